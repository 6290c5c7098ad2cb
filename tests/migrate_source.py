"""What the ``tiervault migrate`` tests share: the source tier they copy and the kill of a
copy in flight (test_migrate_cli, test_migrate_pg_index)."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import numpy as np

from tiervault.vault.entry import Entry
from tiervault.vault.rows import VectorRow
from tiervault.vault.store import TierStore

__all__ = ["fill_tier", "kill_when"]


def fill_tier(path: Path, n: int) -> TierStore:
    """A SQLite team tier at ``path`` holding ``n`` entries ``m00000``..., a link every 7th
    entry plus one to another tier, an 8-d vector each, one memory and two feedback rows:
    every kind of row ``tiervault migrate`` copies."""
    store = TierStore(path, name="team")
    store.capture_many(Entry.create(id=f"m{i:05d}", title=f"migrated entry {i}", type="pattern",
                                    description=f"body {i} " + "words " * (i % 9),
                                    tags=[f"t{i % 5}"], domain=("a", "b")[i % 2]) for i in range(n))
    for i in range(0, n - 1, 7):
        store.link(f"m{i:05d}", f"m{i + 1:05d}", "supports", note=f"n{i}")
    store.link("m00000", "elsewhere-id", "extends")  # a target in another tier
    rng = np.random.default_rng(3)
    vecs = rng.standard_normal((n, 8)).astype(np.float32)
    store.put_vectors("hash-8", [VectorRow(f"m{i:05d}", f"h{i}", vecs[i]) for i in range(n)])
    store.add_memory("migrations need a verify step", topics=["ops"])
    store.add_feedback("how to migrate", "m00003", "accepted")
    store.add_feedback("how to migrate", "m00004", "dismissed")
    return store


def kill_when(proc: subprocess.Popen, marker: str, deadline_s: float = 120) -> int:
    """SIGKILL ``proc`` as soon as a line of its stderr holds ``marker`` (or after
    ``deadline_s``); its exit status (``-SIGKILL`` when the kill landed before it ended)."""
    deadline = time.monotonic() + deadline_s
    for line in proc.stderr:  # type: ignore[union-attr]
        if marker in line or time.monotonic() > deadline:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    return proc.returncode
