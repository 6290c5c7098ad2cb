"""``search_intelligent`` as named stages over one :class:`ScoringContext`.

    gather -> expand -> score -> modulate -> rank -> render

- **gather**: federated FTS candidates (``max(fetch_factor * limit, min_fetch)``),
  vector hits when a query vector exists, memories when asked; the small-corpus
  count when the default scan limit could be widened.
- **expand**: graph seeds = the best ``graph_seeds`` candidates by text relevance
  R with R >= ``seed_min_relevance`` * max(R) (real evidence only); their 1- and
  2-hop neighbours join the pool.
- **score**: the seven signals by name (:class:`~tiervault.brain.matrix.SignalMatrix`),
  then relevance, priors and the score (:mod:`tiervault.brain.combine`), for
  entries and memories on one per-query scale.
- **modulate**: query-time modulations (suppress, trajectory, decay, diverse; pool and
  centroid act in gather), in the fixed order of :mod:`tiervault.brain.modulating`.
- **rank**: one order over entries and memories (score, then tier priority, then
  position), cut to ``limit`` — a hard ceiling; only the *default* scan limit may be
  widened by the small-corpus guard, and ``ctx.widened`` then says so.
- **render**: scan or full rows.

Every policy number comes from :class:`~tiervault.config.BrainConfig`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from tiervault.brain import combine, latent, modulating, signals
from tiervault.brain.expansion import Expansion, expand_query, expansion_scores
from tiervault.brain.graph import GraphHops, graph_hops
from tiervault.brain.matrix import PRIOR_SIGNALS, SignalMatrix, pick
from tiervault.brain.memories import MemorySignals, memory_signals
from tiervault.brain.modulation_spec import Modulations
from tiervault.brain.pool import Pool
from tiervault.brain.proximity import proximities, query_pairs
from tiervault.brain.rows import EntryRows, MemoryRows
from tiervault.brain.weights import WeightSet
from tiervault.errors import EmbeddingError, ValidationError
from tiervault.vault.filter_compile import memories_possible, memory_matches
from tiervault.vault.filters import Filters
from tiervault.vault.function_words import content_text
from tiervault.vault.query import query_terms
from tiervault.vault.scoring import top_k
from tiervault.vault.tokenizer import STOP_WORDS, split_words

__all__ = ["ScoringContext", "STAGES", "run_stages"]

log = logging.getLogger(__name__)


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


# -- gather -------------------------------------------------------------------------------
def gather(brain: Any, ctx: ScoringContext) -> None:
    cfg, manager = ctx.config, brain.manager
    mods = ctx.modulations
    modulating.check_available(brain, mods)
    ctx.qvec = modulating.shifted_query(brain, _query_vector(brain, ctx.query), mods, ctx.tiers)
    ctx.weights = brain.weights(hybrid=ctx.qvec is not None)
    fetch = mods.pool or max(cfg.fetch_factor * ctx.limit, cfg.min_fetch)
    lexical_text = _lexical_text(ctx.query, cfg)
    cands = manager.search(lexical_text, filters=ctx.filters, limit=fetch, tiers=ctx.tiers)
    ctx.lq = cands.query
    ctx.complete = len(cands) < fetch
    if _may_widen(ctx) and not ctx.complete and fetch < cfg.small_corpus:
        total = brain.matching_count(cands.query, ctx.filters, cfg.small_corpus)
        if total < cfg.small_corpus:
            cands = manager.search(lexical_text, filters=ctx.filters, limit=max(total, 1),
                                   tiers=ctx.tiers)
            ctx.complete = True
    ctx.pool = Pool.from_candidates(manager, cands)
    ctx.n_fts = len(ctx.pool)
    if cfg.prf_terms > 0 and ctx.n_fts and ctx.qvec is None:
        # FTS-only: with vectors the dense leg already bridges the vocabulary gap PRF is for
        first = signals.semantic(combine.per_query_scale(ctx.pool.tfidf),
                                 combine.per_query_scale(ctx.pool.lexical), cfg.tfidf_share)
        ctx.expansion = expand_query(brain, ctx, first)
    if ctx.qvec is not None:
        hits = brain.vectors.search(ctx.qvec, fetch, [t.name for t in manager.ordered(ctx.tiers)],
                                    ctx.filters)
        before = len(ctx.pool)
        ctx.known_cosines = {(h[1], h[0]): h[2] for h in hits}  # the scan's exact cosines
        ctx.pool.add_external(manager, [h[0] for h in hits], "vector", ctx.lq, ctx.filters,
                              ctx.tiers, fetch)
        if ctx.expansion is not None:
            ctx.expansion.lexical = expansion_scores(manager, ctx.expansion.lq, ctx.pool, before,
                                                     ctx.expansion.lexical)
    ctx.cosines = _cosines(brain, ctx, 0)
    if _proximity_weight(ctx) > 0:
        ctx.pairs = query_pairs(ctx.query)
    ctx.proximity = _proximity(brain, ctx, 0)
    if not mods.empty and brain.vectors is not None:
        ctx.directions, ctx.n_suppress = modulating.directions(brain, mods, ctx.tiers)
        modulating.direction_sims(brain, ctx, 0)
    elif mods.suppress:  # no embeddings: suppress:@ID by lexical resemblance
        ctx.suppress_queries = modulating.lexical_targets(brain, mods, ctx.tiers)
        ctx.n_suppress = len(ctx.suppress_queries)
        modulating.direction_sims(brain, ctx, 0)
    f = ctx.filters
    if ctx.include_memories and memories_possible(f):
        hits = [h for h in manager.search_memories(ctx.query, fetch) if memory_matches(f, h[0])]
        if hits:
            ctx.memories = memory_signals(hits, ctx.lq, manager=manager, now=ctx.now,
                                          half_life_days=cfg.half_life_days,
                                          query_tags=ctx.query_tags)
    _latent_raw(brain, ctx, 0)


def _lexical_text(query: str, cfg: Any) -> str:
    """The text the lexical (BM25) leg searches (``BrainConfig.query_stopwords``):
    "function" drops the curated function words (:mod:`tiervault.vault.function_words`),
    "english" scikit-learn's English stop words, "off" nothing. The query is kept whole
    when nothing else would be left."""
    mode = cfg.query_stopwords
    if mode == "off":
        return query
    if mode == "function":
        return content_text(query)
    if mode != "english":
        raise ValidationError("query_stopwords", f"{mode!r} is not one of off, function, english")
    words = query_terms(query)
    stop = STOP_WORDS.get()
    kept = [w for w in words if w not in stop]
    return " ".join(kept) if kept and len(kept) < len(words) else query


def _may_widen(ctx: ScoringContext) -> bool:
    return ctx.config.small_corpus_guard and ctx.mode == "scan" and not ctx.limit_given


def _query_vector(brain: Any, query: str) -> np.ndarray | None:
    if brain.vectors is None:
        return None
    try:
        return brain.vectors.embed_query(query)
    except EmbeddingError as exc:
        # This query falls back to the FTS-only weights (not hybrid with a zero term).
        log.warning("embedding the query failed (%s); ranking without vectors", exc)
        return None


def _cosines(brain: Any, ctx: ScoringContext, start: int) -> np.ndarray:
    """ctx.cosines extended to the pool's candidates from ``start`` on (NaN: no vector)."""
    pool, n = ctx.pool, len(ctx.pool)
    out = np.full(n, np.nan)
    out[:start] = ctx.cosines[:start]
    if ctx.qvec is None or n <= start:
        return out
    by_tier: dict[str, list[int]] = {}
    for i in range(start, n):  # a vector hit's cosine is known: its row is not read again
        known = ctx.known_cosines.get((pool.tiers[i], pool.ids[i]))
        if known is None:
            by_tier.setdefault(pool.tiers[i], []).append(i)
        else:
            out[i] = known
    for tier, idx in by_tier.items():
        out[idx] = brain.vectors.similarities(ctx.qvec, tier, [pool.ids[i] for i in idx])
    return out


