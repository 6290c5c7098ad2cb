"""Query-time modulations (seed 000, "programmatic embedding modulation") as pure maths.

A modulation reshapes a candidate score array (or the query vector) between
scoring and selection. This module holds the formulas as small pure NumPy
functions over arrays the caller passes in; it never touches storage, the
embedder or the clock. :mod:`tiervault.brain.modulation_spec` parses the token
grammar into a :class:`~tiervault.brain.modulation_spec.Modulations` value.

Notation: ``M`` is the (n, d) matrix of candidate vectors (L2-normalised rows),
``q`` the query vector, ``s`` a score array of length n.

The linear terms (query, centroid, trajectory, suppress) fold into ONE
matrix-vector product (:func:`fold_direction`), because

    M @ (a*q + c*t - sum_i w_i*x_i) == a*(M@q) + c*(M@t) - sum_i w_i*(M@x_i)

so composing several of them costs the same as plain similarity.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from tiervault.errors import ValidationError

__all__ = [
    "DEFAULT_CENTROID_ALPHA",
    "DEFAULT_DIVERSE_LAMBDA",
    "DEFAULT_SUPPRESS_WEIGHT",
    "TRAJECTORY_SHARE",
    "unit",
    "centroid_query",
    "trajectory_direction",
    "fold_direction",
    "suppress",
    "reciprocal_decay",
    "exponential_decay",
    "mmr",
    "MMRResult",
]

#: Share of the original query kept by ``centroid`` (q' = a*q + (1-a)*mean(E)).
DEFAULT_CENTROID_ALPHA = 0.5
#: MMR trade-off: lambda * relevance - (1 - lambda) * max similarity to the selected.
DEFAULT_DIVERSE_LAMBDA = 0.7
#: Weight of each suppress direction.
DEFAULT_SUPPRESS_WEIGHT = 1.0
#: trajectory: score = (1 - share) * similarity + share * directional similarity.
TRAJECTORY_SHARE = 0.5


def unit(v: np.ndarray) -> np.ndarray:
    """v / ||v|| (a zero vector stays zero)."""
    v = np.asarray(v, dtype=np.float32)
    n = float(np.linalg.norm(v))
    return v / n if n > 0.0 else v


def centroid_query(q: np.ndarray, examples: np.ndarray, alpha: float = DEFAULT_CENTROID_ALPHA
                   ) -> np.ndarray:
    """q' = unit(alpha * q + (1 - alpha) * mean(E)) — Rocchio's positive term.

    ``examples`` is a (k, d) matrix of example vectors (k >= 1).
    """
    e = np.asarray(examples, dtype=np.float32)
    if e.ndim != 2 or e.shape[0] == 0:
        raise ValidationError("centroid", f"needs at least one example vector, got an array of "
                                          f"shape {e.shape}; give entry ids that have vectors")
    return unit(alpha * np.asarray(q, dtype=np.float32) + (1.0 - alpha) * e.mean(axis=0))


def trajectory_direction(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """t = unit(b - a): the direction from A to B (scores rise along it)."""
    return unit(np.asarray(b, dtype=np.float32) - np.asarray(a, dtype=np.float32))


def fold_direction(q: np.ndarray, *, trajectory: np.ndarray | None = None,
                   suppress: Sequence[np.ndarray] = (), suppress_weights: Sequence[float] = (),
                   trajectory_share: float = TRAJECTORY_SHARE) -> np.ndarray:
    """The one vector u with  M @ u == every linear term at once:

        u = (1 - c) * q + c * t - sum_i w_i * x_i

    where ``c = trajectory_share`` when a trajectory ``t`` is given (else 0), and
    ``x_i``/``w_i`` are the suppress directions and their weights.
    """
    u = np.asarray(q, dtype=np.float32).copy()
    if trajectory is not None:
        u = (1.0 - trajectory_share) * u + trajectory_share * np.asarray(trajectory, np.float32)
    if len(suppress) != len(suppress_weights):
        raise ValidationError("suppress", f"{len(suppress)} directions but {len(suppress_weights)} "
                                          "weights; give one weight per suppress direction")
    for x, w in zip(suppress, suppress_weights):
        u = u - np.float32(w) * np.asarray(x, dtype=np.float32)
    return u


def suppress(scores: np.ndarray, m: np.ndarray, directions: Sequence[np.ndarray],
             weights: Sequence[float]) -> np.ndarray:
    """s' = s - sum_i w_i * (M @ x_i)  (the unfolded form; see :func:`fold_direction`)."""
    out = np.asarray(scores, dtype=np.float64).copy()
    for x, w in zip(directions, weights):
        out -= float(w) * (np.asarray(m, dtype=np.float32) @ np.asarray(x, np.float32))
    return out


def reciprocal_decay(age_days: np.ndarray, half_life_days: float) -> np.ndarray:
    """f = 1 / (1 + age / N): 1 today, 1/2 at N days; NaN (unknown age) -> 1."""
    if half_life_days <= 0:
        raise ValidationError("decay", f"half-life {half_life_days!r} days is not positive; give "
                                       "a number of days above 0, as decay:30")
    age = np.nan_to_num(np.maximum(np.asarray(age_days, dtype=np.float32), 0), nan=0.0)
    return 1.0 / (1.0 + age / np.float32(half_life_days))


def exponential_decay(age_days: np.ndarray, half_life_days: float) -> np.ndarray:
    """f = 2 ** (-age / N): halves every N days; NaN (unknown age) -> 1."""
    if half_life_days <= 0:
        raise ValidationError("decay", f"half-life {half_life_days!r} days is not positive; give "
                                       "a number of days above 0, as decay:30")
    age = np.nan_to_num(np.maximum(np.asarray(age_days, dtype=np.float32), 0), nan=0.0)
    return np.exp2(-age / np.float32(half_life_days))


@dataclass(frozen=True)
class MMRResult:
    """The MMR selection: ``order`` (positions into the candidates, best first) and
    ``scores`` (each selected candidate's MMR score at the moment it was picked)."""

    order: np.ndarray
    scores: np.ndarray


def mmr(relevance: np.ndarray, m: np.ndarray, k: int,
        lam: float = DEFAULT_DIVERSE_LAMBDA) -> MMRResult:
    """Maximal marginal relevance (Carbonell & Goldstein 1998), greedy:

        pick argmax_i  lam * rel_i - (1 - lam) * max_{j in S} cos(v_i, v_j)

    with S the already selected set (the max term is 0 while S is empty).
    ``m`` holds one L2-normalised row per candidate. O(k * n * d).
    """
    rel = np.asarray(relevance, dtype=np.float64)
    n = rel.size
    k = min(int(k), n)
    if not 0.0 <= lam <= 1.0:
        raise ValidationError("diverse", f"lambda {lam!r} is outside [0, 1]; give a value from 0 "
                                         "(spread only) to 1 (relevance only)")
    vecs = np.asarray(m, dtype=np.float32)
    max_sim = np.zeros(n, dtype=np.float64)
    taken = np.zeros(n, dtype=bool)
    order = np.empty(k, dtype=np.int64)
    picked = np.empty(k, dtype=np.float64)
    for step in range(k):
        value = lam * rel - (1.0 - lam) * max_sim
        value[taken] = -np.inf
        i = int(np.argmax(value))
        order[step], picked[step] = i, value[i]
        taken[i] = True
        max_sim = np.maximum(max_sim, vecs @ vecs[i])
    return MMRResult(order, picked)
