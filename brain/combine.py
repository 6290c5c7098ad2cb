"""How the seven signals combine into one score: relevance gates, priors order.

Pure NumPy functions over per-candidate arrays; each docstring gives its formula.
The whole rule (see docs/search.md for why)::

    lex_q   = lexical / max(lexical)            per query, over entries AND memories
    tfidf_q = tfidf / max(tfidf)                per query, over entries AND memories
    (FTS-only, PRF on: lex_q = (1 - l) * lex_q + l * exp_q, see brain/expansion.py)
    semantic = s * tfidf_q + (1 - s - b) * lex_q + b * lsa_q
                                                s = BrainConfig.tfidf_share (FTS-only)
                                                  or hybrid_tfidf_share (hybrid);
                                                b = lsa_share / hybrid_lsa_share,
                                                lsa_q: brain/latent.py / its max
    vector   = clip((cos - f) / (max(cos) - f), 0, 1)      f = BrainConfig.vector_floor
               (vector_scale "max"; "minmax" and "zscore": vector_relevance)
    R  = (w_sem * semantic + g * w_vec * vector) / (w_sem + g * w_vec)   g = vector_gain
    P  = sum_k w_k * signal_k / sum_k w_k    k in PRIOR_SIGNALS           priors, [0, 1]
    beta = prior_strength * (1 - w_sem - w_vec) / (w_sem + w_vec)
    score = R * (1 + beta * P) * tierFactor * (1 + feedbackNudge)
    tierFactor = 1 - tier_strength * (1 - tierWeight)

An entry with R == 0 (no lexical, TF-IDF or vector evidence: a graph neighbour
only) is placed below every entry with R > 0 (:func:`below_direct`).

Relevance is scaled per query so a 3-word and a 25-word question put their best
match at the same height; the priors multiply it by at most ``1 + beta``, so they
reorder entries of similar relevance but cannot lift a weak match over a strong one.
"""

from __future__ import annotations

import math

import numpy as np

from tiervault.errors import ValidationError

__all__ = ["per_query_scale", "vector_relevance", "relevance", "prior", "prior_strength",
           "tier_factor", "combine", "below_direct"]


def per_query_scale(x: np.ndarray, top: float | None = None) -> np.ndarray:
    """x / top, with top = max(x) unless given; all zeros when top <= 0.

    Lexical BM25 and TF-IDF have no fixed upper value (BM25 grows with the
    number of matched query terms); dividing by the query's best match puts the
    best candidate at 1.0 for any query length.
    """
    a = np.asarray(x, dtype=np.float64)
    # max(x, 0) is nan_to_num + clip for finite values and -inf; the max of it is the
    # finiteness check (NaN propagates): only a NaN or +inf takes nan_to_num's rules
    # (NaN -> 0, +inf -> the largest float). Two small calls, not four (~10 a query).
    clipped = np.maximum(a, 0.0)
    hi = float(clipped.max()) if clipped.size else 0.0
    if not math.isfinite(hi):
        clipped = np.clip(np.nan_to_num(a), 0.0, None)
        hi = float(clipped.max())
    t = hi if top is None else float(top or 0.0)
    return clipped / t if t > 0 else np.zeros_like(clipped)


def vector_relevance(cosines: np.ndarray, floor: float, scale: str = "max") -> np.ndarray:
    """The dense signal in [0, 1] from raw cosines (NaN: no vector -> 0).

    Dense cosines of unrelated texts are not 0 (MiniLM: ~0.0-0.2), so the part
    below ``floor`` is no evidence at all. The rest is scaled per query:

    - ``max``:    clip((cos - floor) / (max(cos) - floor), 0, 1)
    - ``minmax``: clip((cos - lo) / (max(cos) - lo), 0, 1), lo = max(floor, min(cos))
      over the candidates that have a vector (the pool's weakest match is 0)
    - ``zscore``: z = (cos - mean) / std over the candidates with a vector;
      clip((z + 1) / (z_max + 1), 0, 1) (one standard deviation below the pool's
      mean is no evidence, the best candidate is 1), zero at or below ``floor``
    """
    c = np.nan_to_num(np.asarray(cosines, dtype=np.float64), nan=-1.0)
    top = float(c.max()) if c.size else 0.0
    if top <= floor:
        return np.zeros_like(c)
    if scale == "max":
        return np.clip((c - floor) / (top - floor), 0.0, 1.0)
    has = c > -1.0
    if scale == "minmax":
        lo = max(floor, float(c[has].min()))
        if top <= lo:
            return np.where(c >= top, 1.0, 0.0)
        return np.clip((c - lo) / (top - lo), 0.0, 1.0)
    if scale == "zscore":
        mu, sd = float(c[has].mean()), float(c[has].std())
        if sd <= 0:
            return np.where(c > floor, 1.0, 0.0)
        z = (c - mu) / sd
        zt = (top - mu) / sd
        lo = -1.0  # one standard deviation below the pool's mean is no evidence
        out = np.clip((z - lo) / (zt - lo), 0.0, 1.0) if zt > lo else np.zeros_like(c)
        return np.where(c > floor, out, 0.0)
    raise ValidationError("vector_scale", f"{scale!r} is not one of max, minmax, zscore")