def _proximity_weight(ctx: ScoringContext) -> float:
    """BrainConfig.proximity_weight (FTS-only) or hybrid_proximity_weight (hybrid)."""
    cfg = ctx.config
    return cfg.proximity_weight if ctx.qvec is None else cfg.hybrid_proximity_weight


def _proximity(brain: Any, ctx: ScoringContext, start: int) -> np.ndarray:
    """ctx.proximity extended to the pool's candidates from ``start`` on
    (brain/proximity.py): the ``max(limit, min_fetch)`` best lexical matches among them
    (an entry without a lexical match holds no pair) are read; the rest stay 0."""
    pool, n = ctx.pool, len(ctx.pool)
    out = np.zeros(n)
    out[:start] = ctx.proximity[:start]
    lex = np.asarray(pool.lexical)
    idx: list[int] = []
    if ctx.pairs and n > start:
        depth = max(ctx.limit, ctx.config.min_fetch)  # the answer's length bounds the cost
        best = start + np.argsort(-lex[start:], kind="stable")[:depth]
        idx = sorted(int(i) for i in best if lex[i] > 0)
    if idx:
        texts = brain.field_texts(pool, idx)
        docs = [texts.get(f"{pool.tiers[i]}\0{pool.ids[i]}") for i in idx]
        out[idx] = proximities(docs, ctx.pairs, ctx.config.proximity_window)
    return out


