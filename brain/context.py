"""The one object a ``search_intelligent`` query's stages read and write.

:class:`ScoringContext` holds the request (query, mode, limit, filters, tiers, ...)
and, field group by field group, what each stage of :mod:`tiervault.brain.stages`
leaves for the next: gather (pool, cosines, proximity, latent scores, memories),
expand (graph hops), score (signals, relevance, prior, score), modulate (directions,
MMR order), rank and render (the ranked (kind, index) pairs and the rows). Arrays are
aligned with ``pool`` (entries) or ``memories.hits`` (memories).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from tiervault.brain.expansion import Expansion
from tiervault.brain.graph import GraphHops
from tiervault.brain.matrix import SignalMatrix
from tiervault.brain.memories import MemorySignals
from tiervault.brain.modulation_spec import Modulations
from tiervault.brain.pool import Pool
from tiervault.brain.weights import WeightSet
from tiervault.vault.filters import Filters

__all__ = ["ScoringContext"]


@dataclass(slots=True)
class ScoringContext:
    """Everything one query's stages read and write."""

    # the request
    query: str
    mode: str
    limit: int
    limit_given: bool
    filters: Filters
    tiers: Sequence[str] | None
    query_tags: list[str]
    query_domain: str | None
    include_memories: bool
    explain: bool
    fusion: str
    now: float
    config: Any  # BrainConfig
    modulations: Modulations = field(default_factory=Modulations)
    # gather
    qvec: np.ndarray | None = None
    weights: WeightSet | None = None
    lq: Any = None  # the manager's LexicalQuery
    pool: Pool = field(default_factory=Pool)
    cosines: np.ndarray = field(default_factory=lambda: np.zeros(0))  # NaN = no vector
    known_cosines: dict[tuple[str, str], float] = field(default_factory=dict)  # (tier, id)
    complete: bool = False  # every FTS match is in the pool
    n_fts: int = 0
    memories: MemorySignals | None = None
    expansion: Expansion | None = None  # pseudo-relevance feedback (BrainConfig.prf_terms)
    pairs: list[tuple[str, str]] = field(default_factory=list)  # brain/proximity.py
    proximity: np.ndarray = field(default_factory=lambda: np.zeros(0))
    # brain/latent.py as the tiers answer (NaN: no latent space; None: share 0), asked once
    # per candidate: a remote tier answers over HTTP
    lsa_raw: np.ndarray | None = None
    memory_lsa_raw: np.ndarray | None = None
    lsa: np.ndarray | None = None  # the above on the per-query scale
    memory_lsa: np.ndarray | None = None
    # expand
    graph: GraphHops = field(default_factory=GraphHops)
    # score
    signals: SignalMatrix = field(default_factory=lambda: SignalMatrix(0))
    relevance: np.ndarray = field(default_factory=lambda: np.zeros(0))
    prior: np.ndarray = field(default_factory=lambda: np.zeros(0))
    tier_factor: np.ndarray = field(default_factory=lambda: np.zeros(0))
    nudge: np.ndarray = field(default_factory=lambda: np.zeros(0))
    score: np.ndarray = field(default_factory=lambda: np.zeros(0))
    memory_relevance: np.ndarray = field(default_factory=lambda: np.zeros(0))
    memory_prior: np.ndarray = field(default_factory=lambda: np.zeros(0))
    memory_tier_weight: np.ndarray = field(default_factory=lambda: np.zeros(0))
    memory_tier_factor: np.ndarray = field(default_factory=lambda: np.zeros(0))
    memory_score: np.ndarray = field(default_factory=lambda: np.zeros(0))
    # modulate (directions: stacked suppress/trajectory vectors; sims = vectors @ directions.T)
    directions: np.ndarray | None = None
    n_suppress: int = 0
    suppress_queries: list[Any] = field(default_factory=list)  # no embeddings: suppress:@ID texts
    vectors: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))
    direction_sims: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    mmr_order: np.ndarray | None = None
    mmr_scores: np.ndarray | None = None
    # rank / render
    ranked: list[tuple[str, int]] = field(default_factory=list)  # ("entry"|"memory", index)
    widened: bool = False
    rows: list[dict[str, Any]] = field(default_factory=list)
