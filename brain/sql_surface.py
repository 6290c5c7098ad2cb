"""A read-only SQL surface over the vault, for agents (``tiervault sql``, MCP ``query_vault``).

What the statement sees is a snapshot of every tier the caller may read,
copied through the tier contract into a private in-memory SQLite database
(so it works the same over SQLite, PostgreSQL and remote tiers), with a
``tier`` column on every table:

    entries(tier, id, title, description, context, type, domain, severity, tags,
            origin, created_at, updated_at, valid_from, valid_until, content_hash)
    links(tier, source_id, target_id, link_type, note, created_at)
    feedback(tier, entry_id, query, action, created_at)

plus two search calls usable wherever a table is (several per statement):

    keyword('text' [, k])                    -> (tier, id, score, rank)   federated BM25
    vec_search('text' [, 'tokens' [, k]])    -> (tier, id, score, rank)   search_intelligent
                                                with modulations (see modulation_spec)

Read-only by construction: the database is a private copy, the connection is
``query_only`` while the statement runs, and an authorizer admits only reads
(SELECT, reading columns, functions, recursive CTEs): ATTACH, PRAGMA, writes,
schema changes and ``load_extension`` are refused. A statement is one
statement; it stops after ``time_limit`` seconds and returns at most
``row_limit`` rows (``truncated`` says when more were there). Call arguments
are literals decoded by :mod:`tiervault.brain.sql_calls`, never spliced.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from typing import Any, Sequence

from tiervault.brain.sql_calls import find_table_calls, one_statement, substitute
from tiervault.errors import QueryError
from tiervault.vault.entry import format_timestamp

__all__ = ["SqlSurface", "SqlResult", "TABLES", "CALLS"]

FIELD = "sql"

TABLES: dict[str, tuple[tuple[str, str], ...]] = {
    "entries": (
        ("tier", "tier holding the entry (agent, project, team, or a source)"),
        ("id", "entry id"), ("title", "title"), ("description", "description"),
        ("context", "context"), ("type", "pattern, anti-pattern, rule, ..."),
        ("domain", "domain"), ("severity", "critical, warning or suggestion"),
        ("tags", "comma-separated tags"), ("origin", "agent, human, ..."),
        ("created_at", "ISO 8601 UTC"), ("updated_at", "ISO 8601 UTC"),
        ("valid_from", "ISO 8601 UTC or NULL"), ("valid_until", "ISO 8601 UTC or NULL"),
        ("content_hash", "hash of the content (same hash = same content)"),
    ),
    "links": (
        ("tier", "tier storing the link"), ("source_id", "entry id"),
        ("target_id", "entry id (any tier)"),
        ("link_type", "supports, contradicts, extends or sequences"), ("note", "note"),
        ("created_at", "ISO 8601 UTC"),
    ),
    "feedback": (
        ("tier", "tier storing the feedback"), ("entry_id", "entry id"), ("query", "query text"),
        ("action", "accepted, modified, dismissed or failed"), ("created_at", "ISO 8601 UTC"),
    ),
}

CALLS = {
    "keyword": "keyword('text' [, k=50]) -> (tier, id, score, rank): federated BM25",
    "vec_search": "vec_search('text' [, 'modulation tokens' [, k=50]]) -> (tier, id, score, "
                  "rank): search_intelligent, with modulations when given",
}

_ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION,
            sqlite3.SQLITE_RECURSIVE}
_DENIED_FUNCTIONS = {"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer"}
MAX_K = 1_000


@dataclass(frozen=True)
class SqlResult:
    """A statement's answer: column names, rows, and whether rows were cut at the limit."""

    columns: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool

    def as_dict(self) -> dict[str, Any]:
        return {"columns": self.columns, "rows": [list(r) for r in self.rows],
                "truncated": self.truncated}


