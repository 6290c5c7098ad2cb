"""Opening a tier's SQLite file safely: checks, pragmas, migrations, busy retries.

This module and :mod:`tiervault.vault.store` are the only places that speak
SQLite; a PostgreSQL tier would replace both behind the same ``TierStore`` API.
"""

from __future__ import annotations

import logging
import os
import secrets
import sqlite3
import stat
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_random_exponential

from tiervault.errors import StorageError, TierUnavailable
from tiervault.vault.schema import (APPLICATION_ID, COUNT_DEFERRABLE, DEFERRABLE_INDEXES, READABLE_FROM,
                                    SCHEMA_VERSION, build_deferred_indexes, migrate)

__all__ = ["open_tier_connection", "check_tier_path", "write_transaction", "is_busy", "BUSY_TIMEOUT_MS",
           "EPOCH_WINDOW", "epoch_key", "TIER_CACHE_KIB"]

log = logging.getLogger(__name__)

#: SQLite waits this long on a lock before reporting busy; the store then retries
#: BEGIN with jittered backoff for up to BUSY_RETRY_SECONDS more.
BUSY_TIMEOUT_MS = 5_000
BUSY_RETRY_SECONDS = 60.0
#: SQLite page cache of a tier connection, in KiB (a bulk load raises it for its own
#: duration: vault/sqlite_bulk.py). Searches read scattered rows (light rows, links,
#: feedback) of a file much larger than any cache, so a page is rarely read twice
#: while the cache fills: at 65,536 KiB the three tier connections of a 1,000,000-entry
#: search process held 110 MB more after 230 queries and kept growing towards 192 MB
#: (bench/README.md, issue 16 round 6); the b-trees' inner pages fit in far less.
TIER_CACHE_KIB = 8_192
#: A tier file of at most this many bytes when opened is read through a memory mapping
#: of up to this size (``PRAGMA mmap_size``): SQLite then reads a page in place instead
#: of copying it into its page cache with a ``pread`` system call (~14 a 100,000-entry
#: scan, for the light rows; issue 16 session 16). A larger file keeps ``pread``: this
#: kernel maps a file's page-cache folios up to 2 MB at a time, so scattered row reads
#: would make much of a 1,000,000-entry tier file resident (issue 16 round 3, session 11).
#: 0: never mapped.
TIER_MMAP_BYTES = 256 << 20


def is_busy(exc: BaseException) -> bool:
    """True for SQLite's transient "database is locked/busy" errors."""
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _create_private_file(path: Path) -> None:
    """Create the tier file owner-only (0600) before SQLite touches it.

    SQLite gives its -wal and -shm files the permissions of the main file,
    so the whole tier stays private to its owner.
    """
    # mkdir(parents=True) applies ``mode`` to the last directory only; every
    # directory created here (~/.tiervault too) is private.
    missing = []
    directory = path.parent
    while not directory.exists():
        missing.append(directory)
        directory = directory.parent
    for directory in reversed(missing):
        directory.mkdir(mode=0o700, exist_ok=True)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return
    os.close(fd)


def check_tier_path(name: str, path: Path) -> bool:
    """True when ``path`` is a regular file, False when it is missing (a tier created
    by its first write); anything else is a TierUnavailable naming the problem.

    Only regular files are tiers: a device (``/dev/null``), FIFO, socket or folder
    would make SQLite create stray ``-journal`` files, block, or call the file corrupt.
    """
    text = str(path)
    if "\x00" in text:
        raise TierUnavailable(name, repr(text)[1:-1], "the path contains a NUL character")
    too_long = [p for p in path.parts if len(os.fsencode(p)) > 255]
    if too_long:
        raise TierUnavailable(name, text[:120] + ("..." if len(text) > 120 else ""),
                              "a name in the path is longer than 255 bytes")
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise TierUnavailable(name, text, f"cannot be used: {exc.strerror}") from exc
    if stat.S_ISDIR(info.st_mode):
        raise TierUnavailable(name, text, "is a directory; point the tier at a .db file")
    if not stat.S_ISREG(info.st_mode):
        raise TierUnavailable(name, text, "is not a regular file (a device, FIFO or socket?); "
                              "point the tier at a .db file")
    return True


