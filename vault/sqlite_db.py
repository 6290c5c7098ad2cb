"""One tier file's connection: opened lazily, shared under one lock, errors mapped.

:class:`SqliteDb` is what the SQLite backend modules (:mod:`store`, :mod:`journal`,
:mod:`vectors`) share: read queries, write transactions (each bumps the tier
generation) and read snapshots, every one inside
:func:`~tiervault.vault.boundary.map_errors` so no ``sqlite3`` error leaves it.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from tiervault.errors import ReadOnlyTier, TierUnavailable
from tiervault.vault import sqlite_errors  # noqa: F401  (registers the sqlite3 mapping)
from tiervault.vault.boundary import map_errors
from tiervault.vault.connection import check_tier_path, open_tier_connection, write_transaction

__all__ = ["SqliteDb", "Txn"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Txn:
    """An open write transaction: its connection and the generation it writes."""

    conn: sqlite3.Connection
    gen: int


class SqliteDb:
    """The connection of one tier file. A missing file reads as empty until the
    first write creates it (owner-only permissions)."""

    def __init__(self, path: Path, *, name: str, read_only: bool) -> None:
        self.name = name
        self.path = path
        self.read_only = read_only
        self.lock = threading.RLock()
        self.conn: sqlite3.Connection | None = None
        self.writes = 0  # write transactions begun by this connection (memos compare it)
        if check_tier_path(name, self.path):  # only a regular file (or a missing one) is a tier
            self.connect(create=False)

    def connect(self, *, create: bool) -> sqlite3.Connection:
        if self.conn is None:
            try:
                self.conn = open_tier_connection(self.name, self.path, read_only=self.read_only,
                                                 create=create)
            except TierUnavailable:
                # A writable tier on read-only media (a mounted backup, a CD): readable
                # all the same; writes then get ReadOnlyTier naming the file.
                if (self.read_only or not self.path.exists()
                        or os.access(self.path.parent, os.W_OK)):
                    raise
                self.conn = open_tier_connection(self.name, self.path, read_only=True,
                                                 create=False)
                self.read_only = True
                log.warning("tier %r (%s) is on read-only media; opened read-only",
                            self.name, self.path)
        return self.conn

    def reader(self) -> sqlite3.Connection | None:
        """The connection, or None while the file does not exist."""
        if self.conn is None and self.path.exists():
            # Another process (another agent sharing this tier) created the file
            # after this store was opened: from now on it is a tier like any other.
            with self.lock:
                self.connect(create=False)
        return self.conn

    def writer(self) -> sqlite3.Connection:
        if self.read_only:
            raise ReadOnlyTier(self.name, str(self.path), "is read-only; write to another tier")
        return self.connect(create=True)

    def close(self) -> None:
        with self.lock:
            if self.conn is not None:
                self.conn.close()
                self.conn = None

    def query(self, sql: str, params: Sequence[Any] | dict[str, Any] = (), *,
              action: str = "read") -> list[tuple]:
        """All rows of one read statement ([] while the file does not exist)."""
        conn = self.reader()
        if conn is None:
            return []
        # the error mapping entered only when the driver raised: ~3 us a statement less
        # (a scan runs ~14), the same TierVaultError from the same map_errors
        with self.lock:
            try:
                return conn.execute(sql, params).fetchall()
            except Exception:
                with map_errors(self.name, str(self.path), action):
                    raise

    @contextmanager
    def write(self, action: str = "write") -> Iterator[Txn]:
        """BEGIN IMMEDIATE ... COMMIT around the block (rolled back on any error)."""
        conn = self.writer()
        where = f"tier {self.name!r} ({self.path})"
        self.writes += 1
        with map_errors(self.name, str(self.path), action), \
                write_transaction(conn, self.lock, where) as gen:
            yield Txn(conn, gen)

    @contextmanager
    def snapshot(self, action: str = "read") -> Iterator[sqlite3.Connection | None]:
        """One read transaction: every query inside sees the same committed state.

        Yields None for a tier whose file does not exist yet.
        """
        conn = self.reader()
        if conn is None:
            yield None
            return
        with map_errors(self.name, str(self.path), action), self.lock:
            try:
                conn.execute("BEGIN")
                yield conn
                conn.execute("COMMIT")
            finally:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
