"""The lexical half of :class:`~tiervault.vault.backend.TierBackend`, answered from
an in-memory :class:`~tiervault.vault.postings.Postings` mirror.

The mirror is fed only through the contract (``changes_since``, ``generation``,
``uid``, ``cache_prefix``), so any backend can answer lexical search this way:
the SQLite backend does; a PostgreSQL or remote backend may too, or may score
server-side with the same definition (``docs/backend.md``).

A query touches the same tier several times (top-k, dedup look-ups, graph and
vector neighbours, the match count), so the dense BM25 arrays of the last few
queries are kept, keyed by the terms, the statistics and the mirror's
generation: a repeated call costs a dictionary look-up. BM25 is computed at the
slots holding a query term only (their sorted union, :class:`SlotScores`), and
the filter mask of a top k at those slots only: at 1,000,000 entries a dense array
of every slot per tier, written, masked and scanned, was a quarter of a scan
(issue 16). TF-IDF is computed only at the slots asked (``Postings.tfidf_at``).

A mirror loaded from its cache file checks each block of the file the first time
a query reads it (:mod:`checked_array`); a block that fails raises
``CacheDamaged``: the mirror is marked, the answer computed again on the rebuilt
mirror (``mirror()`` catches up, which warns once and rebuilds), never from the
damaged bytes.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from itertools import repeat
from typing import Any, Callable, Sequence

import numpy as np

from tiervault.vault import latent
from tiervault.vault.checked_array import CacheDamaged
from tiervault.vault.filters import Filters
from tiervault.vault.postings import Postings
from tiervault.vault.term_matches import SPARSE_SHARE, TermMatches, TermScores
from tiervault.vault.term_parts import SlotScores, TermParts, splits
from tiervault.vault.rows import IdMask, LexicalHit, TermStats, hits_of
from tiervault.vault.scoring import top_k, top_k_from_head
from tiervault.vault.slot_hits import SlotHits, hits_at
from tiervault.vault.validity_edges import ValidityEdges

__all__ = ["MirrorLexicon", "LocalMirror", "SlotScores", "SlotHits"]

_KEEP = 8  # matches, unions, BM25 parts and scores, masks kept (TF-IDF: at the slots asked only)
_TERM_SCORES = 1 << 20  # postings whose BM25 is kept per tier (float32: 4 MB)
#: a top k over at most this many scored slots under a kept mask masks them all at once
HEADLESS = 4096
_KEEP_MASKS = 4  # dense filter masks kept across queries (the unfiltered view and a few others)
# every field of Filters but its instant: with the validity bucket, a dense mask's key
_TIMELESS = tuple(f.name for f in dataclasses.fields(Filters) if f.name != "now")


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
        self._terms: tuple[tuple, TermScores] = ((), TermScores(0))  # _term_scores
        # dense masks by (version, validity bucket, filters without now): _dense_mask
        self._masks: OrderedDict[tuple, np.ndarray] = OrderedDict()
        self._edges = ValidityEdges()
        self._last_kept: tuple[Any, tuple, np.ndarray | None] = (None, (), None)  # _kept_mask
        # the validity-only mask and the instants sharing its bucket (_kept_mask)
        self._window: tuple[tuple, tuple, float, float, np.ndarray | None] = ((), (), 0.0, 0.0, None)

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
        # alive.size: the slot count (len(p.ids), without its three Python calls)
        return (id(p), p.build_id, p.gen, p.alive.size, p.n_alive)

    def _peek(self, key: tuple) -> Any:
        """The kept value of ``key``, or None (nothing computed)."""
        with self._lock:
            return self._cache.get(key)

    def _term_scores(self, p: Postings) -> TermScores:
        """Each query term's BM25 at its postings by (stem, idf, avglen), kept across
        queries while the mirror is unchanged (:meth:`TermMatches.terms_bm25`): the
        statistics change only with a write, and common words recur (their BM25 is a
        pass per operation over many postings). At most ``_TERM_SCORES`` postings."""
        version = self._version(p)
        with self._lock:
            if self._terms[0] != version:
                self._terms = (version, TermScores(_TERM_SCORES))
            return self._terms[1]

    def _answer(self, compute: Callable[[Postings], Any]) -> Any:
        """``compute(mirror)``; again on the rebuilt mirror if a cache block failed its check."""
        p = self.mirror()
        try:
            return compute(p)
        except CacheDamaged as exc:
            p.mark_damaged(exc)
            return compute(self.mirror())

    def _mask(self, p: Postings, filters: Filters, at: np.ndarray | None = None,
              at_key: tuple = ()) -> np.ndarray:
        """``p.mask(filters)`` (or at the slots ``at``, named by ``at_key``), kept for the
        query when the filters name their instant (``now``): top-k, dedup and the vector
        pre-filter of one query share it; the dense mask across queries too
        (:meth:`_dense_mask`). With ``now`` unset the wall clock decides, so nothing is
        kept."""
        if at is not None and at.size * SPARSE_SHARE >= len(p.ids):
            return self._mask(p, filters)[at]  # many slots: the dense mask, kept for the query
        if filters.now is None:
            return p.mask(filters, at)
        try:
            hash(filters)
        except TypeError:  # a Filters built by hand with a list inside: not a key
            return p.mask(filters, at)
        if at is None:
            return self._dense_mask(p, filters)
        return self._cached(("mask", self._version(p), filters, at_key),
                            lambda: _frozen(self._mask_at(p, filters, at)))

    def _mask_at(self, p: Postings, filters: Filters, at: np.ndarray, tagged: bool = False) -> np.ndarray:
        """``p.mask(filters, at)`` (``at`` sorted, distinct). With ``now`` named, the
        validity window is read at ``at`` from the kept validity-only dense mask
        (:meth:`_dense_mask`: live and valid, made once per bucket) and only the
        narrowing fields are compiled there -- the same booleans, as :meth:`_compiled`
        makes them densely -- without two float64 columns gathered and compared.
        ``tagged``: every slot of ``at`` holds a tag ``filters`` asks for
        (:func:`_tagged`), so the tags' test (it passes) is left out: under a tag filter
        alone nothing is compiled (issue 16, session 21)."""
        if filters.now is None or not filters.checks_validity:
            return p.mask(dataclasses.replace(filters, tags=()) if tagged else filters, at)
        window = self._dense_mask(p, Filters(include_expired=filters.include_expired,
                                             include_future=filters.include_future, now=filters.now))
        mask = window[at]
        rest = dataclasses.replace(filters, tags=() if tagged else filters.tags,
                                   include_expired=True, include_future=True)
        if rest.restricts:
            mask &= p.mask(rest, at)
        return mask

    def _kept_mask(self, p: Postings, filters: Filters) -> np.ndarray | None:
        """The dense mask kept across queries (:meth:`_dense_mask`) under validity-only
        filters naming their instant (a search's usual filters: one mask a tier, made
        once per validity bucket and mirror version), else None. Reading it at a few
        slots is one gather instead of a compiled mask there per call: the head of a
        top k, a small union's top k and the dedup's look-ups (~4 calls a query,
        issue 16 session 12); the same values (``p.mask(filters)`` at those slots). The
        last answer is kept for the same Filters object (immutable: hashable) and mirror
        version: a search asks with one object in its top k and its look-ups."""
        last, version = self._last_kept, self._version(p)
        if last[0] is filters and last[1] == version:
            return last[2]
        mask = None
        if not filters.restricts and filters.now is not None:
            try:
                hash(filters)
            except TypeError:  # a Filters built by hand with a list inside: not a key
                return None
            # a new Filters a query: the last one's mask while its instant lies between
            # the same two validity edges (session 21: the bucket's search and the key
            # of every field, ~10 us a tier a query in a scan)
            window, flags, now = self._window, (filters.include_expired, filters.include_future), filters.now
            if window[0] == version and window[1] == flags and window[2] <= now < window[3]:
                mask = window[4]
            else:
                mask = self._dense_mask(p, filters)
                around = self._edges.window(p, now)
                if around is not None:
                    self._window = (version, flags, *around, mask)  # replaced whole
        self._last_kept = (filters, version, mask)  # replaced whole: safe across threads
        return mask

    def _dense_mask(self, p: Postings, filters: Filters) -> np.ndarray:
        """``p.mask(filters)`` kept across queries while no validity edge lies between
        their instants (:mod:`validity_edges`: the key holds the edges up to ``now``, not
        ``now``), so the vector pre-filter's view of every tier is not a pass over each
        column per query (a Brain names a new ``now`` per query). A write moves the
        mirror's version, which is in the key."""
        bucket = self._edges.bucket(p, filters.moment)
        if bucket is None:
            return self._cached(("mask", self._version(p), filters, ()),
                                lambda: _frozen(self._compiled(p, filters)))
        key = (self._version(p), bucket, *[getattr(filters, name) for name in _TIMELESS])
        with self._lock:
            hit = self._masks.get(key)
            if hit is not None:
                self._masks.move_to_end(key)
                return hit
        value = _frozen(self._compiled(p, filters))
        with self._lock:
            self._masks[key] = value
            while len(self._masks) > _KEEP_MASKS:
                self._masks.popitem(last=False)
        return value

    def _compiled(self, p: Postings, filters: Filters) -> np.ndarray:
        """``p.mask(filters)`` (``now`` set). Narrowing filters (category, tag...: the
        bench's are nearly all distinct, so their dense masks are made, not kept) take
        the validity window from the kept validity-only mask (:meth:`_dense_mask`: a
        search's usual one, made once per bucket) and compile their fields alone: the
        same booleans (live, the fields, the window: and-ed in another order) without
        two float64 columns compared over every slot (issue 16 session 13)."""
        if not filters.restricts or not filters.checks_validity:
            return p.mask(filters)
        window = self._dense_mask(p, Filters(include_expired=filters.include_expired,
                                             include_future=filters.include_future, now=filters.now))
        mask = p.mask(dataclasses.replace(filters, include_expired=True, include_future=True))
        mask &= window
        return mask

    def _matches(self, p: Postings, terms: Sequence[str]) -> TermMatches:
        # term_stats and the BM25 of the same query read the same columns
        return self._cached(("matches", self._version(p), tuple(terms)),
                            lambda: p.matches(terms))

    def _union(self, p: Postings, terms: Sequence[str]) -> np.ndarray:
        """Sorted slots holding any of ``terms`` (live)."""
        return self._cached(("union", self._version(p), tuple(terms)),
                            lambda: _frozen(p.union(self._matches(p, terms))))

    def _bm25(self, p: Postings, terms: Sequence[str], stats: TermStats) -> SlotScores:
        """BM25 at the slots that may score > 0: in a small tier the slots that do,
        read off one dense sum (:meth:`TermMatches.scored`); else the union's."""
        key = ("bm25", self._version(p), tuple(terms), stats)

        def compute() -> SlotScores:
            got = self._matches(p, terms).scored(p.doclen, stats.idf(), stats.avg_len,
                                                 self._term_scores(p))
            if got is not None:
                return SlotScores(_frozen(got[0]), _frozen(got[1]))
            at = self._union(p, terms)
            scores = p.bm25_at(self._matches(p, terms), stats.idf(), stats.avg_len, at,
                               self._term_scores(p))
            return SlotScores(at, _frozen(scores))
        return self._cached(key, compute)

    def _parts(self, p: Postings, terms: Sequence[str], stats: TermStats) -> TermParts:
        """The query's BM25 as its terms' parts (:class:`TermParts`): its top k and its
        scores at a few slots without the sum at every slot a common word holds."""
        def compute() -> TermParts:
            matches, idf = self._matches(p, terms), stats.idf()
            return TermParts(matches.slots, matches.terms_bm25(p.doclen, idf, stats.avg_len,
                                                               self._term_scores(p)),
                             idf.tolist(), len(p.doclen))
        return self._cached(("parts", self._version(p), tuple(terms), stats), compute)

    def _bm25_at(self, p: Postings, terms: Sequence[str], stats: TermStats, at: np.ndarray) -> np.ndarray:
        """The query's BM25 at the distinct slots ``at``: from its scores at every slot
        when the top k made them, else from its terms' parts (the same numbers)."""
        every = self._peek(("bm25", self._version(p), tuple(terms), stats))
        return every.at(at) if every is not None else self._parts(p, terms, stats).at(at)

    # -- the contract ------------------------------------------------------------------
    def term_stats(self, terms: Sequence[str]) -> TermStats:
        def compute(p: Postings) -> TermStats:
            df = tuple(map(len, self._matches(p, terms).slots)) if terms else ()  # 1-D: len = size
            return TermStats(p.n_alive, float(p.total_len), df)
        return self._answer(compute)

    def lexical_top_k(self, terms: Sequence[str], stats: TermStats, filters: Filters, k: int,
                      *, words: Sequence[str] = ()) -> list[LexicalHit]:
        if not terms or k <= 0:
            return []
        return self._answer(lambda p: self._top_k(p, terms, stats, filters, k, words))

    def _top_k(self, p: Postings, terms: Sequence[str], stats: TermStats, filters: Filters,
               k: int, words: Sequence[str]) -> list[LexicalHit]:
        slots, best = self._pick(p, terms, stats, filters, k)
        return hits_at(p, words, slots, best.tolist())

    def _pick(self, p: Postings, terms: Sequence[str], stats: TermStats, filters: Filters,
              k: int) -> tuple[np.ndarray, np.ndarray]:
        """The top ``k``'s slots and BM25 (best first), as :meth:`lexical_top_k` orders them."""
        # the filters read at the best scores first, when most slots pass them (validity
        # only: Filters.restricts false; a category or tag filter left ~11 of 236 bench
        # top k decided by their head): the same pick as below
        kept = self._kept_mask(p, filters)
        tagged = _tagged(p, filters)
        if tagged is not None:  # few slots hold the tags asked: BM25 at those passing only
            passing = tagged[self._mask_at(p, filters, tagged, tagged=True)]
            scores = self._bm25_at(p, terms, stats, passing)
            # top_k over the same candidates in the same order as over the union below
            pick = top_k(scores, k, scores > 0)
            return passing[pick], scores[pick]
        if not filters.restricts and splits(self._matches(p, terms).slots, stats.idf().tolist(), len(p.doclen)):
            # without the scores of every slot a common word holds
            got = self._parts(p, terms, stats).top_k(
                k, _head(k), (lambda at: p.mask(filters, at)) if kept is None else (lambda at: kept[at]))
            if got is not None:
                return got
        bm25 = self._bm25(p, terms, stats)
        union = bm25.slots
        # a kept mask read at a few thousand slots costs less than the head's partitions
        # (session 21: ~5-9 us a call on the bench's sparse queries); the same pick
        pick = top_k_from_head(bm25.scores, k, (lambda at: p.mask(filters, union[at])) if kept is None
                               else (lambda at: kept[union[at]]),
                               _head(k)) if not filters.restricts and (
            kept is None or union.size > HEADLESS) else None
        if pick is None:
            # named as the slots scored are (the union, or its slots scoring > 0: by
            # terms and statistics), not as the union
            mask = self._mask(p, filters, union, ("scored", tuple(terms), stats)) if kept is None \
                else kept[union]
            # top_k over the union: the candidates (and their order) of the dense top k
            pick = top_k(bm25.scores, k, mask & (bm25.scores > 0))
        return union[pick], bm25.scores[pick]

    def lexical_top_k_slots(self, terms: Sequence[str], stats: TermStats, filters: Filters, k: int,
                            *, words: Sequence[str] = ()) -> "SlotHits":
        """:meth:`lexical_top_k` as slots and BM25, each hit's id, hash and TF-IDF read
        when asked (:meth:`SlotHits.hits`): the federated search keeps ~a third of the
        tiers' top-k hits, and reading the others' was ~0.15 ms of a 100K scan (issue 16,
        session 19)."""
        if not terms or k <= 0:
            return SlotHits(self, (terms, stats, filters, k, words), None, _NO_SLOTS, _NO_SCORES)
        return self._answer(lambda p: SlotHits(self, (terms, stats, filters, k, words), p,
                                               *self._pick(p, terms, stats, filters, k)))

    def lexical_scores(self, terms: Sequence[str], stats: TermStats, *, ids: Sequence[str] = (),
                       hashes: Sequence[str] = (), filters: Filters | None = None,
                       words: Sequence[str] = (), content_hashes: bool = True) -> list[LexicalHit]:
        return self._answer(lambda p: self._scores(p, terms, stats, ids, hashes, filters, words,
                                                   content_hashes))

    def _scores(self, p: Postings, terms: Sequence[str], stats: TermStats, ids: Sequence[str],
                hashes: Sequence[str], filters: Filters | None,
                words: Sequence[str], content_hashes: bool = True) -> list[LexicalHit]:
        # batched look-ups; the distinct slots found, in the order asked (ids, then hashes)
        if hashes:
            slots = dict.fromkeys([*p.slots_of(list(ids)), *p.slots_by_hash(list(hashes))])
        else:  # ids only (graph neighbours, the pool): each slot's id is the one asked
            slots = dict(zip(p.slots_of(list(ids)), ids))
        slots.pop(None, None)
        if not slots:
            return []
        at = np.fromiter(slots, dtype=np.int64, count=len(slots))
        n = at.size
        bm25 = self._bm25_at(p, terms, stats, at).tolist() if terms else [0.0] * n
        tfidf = p.tfidf_at(words, at).tolist() if words else [0.0] * n
        kept = None if filters is None else self._kept_mask(p, filters)
        passes = ([True] * n if filters is None else
                  _mask_at(p, filters, at).tolist() if kept is None else kept[at].tolist())
        # a slot found by its id holds that id: only the hashes read (ids only asked), and
        # not even those for a caller that reads none (the manager's scores of the pool)
        ids = p.ids.take(at) if hashes else list(slots.values())
        return hits_of(ids, p.hashes.take(at) if content_hashes else repeat("", n), bm25, tfidf, passes)

    def lexical_count(self, terms: Sequence[str], filters: Filters, cap: int) -> int:
        if not terms:
            return 0
        return self._answer(lambda p: self._count(p, terms, filters))

    def _count(self, p: Postings, terms: Sequence[str], filters: Filters) -> int:
        hits = self._union(p, terms)
        if hits.size == 0:
            return 0
        # Validity only on the matching slots; the full mask for any other filter
        # (categories, exclusions, dates: Filters.restricts), at the matching slots too.
        if filters.restricts:
            return int(np.count_nonzero(self._mask(p, filters, hits, ("union", tuple(terms)))))
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
        return self._answer(lambda p: self._view(p, filters))

    def _view(self, p: Postings, filters: Filters) -> IdMask:
        """The dense mask of ``filters``: the one :meth:`_kept_mask` answered last when it
        was asked with this very Filters object at this mirror version (a hybrid search's
        vector pre-filter comes right after its top k, with the same object: one compare
        instead of the validity bucket's search and the dense key again, issue 16 session
        22); the same booleans as :meth:`_mask`."""
        version = self._version(p)
        last = self._last_kept
        if last[0] is filters and last[2] is not None and last[1] == version:
            return IdMask(p.ids, last[2], version)
        return IdMask(p.ids, self._mask(p, filters), version)


