"""Text relevance R of every candidate, entries and memories on one per-query scale.

With ``x_q = x / max(x)`` over entries and memories together
(:func:`~tiervault.brain.combine.per_query_scale`):

    lex_q  = BM25_q; with PRF: (1 - prf_weight) * lex_q + prf_weight * expansion_q,
             then rescaled to max 1; with proximity pairs: lex_q + mu * proximity,
             rescaled to max 1 (mu: :func:`~tiervault.brain.evidence.proximity_weight`)
    lsa_q  = LSA_q (a tier without a latent space: its candidates' lex_q)
    sem    = share * tfidf_q + (1 - share - b) * lex_q + b * lsa_q
             (:func:`~tiervault.brain.signals.semantic`; b = latent share)
    vec    = vector_relevance(cos, vector_floor, vector_scale)   (hybrid only)
    R      = (w_sem * sem + gain * w_vec * vec) / (w_sem + gain * w_vec) where a cosine
             exists, else sem (:func:`~tiervault.brain.combine.relevance`)

A memory has no vector: its R is its semantic signal, zero unless it matches a content
word. The expand stage seeds the graph by R; the score stage combines R with the priors.
"""

from __future__ import annotations

from math import isfinite
from typing import NamedTuple

import numpy as np

from tiervault.brain import combine, signals
from tiervault.brain.context import ScoringContext
from tiervault.brain.evidence import latent_share, proximity_weight
from tiervault.brain.matrix import SIGNAL_INDEX, pick

__all__ = ["TextRelevance", "array_relevance", "text_relevance"]

#: the memories' arrays of a query without memories (read-only: shared by every query)
_EMPTY = np.zeros(0)
_EMPTY.flags.writeable = False
_EMPTY_BOOL = np.zeros(0, dtype=bool)
_EMPTY_BOOL.flags.writeable = False


class TextRelevance(NamedTuple):
    """One query's relevance arrays (entries aligned with the pool, memories with
    ``ctx.memories.hits``)."""

    entries: np.ndarray  # R of each entry
    semantic: np.ndarray  # the entries' semantic signal
    vector: np.ndarray  # the entries' vector signal (0 without vectors)
    memories: np.ndarray  # R of each memory (its semantic signal)


def _latent(ctx: ScoringContext) -> tuple[np.ndarray | None, np.ndarray | None, bool]:
    """(lsa_q entries, lsa_q memories, any entry NaN): ``ctx.lsa_raw`` / ``memory_lsa_raw`` on
    one per-query scale, or (None, None, False) when the share is 0. NaN (a tier too small
    for k dimensions) stays NaN: the caller puts the candidate's own lexical signal there;
    the scale is set by the candidates that have an LSA value."""
    lsa = ctx.lsa_raw
    if lsa is None or not len(ctx.pool):
        return None, None, False
    # max(initial=0) is NaN exactly when a value is NaN; without one it is nanmax's value
    # (the same reduction over the same numbers) without nanmax's copy (~5 us)
    top_e = lsa.max(initial=0.0)
    has_nan = bool(np.isnan(top_e))
    if has_nan:
        top_e = np.nanmax(lsa, initial=0.0)
    m_lsa = ctx.memory_lsa_raw
    if m_lsa is None or not m_lsa.size:
        # no memory: max(top_e, 0.0) is top_e (top_e >= 0 by initial=0.0)
        lsa_q = combine.per_query_scale(lsa, float(top_e))
        if has_nan:
            lsa_q[np.isnan(lsa)] = np.nan  # per_query_scale zeroes NaN
        return lsa_q, _EMPTY, has_nan
    top = float(max(top_e, np.nanmax(m_lsa, initial=0.0)))
    lsa_q, m_lsa_q = combine.per_query_scale(lsa, top), combine.per_query_scale(m_lsa, top)
    lsa_q[np.isnan(lsa)], m_lsa_q[np.isnan(m_lsa)] = np.nan, np.nan  # per_query_scale zeroes NaN
    return lsa_q, m_lsa_q, has_nan


def _scaled(xs: list[float], top: float) -> list[float]:
    """:func:`~tiervault.brain.combine.per_query_scale` of finite ``xs`` with its ``top``, in
    Python floats: ``np.maximum(x, 0.0)`` is ``x if x > 0.0 else 0.0`` (NumPy's maximum
    returns its second operand on a tie: -0.0 becomes 0.0), then one IEEE division."""
    if top > 0:
        return [(x if x > 0.0 else 0.0) / top for x in xs]
    return [0.0] * len(xs)


