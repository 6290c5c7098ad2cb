"""The SQLite backend: one tier = one SQLite file with entries, FTS5, links,
memories, feedback and vectors. Implements :class:`~tiervault.vault.backend.TierBackend`.

The SQLite backend is these modules: ``store`` (entries, links, generations), ``journal`` (memories,
feedback), ``vectors`` (vectors, embedding state), ``sqlite_links`` (links), ``sqlite_listing`` (listing and
browsing), ``sqlite_epochs`` (the file's uid, generations and epochs), ``maintenance`` (integrity checks and
repairs), ``sqlite_db`` (connection, transactions), ``sqlite_writer`` (batches of entries), ``sqlite_bulk``
(a bulk load's settings), ``sqlite_sql`` (SQL text and row conversion), ``sqlite_errors`` (sqlite3 ->
tiervault errors), ``connection`` and ``schema`` (opening, migrations). Nothing else imports ``sqlite3``.

Search has two paths that agree on the score: the contract's lexical methods answer from an in-memory
mirror of the FTS5 index (:mod:`postings`, through :mod:`lexicon`), and :meth:`TierStore.search_fts` asks
FTS5's own ``bm25()`` -- the durable index and the definition of the lexical score (tests compare them)."""

from __future__ import annotations

import json
from itertools import repeat
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from tiervault.vault.entry import Entry
from tiervault.vault.filters import Filters
from tiervault.vault.feedback_memo import FeedbackMemo
from tiervault.vault.journal import Journal
from tiervault.vault.lexicon import MirrorLexicon
from tiervault.vault.light_records import SNIPPET_CHARS, mirror_light_rows
from tiervault.vault.light_feed import rows_with_records
from tiervault.vault.link_graph import LinkGraphCache
from tiervault.vault.maintenance import Maintenance, RepairReport
from tiervault.vault.mirror_search import MirrorSearch
from tiervault.vault.mirror_workers import MirrorJob, job_of
from tiervault.vault.postings import Postings
from tiervault.vault.query import match_expression
from tiervault.vault.read_scope import ScopeMemo
from tiervault.vault.browsing import check_limit, check_link_type, facet_vocabulary
from tiervault.vault.rows import (Changes, CommittedBatch, EmbeddingCounts, EmbeddingStatus, FacetCounts,
                                  FieldTexts, FeedbackCounts, FeedbackEvent, FeedbackRow, KeyColumns,
                                  LightPage, LightRow, Link, LinkEnds, Memory, MemoryHit, MirrorRow,
                                  TierHits, TierStats, TitleRow, VectorChanges, VectorHit,
                                  VectorRow, WeightRecord)
from tiervault.vault.schema import own_deletes
from tiervault.vault.scoring import FTS_WEIGHTS
from tiervault.vault.sqlite_bulk import BulkSettings
from tiervault.vault.sqlite_db import SqliteDb
from tiervault.vault.sqlite_epochs import TierEpochs
from tiervault.vault.sqlite_links import TierLinks
from tiervault.vault.sqlite_listing import TierListing
from tiervault.vault.sqlite_writer import BULK_ROWS, EntryWriter  # noqa: F401  (BULK_ROWS: tests)
from tiervault.vault.entry_rows import SELECT_ENTRY, rows_to_entries
from tiervault.vault.sqlite_sql import (LIGHT_BOUND_IDS, LIGHT_N, MIRROR_COLUMNS, READ_GEN, SELECT_FIELD_TEXTS,
                                        TEXTS_OF, filter_sql, light_rows_sql)
from tiervault.vault.vectors import TierVectors
from tiervault.vault.write_pipeline import write_pipelined

__all__ = ["TierStore", "TierHits", "Link", "MemoryHit"]



