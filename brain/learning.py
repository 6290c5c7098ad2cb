"""Learning signal weights from feedback pairs (``brain.adaptation: learned``).

Feedback on one result list says more than an accept rate: an accepted entry
should have ranked above a dismissed one *for that query*. Each such pair gives
the two entries' seven signal values (recorded when the feedback was given), and
a pairwise logistic model (RankNet with a linear scorer) finds the weights whose
scores order the pairs::

    P(accepted above dismissed) = sigmoid(T * w . (phi(s_acc) - phi(s_dis)))

``phi`` (:func:`score_features`) puts the signals in the shape the Brain's score
uses them (``R * (1 + beta * P)``, brain/combine.py), so ``w . phi`` is that score
for the weights w: a prior moves a score by at most ``beta * R``, and lowering
the text weight raises ``beta``. Regularisation toward the base weights ``w0``
(the seed's set) is an L2 pull ``|w - w0|^2 / (2 C)``; weights are kept >= 0 by
the solver's bounds (SciPy L-BFGS-B) and normalised to sum 1 afterwards; the guard
rails of :func:`bounded` then apply.

Everything here is pure (NumPy / SciPy, no storage, no clock; the one side effect is
a warning about an unreadable stored context) and deterministic:
pairs are built in stored order and L-BFGS-B has no randomness.
"""

from __future__ import annotations

import functools
import json
import logging
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from tiervault.brain.shapes import SIGNALS

log = logging.getLogger(__name__)

__all__ = ["FeedbackContext", "event_source", "Pairs", "pairs_from_events", "fit_pairwise", "bounded",
           "query_profile", "profile_similarity", "normalise_query", "ACTION_VALUES",
           "TEMPERATURE", "DEFAULT_C", "MAX_SHIFT", "MAX_STEP", "MIN_TEXT_SHARE",
           "MAX_PAIRS_PER_QUERY", "MAX_PAIRS_PER_AGENT", "PROFILE_K", "PRIOR_STRENGTH",
           "score_features", "text_agreement", "nudge_trust", "TRUST_FULL_AGREEMENT",
           "MIN_TRUST_PAIRS", "trusted", "WEIGHTS_FOLLOW_TRUST"]

