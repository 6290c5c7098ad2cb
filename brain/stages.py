"""``search_intelligent`` as named stages over one :class:`ScoringContext`.

    gather -> expand -> score -> modulate -> rank -> render

- **gather**: federated FTS candidates (``max(fetch_factor * limit, min_fetch)``),
  vector hits when a query vector exists (their light rows read with the candidates'),
  memories when asked; the small-corpus count when the default scan limit could be
  widened and the search's own hits do not settle it.
- **expand**: graph seeds = the best ``graph_seeds`` candidates by text relevance
  R with R >= ``seed_min_relevance`` * max(R) (real evidence only); their 1- and
  2-hop neighbours join the pool. An FTS-only scan reads its candidates' light rows
  here, with the neighbours' (one statement a tier: :meth:`Pool.read_rows`).
- **score**: the seven signals by name (:class:`~tiervault.brain.matrix.SignalMatrix`),
  then relevance, priors and the score (:mod:`tiervault.brain.combine`), for
  entries and memories on one per-query scale.
- **modulate**: query-time modulations (suppress, trajectory, decay, diverse; pool and
  centroid act in gather), in the fixed order of :mod:`tiervault.brain.modulating`.
- **rank**: one order over entries and memories (score, then tier priority, then
  position), cut to ``limit`` — a hard ceiling; only the *default* scan limit may be
  widened by the small-corpus guard, and ``ctx.widened`` then says so.
- **render**: scan or full rows.

The context is :mod:`tiervault.brain.context`; per-candidate evidence read from the
tiers as the pool grows (cosines, proximity, latent scores) is
:mod:`tiervault.brain.evidence`; text relevance R is :mod:`tiervault.brain.relevance`.
Every policy number comes from :class:`~tiervault.config.BrainConfig`.
"""

from __future__ import annotations

from itertools import repeat
from operator import itemgetter
from typing import Any

import numpy as np

from tiervault.brain import combine, evidence, modulating, signals
from tiervault.brain.context import ScoringContext
from tiervault.brain.expansion import expand_query, expansion_scores
from tiervault.brain.graph import graph_hops
from tiervault.brain.matrix import PRIOR_SIGNALS, SignalMatrix, pick
from tiervault.brain.memories import memory_signals
from tiervault.brain.pool import Pool
from tiervault.brain.proximity import query_pairs
from tiervault.brain.relevance import text_relevance
from tiervault.brain.rows import EntryRows, MemoryRows
from tiervault.errors import ValidationError
from tiervault.vault.filter_compile import memories_possible, memory_matches
from tiervault.vault.function_words import content_text
from tiervault.vault.query import query_terms
from tiervault.vault.scoring import top_k
from tiervault.vault.tokenizer import STOP_WORDS

__all__ = ["ScoringContext", "STAGES", "run_stages", "seed_order"]


