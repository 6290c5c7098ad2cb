"""The PostgreSQL connections of a tier store: checks, migration, a pool, reconnects.

:class:`PgSession` opens one checked connection first (login, pgvector, schema
version, migration: :func:`open_connection`), then a ``psycopg_pool``
connection pool (:data:`POOL_MIN_SIZE`..:data:`POOL_MAX_SIZE` connections), so
threads of one process (the HTTP server's workers) query the tier at once.
A thread inside a transaction gets the same connection for nested calls.

A server that goes away breaks the pool's connections: the first broken one
closes the whole pool and the next call opens a new one. A server that is
down is *left out* of answers (StorageError -> ``problems``) and retried on
later calls, spaced by a :class:`~tiervault.vault.backoff.Backoff`, so a dead
host costs one connect timeout per backoff step, not one per search.
"""

from __future__ import annotations

import logging
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from tiervault.errors import ReadOnlyTier, StorageError, TierUnavailable
from tiervault.vault.backoff import Backoff
from tiervault.vault.boundary import map_errors
from tiervault.vault.postgres.errors import classify_connect_error
from tiervault.vault.postgres.schema import (SCHEMA_VERSION, build_entry_indexes, installed_version,
                                             migrate_schema)
from tiervault.vault.postgres.url import PgAddress, scrub

__all__ = ["open_connection", "PgSession", "CONNECT_TIMEOUT_S", "POOL_MIN_SIZE", "POOL_MAX_SIZE"]

log = logging.getLogger(__name__)

#: How long a connection attempt may take before the tier is reported unreachable.
CONNECT_TIMEOUT_S = 5
#: Connections kept open per tier store, and the most it opens at once. Searches hold a
#: connection for one round trip or a short transaction; 4 covers a 2-8 thread server
#: without making a busy team server hold many idle backends per client process.
POOL_MIN_SIZE = 1
POOL_MAX_SIZE = 4


def _connect_kwargs(address: PgAddress) -> dict[str, Any]:
    return {"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S, "application_name": "tiervault",
            "options": f"-c search_path={address.schema},public"}


def _ensure_pgvector(conn: Any, tier: str, address: PgAddress) -> None:
    """pgvector must be installed in the database; install it when this role may."""
    import psycopg

    if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone():
        return
    try:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.errors.InsufficientPrivilege:
        db, role = conn.execute("SELECT current_database(), current_user").fetchone()
        raise TierUnavailable(
            tier, address.display,
            f"the pgvector extension is not installed in database {db!r} and role {role!r} may "
            f"not install it; ask a superuser to run: CREATE EXTENSION vector; in database {db!r}"
        ) from None
    except psycopg.Error as exc:
        raise TierUnavailable(
            tier, address.display,
            f"the server has no pgvector extension ({scrub(str(exc)).splitlines()[0]}); "
            "install pgvector on the server (e.g. the postgresql-NN-pgvector package)") from None


def open_connection(tier: str, address: PgAddress, *, read_only: bool) -> Any:
    """Connect, check pgvector and the schema version, migrate; returns the connection.

    Raises TierUnavailable for what needs a fix (login, database, pgvector,
    newer schema) and StorageError for an unreachable server (retry later).
    """
    import psycopg

    try:
        conn = psycopg.connect(address.dsn, **_connect_kwargs(address))
    except psycopg.Error as exc:
        raise classify_connect_error(tier, address, exc) from None
    try:
        with map_errors(tier, address.display, "open the tier"):
            current = installed_version(conn.cursor(), address.schema)
            if current > SCHEMA_VERSION:
                raise TierUnavailable(
                    tier, address.display,
                    f"was written by a newer tiervault (schema v{current}, this version reads up "
                    f"to v{SCHEMA_VERSION}); upgrade tiervault to open it")
            if current < SCHEMA_VERSION:
                if read_only:
                    if current == 0:
                        raise TierUnavailable(tier, address.display,
                                              "holds no tier yet; create it once without read-only")
                    raise TierUnavailable(tier, address.display,
                                          f"uses schema v{current} and needs a migration to "
                                          f"v{SCHEMA_VERSION}; open it once without read-only")
                _ensure_pgvector(conn, tier, address)
                migrate_schema(conn, address.schema)
            else:
                _ensure_pgvector(conn, tier, address)
            if not read_only:  # a bulk load killed before its index build left them out
                build_entry_indexes(conn, address.schema)
    except ReadOnlyTier as exc:  # a role that may not create the schema or the tables
        conn.close()
        raise TierUnavailable(tier, address.display,
                              f"cannot be created or migrated by this role ({exc.reason}); open it "
                              "once with a role allowed to create tables in the schema, or set "
                              "read_only: true") from None
    except (TierUnavailable, StorageError):
        conn.close()
        raise
    return conn


class PgSession:
    """The connection pool of one tier store, opened on first use and after a loss.

    ``on_open`` runs after each new pool (the store forgets what it cached
    about the schema, which may have been re-created meanwhile).
    """

    def __init__(self, tier: str, address: PgAddress, *, read_only: bool,
                 on_open: Callable[[], None] | None = None) -> None:
        self.tier = tier
        self.address = address
        self.read_only = read_only
        self.backoff = Backoff()
        self._on_open = on_open
        self._pool: Any = None
        self._lock = threading.Lock()
        self._local = threading.local()

    def open(self) -> None:
        """Connect now (TierUnavailable: needs a fix; StorageError: unreachable, retried later)."""
        self._open()

    def _open(self) -> Any:
        """The pool, opened now if needed; StorageError while the server is unreachable."""
        with self._lock:
            if self._pool is not None:
                return self._pool
            if not self.backoff.ready():
                raise StorageError(f"{self.backoff.last_error} (next attempt in "
                                   f"{self.backoff.wait_s():.1f} s)")
            try:
                check = open_connection(self.tier, self.address, read_only=self.read_only)
            except StorageError as exc:
                self.backoff.failed(str(exc))
                raise
            check.close()
            from psycopg_pool import ConnectionPool

            pool = ConnectionPool(self.address.dsn, kwargs=_connect_kwargs(self.address),
                                  min_size=POOL_MIN_SIZE, max_size=POOL_MAX_SIZE, open=False,
                                  timeout=CONNECT_TIMEOUT_S, name=f"tiervault-{self.tier}")
            try:
                with map_errors(self.tier, self.address.display, "open a connection pool"):
                    pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
            except StorageError as exc:
                pool.close(timeout=1)
                self.backoff.failed(str(exc))
                raise
            self.backoff.succeeded()
            self._pool = pool
            if self._on_open is not None:
                self._on_open()
            return pool

    @contextmanager
    def connection(self) -> Iterator[Any]:
        """A pooled connection; a nested call in the same thread gets the same one."""
        held = getattr(self._local, "conn", None)
        if held is not None:
            yield held
            return
        pool = self._open()
        with pool.connection() as conn:
            self._local.conn = conn
            try:
                yield conn
            finally:
                self._local.conn = None

    def reset(self) -> None:
        """Close the pool (its connections died with the server); the next call reopens."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close(timeout=1)

    def close(self) -> None:
        """Close every connection and the pool's worker threads."""
        self.reset()

    @property
    def is_open(self) -> bool:
        return self._pool is not None