# -- expand -------------------------------------------------------------------------------
def expand(brain: Any, ctx: ScoringContext) -> None:
    cfg = ctx.config
    rel = _text_relevance(ctx)[0]
    if not rel.size or rel.max() <= 0:
        return
    # A suppressed entry must not seed the graph (it would pull its neighbours in).
    seed_rel = rel - modulating.suppression(ctx)
    seeds = top_k(seed_rel, cfg.graph_seeds,
                  (rel > 0) & (seed_rel >= cfg.seed_min_relevance * rel.max()))
    ctx.graph = graph_hops(brain.manager, [ctx.pool.ids[i] for i in seeds])
    if ctx.graph.hops:
        before = len(ctx.pool)
        ordered = sorted(ctx.graph.hops, key=lambda e: (ctx.graph.hops[e], e))
        ctx.pool.add_external(brain.manager, ordered, "graph", ctx.lq, ctx.filters, ctx.tiers,
                              cfg.max_graph_additions)
        ctx.cosines = _cosines(brain, ctx, before)
        ctx.proximity = _proximity(brain, ctx, before)
        _latent_raw(brain, ctx, before)
        modulating.direction_sims(brain, ctx, before)
        if ctx.expansion is not None:
            ctx.expansion.lexical = expansion_scores(brain.manager, ctx.expansion.lq, ctx.pool,
                                                     before, ctx.expansion.lexical)


def _latent_share(ctx: ScoringContext) -> float:
    """BrainConfig.lsa_share (FTS-only) or hybrid_lsa_share (hybrid)."""
    return ctx.config.lsa_share if ctx.qvec is None else ctx.config.hybrid_lsa_share


def _latent_raw(brain: Any, ctx: ScoringContext, start: int) -> None:
    """ctx.lsa_raw extended to the pool's candidates from ``start`` on, and (at 0) the
    memories' ``ctx.memory_lsa_raw`` (brain/latent.py; NaN where the tier has no latent
    space). Every pool candidate gets one, graph neighbours too (a latent text match counts
    as evidence, as a cosine does in hybrid; gating it to entries with lexical / TF-IDF
    evidence scored 0.913 vs 0.917 on the agent tune half); memories only when they match
    a content word. Nothing when the share is 0."""
    if not _latent_share(ctx) or ctx.lq is None:
        return
    k, pool = ctx.config.lsa_components, ctx.pool
    new = latent.scores(brain.manager, ctx.lq.words, pool.ids[start:], pool.tiers[start:], k)
    ctx.lsa_raw = new if start == 0 or ctx.lsa_raw is None else np.concatenate([ctx.lsa_raw[:start], new])
    ms = ctx.memories
    if start == 0 and ms is not None and len(ms.content):
        docs = [(tier, split_words(" ".join(x or "" for x in (h.summary, h.context, h.topics,
                                                                    h.project))))
                for h, tier in ms.hits]
        ctx.memory_lsa_raw = np.where(ms.content, latent.text_scores(brain.manager, ctx.lq.words,
                                                                    docs, k), 0.0)


