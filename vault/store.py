"""One tier: one SQLite file with entries, FTS5, links, memories, feedback and vectors.

``TierStore`` is the whole storage interface the rest of tiervault sees; the
SQL dialect stays in here (and :mod:`connection`). Search has two paths that
agree on the score: :meth:`TierStore.search` answers from an in-memory mirror of
the FTS5 index (:mod:`postings`), and :meth:`TierStore.search_fts` asks FTS5's
own ``bm25()`` — the durable index and the definition of the lexical score.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from tiervault.errors import EntryNotFound, ReadOnlyTier, StorageError, TierUnavailable, ValidationError
from tiervault.vault.connection import (check_tier_path, epoch_key, open_tier_connection,
                                        write_transaction)
from tiervault.vault.entry import LINK_TYPES, MAX_ID_CHARS, Entry, check_text
from tiervault.vault.filters import Filters
from tiervault.vault.journal import JournalMixin, MemoryHit
from tiervault.vault.entry_rows import SANE_TIMES as _SANE_TIMES
from tiervault.vault.entry_rows import row_to_entry, rows_to_entries
from tiervault.vault.maintenance import MaintenanceMixin
from tiervault.vault.query import match_expression
from tiervault.vault.schema import FTS_WEIGHTS

__all__ = ["TierStore", "Link", "TierHits", "MemoryHit", "ENTRY_COLUMNS", "row_to_entry",
           "rows_to_entries"]

log = logging.getLogger(__name__)

ENTRY_COLUMNS = ("id", "type", "domain", "title", "description", "context", "example",
                 "counter_example", "why", "tags", "applies_to", "severity", "origin",
                 "valid_from", "valid_until", "created_at", "updated_at", "content_hash")
_SELECT = ", ".join(f"e.{c}" for c in ENTRY_COLUMNS)
_UPDATABLE = [c for c in ENTRY_COLUMNS if c not in ("id", "created_at")]
_UPSERT = (
    f"INSERT INTO entries ({', '.join(ENTRY_COLUMNS)}, gen) "
    f"VALUES ({', '.join(':' + c for c in ENTRY_COLUMNS)}, :gen) "
    "ON CONFLICT(id) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in _UPDATABLE)
    + ", created_at = COALESCE(:given_created_at, entries.created_at), gen = excluded.gen"
)
_FTS_DELETE = (
    "INSERT INTO entries_fts(entries_fts, rowid, id, title, description, context, tags) "
    "SELECT 'delete', rowid, id, title, description, context, tags FROM entries "
    "WHERE id IN (SELECT value FROM json_each(?))")
_FTS_INSERT = (
    "INSERT INTO entries_fts(rowid, id, title, description, context, tags) "
    "SELECT rowid, id, title, description, context, tags FROM entries WHERE gen = ?")


def _unchanged(entry: Entry, stored: Sequence[Any]) -> bool:
    """True when writing ``entry`` over the stored row would change nothing."""
    chash, origin, vfrom, vuntil, created, updated = stored
    return (chash == entry.content_hash and origin == entry.origin and vfrom == entry.valid_from
            and vuntil == entry.valid_until
            and (entry.created_at is None or entry.created_at == created)
            and (entry.updated_at is None or entry.updated_at == updated))


@dataclass(frozen=True, slots=True)
class Link:
    """A typed edge between two entries; the target may live in another tier."""

    source_id: str
    target_id: str
    link_type: str
    note: str
    created_at: float
    tier: str


@dataclass(frozen=True, slots=True)
class TierHits:
    """One tier's ranked answer: parallel ids and scores (higher is better)."""

    ids: list[str]
    scores: np.ndarray

    @classmethod
    def empty(cls) -> "TierHits":
        return cls([], np.zeros(0, dtype=np.float64))


def _params(entry: Entry, gen: int, now: float) -> dict[str, Any]:
    return {
        "id": entry.id, "type": entry.type, "domain": entry.domain, "title": entry.title,
        "description": entry.description, "context": entry.context, "example": entry.example,
        "counter_example": entry.counter_example, "why": entry.why, "tags": entry.tag_text,
        "applies_to": json.dumps(list(entry.applies_to)), "severity": entry.severity,
        "origin": entry.origin, "valid_from": entry.valid_from, "valid_until": entry.valid_until,
        "created_at": entry.created_at if entry.created_at is not None else now,
        "updated_at": entry.updated_at if entry.updated_at is not None else now,
        "content_hash": entry.content_hash or entry.compute_hash(), "gen": gen,
        "given_created_at": entry.created_at, "given_updated_at": entry.updated_at,
    }