# -- gather -------------------------------------------------------------------------------
def gather(brain: Any, ctx: ScoringContext) -> None:
    cfg, manager = ctx.config, brain.manager
    mods = ctx.modulations
    modulating.check_available(brain, mods)
    ctx.qvec = modulating.shifted_query(brain, evidence.query_vector(brain, ctx.query), mods,
                                        ctx.tiers)
    ctx.weights = brain.weights(hybrid=ctx.qvec is not None)
    if ctx.qvec is not None:
        # the vector leg's int8 scan read on the scan pool's thread while the lexical leg
        # runs here (embeddings/dot_job.py; the same numbers whoever computes them)
        brain.vectors.prefetch(ctx.qvec, [t.name for t in manager.ordered(ctx.tiers)])
    fetch = mods.pool or max(cfg.fetch_factor * ctx.limit, cfg.min_fetch)
    lexical_text = _lexical_text(ctx.query, cfg)
    cands = manager.search(lexical_text, filters=ctx.filters, limit=fetch, tiers=ctx.tiers)
    ctx.lq = cands.query
    ctx.complete = len(cands) < fetch
    # the tiers' top k found small_corpus matches already (cands.matched, a lower bound of
    # the count): then the count cannot be under it, and is not asked (~0.1 ms at 100K)
    if (_may_widen(ctx) and not ctx.complete and fetch < cfg.small_corpus
            and cands.matched < cfg.small_corpus):
        total = brain.matching_count(cands.query, ctx.filters, cfg.small_corpus)
        if total < cfg.small_corpus:
            cands = manager.search(lexical_text, filters=ctx.filters, limit=max(total, 1),
                                   tiers=ctx.tiers)
            ctx.complete = True
    ctx.pool = Pool.from_candidates(manager, cands, read=False)
    pairs = query_pairs(ctx.query) if evidence.proximity_weight(ctx) > 0 else []
    # hybrid: the texts term proximity reads come with the light rows read by SQL (one
    # statement a tier instead of two; rows from a mirror's records: no texts, no SQL);
    # an FTS-only scan reads its proximity before its rows
    ctx.pool.keep_texts = ctx.qvec is not None and bool(pairs)
    hits = (brain.vectors.search(ctx.qvec, fetch, [t.name for t in manager.ordered(ctx.tiers)],
                                 ctx.filters) if ctx.qvec is not None else [])
    if not rows_wait_for_neighbours(ctx):
        # the candidates' light rows now, the vector hits' in the same statements (one a
        # tier); nothing is aligned with the pool yet, so a candidate may still leave it
        ctx.pool.read_rows(manager, ctx.tiers, [eid for eid, _, _ in hits])
    ctx.n_fts = len(ctx.pool)
    if cfg.prf_terms > 0 and ctx.n_fts and ctx.qvec is None:
        # FTS-only: with vectors the dense leg already bridges the vocabulary gap PRF is for
        first = signals.semantic(combine.per_query_scale(ctx.pool.tfidf),
                                 combine.per_query_scale(ctx.pool.lexical), cfg.tfidf_share)
        ctx.expansion = expand_query(brain, ctx, first)
    if ctx.qvec is not None:
        before = len(ctx.pool)
        # (id, tier, cosine) rows (VectorMatch), unpacked: any VectorSource's 3-tuples read alike
        ctx.known_cosines = {(tier, eid): cos for eid, tier, cos in hits}  # the scan's exact cosines
        ctx.pool.add_external(manager, [eid for eid, _, _ in hits], "vector", ctx.lq, ctx.filters,
                              ctx.tiers, fetch)
        if ctx.expansion is not None:
            ctx.expansion.lexical = expansion_scores(manager, ctx.expansion.lq, ctx.pool, before,
                                                     ctx.expansion.lexical)
    ctx.cosines = evidence.cosines(brain, ctx, 0)
    ctx.pairs = pairs
    ctx.proximity = evidence.proximity(brain, ctx, 0)
    if not mods.empty and brain.vectors is not None:
        ctx.directions, ctx.n_suppress = modulating.directions(brain, mods, ctx.tiers)
        modulating.direction_sims(brain, ctx, 0)
    elif mods.suppress:  # no embeddings: suppress:@ID by lexical resemblance
        ctx.suppress_queries = modulating.lexical_targets(brain, mods, ctx.tiers)
        ctx.n_suppress = len(ctx.suppress_queries)
        modulating.direction_sims(brain, ctx, 0)
    f = ctx.filters
    if ctx.include_memories and memories_possible(f):
        hits = [(memory, tier) for memory, tier in manager.search_memories(ctx.query, fetch)
                if memory_matches(f, memory)]
        if hits:
            ctx.memories = memory_signals(hits, ctx.lq, manager=manager, now=ctx.now,
                                          half_life_days=cfg.half_life_days,
                                          query_tags=ctx.query_tags)
    evidence.latent_raw(brain, ctx, 0)


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


def rows_wait_for_neighbours(ctx: ScoringContext) -> bool:
    """Whether the candidates' light rows wait for the expand stage, to be read with the
    graph neighbours' in one statement a tier (:meth:`Pool.read_rows`): FTS-only scans
    without PRF or modulations, whose gather needs no row (the PRF and the vector hits
    join the pool by content hash; the modulations' evidence is not recomputed when a
    candidate leaves)."""
    return ctx.qvec is None and ctx.config.prf_terms <= 0 and ctx.modulations.empty



# -- expand -------------------------------------------------------------------------------
def expand(brain: Any, ctx: ScoringContext) -> None:
    cfg = ctx.config
    graph = _graph(brain, ctx)
    near = _nearest_first(graph)
    if ctx.pool.pending:
        # the candidates' light rows with the neighbours' (one statement a tier): the seeds
        # need only the candidates' evidence (lexical, TF-IDF, LSA), no row
        if ctx.pool.read_rows(brain.manager, ctx.tiers, near):
            # a candidate left (deleted since the search): its evidence, then the seeds again
            ctx.n_fts = len(ctx.pool)
            ctx.cosines = evidence.cosines(brain, ctx, 0)
            ctx.proximity = evidence.proximity(brain, ctx, 0)
            evidence.latent_raw(brain, ctx, 0)
            graph = _graph(brain, ctx)
            near = _nearest_first(graph)
    if graph is None:
        return
    ctx.graph = graph
    if near:
        before = len(ctx.pool)
        ctx.pool.add_external(brain.manager, near, "graph", ctx.lq, ctx.filters, ctx.tiers,
                              cfg.max_graph_additions)
        ctx.cosines = evidence.cosines(brain, ctx, before)
        ctx.proximity = evidence.proximity(brain, ctx, before)
        evidence.latent_raw(brain, ctx, before)
        modulating.direction_sims(brain, ctx, before)
        if ctx.expansion is not None:
            ctx.expansion.lexical = expansion_scores(brain.manager, ctx.expansion.lq, ctx.pool,
                                                     before, ctx.expansion.lexical)



