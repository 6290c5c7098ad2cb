"""Adaptation: which feedback teaches the Brain, the weights in force, and their history.

``brain.adaptation`` chooses the rule:

- ``seed`` — the reference design's rule (:func:`tiervault.brain.weights.adapt`):
  after 30 non-failed actions the semantic weight moves with the accept rate.
  O(1) from the tier's counters; kept as the documented baseline.
- ``learned`` (default) — pairwise weights fitted to the feedback
  (:mod:`tiervault.brain.learning`): refitted after every ``brain.refitEvery``
  (10) actions once ``brain.feedbackThreshold`` (30) are stored, from the newest
  :data:`MAX_EVENTS` actions (bounded time and memory); each refit is appended to
  the tier's ``weight_history`` and the weights in force are its last row.

Measured on the starter-pack agent set (``eval/feedback_sim.py``, see
docs/feedback.md): after 200 judged actions ``learned`` raises held-out queries by
+0.009 nDCG@10 FTS-only (+0.020 hybrid), ``seed`` by -0.002 (-0.014), so ``learned``
is the default; the figures are in ``eval/results/feedback_sim.json``. The fitted step
is scaled by the agent's trust (:func:`~tiervault.brain.learning.trusted`).

``brain.feedbackPool`` chooses whose feedback: ``agent`` (default) learns from
this agent's tier only; ``team`` also records every action in the team tier
(with the agent's id) and learns from everything the team's agents recorded
there, each agent capped at :data:`~tiervault.brain.learning.MAX_PAIRS_PER_AGENT`
pairs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from tiervault.brain import learning
from tiervault.brain.shapes import SIGNALS
from tiervault.brain.weights import WeightSet, accept_rate, adapt
from tiervault.errors import ConfigError
from tiervault.vault.rows import FeedbackEvent

__all__ = ["Adaptation", "WeightHistoryRow", "MAX_EVENTS", "context_from_rows"]

#: A refit reads at most this many newest feedback actions.
MAX_EVENTS = 2_000
_SEM, _VEC = SIGNALS.index("semantic"), SIGNALS.index("vector")


@dataclass(frozen=True, slots=True)
class WeightHistoryRow:
    """One refit as shown by ``stats``: when, the rule, on how much feedback, the weights."""

    at: float
    adaptation: str
    events: int
    pairs: int
    weights: dict[str, dict[str, float]]  # weight set name -> signal -> weight
    bases: dict[str, dict[str, float]]    # the base each set was fitted against

    def as_dict(self) -> dict[str, Any]:
        return {"at": self.at, "adaptation": self.adaptation, "events": self.events,
                "pairs": self.pairs, "weights": self.weights}


def context_from_rows(rows: Sequence[Mapping[str, Any]], entry_id: str) -> learning.FeedbackContext:
    """The feedback context from a query's full rows (``search_intelligent(mode="full")``):
    the entry's breakdown as its signal values (None when it is not in the rows) and
    the query's relevance profile from every row's semantic + vector signals."""
    ids, rel, signals = [], [], None
    for row in rows:
        b = row.get("breakdown") or {}
        eid = row["entry"]["id"]
        ids.append(eid)
        rel.append(float(b.get("semantic", 0.0)) + float(b.get("vector", 0.0)))
        if eid == entry_id and signals is None and row["entry"].get("type") != "memory":
            signals = tuple(float(b.get(k, 0.0)) for k in SIGNALS)
    return learning.FeedbackContext(signals, learning.query_profile(ids, np.asarray(rel)))


class Adaptation:
    """Feedback storage choices and the weights they give, for one Brain."""

    def __init__(self, manager: Any, config: Any, agent_id: str) -> None:
        self.manager = manager
        self.config = config
        self.agent_id = agent_id
        # (feedback counts, last weight record) read together: the weights in force only
        # change with a refit, and a refit only follows new feedback, so while the counts
        # stay the same the last record does too (see _in_force).
        self._cache: tuple[tuple[int, ...], WeightHistoryRow | None] | None = None
        self._trust: tuple[tuple[int, ...], float | None] | None = None  # (counts, nudge trust)
        if config.feedback_pool == "team" and "team" not in manager.tiers:
            raise ConfigError("brain.feedbackPool: team needs a team tier; add tiers.team or use "
                              "feedbackPool: agent", key="brain.feedbackPool")

    # -- where feedback lives -----------------------------------------------------------------
    @property
    def record_tiers(self) -> tuple[str, ...]:
        """Tiers each action is written to: the agent's own, and the team's when pooling."""
        return ("agent", "team") if self.config.feedback_pool == "team" else ("agent",)

    def store(self) -> Any | None:
        """The tier store the Brain learns from (team when pooling, else agent)."""
        name = "team" if self.config.feedback_pool == "team" else "agent"
        tier = self.manager.tiers.get(name)
        return tier.store if tier is not None else None

    def counts(self) -> dict[str, int]:
        store = self.store()
        if store is None:
            return {"accepted": 0, "modified": 0, "dismissed": 0, "failed": 0}
        return store.feedback_counts()

    def nudge_events(self, entry_ids: Sequence[str], limit: int) -> list[FeedbackEvent]:
        store = self.store()
        return store.feedback_events_for(entry_ids, limit) if store is not None and entry_ids else []

    def nudge_trust(self, base: np.ndarray) -> float | None:
        """How far the same-query nudge is trusted (:func:`~tiervault.brain.learning.nudge_trust`
        over the pairs of the newest :data:`MAX_EVENTS` actions, text relevance by
        ``base``; None with no pairs to check); recomputed only when the feedback counts
        moved."""
        counts = self.counts()
        key = tuple(int(counts.get(k, 0)) for k in ("accepted", "modified", "dismissed", "failed"))
        if self._trust is not None and self._trust[0] == key:
            return self._trust[1]
        store = self.store()
        trust = None
        if store is not None and any(key):
            trust = learning.nudge_trust(learning.pairs_from_events(store.feedback_events(MAX_EVENTS)),
                                         base)
        self._trust = (key, trust)
        return trust

    # -- weights in force ---------------------------------------------------------------------
    def _last(self) -> WeightHistoryRow | None:
        store = self.store()
        rows = store.weight_history(1) if store is not None else []
        return _parse(rows[0]) if rows else None

    def _refit_due(self, total: int, last: WeightHistoryRow | None) -> bool:
        """True when ``total`` non-failed actions call for a refit that ``last`` is not."""
        if total < self.config.feedback_threshold:
            return False
        return last is None or last.adaptation != self.config.adaptation \
            or total - last.events >= self.config.refit_every

    def _in_force(self) -> tuple[dict[str, int], WeightHistoryRow | None]:
        """(counts, last weight record): one read of the counters per search; the weight
        history is read again only when the counts moved (the feedback generation).

        Not cached while a refit is due for these counts: another process may have
        stored the feedback and not yet its refit, and the record it is about to
        append must not be missed until the next action."""
        counts = self.counts()
        key = tuple(int(counts.get(k, 0)) for k in ("accepted", "modified", "dismissed", "failed"))
        if self._cache is not None and self._cache[0] == key:
            return counts, self._cache[1]
        last = self._last()
        _, total = accept_rate(counts)
        self._cache = None if self._refit_due(total, last) else (key, last)
        return counts, last

    def weights(self, base: np.ndarray, name: str) -> WeightSet:
        """The weights in force for the weight set ``name`` ("fts" | "hybrid") over ``base``."""
        counts, last = self._in_force()
        if self.config.adaptation == "seed":
            values, rate, adapted = adapt(base, counts, self.config.feedback_threshold)
            return WeightSet(tuple(float(v) for v in values), name, adapted, rate)
        rate, _ = accept_rate(counts)
        if last is None or last.adaptation != "learned" or name not in last.weights:
            return WeightSet(tuple(float(v) for v in base), name, False, rate)
        values = _rebase(last, name, base)
        return WeightSet(tuple(float(v) for v in values), name, True, rate)

    # -- refits -------------------------------------------------------------------------------
    def after_feedback(self, bases: Mapping[str, np.ndarray]) -> None:
        """Refit when ``refitEvery`` actions arrived since the last refit (and at least
        ``feedbackThreshold`` are stored); ``bases`` maps weight set name -> base."""
        store = self.store()
        if store is None:
            return
        _, total = accept_rate(self.counts())
        last = self._last()
        if self._refit_due(total, last):
            self.refit(bases, total, last)

    def refit(self, bases: Mapping[str, np.ndarray], total: int,
              last: WeightHistoryRow | None) -> WeightHistoryRow:
        """Fit (``learned``) or apply the seed's rule (``seed``) and append the result
        to ``weight_history``."""
        store = self.store()
        assert store is not None
        out: dict[str, dict[str, Any]] = {}
        n_pairs = 0
        if self.config.adaptation == "learned":
            pairs = learning.pairs_from_events(store.feedback_events(MAX_EVENTS))
            n_pairs = len(pairs)
            # the trust in the verdicts, text relevance by the hybrid base's split (as
            # Brain.nudge_trust): the weights move only as far as it allows
            trust = learning.nudge_trust(pairs, bases.get("hybrid", next(iter(bases.values()))))
            for name, base in bases.items():
                target = learning.fit_pairwise(pairs, base, learning.DEFAULT_C,
                                               self.config.prior_strength)
                if learning.WEIGHTS_FOLLOW_TRUST:
                    target = learning.trusted(target, base, trust)
                prev = base  # the first refit steps from the base, like every later one
                if last is not None and last.adaptation == "learned" and name in last.weights:
                    prev = _rebase(last, name, base)
                w = learning.bounded(target, base, prev)
                out[name] = _pack(w, base)
        else:
            for name, base in bases.items():
                w, _, _ = adapt(base, self.counts(), self.config.feedback_threshold)
                out[name] = _pack(w, base)
        payload = json.dumps({"adaptation": self.config.adaptation, "sets": out})
        store.add_weight_record(total, n_pairs, payload)
        self._cache = None
        return self._last()  # type: ignore[return-value]

    def history(self, limit: int = 20) -> list[WeightHistoryRow]:
        store = self.store()
        return [r for r in (_parse(x) for x in store.weight_history(limit))] if store is not None else []


def _pack(weights: np.ndarray, base: np.ndarray) -> dict[str, Any]:
    return {"weights": dict(zip(SIGNALS, (round(float(v), 6) for v in weights))),
            "base": dict(zip(SIGNALS, (round(float(v), 6) for v in base)))}


def _parse(record: Any) -> WeightHistoryRow:
    data = json.loads(record.weights)
    sets = data.get("sets", {})
    return WeightHistoryRow(record.created_at, data.get("adaptation", "learned"), record.events,
                            record.pairs, {n: s["weights"] for n, s in sets.items()},
                            {n: s["base"] for n, s in sets.items()})


def _rebase(row: WeightHistoryRow, name: str, base: np.ndarray) -> np.ndarray:
    """Learned weights moved onto the current base: w = clip(base + (learned - base_then), 0),
    normalised — so changing ``brain.weights`` after learning keeps what was learned as a
    deviation, and a signal the current base sets to 0 stays 0."""
    learned = np.array([float(row.weights[name][k]) for k in SIGNALS])
    then = np.array([float(row.bases[name][k]) for k in SIGNALS])
    w = np.clip(base + (learned - then), 0.0, None)
    w[np.asarray(base) <= 0] = 0.0
    total = float(w.sum())
    return np.asarray(base, dtype=np.float64) if total <= 1e-12 else w / total