def _fts_only(ctx: ScoringContext, w_sem: float) -> TextRelevance | None:
    """:func:`text_relevance` of an FTS-only query without memories, PRF or term
    proximity (every FTS-only scan with the default config), in Python floats over the
    pool's lists: the same IEEE operations on the same numbers in the same order as the
    NumPy path, so the same float64 bits (tests/test_python_floats.py), without its ~40
    NumPy calls on arrays of ~30-60 candidates (issue 16, session 19). None (the NumPy
    path decides) when a value is not finite or the pool is empty.

    Why no clip: every value ``semantic`` clips to [0, 1] here is ``max(x, 0) / top``
    with ``0 <= max(x, 0) <= top`` (``top`` is the maximum over the same values, at
    least 0), so it lies in [+0.0, 1.0] already (division is monotone); a pool whose
    ``top`` is not positive scales to +0.0s."""
    lex, tfidf, raw = ctx.pool.lexical, ctx.pool.tfidf, ctx.lsa_raw
    lsa = raw.tolist() if raw is not None else None
    if (not len(lex) or not all(map(isfinite, lex)) or not all(map(isfinite, tfidf))
            or (lsa is not None and not all(map(isfinite, lsa)))):
        return None
    share, b = ctx.config.tfidf_share, latent_share(ctx)
    t_q = _scaled(tfidf, max(0.0, *tfidf))
    l_q = _scaled(lex, max(0.0, *lex))
    if lsa is None:
        z_q = None
        ctx.lsa, ctx.memory_lsa = None, None
    else:
        z_q = _scaled(lsa, max(0.0, *lsa))
        ctx.lsa, ctx.memory_lsa = np.array(z_q), _EMPTY
    if z_q is None or not b:
        c = 1.0 - share
        sem = [share * t + c * x for t, x in zip(t_q, l_q)]
    else:
        c = 1.0 - share - b
        sem = [share * t + c * x + b * z for t, x, z in zip(t_q, l_q, z_q)]
    # combine.relevance(sem, zeros, w_sem, 0.0): (w_sem * sem + 0.0 * 0.0) / w_sem
    total = w_sem + 0.0
    rel = [(w_sem * s + 0.0) / total for s in sem] if total > 0 else [0.0] * len(sem)
    return TextRelevance(np.array(rel), np.array(sem), np.zeros(len(sem)), _EMPTY)


def _hybrid(ctx: ScoringContext, w_sem: float, w_vec: float) -> TextRelevance | None:
    """:func:`text_relevance` of a hybrid query without memories, PRF or LSA scores (every
    hybrid scan with the default config: ``hybrid_lsa_share`` 0) and the ``max`` vector
    scale, in Python floats: :func:`array_relevance`'s IEEE operations on the same numbers
    in the same order, so the same float64 bits (tests/test_python_floats.py), without its
    ~45 NumPy calls on ~60 candidates, twice a scan (issue 16, session 22). None (the NumPy
    path decides) when a value is not finite (a NaN cosine, no vector, is -1 here as
    there) or the pool is empty.

    As in :func:`_fts_only`, ``semantic``'s clips are left out: every value is ``max(x, 0)
    / top`` with ``top`` the maximum of the same values, in [+0.0, 1.0] already.
    ``vector_relevance``'s clip is kept: ``v if v >= 0.0 else 0.0`` is NumPy's clip at 0
    (it keeps the value on a tie: -0.0, a cosine of -0.0 at a floor of 0, stays -0.0),
    then ``v if v < 1.0 else 1.0`` at 1."""
    lex, tfidf, cfg = ctx.pool.lexical, ctx.pool.tfidf, ctx.config
    cos = [-1.0 if c != c else c for c in ctx.cosines.tolist()]  # nan_to_num(nan=-1.0)
    if (not len(lex) or len(cos) != len(lex) or not all(map(isfinite, lex))
            or not all(map(isfinite, tfidf)) or not all(map(isfinite, cos))):
        return None
    l_q = _scaled(lex, max(0.0, *lex))
    if ctx.pairs:  # term proximity, then the best candidate back at 1.0
        prox = ctx.proximity.tolist()
        if len(prox) != len(lex) or not all(map(isfinite, prox)):
            return None
        mu = proximity_weight(ctx)
        summed = [x + mu * p for x, p in zip(l_q, prox)]
        l_q = _scaled(summed, max(0.0, *summed))
    ctx.lsa, ctx.memory_lsa = None, None
    share = cfg.hybrid_tfidf_share
    c = 1.0 - share
    sem = [share * t + c * x for t, x in zip(_scaled(tfidf, max(0.0, *tfidf)), l_q)]
    floor, top = cfg.vector_floor, max(cos)
    if top <= floor:
        vec = [0.0] * len(cos)
    else:
        span = top - floor
        vec = [(v if v >= 0.0 else 0.0) if v < 1.0 else 1.0 for v in ((x - floor) / span for x in cos)]
    w_v = cfg.vector_gain * w_vec
    total = w_sem + w_v
    known = [x == x for x in ctx.cosines.tolist()]
    if total > 0:
        rel = [(w_sem * s + w_v * v) / total if k else s for s, v, k in zip(sem, vec, known)]
    else:
        rel = [0.0 if k else s for s, k in zip(sem, known)]
    return TextRelevance(np.array(rel), np.array(sem), np.array(vec), _EMPTY)