def filter_sql(filters: Filters, alias: str = "e") -> tuple[str, list[Any]]:
    """Filters -> (" AND ..." SQL fragment, parameters). Values are always parameters."""
    parts: list[str] = []
    params: list[Any] = []
    for column, values in (("type", filters.types), ("domain", filters.domains),
                           ("severity", filters.severities), ("origin", filters.origins)):
        if values:
            parts.append(f"{alias}.{column} IN ({', '.join('?' * len(values))})")
            params.extend(values)
    if filters.tags:
        parts.append("(" + " OR ".join(
            f"instr(' ' || {alias}.tags || ' ', ' ' || ? || ' ') > 0" for _ in filters.tags) + ")")
        params.extend(filters.tags)
    now = filters.moment
    if not filters.include_expired:
        parts.append(f"({alias}.valid_until IS NULL OR {alias}.valid_until > ?)")
        params.append(now)
    if not filters.include_future:
        parts.append(f"({alias}.valid_from IS NULL OR {alias}.valid_from <= ?)")
        params.append(now)
    return "".join(" AND " + p for p in parts), params


class TierStore(JournalMixin, MaintenanceMixin):
    """One tier file. Thread-safe; every write is one atomic transaction.

    A missing file is an empty tier until the first write creates it
    (owner-only permissions). ``read_only`` refuses every write.
    """

    def __init__(self, path: str | Path, *, name: str = "agent", read_only: bool = False) -> None:
        self.name = name
        self.path = Path(path).expanduser()
        self.read_only = read_only
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._postings: Any = None  # tiervault.vault.postings.Postings, built lazily
        if check_tier_path(name, self.path):  # only a regular file (or a missing one) is a tier
            self._connect(create=False)

    # -- connection ---------------------------------------------------------------
    def _connect(self, *, create: bool) -> sqlite3.Connection:
        if self._conn is None:
            try:
                self._conn = open_tier_connection(self.name, self.path, read_only=self.read_only,
                                                  create=create)
            except TierUnavailable:
                # A writable tier on read-only media (a mounted backup, a CD): readable
                # all the same; writes then get ReadOnlyTier naming the file.
                if (self.read_only or not self.path.exists()
                        or os.access(self.path.parent, os.W_OK)):
                    raise
                self._conn = open_tier_connection(self.name, self.path, read_only=True,
                                                  create=False)
                self.read_only = True
                log.warning("tier %r (%s) is on read-only media; opened read-only",
                            self.name, self.path)
        return self._conn

    @property
    def location(self) -> str:
        """The tier file's path (for messages)."""
        return str(self.path)

    @property
    def exists(self) -> bool:
        """True once the tier file exists (a missing tier searches as empty)."""
        return self._reader() is not None

    def _reader(self) -> sqlite3.Connection | None:
        if self._conn is None and self.path.exists():
            # Another process (another agent sharing this tier) created the file
            # after this store was opened: from now on it is a tier like any other.
            with self._lock:
                self._connect(create=False)
        return self._conn

    def _writer(self) -> sqlite3.Connection:
        if self.read_only:
            raise ReadOnlyTier(self.name, str(self.path), "is read-only; write to another tier")
        return self._connect(create=True)

    def _write(self) -> Any:
        return write_transaction(self._writer(), self._lock, f"tier {self.name!r} ({self.path})")

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> "TierStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"TierStore(name={self.name!r}, path={str(self.path)!r}, read_only={self.read_only})"

    def _query(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[tuple]:
        conn = self._reader()
        if conn is None:
            return []
        try:
            with self._lock:
                return conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise StorageError(f"tier {self.name!r} ({self.path}): {exc}") from exc
        except (UnicodeEncodeError, OverflowError) as exc:  # a value SQLite cannot bind
            raise ValidationError("value", f"cannot be looked up: {exc}") from exc

    # -- entries --------------------------------------------------------------------
    def capture(self, entry: Entry) -> Entry:
        """Insert or update ``entry`` by id in one transaction; returns it as stored."""
        self.capture_many([entry])
        stored = self.get(entry.id)
        assert stored is not None
        return stored

    def capture_many(self, entries: Iterable[Entry], *, batch_size: int = 5_000,
                     on_batch: Callable[[int], None] | None = None) -> int:
        """Upsert entries, one transaction per batch; returns how many were written.

        A batch is all-or-nothing: after a crash every acknowledged batch is
        present and the interrupted one is absent (re-running is idempotent).
        """
        total = 0
        batch: list[Entry] = []
        for entry in entries:
            batch.append(entry)
            if len(batch) >= batch_size:
                total += self._write_batch(batch)
                batch = []
                if on_batch:
                    on_batch(total)
        if batch:
            total += self._write_batch(batch)
            if on_batch:
                on_batch(total)
        return total

    def _write_batch(self, batch: list[Entry]) -> int:
        """Upsert one batch in one transaction; returns how many entries changed.

        The FTS index is maintained set-wise: old index rows of changed entries
        are deleted first, then every row this transaction wrote (``gen``) is
        indexed with one INSERT ... SELECT. Unchanged entries are not rewritten.
        """
        now = round(time.time(), 6)  # microseconds: what the ISO form writes back
        latest = list({e.id: e for e in batch}.values())  # a repeated id: the last one wins
        try:
            with self._write() as gen:
                conn = self._conn
                assert conn is not None
                ids = json.dumps([e.id for e in latest])
                stored = {r[0]: r[1:] for r in conn.execute(
                    "SELECT id, content_hash, origin, valid_from, valid_until, created_at, "
                    "updated_at FROM entries WHERE id IN (SELECT value FROM json_each(?))", (ids,))}
                todo = [e for e in latest if e.id not in stored or not _unchanged(e, stored[e.id])]
                changed = [e.id for e in todo if e.id in stored]
                if changed:
                    conn.execute(_FTS_DELETE, (json.dumps(changed),))
                conn.executemany(_UPSERT, [_params(e, gen, now) for e in todo])
                if todo:
                    conn.execute(_FTS_INSERT, (gen,))
        except sqlite3.Error as exc:
            raise StorageError(f"tier {self.name!r} ({self.path}): write failed: {exc}") from exc
        if todo:
            self._sync_postings()
        return len(todo)

    def get(self, entry_id: str) -> Entry | None:
        rows = self._query(f"SELECT {_SELECT} FROM entries e WHERE e.id = ?", (entry_id,))
        found = rows_to_entries(rows, self.name)
        return found[0] if found else None

    def get_many(self, ids: Sequence[str]) -> dict[str, Entry]:
        """Entries by id (missing ids are simply absent from the mapping)."""
        if not ids:
            return {}
        rows = self._query(
            f"SELECT {_SELECT} FROM entries e WHERE e.id IN (SELECT value FROM json_each(?))",
            (json.dumps(list(ids)),))
        return {e.id: e for e in rows_to_entries(rows, self.name)}

    #: Columns of :meth:`light_rows` (the Brain's scan path; no long text is read back).
    LIGHT_COLUMNS = ("id", "type", "domain", "severity", "title", "snippet", "tags",
                     "created_at", "updated_at", "valid_from", "valid_until", "content_hash",
                     "chars")

    def light_rows(self, ids: Sequence[str], snippet_chars: int = 120) -> dict[str, tuple]:
        """{id: row in LIGHT_COLUMNS order}: scoring fields, the first ``snippet_chars``
        of the description and ``chars`` (length of all text fields), without full entries."""
        if not ids:
            return {}
        rows = self._query(
            "SELECT e.id, e.type, e.domain, e.severity, e.title, substr(e.description, 1, ?), "
            "e.tags, e.created_at, e.updated_at, e.valid_from, e.valid_until, e.content_hash, "
            "length(e.title) + length(e.description) + length(e.context) + length(e.example) "
            "+ length(e.counter_example) + length(e.why) FROM entries e "
            f"WHERE e.id IN (SELECT value FROM json_each(?)) AND {_SANE_TIMES}",
            (int(snippet_chars), json.dumps(list(ids))))
        return {row[0]: row for row in rows}

    def delete(self, entry_id: str) -> bool:
        """Delete an entry (its links, vectors and embedding state cascade)."""
        with self._write():
            cur = self._conn.execute("DELETE FROM entries WHERE id = ?", (entry_id,))  # type: ignore[union-attr]
        self._sync_postings()
        return cur.rowcount > 0

    def delete_many(self, ids: Sequence[str]) -> int:
        """Delete entries in one transaction (all of them or, on failure, none)."""
        if not ids:
            return 0
        try:
            with self._write():
                cur = self._conn.execute(  # type: ignore[union-attr]
                    "DELETE FROM entries WHERE id IN (SELECT value FROM json_each(?))",
                    (json.dumps(list(ids)),))
        except sqlite3.Error as exc:
            raise StorageError(f"tier {self.name!r} ({self.path}): delete failed: {exc}") from exc
        self._sync_postings()
        return cur.rowcount

    def count(self) -> int:
        rows = self._query("SELECT count(*) FROM entries")
        return rows[0][0] if rows else 0

    #: Orders :meth:`list_entries` accepts: newest first by update or creation, or insertion.
    LIST_ORDERS = {"updated": "e.updated_at DESC, e.rowid DESC",
                   "created": "e.created_at DESC, e.rowid DESC", "rowid": "e.rowid"}

    def list_entries(self, *, offset: int = 0, limit: int = 100, filters: Filters | None = None,
                     sort: str = "rowid", since: float | None = None) -> list[Entry]:
        """A page of entries matching ``filters``, in ``sort`` order (see LIST_ORDERS);
        ``since``: only entries updated at or after that unix time."""
        if sort not in self.LIST_ORDERS:
            raise ValidationError("sort", f"{sort!r} is not one of {', '.join(self.LIST_ORDERS)}")
        where, params = filter_sql(filters) if filters else ("", [])
        if since is not None:
            where += " AND e.updated_at >= ?"
            params = [*params, float(since)]
        rows = self._query(f"SELECT {_SELECT} FROM entries e WHERE 1 = 1{where} "
                           f"ORDER BY {self.LIST_ORDERS[sort]} LIMIT ? OFFSET ?",
                           [*params, limit, offset])
        return rows_to_entries(rows, self.name)

    def count_matching(self, filters: Filters | None = None, since: float | None = None) -> int:
        """How many entries :meth:`list_entries` would page through."""
        where, params = filter_sql(filters) if filters else ("", [])
        if since is not None:
            where += " AND e.updated_at >= ?"
            params = [*params, float(since)]
        rows = self._query(f"SELECT count(*) FROM entries e WHERE 1 = 1{where}", params)
        return rows[0][0] if rows else 0

    def vocabulary(self) -> dict[str, dict[str, int]]:
        """{"domains": {domain: n}, "types": {type: n}, "severities": {..}, "tags": {tag: n}}
        over this tier (tags counted per entry; the caller ranks them)."""
        from collections import Counter

        out: dict[str, dict[str, int]] = {}
        for key, column in (("domains", "domain"), ("types", "type"), ("severities", "severity")):
            out[key] = dict(self._query(f"SELECT {column}, count(*) FROM entries "
                                        f"GROUP BY {column} ORDER BY count(*) DESC, {column}"))
        tags: Counter[str] = Counter()
        for (text,) in self._query("SELECT tags FROM entries WHERE tags != ''"):
            tags.update(text.split())
        out["tags"] = dict(tags)
        return out

    def iter_entries(self, batch: int = 2_000) -> Iterator[Entry]:
        """Every entry, streamed in rowid order (for export)."""
        last = 0
        while True:
            rows = self._query(f"SELECT e.rowid, {_SELECT} FROM entries e WHERE e.rowid > ? "
                               "ORDER BY e.rowid LIMIT ?", (last, batch))
            if not rows:
                return
            yield from rows_to_entries((row[1:] for row in rows), self.name)
            last = rows[-1][0]

    def ids_by_hash(self, hashes: Sequence[str]) -> dict[str, str]:
        """content_hash -> id for the given hashes held here (cross-tier dedup)."""
        rows = self._query("SELECT content_hash, id FROM entries WHERE content_hash IN "
                           "(SELECT value FROM json_each(?))", (json.dumps(list(hashes)),))
        return {h: i for h, i in rows}

    # -- search ---------------------------------------------------------------------
    def search_fts(self, terms: list[str], filters: Filters, limit: int) -> TierHits:
        """FTS5 ``bm25()`` with the field weights; the reference lexical score.

        Returns positive scores (FTS5's bm25 is negative: more negative is better).
        """
        if not terms or limit <= 0 or self._reader() is None:
            return TierHits.empty()
        where, params = filter_sql(filters)
        weights = ", ".join(str(w) for w in FTS_WEIGHTS)
        sql = (f"SELECT e.id, -bm25(entries_fts, {weights}) AS s FROM entries_fts "
               f"JOIN entries e ON e.rowid = entries_fts.rowid "
               f"WHERE entries_fts MATCH ?{where} ORDER BY s DESC LIMIT ?")
        rows = self._query(sql, [match_expression(terms), *params, limit])
        return TierHits([r[0] for r in rows], np.array([r[1] for r in rows], dtype=np.float64))

    def postings(self) -> Any:
        """The in-memory mirror of this tier's FTS5 index, built on first use."""
        from tiervault.vault.postings import Postings

        with self._lock:
            if self._postings is None:
                self._postings = Postings.build(self)
            else:
                self._postings.catch_up(self)
            return self._postings

    def _sync_postings(self) -> None:
        if self._postings is not None:
            with self._lock:
                self._postings.catch_up(self)

    # -- links ----------------------------------------------------------------------
    def link(self, source_id: str, target_id: str, link_type: str, note: str = "") -> Link:
        """Link ``source_id`` (held here) to ``target_id`` (any tier)."""
        if link_type not in LINK_TYPES:
            raise ValidationError("link_type", f"{link_type!r} is not one of {', '.join(LINK_TYPES)}")
        check_text("source_id", source_id, MAX_ID_CHARS)
        check_text("target_id", target_id, MAX_ID_CHARS)
        check_text("note", note)
        if source_id == target_id:
            raise ValidationError("target_id", "an entry cannot link to itself")
        now = time.time()
        with self._write():
            conn = self._conn
            assert conn is not None
            if conn.execute("SELECT 1 FROM entries WHERE id = ?", (source_id,)).fetchone() is None:
                raise EntryNotFound(source_id)
            conn.execute("INSERT INTO links(source_id, target_id, link_type, note, created_at) "
                         "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO UPDATE SET note = excluded.note",
                         (source_id, target_id, link_type, note, now))
        return Link(source_id, target_id, link_type, note, now, self.name)

    def unlink(self, source_id: str, target_id: str, link_type: str | None = None) -> int:
        with self._write():
            cur = self._conn.execute(  # type: ignore[union-attr]
                "DELETE FROM links WHERE source_id = ? AND target_id = ? "
                "AND (? IS NULL OR link_type = ?)", (source_id, target_id, link_type, link_type))
        return cur.rowcount

    def links_touching(self, ids: Sequence[str]) -> list[Link]:
        """Every link stored here whose source or target is one of ``ids``."""
        if not ids:
            return []
        rows = self._query(
            "SELECT source_id, target_id, link_type, note, created_at FROM links "
            "WHERE source_id IN (SELECT value FROM json_each(?1)) "
            "OR target_id IN (SELECT value FROM json_each(?1))", (json.dumps(list(ids)),))
        return [Link(*r, self.name) for r in rows]

    def link_count(self) -> int:
        rows = self._query("SELECT count(*) FROM links")
        return rows[0][0] if rows else 0

    # -- maintenance ----------------------------------------------------------------
    def file_size(self) -> int:
        return sum(p.stat().st_size for p in (self.path, Path(f"{self.path}-wal"))
                   if p.exists())

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection | None]:
        """One read transaction: every query inside sees the same committed state.

        Yields None for a tier whose file does not exist yet.
        """
        conn = self._reader()
        if conn is None:
            yield None
            return
        with self._lock:
            try:
                conn.execute("BEGIN")
                yield conn
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                raise StorageError(f"tier {self.name!r} ({self.path}): {exc}") from exc
            finally:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")

    def mirror_rows(self, since_gen: int) -> tuple[int, list[tuple], list[int]]:
        """(generation, rows written after ``since_gen``, rowids deleted after it).

        Read in one snapshot so the generation matches the rows exactly.
        Row layout: rowid, id, content_hash, type, domain, severity, origin,
        valid_from, valid_until, title, description, context, tags.
        """
        with self.snapshot() as conn:
            if conn is None:
                return 0, [], []
            gen = conn.execute("SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'gen'").fetchone()[0]
            columns = ("rowid, id, content_hash, type, domain, severity, origin, valid_from, "
                       "valid_until, title, description, context, tags")
            if since_gen < 0:
                rows = conn.execute(f"SELECT {columns} FROM entries ORDER BY rowid").fetchall()
            else:
                # Through the gen index: a catch-up reads only what changed (ORDER BY rowid
                # would make SQLite walk the whole table instead).
                rows = sorted(conn.execute(
                    f"SELECT {columns} FROM entries INDEXED BY entries_gen WHERE gen > ?",
                    (since_gen,)).fetchall())
            dead = [r[0] for r in conn.execute(
                "SELECT row FROM tombstones WHERE gen > ?", (since_gen,))] if since_gen >= 0 else []
        return gen, rows, dead

    def uid(self) -> str:
        """A random id the tier file gets with its first write (names its caches).

        Never writes: a tier without one yet (never written by this version, or on
        read-only media) is named by its path, and its caches by the epochs.
        """
        rows = self._query("SELECT value FROM meta WHERE key = 'uid'")
        return rows[0][0] if rows else f"path:{self.path.absolute()}"

    def epoch_at(self, gen: int) -> str | None:
        """The random epoch recorded for generation ``gen`` (None: not recorded, e.g.
        written by an older version, or older than the window kept)."""
        rows = self._query("SELECT value FROM meta WHERE key = ?", (epoch_key(gen),))
        return rows[0][0] if rows else None

    def generation(self) -> int:
        rows = self._query("SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'gen'")
        return rows[0][0] if rows else 0
