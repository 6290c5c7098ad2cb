"""One tier in a PostgreSQL schema: the same operations as the SQLite tier store.

Lexical search design (the why is in docs/postgres.md): the PostgreSQL tier
feeds the *same* in-memory BM25 mirror as the SQLite tier
(:class:`tiervault.vault.postings.Postings`) through the same generation
protocol -- ``meta.gen`` bumped by every write transaction, rows stamped with
the generation that wrote them, tombstones for deletes -- so the federated
scores are identical by construction: the same terms from the same tokenizer,
the same statistics, the same formula. Other processes' writes are seen on the
next search, which reads the one-row version (``meta.gen``) before answering.

The durable, server-side path is :meth:`PgTierStore.search_fts`: candidates
through the GIN index on ``terms`` (the FTS5 stems) with the filters in the
SQL, scored by FTS5's ``bm25()`` definition over the tier's own statistics.

Writers serialise on the ``meta.gen`` row lock, taken first in every write
transaction, so generations are handed out in commit order and a reader that
saw generation g has seen every row stamped <= g.
"""

from __future__ import annotations

from itertools import chain
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from tiervault.errors import EntryNotFound, ReadOnlyTier, StorageError, ValidationError
from tiervault.vault.entry import Entry, check_link
from tiervault.vault.filters import Filters
from tiervault.vault.postgres.connection import PgSession
from tiervault.vault.postgres.schema import ENTRY_INDEXES, GIN_INDEX, build_entry_indexes, drop_entry_indexes
from tiervault.vault.boundary import map_errors
from tiervault.vault.postgres.errors import register as _register_errors
from tiervault.vault.postgres.journal import PgJournal
from tiervault.vault.postgres.lexical import bm25_rows, query_stems, statistics_sql, tsquery_of
from tiervault.vault.postgres.term_workers import MIN_HELPED_BATCH, default_worker_count
from tiervault.vault.postgres.writer import (ENTRY_TYPES, TSVECTOR_OID, PreparedBatch, batches, copy_binary,
                                             direct_rows, pipelined, prepare, stage_rows)
from tiervault.vault.filter_compile import to_postgres
from tiervault.vault.postgres.url import PgAddress, parse_address
from tiervault.vault.scoring import FTS_WEIGHTS
from tiervault.vault.rows import CommittedBatch, LightRow, Link
from tiervault.vault.entry_rows import ENTRY_COLUMNS, SELECT_ENTRY, row_to_entry, unchanged
from tiervault.vault.rows import TierHits

__all__ = ["PgEntryStore", "pg_filter_sql"]

log = logging.getLogger(__name__)
_register_errors()

#: The staging table holds the changed versions of entries already stored (updates only:
#: the new ids of a batch are COPYed straight into ``entries``).
_STAGE_COLUMNS = (*ENTRY_COLUMNS, "given_created", "doclen", "stems")
_STAGE_TABLE = (
    "CREATE TEMP TABLE IF NOT EXISTS tv_update_stage (id text, type text, domain text, title text, "
    "description text, context text, example text, counter_example text, why text, tags text, "
    "applies_to text, severity text, origin text, valid_from double precision, "
    "valid_until double precision, created_at double precision, updated_at double precision, "
    "content_hash text, given_created double precision, doclen integer, "
    "stems tsvector) ON COMMIT DELETE ROWS")
_STAGE_TYPES = (*ENTRY_TYPES, "float8", "int4", TSVECTOR_OID)
#: Columns of a row COPYed straight into ``entries`` (a batch of new ids only).
_DIRECT_COLUMNS = (*ENTRY_COLUMNS, "gen", "doclen", "terms")
_DIRECT_TYPES = (*ENTRY_TYPES, "int8", "int4", TSVECTOR_OID)
_SET = ", ".join(f"{c} = s.{c}" for c in ENTRY_COLUMNS if c not in ("id", "created_at"))
_MIRROR = ("rowid, id, content_hash, type, domain, severity, origin, valid_from, valid_until, "
           "updated_at, title, description, context, tags")