def _graph(brain: Any, ctx: ScoringContext) -> Any:
    """The graph hops of the seeds: the best ``graph_seeds`` candidates by text relevance
    R with R >= ``seed_min_relevance`` * max(R); None when no candidate has relevance."""
    cfg = ctx.config
    rel = text_relevance(ctx).entries
    top = rel.max() if rel.size else 0.0
    if not rel.size or top <= 0:
        return None
    cut = cfg.seed_min_relevance * top
    seeds = None if ctx.n_suppress or np.isnan(top) else seed_order(rel.tolist(), cut, cfg.graph_seeds)
    if seeds is None:
        # A suppressed entry must not seed the graph (it would pull its neighbours in).
        seed_rel = rel - modulating.suppression(ctx)
        seeds = top_k(seed_rel, cfg.graph_seeds, (rel > 0) & (seed_rel >= cut))
    return graph_hops(brain.manager, [ctx.pool.ids[i] for i in seeds])


def seed_order(rel: list[float], cut: float, k: int) -> list[int] | None:
    """``top_k(rel, k, (rel > 0) & (rel >= cut))`` in Python over a few dozen floats (no
    suppression: ``rel - 0`` is ``rel``): the best ``k`` by relevance, ties by position;
    None when a tie sits at the cut (``top_k``'s ``argpartition`` picks among the tied
    there: the caller asks it). Otherwise the ``k`` best are one set, and ``top_k``'s
    ``lexsort`` by (-relevance, position) is this sort's order."""
    if k <= 0:
        return []
    picked = sorted([(-v, i) for i, v in enumerate(rel) if v > 0 and v >= cut])
    if len(picked) > k:
        if picked[k - 1][0] == picked[k][0]:
            return None
        del picked[k:]
    return [i for _, i in picked]


def _nearest_first(graph: Any) -> list[str]:
    """The neighbours by hop count, then id (the order they join the pool in)."""
    return sorted(graph.hops, key=lambda e: (graph.hops[e], e)) if graph is not None else []


# -- score --------------------------------------------------------------------------------
def score(brain: Any, ctx: ScoringContext) -> None:
    cfg, pool, n = ctx.config, ctx.pool, len(ctx.pool)
    w = ctx.weights.array  # type: ignore[union-attr]
    rel, sem, vec, m_rel = text_relevance(ctx)
    m = SignalMatrix(n)
    m["semantic"] = sem
    m["vector"] = vec
    m["severity"] = signals.severity(pool.column("severity"))
    m["temporalDecay"] = signals.freshness(
        pool.column("updated_at"), pool.column("created_at"), pool.column("valid_from"),
        pool.column("valid_until"), ctx.now, cfg.half_life_days)
    # the matrix starts at 0: a signal that is 0 for every candidate (no query tag, no
    # query domain, no graph neighbour) is left as it is, its inputs never read
    if ctx.query_tags:
        m["tagOverlap"] = signals.tag_overlap(ctx.query_tags, pool.tag_lists())
    if ctx.query_domain:
        m["domainMatch"] = signals.domain_match(ctx.query_domain, pool.column("domain"))
    if ctx.graph.hops:
        m["graphProximity"] = signals.hop_proximity(ctx.graph.hops, pool.ids)
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
_RANK_KEY = itemgetter(0, 1, 2, 4)  # (-score, tier rank, entry before memory, position)


def rank(brain: Any, ctx: ScoringContext) -> None:
    cfg = ctx.config
    rank_of = {t.name: r for r, t in enumerate(brain.manager.ordered())}
    # -score as Python floats at once (tolist: float(a[i]) of each; negation is exact)
    items: list[tuple[float, int, int, str, int]] = list(zip(
        (-np.asarray(ctx.score, dtype=np.float64)).tolist(),
        map(rank_of.get, ctx.pool.tiers, repeat(len(rank_of))), repeat(0), repeat("entry"),
        range(len(ctx.pool))))
    ms = ctx.memories
    if ms is not None:
        items += [(-float(ctx.memory_score[i]), rank_of.get(t, len(rank_of)), 1, "memory", i)
                  for i, (_, t) in enumerate(ms.hits) if ms.content[i]]
    items.sort(key=_RANK_KEY)
    if ctx.mmr_order is not None:
        # diverse: the MMR selection order is the answer's order (entries only).
        ctx.ranked = [("entry", int(i)) for i in ctx.mmr_order[:ctx.limit]]
        return
    keep = ctx.limit
    # the small-corpus guard returns every match of the query: the PRF expansion's own
    # hits (no word of the query; the pool held every match already) are not matches
    if _may_widen(ctx) and ctx.complete and ctx.n_fts < cfg.small_corpus:
        found = [it for it in items
                 if not (it[3] == "entry" and ctx.pool.via[it[4]] == "expansion")]
        total = len(found)
        if total > ctx.limit and (total - ctx.limit) / total > cfg.small_corpus_drop_share:
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