class TierStore(MirrorSearch):
    """One tier file. Thread-safe; every write is one atomic transaction. A missing file is an
    empty tier until the first write creates it (owner-only permissions). ``read_only`` refuses
    every write."""

    def __init__(self, path: str | Path, *, name: str = "agent", read_only: bool = False) -> None:
        self.name = name
        self.path = Path(path).expanduser()
        self.db = SqliteDb(self.path, name=name, read_only=read_only)
        self.journal = Journal(self.db)
        self.writer = EntryWriter(self.db)
        self.maintenance = Maintenance(self.db)
        self.vectors = TierVectors(self.db)
        self.links = TierLinks(self.db, name)
        self.graph = LinkGraphCache(self, self.links)  # links as a mapped adjacency (link_graph.py)
        self.epochs = TierEpochs(self.db, self.path)
        self.feedback = FeedbackMemo(self.generation, self.journal.feedback_counts,
                                     self.journal.feedback_events, self.journal.feedback_events_for)
        self.listing = TierListing(self.db, name, self.postings)
        self.lexicon = MirrorLexicon(self.postings)
        self._mirror: Postings | None = None
        self._caught_up = ScopeMemo()  # postings(): the mirror caught up in this read scope

    # -- identity and lifecycle ---------------------------------------------------------
    @property
    def read_only(self) -> bool:
        """True when writes are refused (asked for, or the file is on read-only media)."""
        return self.db.read_only

    @property
    def location(self) -> str:
        """The tier file's path (for messages)."""
        return str(self.path)

    @property
    def exists(self) -> bool:
        """True once the tier file exists (a missing tier searches as empty)."""
        return self.db.reader() is not None

    def close(self) -> None:
        self._caught_up.forget()  # a closed tier answers nothing from the scope's memo
        self.db.close()

    def __enter__(self) -> "TierStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"TierStore(name={self.name!r}, path={str(self.path)!r}, read_only={self.read_only})"

    def create(self) -> bool:
        """Create the tier file (schema only) if missing; True when this call created it."""
        if self.exists:
            return False
        self.db.writer()
        return True

    def uid(self) -> str:
        """A random id the tier file gets with its first write (names its caches)."""
        return self.epochs.uid()

    def epoch_at(self, gen: int) -> str | None:
        """The random epoch recorded for generation ``gen`` (see :mod:`sqlite_epochs`)."""
        return self.epochs.epoch_at(gen)

    def pin_epoch(self, gen: int) -> None:
        """Keep the epoch of ``gen`` beyond the window (a cache file was saved at ``gen``)."""
        self.epochs.pin(gen)

    def generation(self) -> int:
        return self.epochs.generation()

    def snapshot(self) -> Any:
        """One read transaction on the file (SQLite only, not in the contract): a
        context manager yielding the connection, or None while the file does not exist."""
        return self.db.snapshot()

    def cache_prefix(self) -> str | None:
        return str(self.path)

    def stats(self) -> TierStats:
        return TierStats(self.location, self.exists, self.count(), self.link_count(),
                         self.memory_count(), self.file_size())

    def file_size(self) -> int:
        return sum(p.stat().st_size for p in (self.path, Path(f"{self.path}-wal"))
                   if p.exists())

    def integrity_problems(self) -> list[str]:
        """Empty when both SQLite's and FTS5's integrity checks pass."""
        return self.maintenance.integrity_problems()

    def damaged_rows(self) -> list[str]:
        """Ids of entries holding a timestamp the model refuses (SQLite only: `check`)."""
        return self.maintenance.damaged_rows()

    def bad_vectors(self) -> list[tuple[str, str]]:
        """(entry id, model) of stored vectors that cannot be vectors (SQLite only)."""
        return self.maintenance.bad_vectors()

    def repair(self, *, fts: bool, rows: bool, vectors: bool) -> RepairReport:
        """Repair what the flags name in one transaction (SQLite only: `check --repair`)."""
        report = self.maintenance.repair(fts=fts, rows=rows, vectors=vectors)
        self._sync_mirror()
        return report

    # -- entries --------------------------------------------------------------------
    def capture(self, entry: Entry) -> Entry:
        """Insert or update ``entry`` by id in one transaction; returns it as stored."""
        self.capture_many([entry])
        stored = self.get(entry.id)
        assert stored is not None
        return stored

    def capture_many(self, entries: Iterable[Entry], *, batch_size: int = 5_000,
                     on_batch: Callable[[CommittedBatch], None] | None = None) -> int:
        """Upsert entries, one transaction per batch; returns how many were written.

        A batch is all-or-nothing: after a crash every acknowledged batch is
        present and the interrupted one is absent (re-running is idempotent).
        """
        bulk = BulkSettings(self.db.lock, self.name)  # a load of bulk batches: bigger cache, fewer checkpoints
        try:
            return write_pipelined(entries, batch_size,
                                   lambda batch, inserted: self._write_batch(batch, inserted, bulk),
                                   on_batch)
        finally:
            bulk.restore()

    def _write_batch(self, batch: list[Entry], inserted: Callable[[], None],
                     bulk: BulkSettings | None = None) -> int:
        """One batch's transaction (:meth:`EntryWriter.write_batch`), then the mirror's catch-up."""
        written = self.writer.write_batch(batch, inserted, bulk)
        if written:
            self._sync_mirror()
        return written

    def get(self, entry_id: str) -> Entry | None:
        rows = self.db.query(f"SELECT {SELECT_ENTRY} FROM entries e WHERE e.id = ?", (entry_id,))
        found = rows_to_entries(rows, self.name)
        return found[0] if found else None

    def get_many(self, ids: Sequence[str]) -> dict[str, Entry]:
        """Entries by id (missing ids are simply absent from the mapping)."""
        if not ids:
            return {}
        rows = self.db.query(
            f"SELECT {SELECT_ENTRY} FROM entries e WHERE e.id IN (SELECT value FROM json_each(?))",
            (json.dumps(list(ids)),))
        return {e.id: e for e in rows_to_entries(rows, self.name)}

    def field_texts(self, ids: Sequence[str]) -> dict[str, FieldTexts]:
        """{id: FieldTexts}: the five FTS5 fields only (no Entry built: ~4x cheaper than
        :meth:`get_many` for term proximity's 30 entries). An optional capability."""
        rows = self.db.query(f"SELECT {SELECT_FIELD_TEXTS} FROM entries e WHERE e.id IN "
                             "(SELECT value FROM json_each(?))", (json.dumps(list(ids)),)) if ids else []
        return {row[0]: FieldTexts._make(row) for row in rows}

    def light_rows(self, ids: Sequence[str], snippet_chars: int = 120) -> dict[str, LightRow]:
        """{id: LightRow}: scoring fields, the first ``snippet_chars`` of the description
        and ``chars`` (length of all text fields), without full entries. While this process
        holds the tier's mirror, its rows come from the mirror's light records
        (:mod:`light_records`: no SQL for base rows; the mirror caught up first, once a
        read scope), the others' from SQL."""
        if ids and snippet_chars == SNIPPET_CHARS and self._mirror is not None:
            rows = mirror_light_rows(self.postings(), ids, self._light_sql)
            if rows is not None:
                return rows
        return self._light_sql_texts(ids, None, snippet_chars)

    def _light_sql(self, ids: list[str]) -> dict[str, LightRow]:
        return self._light_sql_texts(ids, None, SNIPPET_CHARS)

    def light_rows_texts(self, ids: Sequence[str], texts: dict[str, FieldTexts] | None,
                         snippet_chars: int = 120) -> dict[str, LightRow]:
        """:meth:`light_rows`, and the :class:`FieldTexts` of each row read from SQL put in
        ``texts`` (unless None) from the same statement: term proximity's own read spared.
        Rows the mirror's light records answer come without texts (no SQL; proximity reads
        those that may hold a pair, ``may_hold_pairs``). Optional."""
        if texts is not None and ids and snippet_chars == SNIPPET_CHARS and self._mirror is not None:
            rows = mirror_light_rows(self.postings(), ids, lambda ask: self._light_sql_texts(ask, texts))
            if rows is not None:
                return rows
        return self._light_sql_texts(ids, texts, snippet_chars)

    def _light_sql_texts(self, ids: Sequence[str], texts: dict[str, FieldTexts] | None,
                         snippet_chars: int = SNIPPET_CHARS) -> dict[str, LightRow]:
        n = len(ids)
        if not n:
            return {}
        params = ((int(snippet_chars), *ids) if n <= LIGHT_BOUND_IDS
                  else (int(snippet_chars), json.dumps(list(ids))))
        rows = self.db.query(light_rows_sql(n, texts is not None), params)
        if texts is None:  # LightRow's fields are the SELECT's columns: tuple.__new__ in C
            return {r.id: r for r in map(tuple.__new__, repeat(LightRow), rows)}
        texts.update({r[0]: tuple.__new__(FieldTexts, TEXTS_OF(r)) for r in rows})
        return {r[0]: tuple.__new__(LightRow, r[:LIGHT_N]) for r in rows}

    def delete(self, entry_id: str) -> bool:
        """Delete an entry (its links, vectors and embedding state cascade)."""
        with self.db.write("delete") as txn, own_deletes(txn.conn):
            cur = txn.conn.execute("DELETE FROM entries WHERE id = ?", (entry_id,))
        self._sync_mirror()
        return cur.rowcount > 0

    def delete_many(self, ids: Sequence[str]) -> int:
        """Delete entries in one transaction (all of them or, on failure, none)."""
        if not ids:
            return 0
        with self.db.write("delete") as txn, own_deletes(txn.conn):
            cur = txn.conn.execute("DELETE FROM entries WHERE id IN (SELECT value FROM json_each(?))",
                                   (json.dumps(list(ids)),))
        self._sync_mirror()
        return cur.rowcount

    def count(self) -> int:
        rows = self.db.query("SELECT count(*) FROM entries")
        return rows[0][0] if rows else 0

    # -- listing and browsing (vault/sqlite_listing.py) --------------------------------
    def list_entries(self, *, offset: int = 0, limit: int = 100, filters: Filters | None = None,
                     sort: str = "rowid", since: float | None = None) -> list[Entry]:
        return self.listing.list_entries(offset=offset, limit=limit, filters=filters, sort=sort,
                                         since=since)

    def count_matching(self, filters: Filters | None = None, since: float | None = None) -> int:
        return self.listing.count_matching(filters, since)

    def vocabulary(self) -> dict[str, dict[str, int]]:
        """From the search mirror when it is in memory (no table scan), else GROUP BY."""
        if self._mirror is not None:
            return facet_vocabulary(self.listing.facet_counts(None))
        return self.listing.vocabulary()

    def light_page(self, *, order: str = "newest", filters: Filters | None = None, offset: int = 0,
                   limit: int = 25, snippet_chars: int = 120) -> LightPage:
        return self.listing.light_page(order=order, filters=filters, offset=offset, limit=limit,
                                       snippet_chars=snippet_chars)

    def facet_counts(self, filters: Filters | None = None) -> FacetCounts:
        return self.listing.facet_counts(filters)

    def title_rows(self, after: int = 0, limit: int = 5_000) -> list[TitleRow]:
        return self.listing.title_rows(after, limit)

    def iter_entries(self, batch: int = 2_000) -> Iterator[Entry]:
        """Every entry, streamed in rowid order (for export)."""
        last = 0
        while True:
            rows = self.db.query(f"SELECT e.rowid, {SELECT_ENTRY} FROM entries e WHERE e.rowid > ? "
                                 "ORDER BY e.rowid LIMIT ?", (last, batch))
            if not rows:
                return
            yield from rows_to_entries((row[1:] for row in rows), self.name)
            last = rows[-1][0]

    def entries_after(self, after: str, limit: int) -> list[Entry]:
        return self.vectors.page(limit, after=after)

    def ids_by_hash(self, hashes: Sequence[str]) -> dict[str, str]:
        """content_hash -> id for the given hashes held here (cross-tier dedup)."""
        rows = self.db.query("SELECT content_hash, id FROM entries WHERE content_hash IN "
                             "(SELECT value FROM json_each(?))", (json.dumps(list(hashes)),))
        return {h: i for h, i in rows}

    # -- generations ------------------------------------------------------------------
    def changes_since(self, since: int) -> Changes:
        """Rows written after ``since`` and rowids deleted after it, in one snapshot."""
        with self.db.snapshot("read changes") as conn:
            if conn is None:
                return Changes(0, [], [])
            gen = conn.execute(READ_GEN).fetchone()[0]
            if since < 0:
                rows = conn.execute(f"SELECT {MIRROR_COLUMNS} FROM entries ORDER BY rowid").fetchall()
            else:
                # Through the gen index: a catch-up reads only what changed (ORDER BY rowid
                # would make SQLite walk the whole table instead).
                rows = sorted(conn.execute(
                    f"SELECT {MIRROR_COLUMNS} FROM entries INDEXED BY entries_gen WHERE gen > ?",
                    (since,)).fetchall())
            dead = [r[0] for r in conn.execute(
                "SELECT row FROM tombstones WHERE gen > ?", (since,))] if since >= 0 else []
        # tuple.__new__ mapped in C: the SELECT gives exactly MirrorRow's fields, and
        # _make (a Python call per row) was ~1 s of a 500K-row tier's first build
        return Changes(gen, list(map(tuple.__new__, repeat(MirrorRow), rows)), dead)

    def rows_in_chunks(self, size: int) -> Any:
        """Every row (as ``changes_since(-1)``), ``size`` at a time by column, with their
        generation and the light records' builder (:func:`light_feed.rows_with_records`:
        one snapshot held while the caller reads): a first mirror build drops each chunk
        once analysed (1M team tier: ~520 MB less held, 0.3-0.5 s less system CPU) and
        keeps each row's light row beside the mirror. An optional capability (docs/backend.md,
        "Generations")."""
        return rows_with_records(self, size)

    # -- lexical search -----------------------------------------------------------------
    def postings(self) -> Postings:
        """The in-memory mirror of this tier's FTS5 index, built on first use, caught up."""
        if (p := self._caught_up.get(writes := self.db.writes)) is not None and p.damaged is None:
            return p  # caught up in this scope, no write since (a damaged block: caught up again)
        with self.db.lock:
            if self._mirror is None:
                self._mirror = Postings.build(self)
                self.graph.current()  # the link graph with the mirror: mapped, or built and saved
            else:
                self._mirror.catch_up(self)
            self._caught_up.keep(self._mirror, writes)
            return self._mirror

    def mirror_job(self) -> MirrorJob | None:
        """A worker process's build of this tier's mirror and cache file, while this
        process holds no mirror (:func:`mirror_workers.job_of`: None when not needed)."""
        with self.db.lock:
            return job_of(self) if self._mirror is None else None

    def _sync_mirror(self) -> None:
        if self._mirror is not None:
            with self.db.lock:
                self._mirror.catch_up(self)

    def key_columns(self) -> KeyColumns:
        with self.db.lock:  # one build's columns and slot count (a catch-up appends under it)
            p = self.postings()
            return KeyColumns(p.build_id, p.ids, p.hashes, min(len(p.ids), len(p.hashes)))

    def search_fts(self, terms: list[str], filters: Filters, limit: int) -> TierHits:
        """FTS5 ``bm25()`` with the field weights; the reference lexical score.

        Returns positive scores (FTS5's bm25 is negative: more negative is better).
        SQLite only: not part of the contract.
        """
        if not terms or limit <= 0 or not self.exists:
            return TierHits.empty()
        where, params = filter_sql(filters)
        weights = ", ".join(str(w) for w in FTS_WEIGHTS)
        sql = (f"SELECT e.id, -bm25(entries_fts, {weights}) AS s FROM entries_fts "
               f"JOIN entries e ON e.rowid = entries_fts.rowid "
               f"WHERE entries_fts MATCH ?{where} ORDER BY s DESC LIMIT ?")
        rows = self.db.query(sql, [match_expression(terms), *params, limit])
        return TierHits([r[0] for r in rows], np.array([r[1] for r in rows], dtype=np.float64))

    # -- links (vault/sqlite_links.py) ----------------------------------------------
    def link(self, source_id: str, target_id: str, link_type: str, note: str = "") -> Link:
        """Link ``source_id`` (held here) to ``target_id`` (any tier)."""
        return self.links.link(source_id, target_id, link_type, note)

    def unlink(self, source_id: str, target_id: str, link_type: str | None = None) -> int:
        return self.links.unlink(source_id, target_id, link_type)

    def links_touching(self, ids: Sequence[str]) -> list[Link]:
        """Every link stored here whose source or target is one of ``ids``."""
        return self.links.touching(ids)

    def link_ends(self, ids: Sequence[str]) -> list[LinkEnds]:
        """:meth:`links_touching`'s links as (source, target, type), from the tier's
        memory-mapped link graph kept exact by generation (an optional capability)."""
        return self.graph.touching(ids)

    def links_of_type(self, link_type: str, limit: int = 200) -> list[Link]:
        return self.links.of_type(check_link_type(link_type), check_limit("limit", limit, 10_000))

    def link_count(self) -> int:
        return self.links.count()

    # -- memories and feedback (journal) -------------------------------------------------
    def add_memory(self, summary: str, *, context: str = "", topics: Sequence[str] | str = (),
                   project: str = "", created_at: float | None = None) -> str:
        return self.journal.add_memory(summary, context=context, topics=topics, project=project,
                                       created_at=created_at)

    def search_memories(self, terms: Sequence[str], limit: int) -> list[MemoryHit]:
        return self.journal.search_memories(terms, limit)

    def get_memories(self, ids: Sequence[str]) -> dict[str, Memory]:
        return self.journal.get_memories(ids)

    def list_memories(self, *, limit: int = 20, offset: int = 0,
                      project: str | None = None) -> list[Memory]:
        return self.journal.list_memories(limit=limit, offset=offset, project=project)

    def memory_count(self) -> int:
        return self.journal.memory_count()

    def add_feedback(self, query: str, entry_id: str, action: str, *, agent: str = "",
                     context: str = "") -> None:
        self.journal.add_feedback(query, entry_id, action, agent=agent, context=context)

    def feedback_events(self, limit: int) -> list[FeedbackEvent]:
        return self.journal.feedback_events(limit)

    def feedback_events_for(self, entry_ids: Sequence[str], limit: int) -> list[FeedbackEvent]:
        return self.feedback.events_for(entry_ids, limit)  # per generation (feedback_memo.py)

    def add_weight_record(self, events: int, pairs: int, weights: str,
                          created_at: float | None = None) -> None:
        self.journal.add_weight_record(events, pairs, weights, created_at)

    def weight_history(self, limit: int = 20) -> list[WeightRecord]:
        return self.journal.weight_history(limit)

    def feedback_counts(self) -> FeedbackCounts:
        return self.feedback.counts()

    def feedback_for(self, entry_ids: Sequence[str]) -> list[FeedbackRow]:
        return self.journal.feedback_for(entry_ids)

    # -- vectors --------------------------------------------------------------------------
    def put_vectors(self, model: str, rows: Iterable[VectorRow]) -> int:
        return self.vectors.put(model, rows)

    def vectors_for(self, model: str, ids: Sequence[str]) -> dict[str, np.ndarray]:
        return self.vectors.vectors_for(model, ids)

    def vector_input_hashes(self, model: str, ids: Sequence[str]) -> dict[str, str]:
        return self.vectors.input_hashes(model, ids)

    def vector_changes_since(self, model: str, since: int) -> VectorChanges:
        return self.vectors.changes_since(model, since)

    def vector_search(self, model: str, query: np.ndarray, k: int,
                      filters: Filters | None = None) -> list[VectorHit]:
        allowed = None
        if filters is not None:
            m = self.filter_mask(filters)
            rows = np.flatnonzero(m.mask)
            take = getattr(m.ids, "take", None)  # the mirror's string column: one gather
            allowed = set(take(rows)) if take is not None else {m.ids[i] for i in rows}
        return [VectorHit(eid, score) for eid, score in self.vectors.search(model, query, k, allowed)]

    def mark_embedding(self, model: str, items: Iterable[tuple[str, str]], state: str,
                       error: str = "") -> None:
        self.vectors.mark(model, items, state, error)

    def embedding_backlog(self, model: str, limit: int, *, after: str = "") -> list[Entry]:
        return self.vectors.backlog(model, limit, after=after)

    def embedding_counts(self, model: str) -> EmbeddingCounts:
        return self.vectors.counts(model, self.count())

    def embedding_status(self, model: str, ids: Sequence[str]) -> dict[str, EmbeddingStatus]:
        return self.vectors.status(model, ids)