ACTION_VALUES = {"accepted": 1.0, "modified": 0.5, "dismissed": -1.0, "failed": 0.0}
#: Logit scale of a score margin: weights sum to 1, so ``w . d`` of a pair is a small
#: number (the base's median margin on the agent set's pairs is ~0.05); T = 20 makes
#: that a probability of ~0.73 that the base orders such a pair right.
TEMPERATURE = 20.0
#: Inverse strength of the L2 pull toward the base. Chosen on the agent set's tune half
#: (eval/feedback_sim.py --split tune, learned/judged, unseen-half nDCG@10 after 200 /
#: 400 events, from 0.911): C 0.03 -> 0.912 / 0.912, 0.1 0.912 / 0.912, 0.3 0.918 /
#: 0.919, 1 0.924 / 0.928, 10 0.928 / 0.927 (larger C: the same fit). The guard rails
#: below, not C, bound how far the weights go.
DEFAULT_C = 10.0
#: Guard rails: the learned weights stay within this L1 distance of the base set
#: (2.0 is the whole simplex; on the tune half, 0.5 held the unseen gain after 200
#: judged events to +0.007, 1.0 gives +0.017)...
MAX_SHIFT = 1.0
#: ...and one refit moves them at most this far (L1) from the weights in force...
MAX_STEP = 0.15
#: ...and the text weight (semantic + vector) stays at least this share of the base's
#: (with the FTS-only base: semantic >= 0.097, so beta <= 0.2 * 0.903 / 0.097 = 1.86).
MIN_TEXT_SHARE = 0.25
#: At most this many pairs from one query's list (the newest actions win), and
#: at most this many from one agent (pooled team feedback).
MAX_PAIRS_PER_QUERY = 20
MAX_PAIRS_PER_AGENT = 1_000
#: A query's relevance profile keeps its K best entries by text relevance.
PROFILE_K = 10
#: The default of ``brain`` config ``prior_strength`` (BrainConfig), used when a
#: caller gives none: how far the priors may lift a score.
PRIOR_STRENGTH = 0.2
#: The same-query nudge is trusted in full once the agent's pairs agree with text
#: relevance this much (:func:`nudge_trust`); below, in proportion. Judged feedback on
#: the agent set agrees 0.54-0.83 after 30-200 events, random feedback -0.93 to -0.70
#: (a diagnostic run of eval/feedback_sim.py's protocol, FTS-only, both halvings). Chosen on the tune halving (fed /
#: unseen nDCG@10 after 200 judged events, and of the ``noisy`` agent whose verdicts are
#: random 30% of the time, from 0.894 / 0.908): 0.25 -> judged 0.933 / 0.928, noisy
#: 0.914 (0.867 at 50); 0.5 -> 0.933 / 0.928, noisy 0.894 (0.884 at 50); 1.0 -> 0.928 /
#: 0.928 (0.944 / 0.922 after 400). Random feedback: 0.894 / 0.908 in each.
TRUST_FULL_AGREEMENT = 0.5
#: ...judged from at least this many pairs: fewer (one correction of one list) say
#: little about an agent, and its verdicts are then unchecked (set by hand).
MIN_TRUST_PAIRS = 10
#: The fitted weights move from the base only in proportion to the agent's trust
#: (:func:`trusted`): a careless agent's partly wrong pairs still agree with text
#: relevance enough to fit. Chosen on the agent set's tune halving (3 seeds, hybrid, the
#: ``noisy`` agent, unseen nDCG@10 gain after 100 / 200 / 400 events): off +0.001 /
#: -0.024 (one seed -0.081) / +0.006, on +0.003 / +0.005 / +0.001; judged feedback has
#: trust 1 and is unchanged (eval/results/feedback_guard_seeds.json, docs/feedback.md).
#: 0 turns it off (tuning runs).
WEIGHTS_FOLLOW_TRUST = 1.0
_SEM, _VEC = SIGNALS.index("semantic"), SIGNALS.index("vector")
_PRIORS = [i for i in range(len(SIGNALS)) if i not in (_SEM, _VEC)]


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
    def from_json(cls, text: str, *, source: str = "a stored feedback context") -> "FeedbackContext":
        """Parse a stored context; '' or an unreadable one is an empty context.

        An unreadable one (a damaged row) is logged once per ``source`` (e.g.
        ``feedback #12 on entry 'x'``) with the reason's type, never the text, which
        holds query-derived data: the feedback still counts, without its context.
        """
        if not text:
            return cls()
        try:
            data = json.loads(text)
            sig = data.get("signals")
            signals = tuple(float(v) for v in sig) if sig is not None and len(sig) == len(SIGNALS) else None
            profile = {str(k): float(v) for k, v in (data.get("profile") or {}).items()}
        except (ValueError, TypeError, AttributeError) as exc:
            _warn_unreadable(source, type(exc).__name__)
            return cls()
        return cls(signals, profile)


@functools.lru_cache(maxsize=1024)
def _warn_unreadable(source: str, reason: str) -> None:
    # Cached: the same damaged row is read on every search (feedback nudges) and refit;
    # one warning per row and process makes the loss visible without flooding the log.
    log.warning("%s: unreadable context (%s); it is used without its signals and query "
                "profile. Re-record this feedback to restore them.", source, reason)


def event_source(ev: Any) -> str:
    """How a log line names a feedback event: its id and entry, never its content."""
    return f"feedback #{ev.seq} on entry {ev.entry_id!r}"


@dataclass(frozen=True, slots=True)
class Pairs:
    """Preference pairs: row i of ``preferred`` should outrank row i of ``other``
    (each row an entry's seven signal values for that query), with a weight."""

    preferred: np.ndarray
    other: np.ndarray
    weights: np.ndarray

    @property
    def diffs(self) -> np.ndarray:
        """``preferred - other``, one row per pair."""
        return self.preferred - self.other

    def __len__(self) -> int:
        return int(self.preferred.shape[0])

    @classmethod
    def empty(cls) -> "Pairs":
        z = np.zeros((0, len(SIGNALS)))
        return cls(z, z.copy(), np.zeros(0))


class _Event:  # the fields of tiervault.vault.journal.FeedbackEvent this module reads
    seq: int
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
        sig = FeedbackContext.from_json(ev.context, source=event_source(ev)).signals
        group.pop(ev.entry_id, None)
        if value != 0.0 and sig is not None:
            group[ev.entry_id] = (value, sig)
        groups[key] = group
    hi: list[tuple[float, ...]] = []
    lo: list[tuple[float, ...]] = []
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
                hi.append(sp)
                lo.append(sn)
                weights.append((vp - vn) / 2.0)
                taken += 1
                per_agent[agent] = per_agent.get(agent, 0) + 1
    if not hi:
        return Pairs.empty()
    return Pairs(np.asarray(hi, dtype=np.float64), np.asarray(lo, dtype=np.float64),
                 np.asarray(weights, dtype=np.float64))