def _connect_read_only(path: Path) -> sqlite3.Connection:
    """A read-only connection; on read-only media (no -shm/-wal can be made beside a
    WAL file) the file is opened as immutable: nothing else can be writing it there."""
    uri = path.absolute().as_uri()  # percent-encoded: '%', '?', '#' in a name stay literal
    conn = sqlite3.connect(f"{uri}?mode=ro", uri=True, isolation_level=None,
                           check_same_thread=False)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError as exc:
        conn.close()
        text = str(exc).lower()
        if "unable to open" not in text and "readonly" not in text and "read-only" not in text:
            raise
    return sqlite3.connect(f"{uri}?mode=ro&immutable=1", uri=True, isolation_level=None,
                           check_same_thread=False)


def open_tier_connection(name: str, path: Path, *, read_only: bool, create: bool) -> sqlite3.Connection:
    """Open, verify and migrate a tier; every failure is a TierUnavailable naming the file."""
    if not check_tier_path(name, path):
        if not create:
            raise TierUnavailable(name, str(path), "does not exist")
        try:
            _create_private_file(path)
        except OSError as exc:
            raise TierUnavailable(name, str(path), f"cannot be created: {exc.strerror}") from exc
    try:
        if read_only:
            conn = _connect_read_only(path)
        else:
            conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        # One statement, one snapshot: read separately, a tier another process is
        # creating right now could show its tables but not yet its application id.
        app_id, version, tables, indexes = conn.execute(
            "SELECT (SELECT application_id FROM pragma_application_id), "
            "(SELECT user_version FROM pragma_user_version), "
            f"(SELECT count(*) FROM sqlite_master), ({COUNT_DEFERRABLE})").fetchone()
    except sqlite3.DatabaseError as exc:
        raise TierUnavailable(name, str(path), _open_failure(exc)) from exc
    if tables and app_id != APPLICATION_ID:
        conn.close()
        raise TierUnavailable(name, str(path), "is an SQLite file but not a tiervault tier")
    if version > SCHEMA_VERSION:
        conn.close()
        raise TierUnavailable(
            name, str(path),
            f"was written by a newer tiervault (schema v{version}, this version reads up to "
            f"v{SCHEMA_VERSION}); upgrade tiervault to open it")
    try:
        if not read_only:
            # Turning a new file to WAL needs it to itself: while other processes open
            # or create the same tier (8 agents starting at once, on a busy machine) that
            # can take longer than one busy timeout, so it is retried as migrate is.
            for attempt in _busy_retrying():
                with attempt:
                    conn.execute("PRAGMA journal_mode = WAL")
            # NORMAL is durable across process crashes in WAL mode (only an OS crash
            # can lose the last commits), and makes bulk writes several times faster.
            conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute(f"PRAGMA cache_size = {-TIER_CACHE_KIB}")
        if _mappable(path):
            conn.execute(f"PRAGMA mmap_size = {TIER_MMAP_BYTES}")
        conn.execute("PRAGMA temp_store = MEMORY")
        if version < SCHEMA_VERSION and not (read_only and version >= READABLE_FROM):
            if read_only:
                raise TierUnavailable(
                    name, str(path),
                    f"uses schema v{version} and needs a migration to v{SCHEMA_VERSION}; "
                    "open it once without read-only")
            for attempt in _busy_retrying():
                with attempt:
                    migrate(conn)
        elif not read_only and version >= 1 and indexes < len(DEFERRABLE_INDEXES):
            _build_deferred_indexes(name, conn)
    except sqlite3.DatabaseError as exc:
        conn.close()
        why = _open_failure(exc) if is_busy(exc) else f"cannot be opened: {exc}"
        raise TierUnavailable(name, str(path), why) from exc
    return conn


