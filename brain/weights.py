"""Signal weights: the seed's two sets, config overrides, and feedback adaptation.

Weights are a 7-vector in :data:`SIGNALS` order and always sum to 1.0 — the
base sets, every override, and every adapted state (the reference jumps from a
sum of 0.9 to 1.0 at the 30th feedback; ours is normalised from the start).

Adaptation (the seed's rule, exactly): once the agent tier holds at least
``threshold`` (30) feedback actions that are not ``failed``,

    rate  = (accepted + 0.5 * modified) / (accepted + modified + dismissed)
    delta = clamp((rate - 0.5) * 0.3, -0.15, +0.15)
    semantic' = clamp(semantic + delta, 0, 1)
    other'    = other * (1 - semantic') / (1 - semantic)   (so the sum stays 1.0)

The counts come from the agent tier's running counters (O(1)): weights are
recomputed from four integers, never from a scan of the feedback table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from tiervault.brain.shapes import SIGNALS, WeightsDict
from tiervault.errors import ConfigError

__all__ = ["FTS_ONLY", "HYBRID", "WeightSet", "normalise", "base_weights", "adapt",
           "MAX_SEMANTIC_SHIFT", "accept_rate"]

#: The seed's weight sets (semantic, vector, severity, temporalDecay, tagOverlap,
#: domainMatch, graphProximity). As written in the seed both sets sum to 0.9;
#: they are normalised to 1.0 here.
FTS_ONLY = (0.35, 0.0, 0.10, 0.10, 0.10, 0.10, 0.15)
HYBRID = (0.20, 0.15, 0.10, 0.10, 0.10, 0.10, 0.15)
MAX_SEMANTIC_SHIFT = 0.15
_SEMANTIC = SIGNALS.index("semantic")
_VECTOR = SIGNALS.index("vector")


@dataclass(frozen=True, slots=True)
class WeightSet:
    """Weights in force for one query, and how they were obtained."""

    values: tuple[float, ...]
    name: str = "fts"  # "fts" | "hybrid"
    adapted: bool = False
    accept_rate: float | None = None

    @property
    def array(self) -> np.ndarray:
        return np.asarray(self.values, dtype=np.float64)

    def as_dict(self) -> WeightsDict:
        return dict(zip(SIGNALS, (round(v, 6) for v in self.values)))  # type: ignore[return-value]


def normalise(values: np.ndarray | tuple[float, ...]) -> np.ndarray:
    """values / sum(values); raises when every weight is 0 (nothing could rank)."""
    v = np.asarray(values, dtype=np.float64)
    total = float(v.sum())
    if total <= 0 or not np.isfinite(total) or (v < 0).any():
        raise ConfigError("brain.weights: weights must be >= 0 and not all 0; "
                          f"got {dict(zip(SIGNALS, v.tolist()))}", key="brain.weights")
    return v / total


def base_weights(hybrid: bool, overrides: Mapping[str, float] | None = None) -> np.ndarray:
    """The seed set for the mode, with ``brain.weights`` overrides, normalised to 1.

    An override replaces that signal's weight in both sets, except that the
    FTS-only set always has ``vector = 0`` (there is no vector signal to weigh).
    """
    v = np.array(HYBRID if hybrid else FTS_ONLY, dtype=np.float64)
    for key, value in (overrides or {}).items():
        if key not in SIGNALS:
            raise ConfigError(f"brain.weights.{key}: unknown signal; use one of "
                              f"{', '.join(SIGNALS)}", key=f"brain.weights.{key}")
        v[SIGNALS.index(key)] = float(value)
    if not hybrid:
        v[_VECTOR] = 0.0
    return normalise(v)


def accept_rate(counts: Mapping[str, int]) -> tuple[float | None, int]:
    """(rate, non-failed total): rate = (accepted + 0.5 * modified) / total, None if total is 0."""
    acc, mod, dis = (int(counts.get(k, 0)) for k in ("accepted", "modified", "dismissed"))
    total = acc + mod + dis
    if total == 0:
        return None, 0
    return (acc + 0.5 * mod) / total, total


def adapt(base: np.ndarray, counts: Mapping[str, int], threshold: int = 30) -> tuple[np.ndarray, float | None, bool]:
    """(weights, accept rate, adapted?) — the seed's rule, see the module docstring."""
    base = normalise(base)
    rate, total = accept_rate(counts)
    if rate is None or total < threshold:
        return base, rate, False
    delta = float(np.clip((rate - 0.5) * 0.3, -MAX_SEMANTIC_SHIFT, MAX_SEMANTIC_SHIFT))
    sem = base[_SEMANTIC]
    new_sem = float(np.clip(sem + delta, 0.0, 1.0))
    rest = 1.0 - sem
    out = base.copy()
    if rest <= 1e-12:
        return out, rate, False  # semantic already holds all the weight: nothing to move
    mask = np.ones(len(out), dtype=bool)
    mask[_SEMANTIC] = False
    out[mask] *= (1.0 - new_sem) / rest
    out[_SEMANTIC] = new_sem
    return out / out.sum(), rate, True
