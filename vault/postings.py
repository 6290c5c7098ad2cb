"""An in-memory mirror of one tier's FTS5 index: BM25 and TF-IDF over sparse postings.

Why: FTS5 scores *every* row that matches any query term before sorting, so
a query with a common word ("how", "error") costs 100+ ms at 100,000 entries.
The mirror holds the same terms (FTS5's own stems, see :mod:`tokenizer`) as
column-weighted term frequencies in a CSC matrix; a query sums a few columns
with NumPy and takes the top k with ``argpartition`` — about a millisecond.
FTS5 stays the durable index and the definition of the score
(:mod:`scoring` reproduces ``bm25()``; a test checks they agree).

Alongside it sits the TF-IDF model of the Brain's semantic signal: a
scikit-learn ``TfidfTransformer`` (smooth idf, l2 norm, English stop words
removed) fitted on the same documents' term counts; a query's TF-IDF leg is
computed over these arrays by :mod:`tfidf_query`; a query's postings and their
BM25 are :mod:`term_matches`. Each slot also holds the
attributes filters read, as columns (:mod:`slot_columns`).

Freshness: every write transaction has a generation number (``meta.gen``);
the mirror remembers the generation it reflects and catches up by reading only
rows written later (and tombstones of deleted rows). Changed rows go to a small
delta segment; when the delta exceeds ``max(256, 5% of rows)`` the mirror is
rebuilt, which also refits the TF-IDF model (so TF-IDF idf is at most that
stale; BM25 statistics are always exact). The built mirror is cached next to
the tier file (``<tier>.postings.mirror``, :mod:`mirror_cache`), memory-mapped on reopen.

Memory: strings (entry ids, terms) live in NumPy string tables (:mod:`string_table`:
blob + offsets + sorted fingerprints) and content hashes as 32 raw bytes
(:mod:`hash_table`), not in Python lists and dicts; the base postings are int32
slots, float32 weights and each posting's TF-IDF count (:mod:`sparse_columns`), the
TF-IDF rows counts + row norms (:mod:`tfidf_rows`). A mirror loaded from its cache
maps it; postings columns and TF-IDF rows of a large file (``mirror_cache.PREAD_ABOVE_BYTES``)
are read with ``pread`` instead (a mapping made every folio a query touched resident); each
block is checked against its CRC-32 on first read (:mod:`checked_array`).
"""

from __future__ import annotations

import itertools
import logging
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from tiervault.vault import hash_table, latent, mirror_cache
from tiervault.vault.filter_compile import mirror_mask
from tiervault.vault.gc_pause import gc_paused
from tiervault.vault.filters import Filters
from tiervault.vault.lazy_sparse import sp
from tiervault.vault.light_records import LightRecords
from tiervault.vault.rows import MirrorRowColumns, MirrorRow
from tiervault.vault.scoring import tfidf_rows
from tiervault.vault.mirror_analysis import Analysed, analyse_rows, assemble
from tiervault.vault.checked_array import CacheDamaged
from tiervault.vault.slot_columns import SlotColumns, appended, empty_columns, slot_columns
from tiervault.vault.sparse_columns import Columns
from tiervault.vault.tfidf_rows import TfidfRows, fit_tfidf
from tiervault.vault.string_table import StringColumn, StringTable
from tiervault.vault.vocabulary import Terms, Vocabulary
from tiervault.vault.term_matches import SPARSE_SHARE, TermMatches, TermScores, term_postings
from tiervault.vault.word_codes import WordCodes
from tiervault.vault.tfidf_query import QueryWeights, dense_scores, query_row, query_weights, scores_at

__all__ = ["Postings", "TermMatches", "SPARSE_SHARE"]

log = logging.getLogger(__name__)

#: Below this many rows a change rebuilds the mirror (and refits TF-IDF) at once.
SMALL_TIER_ROWS = 1_000
_CHUNK = 20_000
_BUILDS = itertools.count(1)  # each build or load of a mirror gets a new number


def _chunks(rows: Sequence[MirrorRow]) -> Iterator[MirrorRowColumns]:
    return (MirrorRowColumns.of(rows[start:start + _CHUNK]) for start in range(0, len(rows), _CHUNK))