def _mappable(path: Path) -> bool:
    """Whether a tier file is small enough to be read through a mapping (TIER_MMAP_BYTES)."""
    try:
        return 0 < TIER_MMAP_BYTES and os.path.getsize(path) <= TIER_MMAP_BYTES
    except OSError:  # gone or unreadable: SQLite reports it on the next statement
        return False


def _build_deferred_indexes(name: str, conn: sqlite3.Connection) -> None:
    """The secondary indexes a bulk load deferred (sqlite_bulk), for a tier that lacks
    them: a load was stopped before its end, or one is running. Never waited for: while
    another connection writes (a running load builds them at its end; IF NOT EXISTS makes
    either build a no-op after the other) the open goes on without them, as it does if
    the build fails; the tier answers the same without them, and a later open builds them."""
    conn.execute("PRAGMA busy_timeout = 0")
    try:
        build_deferred_indexes(conn)
    except sqlite3.Error as exc:
        if not is_busy(exc):
            log.warning("tier %r: its deferred indexes were not built (%s); a later open "
                        "tries again", name, exc)
    finally:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")


def _open_failure(exc: sqlite3.DatabaseError) -> str:
    """Why a tier file could not be read: only a real format error is called corrupt."""
    if is_busy(exc):
        return f"is locked by another process ({exc}); try again"
    if isinstance(exc, sqlite3.OperationalError) and "unable to open" in str(exc):
        # Not corrupt: the file or its directory is not accessible. A WAL tier also
        # needs its directory writable for the -wal/-shm files, even to be read.
        return (f"cannot be opened ({exc}): check that this user can read and write the "
                "file and its directory (a read-only filesystem or permissions)")
    return f"is corrupt or not an SQLite database ({exc})"


def _busy_retrying() -> Retrying:
    return Retrying(
        retry=retry_if_exception(is_busy),
        wait=wait_random_exponential(multiplier=0.01, max=0.5),
        stop=stop_after_delay(BUSY_RETRY_SECONDS),
        reraise=True,
    )


#: Each write transaction records a random epoch for its generation in ``meta``
#: (``epoch.<gen>``); the last EPOCH_WINDOW are kept. A cache made at generation g
#: is trusted only if the tier still has the epoch the cache recorded for g: a
#: restored older copy of the file reaches g again with other epochs, so its stale
#: caches are refused (issue 12, item 6). A cache older than the window is rebuilt.
EPOCH_WINDOW = 4_096


def epoch_key(gen: int) -> str:
    """The ``meta`` key holding the epoch of generation ``gen``."""
    return f"epoch.{int(gen)}"


@contextmanager
def write_transaction(conn: sqlite3.Connection, lock: threading.RLock,
                      where: str = "tier") -> Iterator[int]:
    """BEGIN IMMEDIATE (retrying while busy) ... COMMIT; yields this write's generation.

    Every write transaction bumps ``meta.gen`` so in-memory mirrors can catch up
    on exactly the rows written after the generation they last saw, records a
    random epoch for that generation (see EPOCH_WINDOW) and gives the tier its
    ``uid`` if it has none yet (so reads never have to write). SQLite errors inside
    roll the transaction back and surface as StorageError (disk full, I/O errors).
    """
    with lock:
        try:
            for attempt in _busy_retrying():
                with attempt:
                    conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise StorageError(f"{where}: could not start a write transaction: {exc}") from exc
        try:
            gen = conn.execute(
                "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'gen' "
                "RETURNING CAST(value AS INTEGER)").fetchone()[0]
            conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                         (epoch_key(gen), secrets.token_hex(8)))
            conn.execute("DELETE FROM meta WHERE key = ?", (epoch_key(gen - EPOCH_WINDOW),))
            conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('uid', ?)",
                         (secrets.token_hex(16),))
            yield gen
            conn.execute("COMMIT")
        except BaseException as exc:
            if conn.in_transaction:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass  # SQLite already rolled back (e.g. after SQLITE_FULL)
            if isinstance(exc, sqlite3.Error):
                raise StorageError(f"{where}: write failed: {exc} (disk full or not "
                                   "writable?)") from exc
            raise
