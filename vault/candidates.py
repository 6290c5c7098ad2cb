"""A federated search's query and its answer: :class:`LexicalQuery`, :class:`Candidates`.

Score comparability across tiers. Raw BM25 is not comparable between two
SQLite files: idf and average length come from each file's own statistics.
The manager therefore scores every tier with *federated* statistics — the
row count, document frequencies and token totals summed over all searched
tiers (what a single index holding every tier would use) — and divides by the
query's upper bound ``sum(idf) * (k1 + 1)`` (see :mod:`scoring`). The result,
``lexical``, lies in [0, 1) on one scale for every tier; it is then multiplied
by the tier weight (agent 1.0, project 0.8, team 0.6 by default):
``score = lexical * tier_weight``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from tiervault.vault.dedup import Kept
from tiervault.vault.rows import TermStats

__all__ = ["LexicalQuery", "Candidates", "candidates_of"]


@dataclass(slots=True)
class LexicalQuery:
    """One query's lexical terms and the federated BM25 statistics of the tiers
    that answered (``tiers``); each tier scores with ``stats`` (see module doc)."""

    text: str
    words: list[str]
    stems: list[str]
    bound: float
    stats: TermStats
    tiers: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Candidates:
    """Federated candidates, best first, as parallel arrays."""

    ids: list[str]
    tiers: list[str]
    also_in: list[tuple[str, ...]]
    hashes: list[str]
    lexical: np.ndarray  # BM25 / query bound, in [0, 1)
    tier_weight: np.ndarray
    tfidf: np.ndarray  # TF-IDF cosine in [0, 1]
    query: LexicalQuery
    # hits the tiers' top k returned before the dedup (duplicates included, each one a
    # match passing the filters): a lower bound of VaultManager.count_matches
    matched: int = 0

    @property
    def score(self) -> np.ndarray:
        """The federated score: lexical * tier weight."""
        return self.lexical * self.tier_weight

    def __len__(self) -> int:
        return len(self.ids)


def candidates_of(kept: Sequence[Kept], lq: LexicalQuery, weights: Mapping[str, float],
                  matched: int = 0) -> Candidates:
    """The kept hits (best first) as :class:`Candidates`: ``lexical`` = raw BM25 /
    the query's bound (1.0 when the bound is 0), each tier's weight from ``weights``."""
    bound = lq.bound if lq.bound > 0 else 1.0
    return Candidates(
        ids=[k.hit.id for k in kept],
        tiers=[k.tier for k in kept],
        also_in=[k.also_in for k in kept],
        hashes=[k.hit.content_hash for k in kept],
        lexical=np.array([k.hit.score / bound for k in kept], dtype=np.float64),
        tier_weight=np.array([weights[k.tier] for k in kept], dtype=np.float64),
        tfidf=np.array([k.hit.tfidf for k in kept], dtype=np.float64),
        query=lq,
        matched=matched,
    )