class Postings:
    """Mirror of one tier. Built by :meth:`build`; kept fresh by :meth:`catch_up`."""

    def __init__(self) -> None:
        self.gen = 0
        self.epoch: str | None = None  # the tier's epoch at ``gen`` (see connection.EPOCH_WINDOW)
        self.build_id = next(_BUILDS)  # lets callers tell a rebuilt mirror from the old one
        self.vocab = Vocabulary()  # stem <-> term id (string_table.py: arrays, not dicts)
        self.ids = StringColumn()  # entry id per slot
        self.hashes = StringColumn()  # content hash per slot
        # rowids, type/severity/origin/domain codes, valid_from/until, updated_at (NaN: none)
        self.__dict__.update(empty_columns())
        self.rowid_order = np.zeros(0, dtype=np.int64)  # base slots sorted by rowid
        self.alive = np.zeros(0, dtype=bool)
        self._kills = 0  # slots :meth:`_kill` turned dead: with ``alive``'s identity, n_alive's key
        self._n_alive: tuple[tuple, int] = ((), 0)
        self.doclen = np.zeros(0, dtype=np.float32)
        self.domains: list[str] = []
        self.tags: dict[str, np.ndarray] = {}  # tag -> slots holding it
        self.base_rows = 0
        self.W = Columns.empty()  # weighted tf of the base
        self.T = TfidfRows.empty()  # l2 tf-idf rows of the base, as counts + norms
        self.delta_W: list[sp.csr_matrix] = []
        self.delta_T: list[sp.csr_matrix] = []
        self._delta_csc: tuple[sp.csc_matrix, sp.csc_matrix] | None = None
        self.idf = np.zeros(0, dtype=np.float64)  # scikit-learn's fitted idf_
        self.tfidf_terms = 0  # vocabulary size the TF-IDF model was fitted on
        self._delta_slot_of: dict[int, int] = {}  # rowid -> slot, rows after the base
        self.total_len = 0.0
        self.damaged: Exception | None = None  # set when a cache block failed its check
        self.records: LightRecords | None = None  # the base's light rows (light_records.py)
        self.latent_V: "np.ndarray | latent.MatrixRows | None" = None  # V_k of the base (latent.py)
        # the base rows' unit latent vectors, saved with a large base (latent.saved_rows)
        self.latent_rows: "np.ndarray | latent.MatrixRows | None" = None
        self.validity_edges: np.ndarray | None = None  # the base's, from the cache (validity_edges.py)
        self._tfidf_columns: tuple[tuple, dict] = ((), {})  # tfidf_at's columns of one query
        # the last query's TF-IDF weights: a search asks ~3 times a tier (top k, TF-IDF of
        # the kept, LSA); catch-up adds no fitted term, a rebuild replaces this memo
        self._query_weights: tuple[tuple, QueryWeights | None] | None = None
        self._read_terms: tuple[tuple, dict, dict[int, np.ndarray]] = ((), {}, {})  # read_terms

    @property
    def terms(self) -> Terms:
        """Stems by term id (a sequence view of :attr:`vocab`)."""
        return Terms(self.vocab)

    @property
    def term_ids(self) -> Vocabulary:
        """Stem -> term id (``get``, ``[]``, ``in``)."""
        return self.vocab

    # -- construction -----------------------------------------------------------------
    @classmethod
    def build(cls, store: Any) -> "Postings":
        """Load the cached mirror if it is usable, else build it; then catch up.

        The cache is disposable: any failure to load, validate or catch up from it
        means one warning and a rebuild from the tier.
        """
        path = cls.cache_path(store)
        try:
            cached = cls.load_cache(store)
            if cached is not None:
                cached.catch_up(store)
                return cached
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:  # noqa: BLE001 -- a damaged cache must never break search
            if isinstance(exc, mirror_cache.StoreFailure):
                raise exc.cause from None
            log.warning("ignoring the search cache %s (%s: %s); rebuilding from the tier",
                        path, type(exc).__name__, str(exc)[:200])
        mirror = cls()
        mirror._rebuild(store)
        return mirror

    def _rebuild(self, store: Any) -> None:
        # The rows, words and blocks of a build are millions of acyclic containers: the
        # cyclic collector walked them ~2,100 times in a 493,612-row tier's build, 1.7 of
        # its 17.8 s (issue 16, session 7); reference counting still frees them.
        with gc_paused():
            self._rebuild_now(store)

    def _rebuild_now(self, store: Any) -> None:
        fresh, records = Postings(), None
        if getattr(store, "rows_in_chunks", None) is not None:  # SQLite: read as analysed, light records
            with store.rows_in_chunks(_CHUNK) as (gen, chunks, records):
                parts = fresh._analyse(chunks, delta=False)
        else:
            changes = store.changes_since(-1)  # -1: every row, including pre-v2 ones (gen 0)
            gen = changes.generation
            parts = fresh._analyse(_chunks(changes.rows), delta=False)
            del changes
        fresh._append_parts(parts, fit=True)
        fresh.gen = gen
        fresh.epoch = mirror_cache.tier_epoch(store, gen)
        fresh._freeze()
        if records is not None:  # the light rows (light_records.py), with the base's columns
            fresh.records = records.finish(fresh)
        k = latent.DEFAULT_COMPONENTS
        if fresh.tfidf_terms and min(fresh.T.shape) > k:
            # Fitted here, once per base, and cached with the mirror: fitted lazily, every
            # new search process refitted it (cold open + first query at 100K: 4.0 s, 3.7
            # of them the three tiers' SVDs; bench/README.md, growth run of session 6).
            fresh.latent_V = latent.fit_components(fresh.T, k)
            fresh.latent_rows = latent.saved_rows(fresh.T, fresh.latent_V)
        self.__dict__.update(fresh.__dict__)
        mirror_cache.save(self, store)
        # In this process T is in memory: a candidate's vector is projected from it when
        # asked (the same numbers), so the saved rows need not stay here too.
        self.latent_rows = None

    def _freeze(self) -> None:
        """Every slot becomes the base: strings into tables, tag slots into arrays."""
        self.base_rows = len(self.ids)
        self.ids = StringColumn(StringTable.build(self.ids.tolist()))
        self.hashes = StringColumn(hash_table.table_of(self.hashes.tolist()))  # 32 raw bytes
        self.vocab = self.vocab.frozen()
        self.rowid_order = np.argsort(self.rowids, kind="stable").astype(
            np.int32 if self.base_rows < 2**31 - 1 else np.int64)
        self._delta_slot_of = {}

    def catch_up(self, store: Any) -> None:
        """Apply every write committed after ``self.gen`` (by any process).

        When the tier no longer holds the epoch this mirror saw at ``self.gen`` (the
        file was replaced, e.g. by a restored backup), it is rebuilt instead.
        """
        if self.damaged is None:
            try:
                self._catch_up(store)
                return
            except CacheDamaged as exc:  # a block of the mapped cache file failed its check
                self.damaged = exc
        log.warning("ignoring the search cache %s (%s: %s); rebuilding from the tier",
                    self.cache_path(store), type(self.damaged).__name__, str(self.damaged)[:200])
        self._rebuild(store)

    def _catch_up(self, store: Any) -> None:
        current = store.generation()
        if current == self.gen:
            return
        if current < self.gen or mirror_cache.tier_epoch(store, self.gen) != self.epoch:
            self._rebuild(store)
            return
        changes = store.changes_since(self.gen)
        gen, rows, dead_rowids = changes.generation, changes.rows, changes.deleted
        for rowid in dead_rowids:
            self._kill(rowid)
        for row in rows:
            self._kill(row.key)
        pending = sum(m.shape[0] for m in self.delta_W) + len(rows)
        # Deletes count toward the refit as writes do (else TF-IDF's idf kept counting
        # deleted entries); an update kills a slot and writes a row: max() counts it once.
        dead = len(self.ids) - self.n_alive
        # Small tiers are rebuilt on every change (cheap), so TF-IDF sees new words
        # at once, and a delete leaves their idf too (else a tier's TF-IDF would depend on
        # its history: a mirror rebuilt from the same rows would score otherwise);
        # larger ones batch changes in the delta up to 5%.
        small = self.base_rows < SMALL_TIER_ROWS
        if (((pending or len(dead_rowids)) and small)
                or max(pending, dead) > max(256, 0.05 * self.base_rows)):
            self._rebuild(store)
            return
        self._append_rows(rows, fit=False)
        self.gen = gen
        self.epoch = mirror_cache.tier_epoch(store, gen)

    def _kill(self, rowid: int) -> None:
        slot = self._delta_slot_of.pop(int(rowid), None)
        if slot is None:
            slot = self._base_slot(int(rowid))
        if slot is not None and self.alive[slot]:
            self.alive[slot] = False
            self._kills += 1
            self.total_len -= float(self.doclen[slot])

    def _base_slot(self, rowid: int) -> int | None:
        """The base slot of ``rowid`` (binary search in the rowid order)."""
        n = self.base_rows
        if not n:
            return None
        base = self.rowids[:n]
        i = int(np.searchsorted(base, rowid, sorter=self.rowid_order))
        if i < n:
            slot = int(self.rowid_order[i])
            if base[slot] == rowid:
                return slot
        return None

    def verify_all(self) -> None:
        """Check every block of a mirror loaded from its cache file now (``tiervault
        check``): :func:`mirror_cache.verify_all`."""
        mirror_cache.verify_all(self)

    def mark_damaged(self, exc: Exception) -> None:
        """A block of the cache file failed its check during a query: the next
        :meth:`catch_up` warns once and rebuilds from the tier."""
        if self.damaged is None:
            self.damaged = exc

    def slot(self, entry_id: str) -> int | None:
        """Live slot of ``entry_id``, if this tier holds it."""
        return self.slots_of([entry_id])[0]

    def slots_of(self, entry_ids: Sequence[str]) -> list[int | None]:
        """Live slot of each id (None where this tier does not hold it): the last live
        slot holding it."""
        entry_ids = list(entry_ids)
        out: list[int | None] = [None] * len(entry_ids)
        alive = self.alive
        # only the ids held get Python (issue 16, session 10: most dedup look-ups miss)
        for i, found in self.ids.held(entry_ids).items():
            out[i] = (found[0] if alive[found[0]] else None) if len(found) == 1 else \
                next((s for s in reversed(found) if alive[s]), None)
        return out

    def slot_by_hash(self, content_hash: str) -> int | None:
        """A live slot whose entry has this content hash (the first one)."""
        return self.slots_by_hash([content_hash])[0]

    def slots_by_hash(self, hashes: Sequence[str]) -> list[int | None]:
        hashes = list(hashes)
        out: list[int | None] = [None] * len(hashes)
        alive = self.alive
        for i, found in self.hashes.held(hashes).items():
            out[i] = (found[0] if alive[found[0]] else None) if len(found) == 1 else \
                next((s for s in found if alive[s]), None)
        return out

    # -- analysis ---------------------------------------------------------------------
    def _append_rows(self, rows: list[MirrorRow], *, fit: bool) -> None:
        """Tokenise rows into new slots (all chunks; ``fit`` refits TF-IDF on them)."""
        self._append_parts(self._analyse(_chunks(rows)), fit=fit)

    def _analyse(self, chunks: Iterable[MirrorRowColumns], *, delta: bool = True) -> list[Analysed]:
        """Each chunk of rows tokenised into new slots (each chunk may be dropped after); ``delta``:
        delta slots, found by rowid until the next freeze (a first build: no index, columns once)."""
        parts: list[Analysed] = []
        words = WordCodes()  # word -> code, for every chunk of this call
        columns: list[tuple[SlotColumns, np.ndarray]] = []
        for chunk in chunks:
            blocks = analyse_rows(chunk, self.vocab, words)
            if len(chunk):
                columns.append(self._register(chunk, blocks.doclen, delta))
            if delta and columns:  # a catch-up's few rows: every column complete after each chunk
                columns = self._append_columns(columns)
            parts.append(blocks)
        self._append_columns(columns)
        return parts

    def _append_parts(self, parts: list[Analysed], *, fit: bool) -> None:
        """The analysed chunks into the base (``fit``: TF-IDF refitted) or the delta."""
        n_terms = len(self.vocab)
        if fit:
            base = assemble(parts, n_terms)
            parts.clear()  # the chunks' arrays freed now, whoever else holds the list
            # Each posting carries its TF-IDF count: a query's TF-IDF at its candidates is
            # read from the columns of its own terms (already read for BM25), not from
            # rows at scattered slots (issue 16: those rows were all resident at 1M).
            self.W = Columns.from_csc(base.w, base.w_counts)
            # T by row, as counts + norms: the latent model reads it whole, a query its norms
            c = base.c
            del base
            self.T = self._fit(c)
            self.delta_W, self.delta_T = [], []
        else:
            for blocks in parts:
                self.delta_W.append(blocks.w(n_terms))
                self.delta_T.append(self._transform(blocks.c(n_terms)))
        self._delta_csc = None

    def _fit(self, counts: sp.csr_matrix) -> TfidfRows:
        """Fit scikit-learn's TfidfTransformer on the term counts; returns the TF-IDF rows
        (as counts and row norms: vault/tfidf_rows.py, the same float32 weights)."""
        if counts.shape[0] == 0:
            self.idf, self.tfidf_terms = np.zeros(0, dtype=np.float64), 0
            return TfidfRows.empty()
        self.idf, rows = fit_tfidf(counts)
        self.tfidf_terms = counts.shape[1]
        return rows

    def _transform(self, counts: sp.csr_matrix) -> sp.csr_matrix:
        """TF-IDF rows with the fitted idf; terms newer than the fit are left out."""
        if self.tfidf_terms == 0:
            return sp.csr_matrix(counts.shape, dtype=np.float32)
        out = tfidf_rows(counts[:, : self.tfidf_terms], self.idf).astype(np.float32)
        out.resize(counts.shape[0], counts.shape[1])
        return out.tocsr()

    def _register(self, rows: MirrorRowColumns, doclen: np.ndarray, delta: bool) -> tuple[SlotColumns, np.ndarray]:
        """Give ``rows`` the next slots: ids, hashes, domains and tag slots now, the numeric
        columns returned for :meth:`_append_columns` (:mod:`slot_columns`: a column at a time)."""
        first, n = len(self.ids), len(rows)
        cols = slot_columns(rows, self.domains, first)
        self.domains.extend(cols.new_domains)
        if delta:
            self._delta_slot_of.update(zip(cols.rowids.tolist(), range(first, first + n)))
        for tag, added in cols.tags.items():
            self.tags[tag] = np.concatenate([self.tags[tag], added]) if tag in self.tags else added
        self.ids.extend(cols.ids)
        self.hashes.extend(cols.hashes)
        return cols, doclen

    def _append_columns(self, columns: Sequence[tuple[SlotColumns, np.ndarray]]) -> list:
        """The numeric slot columns of :meth:`_register`'s chunks (:func:`slot_columns.appended`)."""
        if columns:
            self.__dict__.update(appended(self.__dict__, [c for c, _ in columns]))
            doclen = np.concatenate([d for _, d in columns])
            self.alive = np.concatenate([self.alive, np.ones(doclen.size, dtype=bool)])
            self.doclen = np.concatenate([self.doclen, doclen])
            for _, d in columns:  # chunk by chunk, as the sums were always added
                self.total_len += float(d.sum())
        return []

    # -- queries ----------------------------------------------------------------------
    @property
    def n_alive(self) -> int:
        # count_nonzero, not sum(): a bool sum goes through int64 (~1 ms over 1M slots); the
        # lexicon's cache keys read this ~26 times a query, so the count is kept until
        # ``alive`` is replaced (new slots) or a slot dies (_kill), the only writes to it
        alive = self.alive
        key = (id(alive), alive.size, self._kills)
        memo = self._n_alive
        if memo[0] != key:
            memo = self._n_alive = (key, int(np.count_nonzero(alive)))
        return memo[1]

    def _delta(self) -> tuple[sp.csc_matrix, sp.csc_matrix] | None:
        if not self.delta_W:
            return None
        if self._delta_csc is None:
            n_terms = len(self.vocab)
            for m in (*self.delta_W, *self.delta_T):
                if m.shape[1] != n_terms:
                    m.resize(m.shape[0], n_terms)
            dw = sp.vstack(self.delta_W, format="csc")
            dt = sp.vstack(self.delta_T, format="csr")  # by row, like the base's T
            dw.sort_indices()
            dt.sort_indices()
            self._delta_csc = (dw, dt)
        return self._delta_csc

    def read_terms(self) -> tuple[dict[str, int | None] | None, dict[int, np.ndarray]]:
        """The last :meth:`matches`' stem -> term id and base columns by term id (its
        query's TF-IDF, term proximity's stems) while W and the vocabulary are the same (a
        catch-up adds terms); (None, {}) otherwise. Read only."""
        key, ids, read = self._read_terms
        return (ids, read) if key == (self.W, self.vocab, len(self.vocab)) else (None, {})

    def matches(self, stems: Sequence[str]) -> TermMatches:
        """Live postings of each query stem (its document frequency is ``len``)."""
        delta = self._delta()
        stems = list(stems)
        out = TermMatches(stems, [], [])
        # None: no write deleted or replaced a row
        alive = None if self.n_alive == self.alive.size else self.alive
        tids, read = self.vocab.ids(stems), {}  # read: the base columns by term id (read_terms)
        for tid in tids:
            if tid is None:
                slots, vals = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
            else:
                slots, vals, read[tid] = term_postings(tid, self.W, delta[0] if delta else None,
                                                       self.base_rows, alive)
            out.slots.append(slots)
            out.wtf.append(vals)
        self._read_terms = ((self.W, self.vocab, len(self.vocab)), dict(zip(stems, tids)), read)
        return out

    def bm25(self, matches: TermMatches, idf: np.ndarray, avglen: float) -> np.ndarray:
        """Dense BM25 score per slot (0 where no query term occurs): :meth:`TermMatches.bm25`."""
        return matches.bm25(self.doclen, idf, avglen)

    def union(self, matches: TermMatches) -> np.ndarray:
        """Sorted distinct slots holding any of the query's terms: :meth:`TermMatches.union`."""
        return matches.union(len(self.ids))

    def bm25_at(self, matches: TermMatches, idf: np.ndarray, avglen: float,
                at: np.ndarray, memo: TermScores | None = None) -> np.ndarray:
        """:meth:`bm25` at the sorted distinct slots ``at`` only, bit for bit (``memo``:
        each term's BM25, kept by the caller while this mirror is unchanged)."""
        return matches.bm25_at(self.doclen, idf, avglen, at, memo)

    def query_tfidf(self, words: Sequence[str]) -> QueryWeights | None:
        """The query's TF-IDF weights (:func:`tfidf_query.query_weights`), kept for its calls."""
        key = tuple(words)
        memo = self._query_weights
        if memo is not None and memo[0] == key:
            return memo[1]
        q = query_weights(words, self.vocab, self.idf, self.tfidf_terms, self.read_terms()[0])
        if q is not None:  # shared by the query's calls: read only
            q.tids.flags.writeable = q.weights.flags.writeable = False
        self._query_weights = (key, q)  # replaced whole: safe across threads
        return q

    def tfidf_vector(self, words: Sequence[str]) -> sp.csr_matrix | None:
        """l2-normalised TF-IDF row (1, fitted terms) of ``words``; None if no known content word."""
        q = self.query_tfidf(words)
        return None if q is None else query_row(q, self.tfidf_terms)

    def tfidf_scores(self, query_words: Sequence[str]) -> np.ndarray:
        """Dense cosine of the query's TF-IDF with every slot's (tests; queries: tfidf_at)."""
        delta = self._delta()
        return dense_scores(self.query_tfidf(query_words), len(self.ids), len(self.vocab), self.T,
                            self.base_rows, delta[1] if delta is not None else None)

    def tfidf_at(self, query_words: Sequence[str], slots: np.ndarray) -> np.ndarray:
        """:meth:`tfidf_scores` at ``slots``, bit for bit (:func:`tfidf_query.scores_at`)."""
        slots = np.asarray(slots, dtype=np.int64)
        q = self.query_tfidf(query_words) if slots.size else None
        if q is None:
            return np.zeros(slots.size, dtype=np.float64)
        delta = self._delta()
        # its columns kept until the next query's words (replaced whole: thread-safe)
        key = tuple(query_words)
        memo = self._tfidf_columns
        if memo[0] != key:
            memo = self._tfidf_columns = (key, {})
        read, W = self.read_terms()[1], self.W  # a column the BM25 read: only its counts read here
        return scores_at(q, slots, W, self.T, self.base_rows, delta[1] if delta is not None else None,
                         memo[1], lambda t: W.column_counts(t, read.get(t)))

    def mask(self, filters: Filters, at: np.ndarray | None = None) -> np.ndarray:
        """Boolean mask of live slots passing ``filters`` (:func:`filter_compile.mirror_mask`);
        with ``at`` (sorted, distinct slots) only at those, aligned with them."""
        return mirror_mask(filters, self, at)

    # -- cache (vault/mirror_cache.py) ---------------------------------------------------
    @staticmethod
    def cache_path(store: Any) -> Path | None:
        return mirror_cache.cache_path(store)

    @classmethod
    def load_cache(cls, store: Any) -> "Postings | None":
        """The cached mirror if it belongs to this tier's history, else None."""
        return mirror_cache.load(store, cls)

