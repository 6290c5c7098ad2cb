"""Frozen, validated settings: what :func:`tiervault.config.load_settings` returns.

These classes hold already-validated values; they do not validate themselves.
Build them through the loader (or by hand in tests). Secrets are wrapped in
:class:`Secret` so that no repr, str, f-string or log line can show an API key.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

__all__ = [
    "Secret",
    "EmbeddingConfig",
    "TierConfig",
    "redact_url",
    "BrainConfig",
    "Settings",
    "DEFAULT_TIER_WEIGHTS",
    "DEFAULT_EMBEDDING_MODELS",
    "EMBEDDING_PROVIDERS",
    "BRAIN_WEIGHT_KEYS",
    "ADAPTATIONS",
    "FEEDBACK_POOLS",
    "TIER_NAMES",
    "FEATURE_EMBEDDING",
]

TIER_NAMES = ("agent", "project", "team")
DEFAULT_TIER_WEIGHTS: Mapping[str, float] = MappingProxyType(
    {"agent": 1.0, "project": 0.8, "team": 0.6}
)
EMBEDDING_PROVIDERS = ("openai", "voyage", "ollama", "http", "hash", "local")
# "http" has no default: a generic endpoint's model name cannot be guessed.
DEFAULT_EMBEDDING_MODELS: Mapping[str, str] = MappingProxyType(
    {
        "openai": "text-embedding-3-small",
        "voyage": "voyage-3.5",
        "ollama": "nomic-embed-text",
        "hash": "hash-v1",
        "local": "all-MiniLM-L6-v2-int8-tanh",  # embeddings/providers/local_model.py
    }
)
# The seven brain signals, spelled as in the seed's score breakdown.
#: ``brain.adaptation``: how feedback moves the signal weights (tiervault.brain.weights).
ADAPTATIONS = ("seed", "learned")
#: ``brain.feedbackPool``: whose feedback teaches this agent (tiervault.brain.learning).
FEEDBACK_POOLS = ("agent", "team")

BRAIN_WEIGHT_KEYS = (
    "semantic",
    "vector",
    "severity",
    "temporalDecay",
    "tagOverlap",
    "domainMatch",
    "graphProximity",
)
FEATURE_EMBEDDING = "embedding-enabled"


class Secret:
    """A string that never shows itself: repr/str give ``Secret('***')``.

    Call :meth:`reveal` only at the point of use (an HTTP header), never to log.
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        object.__setattr__(self, "_value", value)

    def reveal(self) -> str:
        """The wrapped value. Do not print it."""
        return self._value

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Secret is immutable")

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        # Constant-time: equality of keys should not leak their prefix via timing.
        return hmac.compare_digest(self._value.encode(), other._value.encode())

    def __hash__(self) -> int:
        return hash(self._value)


@dataclass(frozen=True, slots=True)
class EmbeddingConfig:
    """The ``embedding:`` block. ``api_keys`` is the whole key pool (rotated on 429);
    ``api_key`` is its first key (None when the pool is empty)."""

    provider: str
    model: str
    api_key: Secret | None
    base_url: str | None
    batch_size: int | None
    input_type: str | None
    dim: int | None
    timeout_s: float = 30.0
    max_input_chars: int = 8000
    model_path: str | None = None
    api_keys: tuple[Secret, ...] = ()


@dataclass(frozen=True, slots=True)
class TierConfig:
    """One tier: ``agent``/``project``/``team`` or a named read-only source.

    Either ``path`` (an SQLite file) or ``url`` (``postgresql://...`` or
    ``http(s)://...``, see :func:`tiervault.vault.backend.open_tier`). ``url`` and
    ``token`` are :class:`Secret` (a URL may carry a password): print
    :attr:`location`, which never shows either.
    """

    name: str
    path: Path | None
    weight: float
    read_only: bool
    url: "Secret | None" = None
    token: "Secret | None" = None
    schema: str | None = None

    @property
    def location(self) -> str:
        """The path, or the URL with any password / query string replaced by ``***``."""
        if self.url is not None:
            return redact_url(self.url.reveal())
        return str(self.path)