_NO_SLOTS, _NO_SCORES = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)


def _tagged(p: Postings, filters: Filters) -> np.ndarray | None:
    """The sorted distinct slots holding any tag ``filters`` asks for (every slot passing
    them holds one), when they are under 1/:data:`SPARSE_SHARE` of the tier's slots; else
    None. (A bench query's tag is in 1-3 % of the slots; a top k under it scored every
    slot holding a query term, then masked them: issue 16, session 20.)"""
    if not filters.tags:
        return None
    held = [h for h in map(p.tags.get, filters.tags) if h is not None and h.size]
    if sum(map(len, held)) * SPARSE_SHARE >= len(p.doclen):
        return None
    if len(held) != 1:  # none held (no slot passes), or several tags: their union
        return np.unique(np.concatenate(held)) if held else _NO_SLOTS
    slots = held[0]  # ascending, a slot repeated as often as its row repeats the tag
    return slots[np.concatenate(([True], slots[1:] != slots[:-1]))] if slots.size > 1 else slots


def _head(k: int) -> int:
    """How many of the best scores a top ``k`` masks first (:func:`top_k_from_head`):
    room for some to fail the filters and for the score after the ``k``-th."""
    return 2 * k + 16


def _mask_at(p: Postings, filters: Filters, at: np.ndarray) -> np.ndarray:
    """``p.mask(filters)[at]`` for any distinct slots ``at``, read at those slots only."""
    order = np.argsort(at, kind="stable")
    out = np.empty(at.size, dtype=bool)
    out[order] = p.mask(filters, at[order])
    return out


def _frozen(a: np.ndarray) -> np.ndarray:
    """``a`` made read-only: a kept array is shared by every caller of the query."""
    a.flags.writeable = False
    return a
