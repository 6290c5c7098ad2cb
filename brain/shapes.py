"""The JSON shapes the Brain returns (and the CLI / MCP server print), as TypedDicts.

Keys are exactly those of the reference design (camelCase, as agents read them).
Optional extras live under ``explain`` and appear only when ``explain=True``.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

__all__ = ["ScanRow", "FullRow", "Breakdown", "LoadedRow", "Explain", "StatsReport",
           "WeightsDict", "SIGNALS", "SearchResults"]

#: The seven signals, in weight-vector order (spelled as in the breakdown).
SIGNALS = ("semantic", "vector", "severity", "temporalDecay", "tagOverlap", "domainMatch",
           "graphProximity")


class WeightsDict(TypedDict):
    semantic: float
    vector: float
    severity: float
    temporalDecay: float
    tagOverlap: float
    domainMatch: float
    graphProximity: float


class Breakdown(TypedDict):
    """Per-signal values in [0, 1] and the row's final score (``total`` == ``score``)."""

    semantic: float
    vector: float
    severity: float
    temporalDecay: float
    tagOverlap: float
    domainMatch: float
    graphProximity: float
    total: float


class Explain(TypedDict, total=False):
    """How a score was made (only with ``explain=True``).

    ``total = relevance * (1 + beta * prior) * tierFactor * (1 + feedback)`` for an
    entry with text evidence (relevance > 0); see :mod:`tiervault.brain.combine`.
    ``semantic`` in the breakdown is on the per-query scale (best match = 1).
    """

    lexical: float          # BM25 with federated statistics / the query's upper bound
    tfidf: float            # scikit-learn TF-IDF cosine
    tierWeight: float
    relevance: float        # R: text relevance (semantic, vector), per-query scale [0, 1]
    prior: float            # P: weighted severity, decay, tags, domain, graph, [0, 1]
    tierFactor: float       # 1 - tier_strength * (1 - tierWeight)
    feedback: float         # the entry-level feedback nudge, in [-0.1, 0.1]
    weights: WeightsDict    # the weight set used for this query
    weightSet: str          # "fts" | "hybrid"
    via: str                # "search" | "expansion" | "graph" | "vector" | "memory"
    alsoIn: list[str]       # lower-priority tiers holding the same entry
    contradicts: list[str]  # pool entries linked to this one by `contradicts`


class ScanRow(TypedDict):
    id: str
    title: str
    score: float
    type: str
    domain: str
    severity: str
    tags: list[str]
    snippet: str
    tokenEstimate: int
    tier: str
    mmr: NotRequired[float]  # only with the ``diverse`` modulation, see FullRow
    explain: NotRequired[Explain]


class FullRow(TypedDict):
    """``score`` is the row's relevance score (after suppress / trajectory / decay);
    with ``diverse``, rows are in MMR selection order and ``mmr`` is the MMR score
    ``lambda * score - (1 - lambda) * max similarity to the rows above`` at the moment
    the row was picked (both are returned: the order comes from ``mmr``)."""

    entry: dict[str, Any]
    score: float
    breakdown: Breakdown
    tier: str
    mmr: NotRequired[float]
    explain: NotRequired[Explain]


class LoadedRow(TypedDict):
    """One answer of ``load_entries``: the entry, or ``found: false`` with the reason."""

    id: str
    found: bool
    entry: NotRequired[dict[str, Any]]
    tier: NotRequired[str]
    links: NotRequired[list[dict[str, Any]]]  # {direction, type, id, note, tier}
    error: NotRequired[str]


class StatsReport(TypedDict):
    tiers: dict[str, dict[str, Any]]
    vocabulary: dict[str, Any]  # domains, types, severities, tags (top 30): {word: count}; tagCount
    weights: WeightsDict
    weightSet: str
    adapted: bool
    feedback: dict[str, int]           # the counts the weights rest on (the pool's)
    agentFeedback: dict[str, int]      # this agent's own counts (== feedback unless pooling)
    adaptation: str                    # "seed" | "learned" (brain.adaptation)
    feedbackPool: str                  # "agent" | "team" (brain.feedbackPool)
    weightEvents: int                  # feedback actions the weights in force rest on
    nudgeTrust: float | None           # how far verdicts move their own query, [0, 1]; None: no pairs
    weightHistory: list[dict[str, Any]]  # the newest refits, oldest first


class SearchResults(list):
    """The rows of one ``search_intelligent`` call (a list, best first), plus how the
    limit was applied: ``limit`` is the ceiling used, and ``widened`` is True when
    the small-corpus guard returned more than the default scan limit (never when a
    limit was given); ``filters`` is the filters in force as
    :meth:`~tiervault.vault.filters.Filters.describe` gives them (what was asked,
    normalised: a caller can send it back and get the same filters)."""

    def __init__(self, rows: Any = (), *, limit: int = 0, widened: bool = False,
                 filters: dict[str, Any] | None = None) -> None:
        super().__init__(rows)
        self.limit = limit
        self.widened = widened
        self.filters = dict(filters or {})
