"""The seven Brain signals as small pure NumPy functions over candidate arrays.

Each function takes arrays (one element per candidate) and returns a float64
array of values in [0, 1]; the docstring gives the formula. Nothing here
touches storage or the clock: callers pass ``now``.
"""

from __future__ import annotations

import math
from itertools import repeat
from typing import Iterable, Mapping, Sequence

import numpy as np

__all__ = [
    "SEMANTIC_TFIDF_SHARE",
    "SEVERITY_SCORES",
    "DAY_SECONDS",
    "semantic",
    "vector",
    "severity",
    "temporal_decay",
    "freshness",
    "tag_overlap",
    "domain_match",
    "graph_proximity",
    "hop_proximity",
    "HOP_SCORES",
]

DAY_SECONDS = 86_400.0

#: Default share of the TF-IDF cosine in the semantic signal (the seed's); the Brain
#: passes its own, ``BrainConfig.tfidf_share`` / ``hybrid_tfidf_share`` (chosen on
#: SciFact odd query ids and the agent set's tune half, docs/search.md).
SEMANTIC_TFIDF_SHARE = 0.2

SEVERITY_SCORES = {"critical": 1.0, "warning": 0.7, "suggestion": 0.4}

#: Graph proximity by hop count from the nearest seed: 1 hop -> 1/2, 2 hops -> 1/3.
HOP_SCORES = {1: 1.0 / 2.0, 2: 1.0 / 3.0}


def semantic(tfidf: np.ndarray, lexical: np.ndarray,
             share: float = SEMANTIC_TFIDF_SHARE, lsa: np.ndarray | None = None,
             lsa_share: float = 0.0) -> np.ndarray:
    """semantic = share * tfidf + (1 - share - lsa_share) * lexical + lsa_share * lsa.

    ``lsa`` (brain/latent.py, on the per-query scale) is the latent semantic match of
    FTS-only queries; without it (or with ``lsa_share`` 0) this is the seed's
    ``share * tfidf + (1 - share) * lexical``.

    ``tfidf`` and ``lexical`` are given on the per-query scale by the Brain
    (:func:`tiervault.brain.combine.per_query_scale`): the scikit-learn TF-IDF
    cosine (smooth idf ``ln((N+1)/(df+1)) + 1``, l2 norm, English stop words
    removed) and the entry's BM25 (FTS5's formula and field weights, statistics
    federated over the searched tiers), each divided by the query's best
    candidate, so the best match is 1.0 whatever the query's length.
    """
    t = np.clip(np.asarray(tfidf, dtype=np.float64), 0.0, 1.0)
    lex = np.clip(np.asarray(lexical, dtype=np.float64), 0.0, 1.0)
    if lsa is None or not lsa_share:
        return share * t + (1.0 - share) * lex
    z = np.clip(np.asarray(lsa, dtype=np.float64), 0.0, 1.0)
    return share * t + (1.0 - share - lsa_share) * lex + lsa_share * z


def vector(cosines: np.ndarray | None, n: int) -> np.ndarray:
    """Dense cosine between query and entry embeddings, clipped to [0, 1]; zeros when
    there are no embeddings (``cosines`` is None). NaN (entry without a vector) -> 0."""
    if cosines is None:
        return np.zeros(n, dtype=np.float64)
    c = np.nan_to_num(np.asarray(cosines, dtype=np.float64), nan=0.0)
    return np.clip(c, 0.0, 1.0)


def severity(levels: Sequence[str]) -> np.ndarray:
    """critical -> 1.0, warning -> 0.7, suggestion -> 0.4 (anything else -> 0)."""
    return np.fromiter(map(SEVERITY_SCORES.get, levels, repeat(0.0)), dtype=np.float64,
                       count=len(levels))


def temporal_decay(updated_at: np.ndarray, created_at: np.ndarray, valid_from: np.ndarray,
                   valid_until: np.ndarray, now: float,
                   half_life_days: float = 365.0) -> np.ndarray:
    """Freshness of each entry at ``now`` (unix seconds; NaN marks a missing time).

    Without a validity window (no ``valid_until``):
        decay = exp(-ln 2 * age / half_life), age = now - (updated_at, else created_at),
    in days, floored at 0 (a timestamp in the future counts as new).

    With a validity window ``[start, valid_until]`` where start is ``valid_from``
    (else ``created_at``, else ``updated_at``):
        zone = 0.25 * (valid_until - start); remaining = valid_until - now
        decay = 1.0 if remaining > zone else max(remaining, 0) / zone
    i.e. full strength for the first 75% of the window, then a linear ramp to 0.
    """
    upd = np.asarray(updated_at, dtype=np.float64)
    crt = np.asarray(created_at, dtype=np.float64)
    vf = np.asarray(valid_from, dtype=np.float64)
    vu = np.asarray(valid_until, dtype=np.float64)
    stamp = np.where(np.isnan(upd), crt, upd)
    age_days = np.maximum(now - stamp, 0.0) / DAY_SECONDS
    decay = np.exp(-math.log(2.0) * age_days / half_life_days)
    decay = np.where(np.isnan(decay), 1.0, decay)  # no timestamp at all: treat as new
    windowed = ~np.isnan(vu)
    if windowed.any():
        start = np.where(np.isnan(vf), np.where(np.isnan(crt), upd, crt), vf)
        zone = 0.25 * (vu - start)
        remaining = vu - now
        with np.errstate(invalid="ignore", divide="ignore"):
            ramp = np.where(remaining > zone, 1.0, np.maximum(remaining, 0.0) / zone)
        ramp = np.where(np.isfinite(ramp), ramp, np.where(remaining > 0, 1.0, 0.0))
        decay = np.where(windowed, ramp, decay)
    return np.clip(decay, 0.0, 1.0)


