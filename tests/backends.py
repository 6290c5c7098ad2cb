"""The registry of storage backends the contract suite runs against.

``BACKENDS[kind](where, name=..., read_only=...)`` opens tier ``name`` of a fresh
storage area ``where`` (a per-test tmp_path). Calling it again with the same
``where`` and ``name`` opens ANOTHER handle on the SAME tier (a second process,
as far as the backend can tell); another ``name`` is another tier. A new tier is
empty. The PostgreSQL backend registers ``"postgres"`` here, a remote tier
``"remote"``: the same tests then run against them (tests/test_tier_contract.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from tiervault.vault.backend import TierBackend
from tiervault.vault.store import TierStore

__all__ = ["BACKENDS", "BackendFactory"]

BackendFactory = Callable[..., TierBackend]


def sqlite_backend(where: Path, *, name: str = "agent", read_only: bool = False) -> TierBackend:
    """An SQLite tier file ``<where>/<name>.db``."""
    return TierStore(Path(where) / f"{name}.db", name=name, read_only=read_only)


BACKENDS: dict[str, BackendFactory] = {"sqlite": sqlite_backend}
