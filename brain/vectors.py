"""What the Brain needs from dense vectors (implemented by the embeddings layer).

The Brain never imports a provider: it is handed an object with this shape
(``Brain(manager, settings, vectors=...)``). Without one, or when
:meth:`VectorSource.embed_query` raises, the query runs with the FTS-only
weights (never the hybrid weights with a zero vector term).
"""

from __future__ import annotations

from typing import NamedTuple, Protocol, Sequence, runtime_checkable

import numpy as np

from tiervault.vault.filters import Filters

__all__ = ["VectorSource", "VectorMatch"]


class VectorMatch(NamedTuple):
    """One answer of :meth:`VectorSource.search`: an entry, the tier it was found in,
    and its raw cosine with the query."""

    id: str
    tier: str
    cosine: float


@runtime_checkable
class VectorSource(Protocol):
    """Dense-vector access for one Brain."""

    def embed_query(self, query: str) -> np.ndarray:
        """The query's L2-normalised vector; raises EmbeddingError when the provider fails."""

    def similarities(self, query_vector: np.ndarray, tier: str, ids: Sequence[str]) -> np.ndarray:
        """Cosine of each entry of ``tier`` in ``ids`` to the query (NaN where it has no vector)."""

    def vectors_for(self, tier: str, ids: Sequence[str]) -> np.ndarray | None:
        """The (n, dim) unit vectors of ``ids`` in ``tier`` (NaN rows where an entry has
        none; None when the tier has no vectors), so re-rankers can see candidates."""

    def prefetch(self, query_vector: np.ndarray, tiers: Sequence[str]) -> bool:
        """A hint that :meth:`search` of ``query_vector`` over ``tiers`` comes next: a
        source may start its scan in the background (the Brain does its lexical work
        meanwhile). Must not change any answer; may do nothing (then False)."""

    def search(self, query_vector: np.ndarray, k: int, tiers: Sequence[str],
               filters: Filters) -> list[VectorMatch]:
        """Top ``k`` entries by ``cosine * tier weight`` over ``tiers``, filters applied
        before the limit."""