def pg_filter_sql(filters: Filters, alias: str = "e") -> tuple[str, list[Any]]:
    """Filters -> (" AND ..." SQL fragment, parameters); compiled by
    :func:`~tiervault.vault.filter_compile.to_postgres` (values always parameters)."""
    return to_postgres(filters, alias)


class PgEntryStore(PgJournal):
    """A tier in one schema of a PostgreSQL database. Thread-safe (one connection, one lock).

    ``url`` may hold ``${VAR}`` references (expanded from the environment); the
    password is never shown: ``path`` and ``repr`` use the password-free form.
    A server that cannot be reached does not fail the constructor: the tier then
    raises StorageError on use (left out of answers, retried on the next call).
    """

    backend = "postgres"

    def __init__(self, url: str | PgAddress, *, name: str = "team", schema: str | None = None,
                 read_only: bool = False) -> None:
        self.name = name
        self.address = url if isinstance(url, PgAddress) else parse_address(url, schema)
        self.path = self.address.display
        self.read_only = read_only
        self._lock = threading.RLock()
        self._postings: Any = None
        self._uid: str | None = None
        self._written = False
        #: HNSW index names known to exist (vectors.py: found once, trusted from then on)
        self.vector_indexes: set[str] = set()
        #: (model, dim) HNSW index name -> when it was last found missing (vectors.py)
        self.vector_index_misses: dict[str, float] = {}
        #: True inside :meth:`deferring_vector_indexes` (a bulk copy): ``put_vectors``
        #: then does not create HNSW indexes, which are built once at the end.
        self.vector_index_deferred = False
        #: Helper processes that stem a bulk load's batches (None: the default count,
        #: :func:`~tiervault.vault.postgres.term_workers.default_worker_count`, for
        #: batches of ``MIN_HELPED_BATCH`` entries or more; 0: none).
        self.term_workers: int | None = None
        self.session = PgSession(name, self.address, read_only=read_only, on_open=self._forget_schema)
        try:
            self.session.open()
        except StorageError as exc:  # unreachable now; retried on later calls (with backoff)
            log.warning("%s", exc)

    @contextmanager
    def deferring_vector_indexes(self) -> Iterator[None]:
        """Inside, ``put_vectors`` creates no HNSW index (see
        ``PgTransfer.deferred_vector_indexes``); the flag is reset however the block ends."""
        self.vector_index_deferred = True
        try:
            yield
        finally:
            self.vector_index_deferred = False

    # -- connection -------------------------------------------------------------------
    def _forget_schema(self) -> None:
        """A new pool: the schema may have been re-created meanwhile."""
        self._uid = None
        self.vector_indexes.clear()
        self.vector_index_misses.clear()

    @contextmanager
    def mapped(self, action: str) -> Iterator[Any]:
        """A pooled connection, with every driver error mapped; a connection that died
        with its server closes the pool (the next call reconnects)."""
        broken = False
        try:
            with map_errors(self.name, self.path, action):
                with self.session.connection() as conn:
                    try:
                        yield conn
                    except BaseException:
                        broken = bool(conn.closed or conn.broken)
                        raise
        except StorageError:
            if broken:
                self.session.reset()
            raise

    def query(self, sql: str, params: Sequence[Any] = (), action: str = "read the tier") -> list[tuple]:
        with self.mapped(action) as conn:
            return conn.execute(sql, params).fetchall()

    @contextmanager
    def write(self, action: str = "write to the tier") -> Iterator[tuple[Any, int]]:
        """One write transaction; yields (connection, this write's generation)."""
        if self.read_only:
            raise ReadOnlyTier(self.name, self.path, "is read-only; write to another tier")
        with self.mapped(action) as conn:
            with conn.transaction():
                gen = conn.execute("UPDATE meta SET value = (value::bigint + 1)::text "
                                   "WHERE key = 'gen' RETURNING value::bigint").fetchone()[0]
                yield conn, gen

    @contextmanager
    def snapshot(self) -> Iterator[Any]:
        """One repeatable-read transaction: every query inside sees the same committed state."""
        with self.mapped("read a snapshot of the tier") as conn:
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                yield conn

    def close(self) -> None:
        """Close the connection pool (its worker threads included)."""
        self.session.close()

    def __enter__(self) -> "PgEntryStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, at={self.path!r}, read_only={self.read_only})"

    @property
    def exists(self) -> bool:
        """True once the tier has been written (its generation moved from 0)."""
        if not self._written:
            self._written = self.generation() > 0
        return self._written

    # -- entries ----------------------------------------------------------------------
    def capture(self, entry: Entry) -> Entry:
        """Insert or update ``entry`` by id in one transaction; returns it as stored."""
        self.capture_many([entry])
        stored = self.get(entry.id)
        assert stored is not None
        return stored

    def capture_many(self, entries: Iterable[Entry], *, batch_size: int = 5_000,
                     on_batch: Callable[[CommittedBatch], None] | None = None) -> int:
        """Upsert entries, one transaction per batch; returns how many were written.

        Batches are prepared (stemmed) while the previous one is written
        (:func:`~tiervault.vault.postgres.writer.pipelined`), by helper processes
        when there is more than one batch and batches hold at least ``MIN_HELPED_BATCH``
        entries (:attr:`term_workers` overrides the count). A bulk load (more than
        one batch) into an empty tier drops the secondary indexes first and builds
        them once at the end -- one sorted build instead of a million index
        insertions; a load killed half-way gets them back when the tier is next
        opened (:func:`build_entry_indexes`).
        """
        chunks = batches(entries, batch_size)
        first = next(chunks, None)
        if first is None:
            return 0
        second = next(chunks, None)
        if second is None:  # one batch: nothing to overlap
            written = self._write_batch(prepare(first))
            if on_batch:
                on_batch(CommittedBatch(first, written, written))
            return written
        workers = self.term_workers
        if workers is None:  # by default, helpers only for batches big enough to pay for them
            workers = default_worker_count() if batch_size >= MIN_HELPED_BATCH else 0
        if self.read_only or self.count() > 0:
            return pipelined(chain([first, second], chunks), self._write_batch, on_batch, workers)
        with self.mapped("prepare a bulk load") as conn:
            drop_entry_indexes(conn, self.address.schema)
        try:
            return pipelined(chain([first, second], chunks), self._write_batch, on_batch, workers)
        finally:
            self._build_indexes_after_load()

    def _build_indexes_after_load(self) -> None:
        """Build the secondary indexes a bulk load dropped: the GIN on ``terms`` in this
        thread's connection while the B-trees are built in another (the pool's), so the
        end of a load lasts as long as the GIN build, not the sum (300K: 6.5 -> 5.8 s)."""
        schema = self.address.schema
        btrees = [name for name in ENTRY_INDEXES if name != GIN_INDEX]

        def build_btrees() -> None:
            with self.mapped("build the indexes after a bulk load") as conn:
                build_entry_indexes(conn, schema, btrees)

        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="tiervault-pg-index") as side:
            pending = side.submit(build_btrees)
            try:
                with self.mapped("build the indexes after a bulk load") as conn:
                    build_entry_indexes(conn, schema, [GIN_INDEX])
            finally:
                pending.result()  # its error too (the GIN's, if both failed, is chained)

    def _write_batch(self, prepared: PreparedBatch) -> int:
        """Write the changed entries in one transaction: the new ids are COPYed straight
        into ``entries``; the changed versions of stored ones are COPYed into a staging
        table and applied by one UPDATE. Unchanged entries (same content hash and
        metadata) are skipped, as in SQLite.

        Only the updates are staged: a bulk load's batches mostly hold new ids with a
        few updates among them (the bench corpus: 16 of 20 batches at 100K), and staging
        the whole batch made the server write every row twice (temporary table, then
        ``INSERT ... SELECT``: ~14 us per entry at 250K), while a staging table of the
        few updates is also small enough for the UPDATE to probe the ``id`` index
        instead of hashing the whole table (bench/README.md, "1M").
        """
        now = time.time()
        latest = prepared.entries
        with self.write("write entries") as (conn, gen):
            stored = {r[0]: r[1:] for r in conn.execute(
                "SELECT id, content_hash, origin, valid_from, valid_until, created_at, updated_at "
                "FROM entries WHERE id = ANY(%s)", ([e.id for e in latest],))}
            fresh = [e.id not in stored for e in latest]
            changed = [e.id in stored and not unchanged(e, stored[e.id]) for e in latest]
            todo = sum(fresh) + sum(changed)
            if not todo:
                return 0
            if any(fresh):  # new ids: straight into the table, no staging pass
                copy_binary(conn, "entries", _DIRECT_COLUMNS, _DIRECT_TYPES, direct_rows(prepared, fresh, gen, now))
            if any(changed):
                conn.execute(_STAGE_TABLE)
                copy_binary(conn, "tv_update_stage", _STAGE_COLUMNS, _STAGE_TYPES,
                            stage_rows(prepared, changed, now))
                conn.execute(
                    f"UPDATE entries SET {_SET}, created_at = COALESCE(s.given_created, entries.created_at), "
                    "gen = %s, doclen = s.doclen, terms = s.stems "
                    "FROM tv_update_stage s WHERE entries.id = s.id", (gen,))
        self._sync_postings()
        return todo

    def get(self, entry_id: str) -> Entry | None:
        rows = self.query(f"SELECT {SELECT_ENTRY} FROM entries e WHERE e.id = %s", (entry_id,))
        return row_to_entry(rows[0]) if rows else None

    def get_many(self, ids: Sequence[str]) -> dict[str, Entry]:
        if not ids:
            return {}
        rows = self.query(f"SELECT {SELECT_ENTRY} FROM entries e WHERE e.id = ANY(%s)", (list(ids),))
        return {row[0]: row_to_entry(row) for row in rows}

    def light_rows(self, ids: Sequence[str], snippet_chars: int = 120) -> dict[str, LightRow]:
        if not ids:
            return {}
        rows = self.query(
            "SELECT e.id, e.type, e.domain, e.severity, e.title, substr(e.description, 1, %s), "
            "e.tags, e.created_at, e.updated_at, e.valid_from, e.valid_until, e.content_hash, "
            "char_length(e.title) + char_length(e.description) + char_length(e.context) "
            "+ char_length(e.example) + char_length(e.counter_example) + char_length(e.why), "
            "e.origin FROM entries e WHERE e.id = ANY(%s)", (int(snippet_chars), list(ids)))
        return {row[0]: LightRow(*row) for row in rows}

    def delete(self, entry_id: str) -> bool:
        """Delete an entry (links, vectors and embedding state cascade; a tombstone is left)."""
        with self.write("delete an entry") as (conn, _gen):
            count = conn.execute("DELETE FROM entries WHERE id = %s", (entry_id,)).rowcount
        self._sync_postings()
        return count > 0

    def delete_many(self, ids: Sequence[str]) -> int:
        """Delete entries in one transaction (all of them or, on failure, none)."""
        if not ids:
            return 0
        with self.write("delete entries") as (conn, _gen):
            count = conn.execute("DELETE FROM entries WHERE id = ANY(%s)", (list(ids),)).rowcount
        self._sync_postings()
        return count

    def count(self) -> int:
        return self.query("SELECT count(*) FROM entries")[0][0]

    #: Orders :meth:`list_entries` accepts (as the SQLite tier's).
    LIST_ORDERS = {"updated": "e.updated_at DESC, e.rowid DESC",
                   "created": "e.created_at DESC, e.rowid DESC", "rowid": "e.rowid"}

    def _list_where(self, filters: Filters | None, since: float | None) -> tuple[str, list[Any]]:
        where, params = pg_filter_sql(filters) if filters else ("", [])
        if since is not None:
            where += " AND e.updated_at >= %s"
            params = [*params, float(since)]
        return where, params

    def list_entries(self, *, offset: int = 0, limit: int = 100, filters: Filters | None = None,
                     sort: str = "rowid", since: float | None = None) -> list[Entry]:
        if sort not in self.LIST_ORDERS:
            raise ValidationError("sort", f"{sort!r} is not one of {', '.join(self.LIST_ORDERS)}")
        where, params = self._list_where(filters, since)
        rows = self.query(f"SELECT {SELECT_ENTRY} FROM entries e WHERE true{where} "
                           f"ORDER BY {self.LIST_ORDERS[sort]} LIMIT %s OFFSET %s",
                           [*params, limit, offset])
        return [row_to_entry(r) for r in rows]

    def count_matching(self, filters: Filters | None = None, since: float | None = None) -> int:
        where, params = self._list_where(filters, since)
        return self.query(f"SELECT count(*) FROM entries e WHERE true{where}", params)[0][0]

    def vocabulary(self) -> dict[str, dict[str, int]]:
        """Domains, types, severities and tags with their entry counts."""
        out: dict[str, dict[str, int]] = {}
        for key, column in (("domains", "domain"), ("types", "type"), ("severities", "severity")):
            out[key] = dict(self.query(f"SELECT {column}, count(*) FROM entries "
                                        f"GROUP BY {column} ORDER BY count(*) DESC, {column}"))
        out["tags"] = dict(self.query(
            "SELECT t, count(*) FROM entries, unnest(string_to_array(tags, ' ')) AS t "
            "WHERE t <> '' GROUP BY t"))
        return out

    def iter_entries(self, batch: int = 2_000) -> Iterator[Entry]:
        """Every entry, streamed in rowid order."""
        last = 0
        while True:
            rows = self.query(f"SELECT e.rowid, {SELECT_ENTRY} FROM entries e WHERE e.rowid > %s "
                               "ORDER BY e.rowid LIMIT %s", (last, batch))
            if not rows:
                return
            for row in rows:
                yield row_to_entry(row[1:])
            last = rows[-1][0]

    def ids_by_hash(self, hashes: Sequence[str]) -> dict[str, str]:
        rows = self.query("SELECT content_hash, id FROM entries WHERE content_hash = ANY(%s)",
                           (list(hashes),))
        return {h: i for h, i in rows}

    # -- search -----------------------------------------------------------------------
    def search_fts(self, terms: list[str], filters: Filters, limit: int) -> TierHits:
        """Server-side lexical search: GIN candidates (filters in the SQL), FTS5 bm25() scores."""
        stems = query_stems(terms)
        if not stems or limit <= 0:
            return TierHits.empty()
        where, params = pg_filter_sql(filters)
        with self.snapshot() as conn:
            n_rows, total, df = conn.execute(statistics_sql("entries"), (stems,)).fetchone()
            rows = conn.execute(f"SELECT e.id, e.title, e.description, e.context, e.tags FROM entries e "
                                f"WHERE e.terms @@ %s::tsquery{where} ORDER BY e.rowid",
                                [tsquery_of(stems), *params]).fetchall()
        if not rows:
            return TierHits.empty()
        fields = [(r[0], r[1], r[2], r[3], r[4]) for r in rows]  # FTS column order
        scores = bm25_rows(fields, FTS_WEIGHTS, stems, n_rows, df, total / n_rows if n_rows else 1.0)
        order = np.lexsort((np.arange(len(rows)), -scores))[:limit]
        return TierHits([rows[i][0] for i in order], scores[order])

    def mirror_rows(self, since_gen: int) -> tuple[int, list[tuple], list[int]]:
        """(generation, rows written after ``since_gen``, rowids deleted after it); one snapshot."""
        with self.snapshot() as conn:
            gen = conn.execute("SELECT value::bigint FROM meta WHERE key = 'gen'").fetchone()[0]
            if since_gen < 0:
                rows = conn.execute(f"SELECT {_MIRROR} FROM entries ORDER BY rowid").fetchall()
                dead: list[int] = []
            else:
                rows = conn.execute(f"SELECT {_MIRROR} FROM entries WHERE gen > %s ORDER BY rowid",
                                    (since_gen,)).fetchall()
                dead = [r[0] for r in conn.execute("SELECT row FROM tombstones WHERE gen > %s",
                                                   (since_gen,))]
        return gen, rows, dead

    def generation(self) -> int:
        return self.query("SELECT value::bigint FROM meta WHERE key = 'gen'")[0][0]

    def uid(self) -> str:
        """The tier's random id (made with its schema; names its local caches)."""
        if self._uid is None:
            self._uid = self.query("SELECT value FROM meta WHERE key = 'uid'")[0][0]
        return self._uid

    # -- links ------------------------------------------------------------------------
    def link(self, source_id: str, target_id: str, link_type: str, note: str = "") -> Link:
        check_link(source_id, target_id, link_type, note)
        now = time.time()
        with self.write("store a link") as (conn, _gen):
            if conn.execute("SELECT 1 FROM entries WHERE id = %s", (source_id,)).fetchone() is None:
                raise EntryNotFound(source_id)
            conn.execute("INSERT INTO links (source_id, target_id, link_type, note, created_at) "
                         "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (source_id, target_id, link_type) "
                         "DO UPDATE SET note = excluded.note",
                         (source_id, target_id, link_type, note, now))
        return Link(source_id, target_id, link_type, note, now, self.name)

    def unlink(self, source_id: str, target_id: str, link_type: str | None = None) -> int:
        with self.write("remove a link") as (conn, _gen):
            return conn.execute(
                "DELETE FROM links WHERE source_id = %s AND target_id = %s "
                "AND (%s::text IS NULL OR link_type = %s)",
                (source_id, target_id, link_type, link_type)).rowcount

    def links_touching(self, ids: Sequence[str]) -> list[Link]:
        if not ids:
            return []
        rows = self.query("SELECT source_id, target_id, link_type, note, created_at FROM links "
                           "WHERE source_id = ANY(%s) OR target_id = ANY(%s)", (list(ids), list(ids)))
        return [Link(*r, self.name) for r in rows]

    def link_count(self) -> int:
        return self.query("SELECT count(*) FROM links")[0][0]

    # -- maintenance --------------------------------------------------------------------
    def integrity_problems(self) -> list[str]:
        """Empty when the tier's bookkeeping is consistent (generations, lexemes, vectors)."""
        checks = (
            ("rows stamped with a generation newer than meta.gen",
             "SELECT count(*) FROM entries WHERE gen > (SELECT value::bigint FROM meta WHERE key = 'gen')"),
            ("entries with text but no indexed terms",
             "SELECT count(*) FROM entries WHERE doclen > 0 AND terms = ''::tsvector"),
            ("vectors whose stored dimension differs from their length",
             "SELECT count(*) FROM entry_vectors WHERE vector_dims(vector) <> dim"),
            ("links from entries that do not exist",
             "SELECT count(*) FROM links l WHERE NOT EXISTS (SELECT 1 FROM entries e WHERE e.id = l.source_id)"),
        )
        problems = []
        with self.snapshot() as conn:
            for what, sql in checks:
                n = conn.execute(sql).fetchone()[0]
                if n:
                    problems.append(f"{n} {what}")
        return problems

    def file_size(self) -> int:
        """Bytes on the server of this tier's tables and indexes."""
        return int(self.query(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
            (self.address.schema,))[0][0])