def text_relevance(ctx: ScoringContext) -> TextRelevance:
    """(R entries, semantic, vector, R memories) on one per-query scale (a memory's R is
    its semantic signal: memories have no vector); sets ``ctx.lsa`` / ``ctx.memory_lsa``.
    An FTS-only query without memories, PRF or term proximity, and a hybrid one without
    memories, PRF or LSA scores (``max`` vector scale), are computed in Python floats
    (the same bits as :func:`array_relevance`), any other by it."""
    if ctx.memories is None and ctx.expansion is None:
        if ctx.qvec is None and not ctx.pairs:
            w_sem = float(ctx.weights.values[SIGNAL_INDEX["semantic"]])  # type: ignore[union-attr]
            fast = _fts_only(ctx, w_sem)
            if fast is not None:
                return fast
        elif ctx.qvec is not None and ctx.lsa_raw is None and ctx.config.vector_scale == "max":
            values = ctx.weights.values  # type: ignore[union-attr]
            fast = _hybrid(ctx, float(values[SIGNAL_INDEX["semantic"]]),
                           float(values[SIGNAL_INDEX["vector"]]))
            if fast is not None:
                return fast
    return array_relevance(ctx)


def array_relevance(ctx: ScoringContext) -> TextRelevance:
    """:func:`text_relevance` by NumPy arrays, for every kind of query."""
    w = ctx.weights.array  # type: ignore[union-attr]
    w_sem, w_vec = (float(x) for x in pick(w, ("semantic", "vector")))
    ms = ctx.memories
    lex, tfidf = np.asarray(ctx.pool.lexical), np.asarray(ctx.pool.tfidf)
    if ms is None:
        # no memory (every scan without include_memories): the memories' empty arrays
        # and their maxima (0.0, never above the entries' max(initial=0.0)) left out
        keep, m_lex = _EMPTY_BOOL, _EMPTY
        lex_top, tfidf_top = float(lex.max(initial=0.0)), float(tfidf.max(initial=0.0))
    else:
        keep = ms.content
        m_lex, m_tfidf = ms.lexical[keep], ms.tfidf[keep]
        lex_top = float(max(lex.max(initial=0.0), m_lex.max(initial=0.0)))
        tfidf_top = float(max(tfidf.max(initial=0.0), m_tfidf.max(initial=0.0)))
    share = ctx.config.tfidf_share if ctx.qvec is None else ctx.config.hybrid_tfidf_share
    lex_q = combine.per_query_scale(lex, lex_top)
    m_lex_q = combine.per_query_scale(m_lex, lex_top) if ms is not None else _EMPTY
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
        lex_q = lex_q + proximity_weight(ctx) * ctx.proximity
        top = float(max(lex_q.max(initial=0.0), m_lex_q.max(initial=0.0)))
        lex_q, m_lex_q = combine.per_query_scale(lex_q, top), combine.per_query_scale(m_lex_q, top)
    b = latent_share(ctx)
    lsa_q, m_lsa_q, lsa_nan = _latent(ctx)
    if lsa_nan:
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
    m_sem = _EMPTY
    if ms is not None:
        m_sem = np.zeros(len(keep))
        m_all = np.zeros(len(keep))
        m_all[keep] = m_lex_q
        if m_lsa_q is not None and len(m_lsa_q):
            m_lsa_q = np.where(np.isnan(m_lsa_q), m_all, m_lsa_q)
            ctx.memory_lsa = m_lsa_q
        m_sem = signals.semantic(combine.per_query_scale(ms.tfidf, tfidf_top), m_all, share,
                                 m_lsa_q, b) * keep
    # memories have no vector: their relevance is their semantic signal (R over the
    # text signals they have), on the entries' scale
    return TextRelevance(rel, sem, vec, m_sem)