def redact_url(url: str) -> str:
    """``scheme://user:secret@host/db?password=x`` -> ``scheme://user:***@host/db?***``."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, host = netloc.rsplit("@", 1)
            user = userinfo.split(":", 1)[0]
            netloc = f"{user}:***@{host}" if ":" in userinfo else f"{user}@{host}"
        query = "***" if parts.query else ""
        return urlunsplit((parts.scheme, netloc, parts.path, query, ""))
    except ValueError:
        return "<unparseable url>"


@dataclass(frozen=True, slots=True)
class BrainConfig:
    """``brain:`` overrides. ``weights`` replaces individual base (FTS-only) signal
    weights; keys are those of :data:`BRAIN_WEIGHT_KEYS`; None means no override."""

    half_life_days: float = 365.0
    feedback_threshold: int = 30
    weights: Mapping[str, float] | None = None
    small_corpus_guard: bool = True
    adaptation: str = "learned"
    feedback_pool: str = "agent"
    refit_every: int = 10
    # -- policy numbers of search_intelligent (tiervault.brain.stages) ------------------
    #: candidates fetched per query: max(fetch_factor * limit, min_fetch)
    fetch_factor: int = 3
    min_fetch: int = 30
    #: graph seeds: at most this many candidates, each with relevance >= seed_min_relevance
    graph_seeds: int = 5
    seed_min_relevance: float = 0.5
    max_graph_additions: int = 50
    #: the small-corpus guard: below this many matches, when the default limit would
    #: drop more than small_corpus_drop_share of them, scan mode returns them all
    small_corpus: int = 50
    small_corpus_drop_share: float = 0.5
    #: how far the priors may lift a score (see tiervault.brain.combine.prior_strength);
    #: chosen on the agent dev set, tune half (eval/README.md)
    prior_strength: float = 0.2
    #: tier preference: tierFactor = 1 - tier_strength * (1 - tierWeight)
    tier_strength: float = 0.25
    #: dense cosine below this is no evidence (MiniLM; eval/README.md)
    vector_floor: float = 0.05
    #: share of TF-IDF in the semantic signal (the rest is BM25), FTS-only queries: chosen
    #: on SciFact ODD query ids + the agent set's TUNE half (0.3; the seed's 0.2 was -0.004
    #: / -0.005 there; bench/results/relevance-grid-*.json, eval/results/relevance-grid-*.json)
    tfidf_share: float = 0.3
    #: the same share for hybrid queries (the dense leg does the soft matching): 0.2, same data
    hybrid_tfidf_share: float = 0.2
    #: how raw cosines become the vector signal: max | minmax | zscore
    #: (tiervault.brain.combine.vector_relevance). zscore with vector_gain 1.33 won on
    #: SciFact ODD ids + agent TUNE half but is neutral held out (SciFact EVEN -0.007 /
    #: +0.001 with the old / new int8 embedder, agent report +0.006, ops -0.001 / -0.007),
    #: so the defaults stay max / 1.0 (bench/README.md, issue 16 re-check)
    vector_scale: str = "max"
    #: multiplies the vector weight inside R only: R = (w_sem*sem + g*w_vec*vec) / (w_sem + g*w_vec)
    vector_gain: float = 1.0
    #: words dropped from the query's lexical (BM25) leg (the query is kept whole when it
    #: has nothing else): "off"; "function" = the curated function words of
    #: tiervault.vault.function_words (never a negation); "english" = scikit-learn's list
    #: (-0.040 nDCG@10 on the agent tune half: it holds "not", "without", "first"...)
    query_stopwords: str = "function"
    #: term proximity in the lexical leg (tiervault.brain.proximity): lex_q + mu * prox,
    #: prox = share of the query's consecutive content-word pairs found in order within
    #: proximity_window positions of one field. mu 0.3 / window 8 chosen on SciFact ODD
    #: ids + agent TUNE half (eval/README.md). Hybrid queries: on (SciFact even hybrid
    #: +0.004). FTS-only: opt-in (0 = off): held out +0.000 to +0.003 for 1.2-1.3x the
    #: FTS-only scan at 10K (bench/lexical_leg_cost.py), like PRF
    proximity_weight: float = 0.0
    hybrid_proximity_weight: float = 0.3
    proximity_window: int = 8
    #: pseudo-relevance feedback for FTS-only queries (tiervault.brain.expansion): prf_terms
    #: expansion words from the best prf_docs candidates (0 = off), the expansion's share of
    #: the lexical signal. Off by default: it is a second lexical pass, 2.3x the FTS-only
    #: scan at 10K (bench/prf_cost.py). When on, prf_weight 0.1 was chosen on SciFact ODD
    #: ids + agent TUNE half (terms / docs fixed at 10 / 5, not tuned; eval/README.md)
    prf_terms: int = 0
    prf_docs: int = 5
    prf_weight: float = 0.1
    #: latent semantic (LSA) share of the semantic signal (tiervault.brain.latent: cosine in a
    #: rank-lsa_components SVD of the tier's own TF-IDF matrix, no model). FTS-only 0.2 with
    #: k 16, chosen on the agent TUNE half + SciFact ODD ids (eval/README.md); hybrid 0 (the
    #: dense leg does the soft matching; not measured on). 0 = off (no SVD fitted in a
    #: search; a mirror build of a tier of 50,000+ rows still fits k 16 once and caches it:
    #: vault/latent.py DEFAULT_COMPONENTS, pinned to lsa_components' default by a test).
    lsa_share: float = 0.2
    hybrid_lsa_share: float = 0.0
    lsa_components: int = 16


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything a tiervault process needs to know, after all layers are merged."""

    agent_id: str
    tiers: tuple[TierConfig, ...]
    embedding: EmbeddingConfig | None
    features: frozenset[str]
    brain: BrainConfig
    config_path: Path | None
    #: How config_path was found: argument | cwd | parent | env | default (see locate_config).
    config_source: str = "default"

    def tier(self, name: str) -> TierConfig | None:
        """The tier called ``name`` (a built-in tier or a source), or None."""
        return next((t for t in self.tiers if t.name == name), None)

    @property
    def embedding_enabled(self) -> bool:
        """Vector search is on only with an embedding block AND the feature flag."""
        return self.embedding is not None and FEATURE_EMBEDDING in self.features
