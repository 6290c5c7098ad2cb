"""The three ways a search process reads a tier's mirror, for tests that must hold in each:
``built`` (made in this process), ``mapped`` (loaded from its saved cache file) and ``pread``
(loaded, every block read with ``os.pread`` as a large cache file's are)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tiervault.vault import mirror_cache
from tiervault.vault.store import TierStore

MIRROR_MODES = ("built", "mapped", "pread")


def read_mirror_as(db: Path, mode: str, monkeypatch: Any) -> None:
    """Make the next ``TierStore(db)`` read its mirror in ``mode``: for ``mapped`` and
    ``pread`` the cache is built and saved first; ``pread`` also counts every cache file
    as large."""
    if mode == "built":
        return
    with TierStore(db, name="t") as st:
        st.postings()  # builds and saves the cache
    if mode == "pread":
        monkeypatch.setattr(mirror_cache, "PREAD_ABOVE_BYTES", -1)