def _latent(ctx: ScoringContext) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(lsa_q entries, lsa_q memories): ``ctx.lsa_raw`` / ``memory_lsa_raw`` on one per-query
    scale, or (None, None) when the share is 0. NaN (a tier too small for k dimensions)
    stays NaN: the caller puts the candidate's own lexical signal there; the scale is set
    by the candidates that have an LSA value."""
    lsa = ctx.lsa_raw
    if lsa is None or not len(ctx.pool):
        return None, None
    m_lsa = ctx.memory_lsa_raw if ctx.memory_lsa_raw is not None else np.zeros(0)
    top = float(max(np.nanmax(lsa, initial=0.0), np.nanmax(m_lsa, initial=0.0)))
    lsa_q, m_lsa_q = combine.per_query_scale(lsa, top), combine.per_query_scale(m_lsa, top)
    lsa_q[np.isnan(lsa)], m_lsa_q[np.isnan(m_lsa)] = np.nan, np.nan  # per_query_scale zeroes NaN
    return lsa_q, m_lsa_q


def _text_relevance(ctx: ScoringContext) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                   np.ndarray]:
    """(R entries, semantic, vector, R memories) on one per-query scale (a memory's R is
    its semantic signal: memories have no vector)."""
    w = ctx.weights.array  # type: ignore[union-attr]
    w_sem, w_vec = (float(x) for x in pick(w, ("semantic", "vector")))
    ms = ctx.memories
    keep = ms.content if ms is not None else np.zeros(0, dtype=bool)
    lex, tfidf = np.asarray(ctx.pool.lexical), np.asarray(ctx.pool.tfidf)
    m_lex = ms.lexical[keep] if ms is not None else np.zeros(0)
    m_tfidf = ms.tfidf[keep] if ms is not None else np.zeros(0)
    lex_top = float(max(lex.max(initial=0.0), m_lex.max(initial=0.0)))
    tfidf_top = float(max(tfidf.max(initial=0.0), m_tfidf.max(initial=0.0)))
    share = ctx.config.tfidf_share if ctx.qvec is None else ctx.config.hybrid_tfidf_share
    lex_q = combine.per_query_scale(lex, lex_top)
    m_lex_q = combine.per_query_scale(m_lex, lex_top)
    if ctx.expansion is not None:
        # RM3's interpolation on the per-query scale, then the best candidate back at 1.0
        # (a memory has no expansion score: the same scale, no expansion evidence)
        lam = ctx.config.prf_weight
        lex_q = (1.0 - lam) * lex_q + lam * combine.per_query_scale(ctx.expansion.lexical)
        m_lex_q = (1.0 - lam) * m_lex_q
        top = float(max(lex_q.max(initial=0.0), m_lex_q.max(initial=0.0)))
        lex_q, m_lex_q = combine.per_query_scale(lex_q, top), combine.per_query_scale(m_lex_q, top)
    if ctx.pairs:
        # term proximity (brain/proximity.py), then the best candidate back at 1.0
        lex_q = lex_q + _proximity_weight(ctx) * ctx.proximity
        top = float(max(lex_q.max(initial=0.0), m_lex_q.max(initial=0.0)))
        lex_q, m_lex_q = combine.per_query_scale(lex_q, top), combine.per_query_scale(m_lex_q, top)
    b = _latent_share(ctx)
    lsa_q, m_lsa_q = _latent(ctx)
    if lsa_q is not None:
        # a tier with no latent space: its candidates' LSA is their lexical signal (the
        # round-3 ranking inside that tier, on the same per-query scale as the others)
        lsa_q = np.where(np.isnan(lsa_q), lex_q, lsa_q)
    ctx.lsa, ctx.memory_lsa = lsa_q, m_lsa_q
    sem = signals.semantic(combine.per_query_scale(tfidf, tfidf_top), lex_q, share, lsa_q, b)
    if ctx.qvec is not None:
        vec = combine.vector_relevance(ctx.cosines, ctx.config.vector_floor,
                                       ctx.config.vector_scale)
        has_vec = ~np.isnan(ctx.cosines)
        rel = np.where(has_vec, combine.relevance(sem, vec, w_sem,
                                                  ctx.config.vector_gain * w_vec), sem)
    else:
        vec = np.zeros(len(ctx.pool))
        rel = combine.relevance(sem, vec, w_sem, 0.0)
    m_sem = np.zeros(len(keep))
    if ms is not None:
        m_all = np.zeros(len(keep))
        m_all[keep] = m_lex_q
        if m_lsa_q is not None and len(m_lsa_q):
            m_lsa_q = np.where(np.isnan(m_lsa_q), m_all, m_lsa_q)
            ctx.memory_lsa = m_lsa_q
        m_sem = signals.semantic(combine.per_query_scale(ms.tfidf, tfidf_top), m_all, share,
                                 m_lsa_q, b) * keep
    # memories have no vector: their relevance is their semantic signal (R over the
    # text signals they have), on the entries' scale
    return rel, sem, vec, m_sem


# -- score --------------------------------------------------------------------------------
def score(brain: Any, ctx: ScoringContext) -> None:
    cfg, pool, n = ctx.config, ctx.pool, len(ctx.pool)
    w = ctx.weights.array  # type: ignore[union-attr]
    rel, sem, vec, m_rel = _text_relevance(ctx)
    m = SignalMatrix(n)
    m["semantic"] = sem
    m["vector"] = vec
    m["severity"] = signals.severity(pool.column("severity"))
    m["temporalDecay"] = signals.temporal_decay(
        pool.times("updated_at"), pool.times("created_at"), pool.times("valid_from"),
        pool.times("valid_until"), ctx.now, cfg.half_life_days)
    m["tagOverlap"] = signals.tag_overlap(ctx.query_tags, pool.tag_lists())
    m["domainMatch"] = signals.domain_match(ctx.query_domain, pool.column("domain"))
    hops = np.array([ctx.graph.hops.get(e, -1) for e in pool.ids], dtype=np.int64)
    m["graphProximity"] = signals.graph_proximity(hops)
    w_text = float(pick(w, ("semantic", "vector")).sum())
    beta = combine.prior_strength(cfg.prior_strength, w_text)
    prior_w = pick(w, PRIOR_SIGNALS)
    ctx.signals, ctx.relevance = m, rel
    ctx.prior = combine.prior(m.columns(PRIOR_SIGNALS), prior_w)
    ctx.tier_factor = combine.tier_factor(np.asarray(pool.tier_weight), cfg.tier_strength)
    ctx.nudge = (brain.nudges(ctx.query, pool.ids, m["semantic"] + m["vector"], ctx.now)
                 if n else np.zeros(0))
    raw = combine.combine(rel, ctx.prior, beta, ctx.tier_factor, ctx.nudge)
    ctx.score = combine.below_direct(raw, rel > 0, ctx.prior)
    if ctx.fusion == "rrf":
        ctx.score = _rrf_scores(pool, ctx.cosines if ctx.qvec is not None else None,
                                np.asarray(pool.tier_weight))
    ms = ctx.memories
    if ms is not None:
        ms.signals["semantic"] = m_rel
        ctx.memory_relevance = m_rel
        ctx.memory_prior = combine.prior(ms.signals.columns(PRIOR_SIGNALS), prior_w)
        ctx.memory_tier_weight = np.array([brain.manager.tiers[t].weight for _, t in ms.hits])
        ctx.memory_tier_factor = combine.tier_factor(ctx.memory_tier_weight, cfg.tier_strength)
        ctx.memory_score = combine.combine(m_rel, ctx.memory_prior, beta,
                                           ctx.memory_tier_factor, np.zeros(len(ms.hits)))


def _rrf_scores(pool: Pool, cosines: np.ndarray | None, tier_w: np.ndarray) -> np.ndarray:
    """RRF of the lexical ranking and (when there are vectors) the vector ranking."""
    from tiervault.brain.fusion import rrf

    n = len(pool)
    lex = np.asarray(pool.lexical) * tier_w
    rankings = [[pool.ids[i] for i in sorted(range(n), key=lambda i: -lex[i]) if lex[i] > 0]]
    if cosines is not None:
        cos = np.nan_to_num(cosines, nan=0.0)
        rankings.append([pool.ids[i] for i in sorted(range(n), key=lambda i: -cos[i])
                         if cos[i] > 0])
    fused = rrf(rankings)
    return np.array([fused.get(e, 0.0) for e in pool.ids], dtype=np.float64)


# -- modulate -----------------------------------------------------------------------------
def modulate(brain: Any, ctx: ScoringContext) -> None:
    """Suppress, trajectory, decay and diverse on ``ctx.score`` (see
    :mod:`tiervault.brain.modulating`); nothing when no modulation was asked."""
    if ctx.modulations.empty or not len(ctx.pool):
        return
    updated = ctx.pool.times("updated_at")
    created = ctx.pool.times("created_at")
    stamp = np.where(np.isnan(updated), created, updated)
    modulating.apply(ctx, ((ctx.now - stamp) / modulating.DAY_SECONDS).astype(np.float32))


# -- rank ---------------------------------------------------------------------------------
def rank(brain: Any, ctx: ScoringContext) -> None:
    cfg = ctx.config
    rank_of = {t.name: r for r, t in enumerate(brain.manager.ordered())}
    items: list[tuple[float, int, int, str, int]] = [
        (-float(ctx.score[i]), rank_of.get(ctx.pool.tiers[i], len(rank_of)), 0, "entry", i)
        for i in range(len(ctx.pool))]
    ms = ctx.memories
    if ms is not None:
        items += [(-float(ctx.memory_score[i]), rank_of.get(t, len(rank_of)), 1, "memory", i)
                  for i, (_, t) in enumerate(ms.hits) if ms.content[i]]
    items.sort(key=lambda x: (x[0], x[1], x[2], x[4]))
    if ctx.mmr_order is not None:
        # diverse: the MMR selection order is the answer's order (entries only).
        ctx.ranked = [("entry", int(i)) for i in ctx.mmr_order[:ctx.limit]]
        return
    keep = ctx.limit
    # the small-corpus guard returns every match of the query: the PRF expansion's own
    # hits (no word of the query; the pool held every match already) are not matches
    found = [it for it in items if not (it[3] == "entry" and ctx.pool.via[it[4]] == "expansion")]
    total = len(found)
    if (_may_widen(ctx) and ctx.complete and ctx.n_fts < cfg.small_corpus and total > ctx.limit
            and (total - ctx.limit) / total > cfg.small_corpus_drop_share):
        keep, ctx.widened, items = total, True, found  # a small vault returns all it found
    ctx.ranked = [(kind, i) for *_, kind, i in items[:keep]]


# -- render -------------------------------------------------------------------------------
def render(brain: Any, ctx: ScoringContext) -> None:
    weights = ctx.weights
    mmr = (None if ctx.mmr_order is None or ctx.mmr_scores is None else
           {int(i): float(v) for i, v in zip(ctx.mmr_order, ctx.mmr_scores)})
    entries = EntryRows(ctx.pool, ctx.signals, ctx.relevance, ctx.prior, ctx.tier_factor,
                        ctx.nudge, ctx.score, weights, ctx.graph.contradicts, ctx.explain, mmr,
                        ctx.lsa)
    memories = (MemoryRows(ctx.memories, ctx.memory_relevance, ctx.memory_prior,
                           ctx.memory_tier_weight, ctx.memory_tier_factor, ctx.memory_score, weights, ctx.explain,
                           ctx.memory_lsa)
                if ctx.memories is not None else None)
    builders = {"entry": entries, "memory": memories}
    if ctx.mode == "scan":
        ctx.rows = [builders[k].scan_row(i) for k, i in ctx.ranked]  # type: ignore[union-attr]
        return
    full = brain.full_entries(ctx.pool, [i for k, i in ctx.ranked if k == "entry"])
    ctx.rows = [builders[k].full_row(i, full) for k, i in ctx.ranked]  # type: ignore[union-attr]


STAGES = (gather, expand, score, modulate, rank, render)


def run_stages(brain: Any, ctx: ScoringContext) -> ScoringContext:
    """Run every stage in order over ``ctx``; returns it (rows in ``ctx.rows``)."""
    for stage in STAGES:
        stage(brain, ctx)
    return ctx
