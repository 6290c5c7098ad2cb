"""Shrinkage of the learned weights, checked on result lists the fit did not see.

The pairwise fit (:func:`~tiervault.brain.learning.fit_pairwise`) orders the pairs it
is given; whether the weights it finds also order *other* queries' lists is a
different question, and the one feedback is for. It is asked of the agent's own
feedback: the result lists (one per agent and query) are dealt into ``FOLDS`` folds
(list g, numbered newest first, into fold g mod FOLDS), each fold's pairs are scored
by the weights fitted without them, and the step from the base toward the fit is
shrunk to what held out best::

    w_k        = fit(pairs outside fold k)
    loss(lam)  = sum_k sum_{i in fold k} s_i * log(1 + exp(-T * (w0 + lam * (w_k - w0)) . d_i))
    lam*       = argmin_{lam in LAMBDAS} loss(lam)        (the smallest lam on a tie)
    weights    = w0 + lam* * (fit(all pairs) - w0)

(d_i = phi(preferred) - phi(other) in the score's shape, T = TEMPERATURE, s_i the pair
weights: the fit's own loss, without its pull toward the base.) lam* = 0 keeps the
base: the fit ordered its own pairs and no held-out ones. A convex combination, so
the weights stay >= 0 and sum 1; the guard rails of ``learning.bounded`` apply after.
With fewer than ``MIN_LISTS`` lists nothing is held out and lam* = 1 (the rails
alone bound the step, as before this check).

Pure and deterministic (the folds follow the stored order, L-BFGS-B has no randomness);
it costs FOLDS extra fits per refit, each over at most MAX_PAIRS_PER_AGENT pairs.
"""

from __future__ import annotations

import numpy as np

from tiervault.brain import learning

__all__ = ["FOLDS", "LAMBDAS", "MIN_LISTS", "CHECKED", "held_out_lambda", "shrunk_fit"]

#: 1: the refits shrink by held-out lists; 0: they take the whole fit (tuning runs).
CHECKED = 1.0

#: Folds of result lists (set by hand: 3 keeps two thirds of a small agent's lists in
#: each fit).
FOLDS = 3
#: The shrinkage grid: how much of the step from the base toward the fit is taken.
LAMBDAS = (0.0, 0.25, 0.5, 0.75, 1.0)
#: Below this many result lists nothing is held out (lam* = 1).
MIN_LISTS = 6


def _loss(d: np.ndarray, s: np.ndarray, w: np.ndarray) -> float:
    return float(s @ np.logaddexp(0.0, -learning.TEMPERATURE * (d @ w)))


def held_out_lambda(pairs: learning.Pairs, base: np.ndarray, c: float = learning.DEFAULT_C,
                    strength: float = learning.PRIOR_STRENGTH) -> float:
    """lam* (module docstring): the share of the fitted step that held-out lists support."""
    groups = pairs.groups
    if groups is None or len(pairs) == 0 or len(np.unique(groups)) < MIN_LISTS:
        return 1.0
    w0 = np.asarray(base, dtype=np.float64)
    d = (learning.score_features(pairs.preferred, w0, strength)
         - learning.score_features(pairs.other, w0, strength))
    fold = groups % FOLDS
    losses = np.zeros(len(LAMBDAS))
    for k in range(FOLDS):
        held = fold == k
        if not held.any() or held.all():
            continue
        train = learning.Pairs(pairs.preferred[~held], pairs.other[~held], pairs.weights[~held])
        w_k = learning.fit_pairwise(train, w0, c, strength)
        for j, lam in enumerate(LAMBDAS):
            losses[j] += _loss(d[held], pairs.weights[held], w0 + lam * (w_k - w0))
    best = float(losses.min())
    return float(next(lam for lam, v in zip(LAMBDAS, losses) if v <= best + 1e-12))


def shrunk_fit(pairs: learning.Pairs, base: np.ndarray, c: float = learning.DEFAULT_C,
               strength: float = learning.PRIOR_STRENGTH) -> tuple[np.ndarray, float]:
    """(weights, lam*): the fit to every pair, its step from the base scaled by lam*."""
    w0 = np.asarray(base, dtype=np.float64)
    target = learning.fit_pairwise(pairs, w0, c, strength)
    lam = held_out_lambda(pairs, w0, c, strength)
    return w0 + lam * (target - w0), lam
