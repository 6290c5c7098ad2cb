"""One tier's top k as mirror slots and BM25, its hits made when asked (:class:`SlotHits`,
:meth:`MirrorLexicon.lexical_top_k_slots <tiervault.vault.lexicon.MirrorLexicon.lexical_top_k_slots>`):
the federated search keeps ~a third of the tiers' top-k hits, and reading the others'
ids, hashes and TF-IDF was ~0.15 ms of a 100K scan (issue 16, session 19)."""

from __future__ import annotations

from itertools import repeat
from typing import TYPE_CHECKING, Sequence

import numpy as np

from tiervault.vault.checked_array import CacheDamaged
from tiervault.vault.postings import Postings
from tiervault.vault.rows import LexicalHit, hits_of

if TYPE_CHECKING:
    from tiervault.vault.lexicon import MirrorLexicon

__all__ = ["SlotHits", "hits_at"]


class SlotHits:
    """One tier's top k as slots and BM25 (``slots``, ``scores``: best first), its hits
    made when asked (:meth:`hits`): :meth:`MirrorLexicon.lexical_top_k`'s hits at the
    positions asked, the same values (each slot's TF-IDF is computed alone)."""

    __slots__ = ("_lexicon", "_query", "_p", "slots", "scores")

    def __init__(self, lexicon: "MirrorLexicon", query: tuple, p: Postings | None,
                 slots: np.ndarray, scores: np.ndarray) -> None:
        self._lexicon, self._query, self._p = lexicon, query, p
        self.slots, self.scores = slots, scores

    def __len__(self) -> int:
        return self.slots.size

    def hits(self, at: Sequence[int] | None = None) -> list[LexicalHit]:
        """The hits at positions ``at`` (every one when None), in that order."""
        p = self._p
        if p is None:
            return []
        slots, scores = (self.slots, self.scores) if at is None else (self.slots[at], self.scores[at])
        try:
            return hits_at(p, self._query[4], slots, scores.tolist())
        except CacheDamaged as exc:  # read again from the rebuilt mirror, as _answer does
            p.mark_damaged(exc)
            again = self._lexicon.lexical_top_k(*self._query[:4], words=self._query[4])
            return again if at is None else [again[i] for i in at if i < len(again)]


def hits_at(p: Postings, words: Sequence[str], slots: np.ndarray, best: list[float]) -> list[LexicalHit]:
    """The hits at ``slots`` (each a top-k hit: it passes the filters) with BM25 ``best``."""
    tfidf = p.tfidf_at(words, slots).tolist() if words else [0.0] * slots.size
    # the ids remembered by slot: LSA and the pool look the same ids up next
    ids, hashes = p.ids.take_distinct(slots), p.hashes.take(slots)
    return hits_of(ids, hashes, best, tfidf, repeat(True, slots.size))
