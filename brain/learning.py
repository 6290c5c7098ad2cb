"""Learning signal weights from feedback pairs (``brain.adaptation: learned``).

Feedback on one result list says more than an accept rate: an accepted entry
should have ranked above a dismissed one *for that query*. Each such pair gives
the difference of the two entries' seven signal values (recorded when the
feedback was given), and a pairwise logistic model (RankNet with a linear
scorer) finds the weights that order the pairs::

    P(accepted above dismissed) = sigmoid(w . (s_acc - s_dis))

Regularisation toward the base weights ``w0`` (the seed's set): the model is
fitted as ``w = alpha * w0 + delta`` — the base margin ``w0 . d`` is one extra
feature whose coefficient (``alpha``, the scale) is nearly unpenalised (the
column is multiplied by :data:`BASE_COLUMN_SCALE`), while the deviation
``delta`` carries scikit-learn's L2 penalty ``|delta|^2 / (2 C)``. Few or
contradictory pairs leave ``delta`` near 0, i.e. the base direction; many
consistent pairs move it. Then ``w = clip(w, 0) / sum`` (weights >= 0, sum 1),
and the guard rails of :func:`bounded` apply.

Everything here is pure (NumPy / scikit-learn, no storage, no clock) and
deterministic: pairs are built in stored order and lbfgs has no randomness.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

import numpy as np

from tiervault.brain.shapes import SIGNALS

__all__ = ["FeedbackContext", "Pairs", "pairs_from_events", "fit_pairwise", "bounded",
           "query_profile", "profile_similarity", "normalise_query", "ACTION_VALUES",
           "BASE_COLUMN_SCALE", "DEFAULT_C", "MAX_SHIFT", "MAX_STEP", "MAX_PAIRS_PER_QUERY",
           "MAX_PAIRS_PER_AGENT", "PROFILE_K"]

ACTION_VALUES = {"accepted": 1.0, "modified": 0.5, "dismissed": -1.0, "failed": 0.0}
#: The base-margin column is multiplied by this, so its coefficient's L2 penalty is
#: 1/BASE_COLUMN_SCALE^2 of a deviation coefficient's: the scale is (almost) free.
BASE_COLUMN_SCALE = 10.0
#: Inverse L2 strength on the deviation from the base (scikit-learn's C). Chosen on
#: the agent set's tune half (eval/feedback_sim.py --split tune, unseen nDCG@10 after
#: 200 judged events): C 0.01 0.924, 0.03 0.924, 0.1 0.929, 0.3 0.927, 1 0.918, 3 0.919.
DEFAULT_C = 0.1
#: Guard rails: the learned weights stay within this L1 distance of the base set...
MAX_SHIFT = 0.5
#: ...and one refit moves them at most this far (L1) from the weights in force.
MAX_STEP = 0.15
#: At most this many pairs from one query's list (the newest actions win), and
#: at most this many from one agent (pooled team feedback).
MAX_PAIRS_PER_QUERY = 20
MAX_PAIRS_PER_AGENT = 1_000
#: A query's relevance profile keeps its K best entries by text relevance.
PROFILE_K = 10


@dataclass(frozen=True, slots=True)
class FeedbackContext:
    """What the ranking looked like when feedback was given, stored as JSON with it.

    ``signals``: the entry's seven signal values for that query (None when the
    entry was not in the query's list, so it forms no pair); ``profile``: the
    query's relevance profile (:func:`query_profile`)."""

    signals: tuple[float, ...] | None = None
    profile: Mapping[str, float] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps({"signals": None if self.signals is None else [round(v, 6) for v in self.signals],
                           "profile": {k: round(v, 6) for k, v in self.profile.items()}},
                          separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> "FeedbackContext":
        """Parse a stored context; '' or an unreadable one is an empty context."""
        if not text:
            return cls()
        try:
            data = json.loads(text)
            sig = data.get("signals")
            signals = tuple(float(v) for v in sig) if sig is not None and len(sig) == len(SIGNALS) else None
            profile = {str(k): float(v) for k, v in (data.get("profile") or {}).items()}
        except (ValueError, TypeError, AttributeError):
            return cls()
        return cls(signals, profile)


@dataclass(frozen=True, slots=True)
class Pairs:
    """Preference pairs: ``diffs[i] = s_preferred - s_other`` (7 signals), with a weight."""

    diffs: np.ndarray
    weights: np.ndarray

    def __len__(self) -> int:
        return int(self.diffs.shape[0])


class _Event:  # the fields of tiervault.vault.journal.FeedbackEvent this module reads
    query: str
    entry_id: str
    action: str
    agent: str
    context: str


def normalise_query(text: str) -> str:
    """Lower-cased, whitespace-folded query text: the key that groups one result list."""
    return " ".join(text.lower().split())


def pairs_from_events(events: Iterable[_Event], *, max_per_query: int = MAX_PAIRS_PER_QUERY,
                      max_per_agent: int = MAX_PAIRS_PER_AGENT) -> Pairs:
    """Preference pairs from feedback events (oldest first).

    Events are grouped by (agent, normalised query); within a group the latest
    action on an entry replaces earlier ones (repeating feedback adds nothing).
    Every positive (accepted +1, modified +0.5) x negative (dismissed -1) entry
    with recorded signals gives ``diff = s_pos - s_neg`` with weight
    ``(v_pos - v_neg) / 2`` (1 for accepted vs dismissed). At most
    ``max_per_query`` pairs per group and ``max_per_agent`` per agent, newest
    groups first, so one query or one agent's burst cannot dominate the fit.
    """
    groups: dict[tuple[str, str], dict[str, tuple[float, tuple[float, ...]]]] = {}
    for ev in events:
        key = (ev.agent, normalise_query(ev.query))
        group = groups.pop(key, {})  # re-insert: dict order = most recently touched last
        value = ACTION_VALUES.get(ev.action, 0.0)
        sig = FeedbackContext.from_json(ev.context).signals
        group.pop(ev.entry_id, None)
        if value != 0.0 and sig is not None:
            group[ev.entry_id] = (value, sig)
        groups[key] = group
    diffs: list[np.ndarray] = []
    weights: list[float] = []
    per_agent: dict[str, int] = {}
    for (agent, _), group in reversed(list(groups.items())):  # newest groups first
        pos = [(v, s) for v, s in group.values() if v > 0]
        neg = [(v, s) for v, s in group.values() if v < 0]
        taken = 0
        for vp, sp in reversed(pos):
            for vn, sn in reversed(neg):
                if taken >= max_per_query or per_agent.get(agent, 0) >= max_per_agent:
                    break
                diffs.append(np.subtract(sp, sn))
                weights.append((vp - vn) / 2.0)
                taken += 1
                per_agent[agent] = per_agent.get(agent, 0) + 1
    if not diffs:
        return Pairs(np.zeros((0, len(SIGNALS))), np.zeros(0))
    return Pairs(np.vstack(diffs), np.asarray(weights, dtype=np.float64))


def fit_pairwise(pairs: Pairs, base: np.ndarray, c: float = DEFAULT_C) -> np.ndarray:
    """Weights fitted to ``pairs``, regularised toward ``base`` (sums to 1, all >= 0).

    With d the pair differences restricted to the signals the base weighs
    (a signal at 0 in the base stays 0), scikit-learn's LogisticRegression
    (lbfgs, no intercept, L2 with inverse strength ``c``) fits on the rows
    ``[d, S * (w0 . d)] -> 1`` and their mirrors ``[-d, -S * (w0 . d)] -> 0``::

        alpha = S * gamma,   w = alpha * w0 + delta,   w = clip(w, 0) / sum(clip(w, 0))

    (S = BASE_COLUMN_SCALE). The base itself is returned with no pairs, when
    every weight clips to 0, and when alpha <= 0: pairs that on the whole prefer
    the reverse of the base ordering (what accepting random entries below
    dismissed top results looks like) are not trusted to set the weights.
    """
    from sklearn.linear_model import LogisticRegression

    w0 = np.asarray(base, dtype=np.float64)
    if len(pairs) == 0:
        return w0.copy()
    active = w0 > 0
    d = pairs.diffs[:, active]
    margin = d @ w0[active]
    x = np.column_stack([d, BASE_COLUMN_SCALE * margin])
    if not np.any(np.abs(x) > 1e-12):
        return w0.copy()  # every pair is a tie on every signal: nothing to learn
    xx = np.vstack([x, -x])
    yy = np.concatenate([np.ones(len(x)), np.zeros(len(x))])
    sw = np.concatenate([pairs.weights, pairs.weights])
    model = LogisticRegression(C=c, fit_intercept=False, solver="lbfgs", max_iter=500)
    model.fit(xx, yy, sample_weight=sw)
    coef = model.coef_[0]
    alpha = BASE_COLUMN_SCALE * coef[-1]
    if alpha <= 0:
        return w0.copy()  # the pairs reverse the base ordering as a whole: not trusted
    w = np.zeros_like(w0)
    w[active] = alpha * w0[active] + coef[:-1]
    w = np.clip(w, 0.0, None)
    total = float(w.sum())
    return w0.copy() if total <= 1e-12 or not np.isfinite(total) else w / total


def bounded(target: np.ndarray, base: np.ndarray, previous: np.ndarray | None = None,
            max_shift: float | None = None, max_step: float | None = None) -> np.ndarray:
    """The guard rails: pull ``target`` back toward ``base`` and ``previous``.

        w = base + min(1, max_shift / |target - base|_1) * (target - base)
        w = prev + min(1, max_step  / |w - prev|_1)      * (w - prev)

    Both are convex combinations of weight vectors (>= 0, sum 1), so the result
    is one too; it lies within ``max_shift`` of the base and ``max_step`` of the
    weights in force, however many events pushed it. The bounds default to
    MAX_SHIFT and MAX_STEP.
    """
    max_shift = MAX_SHIFT if max_shift is None else max_shift
    max_step = MAX_STEP if max_step is None else max_step
    b = np.asarray(base, dtype=np.float64)
    w = np.asarray(target, dtype=np.float64)
    dist = float(np.abs(w - b).sum())
    if dist > max_shift:
        w = b + (max_shift / dist) * (w - b)
    if previous is not None:
        p = np.asarray(previous, dtype=np.float64)
        step = float(np.abs(w - p).sum())
        if step > max_step:
            w = p + (max_step / step) * (w - p)
    return w / w.sum()


def query_profile(ids: Sequence[str], relevance: np.ndarray, k: int = PROFILE_K) -> dict[str, float]:
    """The query's relevance profile: its ``k`` entries with the highest text
    relevance r (semantic + vector signal), as {id: r / |r|_2}; entries with r = 0
    are left out. Two queries about the same thing retrieve the same entries by
    text, whatever words they use, so their profiles overlap."""
    r = np.asarray(relevance, dtype=np.float64)
    if r.size == 0:
        return {}
    order = sorted(range(r.size), key=lambda i: (-r[i], i))[:k]
    keep = [i for i in order if r[i] > 0]
    norm = float(np.sqrt(sum(r[i] ** 2 for i in keep)))
    return {ids[i]: float(r[i] / norm) for i in keep} if norm > 0 else {}


def profile_similarity(a: Mapping[str, float], b: Mapping[str, float],
                       leave_out: str | None = None) -> float:
    """Cosine of two profiles without the share of the entry ``leave_out`` (x)::

        sim = sum_{e != x} a[e] b[e] / (|a|_2 |b|_2)

    Leaving the nudged entry x out of the numerator means two queries are alike
    because of the *other* entries they both retrieve: an entry that shows up for
    two different topics does not make the topics alike. The norms keep x, so a
    faint overlap elsewhere stays faint."""
    dot = sum(v * b[k] for k, v in a.items() if k in b and k != leave_out)
    na = sum(v * v for v in a.values())
    nb = sum(v * v for v in b.values())
    return float(dot / np.sqrt(na * nb)) if na > 0 and nb > 0 else 0.0
