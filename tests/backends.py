"""The registry of storage backends the contract suite runs against.

``BACKENDS[kind](request, where, name=..., read_only=...)`` opens tier ``name``
of a fresh storage area ``where`` (a per-test tmp_path); ``request`` is pytest's
FixtureRequest, for a backend that needs a server fixture
(``request.getfixturevalue("pg_server")``) or a finalizer. Calling it again with
the same ``where`` and ``name`` opens ANOTHER handle on the SAME tier (a second
process, as far as the backend can tell); another ``name`` is another tier. A
new tier is empty. The PostgreSQL backend registers ``"postgres"`` here, a remote tier
``"remote"``: the same tests then run against them (tests/test_tier_contract.py and the
lexical and browse contract files beside it).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Callable

from tiervault.vault.backend import TierBackend
from tiervault.vault.store import TierStore

__all__ = ["BACKENDS", "BackendFactory"]

BackendFactory = Callable[..., TierBackend]


def sqlite_backend(request: Any, where: Path, *, name: str = "agent",
                   read_only: bool = False) -> TierBackend:
    """An SQLite tier file ``<where>/<name>.db``."""
    return TierStore(Path(where) / f"{name}.db", name=name, read_only=read_only)


def postgres_backend(request: Any, where: Path, *, name: str = "agent",
                     read_only: bool = False) -> TierBackend:
    """A schema of the session's PostgreSQL test database (``pg_server`` fixture),
    named from ``where`` and ``name``; dropped when the test ends."""
    from tiervault.vault.postgres import PgTierStore

    server = request.getfixturevalue("pg_server")
    schema = "c_" + hashlib.sha1(f"{where}\0{name}".encode()).hexdigest()[:20]
    if schema not in _SCHEMAS:
        _SCHEMAS.add(schema)
        server.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE", "tiervault_test")
        request.addfinalizer(lambda: (_SCHEMAS.discard(schema), server.execute(
            f"DROP SCHEMA IF EXISTS {schema} CASCADE", "tiervault_test")))
    return PgTierStore(server.url("tiervault_test"), name=name, schema=schema, read_only=read_only)


_SCHEMAS: set[str] = set()

BACKENDS: dict[str, BackendFactory] = {"sqlite": sqlite_backend, "postgres": postgres_backend}

from remote_backend import remote_backend  # noqa: E402  (a real `tiervault serve` process)

BACKENDS["remote"] = remote_backend