def score_features(signals: np.ndarray, base: np.ndarray,
                   strength: float = PRIOR_STRENGTH) -> np.ndarray:
    """The signals in the shape the score uses them, so a linear model over these
    features *is* the Brain's score for some weights (see :func:`fit_pairwise`)::

        phi_sem = semantic,  phi_vec = vector,  phi_k = strength * R0 * signal_k  (priors)
        R0 = (w0_sem * semantic + w0_vec * vector) / (w0_sem + w0_vec)

    For weights w (sum 1), ``w . phi`` is ``w_text * R * (1 + beta * P)`` with
    ``beta = strength * (1 - w_text) / w_text`` (brain/combine.py): the score up to a
    positive factor (exactly, in FTS-only mode; with the base's text split, in hybrid).
    A plain difference of the raw signals would let a prior move a score as much as
    text relevance does, while the score lets it move at most ``beta * R``.
    """
    s = np.asarray(signals, dtype=np.float64)
    w0 = np.asarray(base, dtype=np.float64)
    w_text = float(w0[_SEM] + w0[_VEC])
    r0 = (w0[_SEM] * s[:, _SEM] + w0[_VEC] * s[:, _VEC]) / w_text if w_text > 0 else s[:, _SEM]
    phi = s.copy()
    phi[:, _PRIORS] = strength * r0[:, None] * s[:, _PRIORS]
    return phi


def fit_pairwise(pairs: Pairs, base: np.ndarray, c: float = DEFAULT_C,
                 strength: float = PRIOR_STRENGTH) -> np.ndarray:
    """Weights fitted to ``pairs``, regularised toward ``base`` (sums to 1, all >= 0).

    With d = phi(preferred) - phi(other) (:func:`score_features`, restricted to the
    signals the base weighs: a signal at 0 in the base stays 0) and pair weights s,
    the pairwise logistic loss with an L2 pull toward the base::

        minimise  sum_i s_i * log(1 + exp(-T * w . d_i))  +  |w - w0|^2 / (2 C),   w >= 0

    (T = :data:`TEMPERATURE`), solved by SciPy's L-BFGS-B (bounded quasi-Newton,
    deterministic), then ``w / sum(w)``. Because ``w . phi`` is the score for
    weights w, the fitted w are the weights whose *scores* order the pairs, the
    priors' strength ``beta`` included (lowering the text weight raises beta).
    Few or contradictory pairs leave w near the base; many consistent ones move it.

    The base itself is returned with no pairs, when every pair is a tie, and when
    the pairs on the whole prefer the entry matching the *text* worse
    (``sum s_i * (R_preferred - R_other) <= 0``, R = the base's text relevance):
    that is what accepting random entries below dismissed top results looks like,
    and such feedback is not trusted to set the weights. A fit that leaves no text
    weight (semantic + vector = 0) also keeps the base.
    """
    from scipy.optimize import minimize
    from scipy.special import expit

    w0 = np.asarray(base, dtype=np.float64)
    if len(pairs) == 0:
        return w0.copy()
    if float(pairs.weights @ _text_margins(pairs, w0)) <= 0:
        return w0.copy()  # the pairs prefer the worse text match as a whole: not trusted
    active = w0 > 0
    d = (score_features(pairs.preferred, w0, strength)
         - score_features(pairs.other, w0, strength))[:, active]
    if not np.any(np.abs(d) > 1e-12):
        return w0.copy()  # every pair is a tie on every signal: nothing to learn
    sw, v0 = pairs.weights, w0[active]

    def objective(v: np.ndarray) -> tuple[float, np.ndarray]:
        m = TEMPERATURE * (d @ v)
        r = v - v0
        loss = float(sw @ np.logaddexp(0.0, -m)) + float(r @ r) / (2.0 * c)
        grad = -TEMPERATURE * ((sw * expit(-m)) @ d) + r / c
        return loss, grad

    res = minimize(objective, v0, jac=True, method="L-BFGS-B",
                   bounds=[(0.0, None)] * int(active.sum()), options={"maxiter": 500})
    w = np.zeros_like(w0)
    w[active] = np.clip(res.x, 0.0, None)
    total = float(w.sum())
    if total <= 1e-12 or not np.isfinite(total) or w[_SEM] + w[_VEC] <= 1e-12:
        return w0.copy()  # nothing left to rank by, or no text relevance: keep the base
    return w / total


def _text_margins(pairs: Pairs, base: np.ndarray) -> np.ndarray:
    """``R(preferred) - R(other)`` per pair, R = the base's text relevance
    ``(w0_sem * semantic + w0_vec * vector) / (w0_sem + w0_vec)``."""
    w0 = np.asarray(base, dtype=np.float64)
    w_text = float(w0[_SEM] + w0[_VEC])
    return ((pairs.preferred - pairs.other)[:, [_SEM, _VEC]] @ w0[[_SEM, _VEC]]) / max(w_text, 1e-12)


def text_agreement(pairs: Pairs, base: np.ndarray) -> float | None:
    """How far the pairs agree with text relevance, in [-1, 1] (None without pairs
    or when every pair is a text tie)::

        agreement = sum_i s_i (R_pref,i - R_other,i) / sum_i s_i |R_pref,i - R_other,i|

    +1: every preferred entry matches the query's text better than the other one;
    -1: every one worse. Judged feedback corrects the text ranking in some pairs and
    agrees with it in most (0.5-0.9 on the agent set); accepting random entries of a
    top 10 while dismissing top hits lands near -0.8 (the fit's trust rule is
    ``agreement > 0``)."""
    if len(pairs) == 0:
        return None
    margins = _text_margins(pairs, base)
    total = float(pairs.weights @ np.abs(margins))
    if total <= 1e-12:
        return None
    return float(pairs.weights @ margins) / total


def nudge_trust(pairs: Pairs, base: np.ndarray, full: float | None = None) -> float | None:
    """How far an agent's verdicts on a query are trusted to move that query::

        trust = clip(agreement / full, 0, 1)     (None with < MIN_TRUST_PAIRS pairs)

    (``agreement`` = :func:`text_agreement`, ``full`` defaults to
    TRUST_FULL_AGREEMENT). Feedback that as a whole prefers worse text matches
    (random accepts below dismissed top hits) gets trust 0: its verdicts move no
    query (brain/feedback.py). Feedback without
    dismissals forms no pairs, and a few pairs say little: it is unchecked (None),
    and its verdicts move their query only within the shared +/-MAX_NUDGE."""
    full = TRUST_FULL_AGREEMENT if full is None else full
    agreement = text_agreement(pairs, base)
    if agreement is None or len(pairs) < MIN_TRUST_PAIRS:
        return None
    if full <= 0:
        return 1.0 if agreement > 0 else 0.0
    return float(min(max(agreement / full, 0.0), 1.0))


def trusted(target: np.ndarray, base: np.ndarray, trust: float | None) -> np.ndarray:
    """The fitted weights scaled back toward the base by the agent's trust::

        w = base + t * (target - base),   t = trust (:func:`nudge_trust`; 1 when None)

    A convex combination of two weight vectors, so still >= 0 and summing to 1.
    Judged feedback has trust 1 (the fit is kept whole); an agent whose verdicts are
    partly random moves the weights only as far as its pairs, taken together, agree
    with text relevance. With fewer than MIN_TRUST_PAIRS pairs (None) the fit is kept:
    its own trust rule (pairs preferring worse text matches keep the base) and the
    rails of :func:`bounded` are what hold a few pairs back, as before this scaling."""
    t = 1.0 if trust is None else min(max(float(trust), 0.0), 1.0)
    b = np.asarray(base, dtype=np.float64)
    return b + t * (np.asarray(target, dtype=np.float64) - b)


def bounded(target: np.ndarray, base: np.ndarray, previous: np.ndarray | None = None,
            max_shift: float | None = None, max_step: float | None = None) -> np.ndarray:
    """The guard rails: pull ``target`` back toward ``base`` and ``previous``.

        w = base + min(1, max_shift / |target - base|_1) * (target - base)
        w = prev + min(1, max_step  / |w - prev|_1)      * (w - prev)

    Both are convex combinations of weight vectors (>= 0, sum 1), so the result
    is one too; it lies within ``max_shift`` of the base and ``max_step`` of the
    weights in force, however many events pushed it. The bounds default to
    MAX_SHIFT and MAX_STEP. First, the target's text weight (semantic + vector) is
    raised to MIN_TEXT_SHARE of the base's when it is below, the same way (a convex
    step back toward the base)::

        w = base + t * (target - base),  t = (text(base) - floor) / (text(base) - text(target))

    Every later step is a convex combination of points at or above the floor, so
    the result keeps it: the priors' strength ``beta`` stays bounded and text
    relevance keeps deciding what is relevant at all.
    """
    max_shift = MAX_SHIFT if max_shift is None else max_shift
    max_step = MAX_STEP if max_step is None else max_step
    b = np.asarray(base, dtype=np.float64)
    w = np.asarray(target, dtype=np.float64)
    b_text, w_text = float(b[_SEM] + b[_VEC]), float(w[_SEM] + w[_VEC])
    floor = MIN_TEXT_SHARE * b_text
    if w_text < floor:
        w = b + ((b_text - floor) / (b_text - w_text)) * (w - b)
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