class SqlSurface:
    """Run read-only SQL over a Brain's tiers (``tiers``: the readable ones, default all)."""

    def __init__(self, brain: Any, *, tiers: Sequence[str] | None = None, row_limit: int = 1_000,
                 time_limit: float = 5.0) -> None:
        self.brain = brain
        self.tiers = list(tiers) if tiers is not None else None
        self.row_limit = row_limit
        self.time_limit = time_limit
        self._db: sqlite3.Connection | None = None
        self._version: tuple[Any, ...] | None = None

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    # -- what is there ------------------------------------------------------------------
    def schema(self) -> dict[str, Any]:
        """Tables (with column descriptions, row counts) and search calls, at run time."""
        db = self._snapshot()
        tables = {}
        for name, cols in TABLES.items():
            count = db.execute(f"SELECT count(*) FROM {name}").fetchone()[0]  # our own names
            tables[name] = {"rows": count, "columns": {c: d for c, d in cols}}
        return {"tables": tables, "calls": dict(CALLS),
                "limits": {"rows": self.row_limit, "seconds": self.time_limit}}

    # -- running a statement ---------------------------------------------------------------
    def run(self, sql: str) -> SqlResult:
        if not isinstance(sql, str) or not sql.strip():
            raise QueryError(FIELD, "give a SELECT statement")
        statement = one_statement(sql)
        calls = find_table_calls(statement, CALLS)
        db = self._snapshot()
        tables = [f"temp.call_{i}" for i in range(len(calls))]
        try:
            for call, table in zip(calls, tables):
                db.execute(f"CREATE TABLE {table} (tier TEXT, id TEXT, score REAL, rank INTEGER)")
                db.executemany(f"INSERT INTO {table} VALUES (?, ?, ?, ?)", self._call_rows(call))
            return self._execute(db, substitute(statement, calls, tables))
        finally:
            for table in tables:
                db.execute(f"DROP TABLE IF EXISTS {table}")

    def _execute(self, db: sqlite3.Connection, sql: str) -> SqlResult:
        deadline = time.monotonic() + self.time_limit
        db.execute("PRAGMA query_only = ON")
        db.set_authorizer(_authorize)
        db.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
        try:
            cur = db.execute(sql)
            rows = cur.fetchmany(self.row_limit + 1)
            columns = [d[0] for d in cur.description or ()]
        except sqlite3.DatabaseError as exc:
            if time.monotonic() > deadline:
                raise QueryError(FIELD, f"the statement ran past {self.time_limit:g} s; narrow it "
                                        "(a WHERE clause, a smaller k) or add a LIMIT") from None
            raise QueryError(FIELD, f"{exc}; see `tiervault sql --schema` for tables and "
                                    "calls (read-only: SELECT only)") from None
        finally:
            db.set_progress_handler(None, 0)
            db.set_authorizer(None)
            db.execute("PRAGMA query_only = OFF")
        truncated = len(rows) > self.row_limit
        return SqlResult(columns, [tuple(r) for r in rows[: self.row_limit]], truncated)

    def _call_rows(self, call: Any) -> list[tuple[str, str, float, int]]:
        args = list(call.args)
        text = args.pop(0) if args else None
        if not isinstance(text, str):
            raise QueryError(FIELD, f"{call.name}() takes the query text first, as {CALLS[call.name]}")
        modulate = None
        if call.name == "vec_search" and args and isinstance(args[0], str):
            modulate = args.pop(0)
        k = args.pop(0) if args else 50
        if args or isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
            raise QueryError(FIELD, f"{call.name}(): bad arguments; {CALLS[call.name]}, "
                                    f"k from 1 to {MAX_K}")
        if call.name == "keyword":
            hits = self.brain.manager.search(text, limit=k, tiers=self.tiers)
            return [(t, e, float(s), r + 1)
                    for r, (e, t, s) in enumerate(zip(hits.ids, hits.tiers, hits.score))]
        options: dict[str, Any] = {"mode": "scan", "limit": k, "tiers": self.tiers}
        if modulate:
            options["modulate"] = modulate
        rows = self.brain.search_intelligent(text, **options)
        return [(r["tier"], r["id"], float(r["score"]), i + 1) for i, r in enumerate(rows)
                if r.get("kind", "entry") == "entry"]

    # -- the snapshot ---------------------------------------------------------------------
    def _snapshot(self) -> sqlite3.Connection:
        tiers = self.brain.manager.ordered(self.tiers)
        version = tuple((t.name, t.store.uid() if t.store.exists else "", t.store.generation())
                        for t in tiers)
        if self._db is not None and version == self._version:
            return self._db
        self.close()
        db = sqlite3.connect(":memory:", check_same_thread=False)
        for name, cols in TABLES.items():
            db.execute(f"CREATE TABLE {name} ({', '.join(c for c, _ in cols)})")
        live = [t for t in tiers if t.store.exists]
        every_id: list[str] = []
        for tier in live:
            ids: list[str] = []
            batch: list[tuple[Any, ...]] = []
            for e in tier.store.iter_entries():
                ids.append(e.id)
                batch.append((tier.name, e.id, e.title, e.description, e.context, e.type,
                              e.domain, e.severity, ",".join(e.tags), e.origin, _iso(e.created_at),
                              _iso(e.updated_at), _iso(e.valid_from), _iso(e.valid_until),
                              e.content_hash))
            db.executemany(f"INSERT INTO entries VALUES ({','.join('?' * 15)})", batch)
            own = set(ids)
            db.executemany("INSERT INTO links VALUES (?, ?, ?, ?, ?, ?)",
                           [(tier.name, ln.source_id, ln.target_id, ln.link_type, ln.note,
                             _iso(ln.created_at)) for ln in tier.store.links_touching(ids)
                            if ln.source_id in own])
            every_id.extend(ids)
        # Feedback lives in the agent tier but is about entries of any tier.
        every_id = list(dict.fromkeys(every_id))
        for tier in live:
            db.executemany("INSERT INTO feedback VALUES (?, ?, ?, ?, ?)",
                           [(tier.name, f.entry_id, f.query, f.action, _iso(f.created_at))
                            for f in tier.store.feedback_for(every_id)])
        db.commit()
        self._db, self._version = db, version
        return db


def _iso(t: float | None) -> str | None:
    return format_timestamp(t)


def _authorize(action: int, arg1: Any, arg2: Any, db_name: Any, source: Any) -> int:
    if action not in _ALLOWED:
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_FUNCTION and str(arg2).lower() in _DENIED_FUNCTIONS:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK
