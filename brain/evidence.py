"""Per-candidate evidence that is read from the tiers, extended as the pool grows.

The pool grows twice in a query (gather: FTS candidates and vector hits; expand: graph
neighbours), so each column here is computed for the candidates from ``start`` on and
appended to what the earlier candidates already hold, never recomputed:

- :func:`cosines`: ``cos(q, e)`` of each candidate with a vector (NaN: none); a vector
  hit's cosine comes from the scan (``ctx.known_cosines``), the rest from its tier;
- :func:`proximity`: term proximity (:mod:`tiervault.brain.proximity`) of the
  ``max(limit, min_fetch)`` best lexical matches, 0 elsewhere, weighted by
  :func:`proximity_weight`;
- :func:`latent_raw`: the LSA score (:mod:`tiervault.brain.latent`) as the tiers answer,
  weighted by :func:`latent_share`;
- :func:`query_vector`: the query's embedding, or None (FTS-only weights).

Relevance puts them on one per-query scale (:mod:`tiervault.brain.relevance`).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from tiervault.brain import latent
from tiervault.brain.context import ScoringContext
from tiervault.brain.proximity import proximities
from tiervault.errors import EmbeddingError
from tiervault.vault.tokenizer import split_words

__all__ = ["query_vector", "cosines", "proximity_weight", "proximity", "latent_share",
           "latent_raw"]

log = logging.getLogger(__name__)


def query_vector(brain: Any, query: str) -> np.ndarray | None:
    """The query's embedding, or None without vectors or when embedding it fails."""
    if brain.vectors is None:
        return None
    try:
        return brain.vectors.embed_query(query)
    except EmbeddingError as exc:
        # This query falls back to the FTS-only weights (not hybrid with a zero term).
        log.warning("embedding the query failed (%s); ranking without vectors", exc)
        return None


def cosines(brain: Any, ctx: ScoringContext, start: int) -> np.ndarray:
    """ctx.cosines extended to the pool's candidates from ``start`` on (NaN: no vector)."""
    pool, n = ctx.pool, len(ctx.pool)
    out = np.empty(n)
    out.fill(np.nan)  # np.full's own two steps, without its Python wrapper
    if ctx.qvec is None:  # FTS-only: no candidate has a cosine (ctx.cosines is all NaN)
        return out
    out[:start] = ctx.cosines[:start]
    if n <= start:
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


def proximity_weight(ctx: ScoringContext) -> float:
    """BrainConfig.proximity_weight (FTS-only) or hybrid_proximity_weight (hybrid)."""
    cfg = ctx.config
    return cfg.proximity_weight if ctx.qvec is None else cfg.hybrid_proximity_weight


def proximity(brain: Any, ctx: ScoringContext, start: int) -> np.ndarray:
    """ctx.proximity extended to the pool's candidates from ``start`` on
    (brain/proximity.py): the ``max(limit, min_fetch)`` best lexical matches among them
    (an entry without a lexical match holds no pair) are read; the rest stay 0."""
    pool, n = ctx.pool, len(ctx.pool)
    out = np.zeros(n)
    if not ctx.pairs:  # no pair of query words: every candidate's proximity is 0
        return out
    out[:start] = ctx.proximity[:start]
    lex = np.asarray(pool.lexical)
    idx: list[int] = []
    if n > start:
        depth = max(ctx.limit, ctx.config.min_fetch)  # the answer's length bounds the cost
        best = start + np.argsort(-lex[start:], kind="stable")[:depth]
        idx = np.sort(best[lex[best] > 0]).tolist()  # ascending Python ints (distinct)
    if idx:
        texts = brain.field_texts(pool, idx, ctx.pairs)  # rows holding no pair: not read
        docs = [texts.get(f"{pool.tiers[i]}\0{pool.ids[i]}") for i in idx]
        out[idx] = proximities(docs, ctx.pairs, ctx.config.proximity_window)
    return out


def latent_share(ctx: ScoringContext) -> float:
    """BrainConfig.lsa_share (FTS-only) or hybrid_lsa_share (hybrid)."""
    return ctx.config.lsa_share if ctx.qvec is None else ctx.config.hybrid_lsa_share


def latent_raw(brain: Any, ctx: ScoringContext, start: int) -> None:
    """ctx.lsa_raw extended to the pool's candidates from ``start`` on, and (at 0) the
    memories' ``ctx.memory_lsa_raw`` (brain/latent.py; NaN where the tier has no latent
    space). Every pool candidate gets one, graph neighbours too (a latent text match counts
    as evidence, as a cosine does in hybrid; gating it to entries with lexical / TF-IDF
    evidence scored 0.913 vs 0.917 on the agent tune half); memories only when they match
    a content word. Nothing when the share is 0."""
    if not latent_share(ctx) or ctx.lq is None:
        return
    k, pool = ctx.config.lsa_components, ctx.pool
    new = latent.scores(brain.manager, ctx.lq.words, pool.ids[start:], pool.tiers[start:], k)
    ctx.lsa_raw = new if start == 0 or ctx.lsa_raw is None else np.concatenate([ctx.lsa_raw[:start], new])
    ms = ctx.memories
    if start == 0 and ms is not None and len(ms.content):
        docs = [latent.TierText(m.tier, split_words(" ".join(
                    x or "" for x in (m.hit.summary, m.hit.context, m.hit.topics, m.hit.project))))
                for m in ms.hits]
        ctx.memory_lsa_raw = np.where(ms.content, latent.text_scores(brain.manager, ctx.lq.words,
                                                                    docs, k), 0.0)
