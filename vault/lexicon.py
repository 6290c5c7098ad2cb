"""The lexical half of :class:`~tiervault.vault.backend.TierBackend`, answered from
an in-memory :class:`~tiervault.vault.postings.Postings` mirror.

The mirror is fed only through the contract (``changes_since``, ``generation``,
``uid``, ``cache_prefix``), so any backend can answer lexical search this way:
the SQLite backend does; a PostgreSQL or remote backend may too, or may score
server-side with the same definition (``docs/backend.md``).

A query touches the same tier several times (top-k, dedup look-ups, graph and
vector neighbours, the match count), so the dense BM25 arrays of the last few
queries are kept, keyed by the terms, the statistics and the mirror's
generation: a repeated call costs a dictionary look-up. TF-IDF is computed only
at the slots asked (``Postings.tfidf_at``), never as a dense array.

A mirror loaded from its cache file checks each block of the file the first time
a query reads it (:mod:`checked_array`); a block that fails raises
``CacheDamaged``: the mirror is marked, the answer computed again on the rebuilt
mirror (``mirror()`` catches up, which warns once and rebuilds), never from the
damaged bytes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable, Sequence

import numpy as np

from tiervault.vault import latent
from tiervault.vault.checked_array import CacheDamaged
from tiervault.vault.filters import Filters
from tiervault.vault.postings import Postings, TermMatches
from tiervault.vault.rows import IdMask, LexicalHit, TermStats
from tiervault.vault.scoring import top_k

__all__ = ["MirrorLexicon", "LocalMirror"]

_KEEP = 6  # matches + dense BM25 arrays kept (TF-IDF is computed at the slots asked only)


class LocalMirror:
    """A :class:`Postings` mirror of any backend, built and caught up through the
    contract alone (``changes_since``, ``generation``, ``uid``, ``cache_prefix``).

    For a backend that scores server-side but must still answer the in-process
    parts of the contract (``filter_mask``): a remote tier, say.
    """

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self._mirror: Postings | None = None
        self._lock = threading.RLock()

    def get(self) -> Postings:
        """The mirror, caught up with every write committed so far."""
        with self._lock:
            if self._mirror is None:
                self._mirror = Postings.build(self.backend)
            else:
                self._mirror.catch_up(self.backend)
            return self._mirror


class MirrorLexicon:
    """Lexical search of one tier over its mirror (``mirror()`` returns it caught up)."""

    def __init__(self, mirror: Callable[[], Postings]) -> None:
        self.mirror = mirror
        self._cache: OrderedDict[tuple, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def _cached(self, key: tuple, compute: Callable[[], Any]) -> Any:
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        value = compute()
        with self._lock:
            self._cache[key] = value
            while len(self._cache) > _KEEP:
                self._cache.popitem(last=False)
        return value

    @staticmethod
    def _version(p: Postings) -> tuple:
        return (id(p), p.build_id, p.gen, len(p.ids), p.n_alive)

    def _answer(self, compute: Callable[[Postings], Any]) -> Any:
        """``compute(mirror)``; again on the rebuilt mirror if a cache block failed its check."""
        p = self.mirror()
        try:
            return compute(p)
        except CacheDamaged as exc:
            p.mark_damaged(exc)
            return compute(self.mirror())

    def _mask(self, p: Postings, filters: Filters) -> np.ndarray:
        """``p.mask(filters)``, kept for the query when the filters name their instant
        (``now``): top-k, dedup and the vector pre-filter of one query share it. With
        ``now`` unset the wall clock decides, so nothing is kept."""
        if filters.now is None:
            return p.mask(filters)
        try:
            hash(filters)
        except TypeError:  # a Filters built by hand with a list inside: not a key
            return p.mask(filters)
        return self._cached(("mask", self._version(p), filters), lambda: _frozen(p.mask(filters)))

    def _matches(self, p: Postings, terms: Sequence[str]) -> TermMatches:
        # term_stats and the BM25 of the same query read the same columns
        return self._cached(("matches", self._version(p), tuple(terms)),
                            lambda: p.matches(terms))

    def _bm25(self, p: Postings, terms: Sequence[str], stats: TermStats) -> np.ndarray:
        key = ("bm25", self._version(p), tuple(terms), stats)
        return self._cached(key, lambda: p.bm25(self._matches(p, terms), stats.idf(),
                                                stats.avg_len))

    # -- the contract ------------------------------------------------------------------
    def term_stats(self, terms: Sequence[str]) -> TermStats:
        def compute(p: Postings) -> TermStats:
            df = self._matches(p, terms).df if terms else np.zeros(0)
            return TermStats(p.n_alive, float(p.total_len), tuple(int(x) for x in df))
        return self._answer(compute)

    def lexical_top_k(self, terms: Sequence[str], stats: TermStats, filters: Filters, k: int,
                      *, words: Sequence[str] = ()) -> list[LexicalHit]:
        if not terms or k <= 0:
            return []
        return self._answer(lambda p: self._top_k(p, terms, stats, filters, k, words))

    def _top_k(self, p: Postings, terms: Sequence[str], stats: TermStats, filters: Filters,
               k: int, words: Sequence[str]) -> list[LexicalHit]:
        scores = self._bm25(p, terms, stats)
        slots = top_k(scores, k, self._mask(p, filters) & (scores > 0))
        tfidf = p.tfidf_at(words, slots).tolist() if words else [0.0] * slots.size
        best = scores[slots].tolist()
        ids, hashes = p.ids.take(slots), p.hashes.take(slots)
        return [LexicalHit(ids[i], hashes[i], best[i], tfidf[i], True) for i in range(slots.size)]

    def lexical_scores(self, terms: Sequence[str], stats: TermStats, *, ids: Sequence[str] = (),
                       hashes: Sequence[str] = (), filters: Filters | None = None,
                       words: Sequence[str] = ()) -> list[LexicalHit]:
        return self._answer(lambda p: self._scores(p, terms, stats, ids, hashes, filters, words))

    def _scores(self, p: Postings, terms: Sequence[str], stats: TermStats, ids: Sequence[str],
                hashes: Sequence[str], filters: Filters | None,
                words: Sequence[str]) -> list[LexicalHit]:
        slots: dict[int, None] = {}
        for s in [*p.slots_of(list(ids)), *p.slots_by_hash(list(hashes))]:  # batched look-ups
            if s is not None:
                slots[s] = None
        if not slots:
            return []
        at = np.fromiter(slots, dtype=np.int64, count=len(slots))
        n = at.size
        bm25 = self._bm25(p, terms, stats)[at].tolist() if terms else [0.0] * n
        tfidf = p.tfidf_at(words, at).tolist() if words else [0.0] * n
        passes = self._mask(p, filters)[at].tolist() if filters is not None else [True] * n
        ids, hashes = p.ids.take(at), p.hashes.take(at)
        return [LexicalHit(ids[i], hashes[i], bm25[i], tfidf[i], passes[i]) for i in range(n)]

    def lexical_count(self, terms: Sequence[str], filters: Filters, cap: int) -> int:
        if not terms:
            return 0
        return self._answer(lambda p: self._count(p, terms, filters))

    def _count(self, p: Postings, terms: Sequence[str], filters: Filters) -> int:
        matched = np.zeros(len(p.ids), dtype=bool)
        for slots in self._matches(p, terms).slots:
            matched[slots] = True
        hits = np.flatnonzero(matched)
        if hits.size == 0:
            return 0
        # Validity only on the matching slots; the full mask for any other filter
        # (categories, exclusions, dates: Filters.restricts).
        if filters.restricts:
            return int(np.count_nonzero(self._mask(p, filters)[hits]))
        now = filters.moment
        keep = np.ones(hits.size, dtype=bool)
        with np.errstate(invalid="ignore"):
            if not filters.include_expired:
                keep &= ~(p.valid_until[hits] <= now)
            if not filters.include_future:
                keep &= ~(p.valid_from[hits] > now)
        return int(np.count_nonzero(keep))

    def text_similarity(self, words: Sequence[str], documents: Sequence[Sequence[str]]) -> list[float]:
        return self._answer(lambda p: self._similarity(p, words, documents))

    @staticmethod
    def _similarity(p: Postings, words: Sequence[str], documents: Sequence[Sequence[str]]) -> list[float]:
        out = [0.0] * len(documents)
        if p.tfidf_terms == 0:
            return out
        qv = p.tfidf_vector(list(words))
        if qv is None:
            return out
        for i, doc in enumerate(documents):
            dv = p.tfidf_vector(list(doc))
            if dv is not None:
                out[i] = float(dv.multiply(qv).sum())
        return out

    def latent_scores(self, words: Sequence[str], ids: Sequence[str], k: int) -> list[float | None]:
        """vault/latent.py over this mirror (a damaged TF-IDF block found by the fit:
        the mirror is rebuilt, as for any other read)."""
        return self._answer(lambda p: latent.scores(p, words, ids, k))

    def latent_text_scores(self, words: Sequence[str], documents: Sequence[Sequence[str]],
                           k: int) -> list[float | None]:
        return self._answer(lambda p: latent.text_scores(p, words, documents, k))

    def filter_mask(self, filters: Filters) -> IdMask:
        return self._answer(lambda p: IdMask(p.ids, self._mask(p, filters), self._version(p)))


def _frozen(a: np.ndarray) -> np.ndarray:
    """``a`` made read-only: a kept array is shared by every caller of the query."""
    a.flags.writeable = False
    return a