def freshness(updated_at: Sequence[float | None], created_at: Sequence[float | None],
              valid_from: Sequence[float | None], valid_until: Sequence[float | None],
              now: float, half_life_days: float = 365.0) -> np.ndarray:
    """:func:`temporal_decay` of the light rows' times as they come (float or None:
    missing), built in Python floats: the same IEEE operations in the same order, then
    the same ``np.exp`` over the same exponents, so the same float64 bits
    (tests/test_python_floats.py) without ~20 NumPy calls on a few dozen candidates
    (issue 16, session 19). On a number ``np.maximum(x, 0.0)`` is ``x if x > 0.0 else
    0.0`` (NumPy returns its second operand on a tie: -0.0 becomes 0.0); a ramp NumPy
    would make infinite or NaN (a window of no length, an unknown start, an overflow)
    becomes ``1.0 if remaining > 0 else 0.0`` as there. A time that is not a finite
    float (an integer from outside SQL, say) or a ``now`` that is not takes
    :func:`temporal_decay` itself."""
    def arrays() -> np.ndarray:
        return temporal_decay(*(np.array(t, dtype=np.float64)
                                for t in (updated_at, created_at, valid_from, valid_until)),
                              now, half_life_days)

    if type(now) is not float or now - now != 0.0:  # x - x is 0.0 exactly when x is finite
        return arrays()
    c, missing = -math.log(2.0), False
    exponent: list[float] = []
    ramps: list[tuple[int, float]] = []  # (position, decay) of the entries with a window
    for i, (upd, crt, vu) in enumerate(zip(updated_at, created_at, valid_until)):
        if vu is not None:
            vf = valid_from[i]
            start = vf if vf is not None else crt if crt is not None else upd
            if (type(vu) is not float or vu - vu != 0.0
                    or (start is not None and (type(start) is not float or start - start != 0.0))):
                return arrays()
            remaining = vu - now
            zone = 0.25 * (vu - start) if start is not None else math.nan
            ramp = 1.0
            if not remaining > zone:
                ramp = (remaining if remaining > 0.0 else 0.0) / zone if zone else math.inf
                if not math.isfinite(ramp):
                    ramp = 1.0 if remaining > 0 else 0.0
            ramps.append((i, ramp))
            exponent.append(0.0)  # its exp is not used: the ramp is its decay
            continue
        stamp = upd if upd is not None else crt
        if stamp is None:
            missing = True
            exponent.append(math.nan)
            continue
        if type(stamp) is not float or stamp - stamp != 0.0:
            return arrays()
        age = now - stamp
        exponent.append(c * ((age if age > 0.0 else 0.0) / DAY_SECONDS) / half_life_days)
    decay = np.exp(np.array(exponent, dtype=np.float64))
    if missing:  # no timestamp at all: treat as new
        decay = np.where(np.isnan(decay), 1.0, decay)
    for i, ramp in ramps:
        decay[i] = ramp
    return decay.clip(0.0, 1.0)  # np.clip's ufunc call without its wrappers


def tag_overlap(query_tags: Iterable[str], entry_tags: Sequence[Iterable[str]]) -> np.ndarray:
    """Jaccard |Q ∩ E| / |Q ∪ E| between the query's tags Q and each entry's tags E
    (case-insensitive); 0 for every entry when Q is empty."""
    q = {t.lower() for t in query_tags}
    if not q:
        return np.zeros(len(entry_tags), dtype=np.float64)
    out = np.empty(len(entry_tags), dtype=np.float64)
    for i, tags in enumerate(entry_tags):
        e = {t.lower() for t in tags}
        out[i] = len(q & e) / len(q | e)
    return out


def domain_match(query_domain: str | None, domains: Sequence[str]) -> np.ndarray:
    """1.0 where the entry's domain equals the query's (case-insensitive), else 0;
    all 0 when the query names no domain."""
    if not query_domain:
        return np.zeros(len(domains), dtype=np.float64)
    q = query_domain.strip().lower()
    return np.fromiter((1.0 if d.lower() == q else 0.0 for d in domains), dtype=np.float64,
                       count=len(domains))


def graph_proximity(hops: np.ndarray) -> np.ndarray:
    """1 / (hops + 1) for an entry 1 or 2 positive link hops from a seed (1 hop -> 0.5,
    2 hops -> 1/3), else 0. ``hops`` holds the shortest hop count (-1 = unreachable
    or a seed): seeds earn nothing, their relevance is already in the other signals.
    Which links count as hops (``contradicts`` does not) is decided by
    :mod:`tiervault.brain.graph`."""
    h = np.asarray(hops)
    out = np.zeros(h.shape, dtype=np.float64)
    for k, v in HOP_SCORES.items():
        out[h == k] = v
    return out


def hop_proximity(hops: Mapping[str, int], ids: Sequence[str]) -> np.ndarray:
    """:func:`graph_proximity` of each of ``ids``' hop count in ``hops`` (an id not there:
    unreachable), read from the mapping at once (no hop array, no mask per hop count)."""
    return np.fromiter(map(HOP_SCORES.get, map(hops.get, ids, repeat(-1)), repeat(0.0)),
                       dtype=np.float64, count=len(ids))