def relevance(semantic: np.ndarray, vector: np.ndarray, w_sem: float, w_vec: float) -> np.ndarray:
    """R = (w_sem * semantic + w_vec * vector) / (w_sem + w_vec), in [0, 1].

    With ``w_vec = 0`` (FTS-only weights) R is the semantic signal itself.
    """
    total = w_sem + w_vec
    if total <= 0:
        return np.zeros_like(np.asarray(semantic, dtype=np.float64))
    return (w_sem * np.asarray(semantic, dtype=np.float64)
            + w_vec * np.asarray(vector, dtype=np.float64)) / total


def prior(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """P = values @ weights / sum(weights), in [0, 1] (0 when every weight is 0).

    ``values`` is (n, k): the prior signals' columns; ``weights`` their k weights.
    """
    w = np.asarray(weights, dtype=np.float64)
    total = float(w.sum())
    if total <= 0:
        return np.zeros(np.asarray(values).shape[0])
    return np.asarray(values, dtype=np.float64) @ w / total


def prior_strength(strength: float, w_text: float) -> float:
    """beta = strength * (1 - w_text) / w_text: how far priors may lift a score.

    ``w_text = w_sem + w_vec`` of the weights in force. Feedback adaptation that
    raises the semantic weight (agents accept what they get) lowers beta, so the
    text decides more; a falling accept rate gives the priors more say.
    """
    if w_text <= 0:
        return float(strength)
    return float(strength) * (1.0 - w_text) / w_text


def tier_factor(tier_weight: np.ndarray, strength: float) -> np.ndarray:
    """1 - strength * (1 - tierWeight): agent (1.0) -> 1, team (0.6) -> 1 - 0.4 * strength.

    The seed multiplied the whole score by the tier weight, so an agent entry
    matching a third as well as a team entry could outrank it; here the tier is
    a bounded preference like the other priors.
    """
    return 1.0 - float(strength) * (1.0 - np.asarray(tier_weight, dtype=np.float64))


def combine(rel: np.ndarray, pri: np.ndarray, beta: float, tier_f: np.ndarray,
            nudge: np.ndarray) -> np.ndarray:
    """score = R * (1 + beta * P) * tierFactor * (1 + nudge)."""
    return (np.asarray(rel, dtype=np.float64) * (1.0 + beta * np.asarray(pri, dtype=np.float64))
            * np.asarray(tier_f, dtype=np.float64) * (1.0 + np.asarray(nudge, dtype=np.float64)))


def below_direct(score: np.ndarray, direct: np.ndarray, pri: np.ndarray) -> np.ndarray:
    """Scores where every non-direct candidate sits below every direct one.

    direct: score unchanged. Others: low * (0.5 + 0.5 * P), with
    low = 0.5 * min(direct scores) (0.5 when there is no direct match), so they
    keep the priors' order among themselves but never pass a direct match.
    """
    s = np.asarray(score, dtype=np.float64).copy()
    d = np.asarray(direct, dtype=bool)
    if d.all():
        return s
    positive = s[d][s[d] > 0]
    low = 0.5 * float(positive.min()) if positive.size else 0.5
    s[~d] = low * (0.5 + 0.5 * np.asarray(pri, dtype=np.float64)[~d])
    return s
