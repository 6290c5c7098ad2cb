"""The Brain: seven-signal rescoring of federated candidates, and the agent-facing calls.

Open one with ``Brain.open(settings)`` (a :class:`~tiervault.config.Settings`,
a path to an agent.yaml, or None for the default lookup), or wrap an existing
manager: ``Brain(manager, settings)``. Then:

- ``search_intelligent(query, mode="scan"|"full", ...)`` -> list of rows
  (:class:`~tiervault.brain.shapes.ScanRow` / :class:`~tiervault.brain.shapes.FullRow`);
- ``load_entries(ids)`` -> complete entries in the order asked (scan-then-full);
- ``feedback(query, entry_id, action)``; ``weights()``; ``stats()``.

How a candidate is scored (:mod:`tiervault.brain.combine`; why: docs/search.md).
Text relevance decides *whether* an entry is relevant, the other signals the
order *among* relevant entries::

    R     = (w_sem * semantic + w_vec * vector) / (w_sem + w_vec)   per-query scale, [0, 1]
    P     = weighted mean of severity, temporalDecay, tagOverlap, domainMatch, graphProximity
    score = R * (1 + beta * P) * tierFactor * (1 + feedbackNudge)
    beta  = prior_strength * (1 - w_sem - w_vec) / (w_sem + w_vec)
    tierFactor = 1 - tier_strength * (1 - tierWeight)

``semantic`` = 0.2 * TF-IDF + 0.8 * BM25, each divided by the query's best
candidate (entries and memories together), so a 3-word and a 25-word question
put their best match at 1.0. A candidate without text or vector evidence (a
graph neighbour only) ranks below every direct match. The seed's additive form
``tierWeight * sum(w_k * signal_k)`` let severity, decay and graph (always on a
full scale) outrank the best text match of a long question (issue 10).

``search_intelligent`` runs the stages of :mod:`tiervault.brain.stages`
(gather -> expand -> score -> modulate -> rank -> render) over one
``ScoringContext``; policy numbers come from :class:`~tiervault.config.BrainConfig`.
Figures (agent dev set, SciFact): eval/README.md.
"""

from __future__ import annotations

import logging
import time
from itertools import compress
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from tiervault.brain.adaptation import Adaptation, context_from_rows
from tiervault.brain.feedback import MAX_NUDGE_EVENTS, check_feedback, entry_nudges, record_feedback
from tiervault.brain.learning import query_profile
from tiervault.brain.modulation_spec import Modulations
from tiervault.brain.pool import Pool
from tiervault.brain.shapes import LoadedRow, SearchResults, StatsReport
from tiervault.brain.stages import ScoringContext, run_stages
from tiervault.brain.vectors import VectorSource
from tiervault.brain.weights import WeightSet, base_weights
from tiervault.errors import EntryNotFound, QueryError
from tiervault.vault.filters import Filters
from tiervault.vault.query import hashtags
from tiervault.vault.read_scope import read_scope

__all__ = ["Brain", "MODES", "DEFAULT_LIMITS", "MAX_LIMIT"]

log = logging.getLogger(__name__)

MODES = ("scan", "full")
FUSIONS = ("signals", "rrf")
DEFAULT_LIMITS = {"scan": 10, "full": 20}
MAX_LIMIT = 1_000
STATS_HISTORY = 20  # refits shown by stats()
FEEDBACK_CONTEXT_DEPTH = 30  # feedback re-ranks its query this deep to record the signals


class Brain:
    """Rescoring and the search facade over a :class:`~tiervault.vault.manager.VaultManager`."""

    def __init__(self, manager: Any, settings: Any = None, *, vectors: VectorSource | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        from tiervault.config import BrainConfig

        self.manager = manager
        self.settings = settings
        self.config = getattr(settings, "brain", None) or BrainConfig()
        self.vectors = vectors
        self.clock = clock
        # Validate overrides now: a bad brain.weights block fails at open, not mid-search.
        self._bases = self._base_sets()
        self.adaptation = Adaptation(manager, self.config, getattr(settings, "agent_id", "default"))

    @classmethod
    def open(cls, settings: Any = None, *, vectors: VectorSource | None = None) -> "Brain":
        """A Brain over the tiers of ``settings`` (Settings, agent.yaml path, or None =
        ``$TIERVAULT_CONFIG`` / ./agent.yaml / defaults).

        With embeddings enabled in ``settings`` (and no ``vectors`` given), the
        embedding runtime is attached: captures are embedded on write and the
        vector signal and vector recall join the ranking. A provider that cannot
        start costs one warning on stderr and the Brain runs FTS-only.
        """
        from tiervault.config import Settings, load_settings
        from tiervault.vault.manager import VaultManager

        if not isinstance(settings, Settings):
            settings = load_settings(str(settings) if isinstance(settings, (str, Path)) else None)
        manager = VaultManager.from_settings(settings)
        if vectors is None and settings.embedding_enabled:
            from tiervault.embeddings.runtime import attach_embeddings

            vectors = attach_embeddings(manager, settings)
        return cls(manager, settings, vectors=vectors)

    def close(self) -> None:
        self.manager.close()

    def __enter__(self) -> "Brain":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- weights --------------------------------------------------------------------------
    def _agent_store(self) -> Any | None:
        tier = self.manager.tiers.get("agent")
        return tier.store if tier is not None else None

    def feedback_counts(self) -> dict[str, int]:
        """The feedback counts the weights rest on: this agent's tier, or with
        ``brain.feedbackPool: team`` the team tier's (every agent of the team), the
        same counts the adaptation's threshold and accept rate use."""
        return dict(self.adaptation.counts())

    def agent_feedback_counts(self) -> dict[str, int]:
        """This agent's own feedback counts (its agent tier), whatever the pool."""
        store = self._agent_store()
        if store is None:
            return {"accepted": 0, "modified": 0, "dismissed": 0, "failed": 0}
        return dict(store.feedback_counts())

    def weights(self, hybrid: bool | None = None) -> WeightSet:
        """The weights in force: hybrid when vectors are available (or asked), adapted
        by feedback once the threshold is reached. Always sums to 1.0."""
        if hybrid is None:
            hybrid = self.vectors is not None
        if self._bases[0] is not self.config:
            self._bases = self._base_sets()
        return self.adaptation.weights(self._bases[1][bool(hybrid)], "hybrid" if hybrid else "fts")

    def _base_sets(self) -> tuple[Any, dict[bool, np.ndarray]]:
        """(the config they come from, {hybrid: the base set}), read-only: made once, not
        per search (issue 16 session 13: ~20 us of NumPy calls a scan warm, ~0.1 ms
        in run.py's interleave, where they were the scan's first NumPy calls)."""
        bases = {}
        for hybrid in (False, True):
            bases[hybrid] = base_weights(hybrid, self.config.weights)
            bases[hybrid].flags.writeable = False
        return self.config, bases

    # -- search ---------------------------------------------------------------------------
    def search_intelligent(
        self, query: str, *, mode: str = "scan", limit: int | None = None, domain: Any = None,
        type: Any = None, severity: Any = None, tags: Any = None,  # noqa: A002 - public names
        tiers: Sequence[str] | None = None, include_memories: bool = False, explain: bool = False,
        fusion: str = "signals", modulate: Any = None, not_domain: Any = None,
        not_type: Any = None, not_tags: Any = None, exclude_ids: Any = None,
        updated_after: Any = None, updated_before: Any = None,
    ) -> SearchResults:
        """Search every tier and rank relevant entries; rows best first.

        ``mode="scan"`` gives light rows (no full entry is read), ``"full"`` complete
        entries with their score breakdown. ``domain``/``type``/``severity``/``tags``
        filter before the candidate limit (tags: any of them); ``tags`` and ``#tag``
        words in the query also feed the tag-overlap signal, ``domain`` the
        domain-match signal. Exclusions ``not_domain`` / ``not_type`` / ``not_tags``
        (none of them) / ``exclude_ids``, and ``updated_after`` (inclusive) /
        ``updated_before`` (exclusive; ISO 8601 or unix seconds) filter the same way
        (rules: :mod:`tiervault.vault.filters`). ``limit`` (default 10 scan / 20 full) is a hard
        ceiling; only the default scan limit may be widened by the small-corpus
        guard, and the result's ``widened`` attribute then says so.

        Returns a :class:`~tiervault.brain.shapes.SearchResults` (a list of rows
        with ``.limit``, ``.widened`` and ``.filters``: the filters in force, in the
        argument names and forms accepted here, dates as ISO 8601 UTC).

        ``fusion="rrf"`` orders by reciprocal-rank fusion (k=60, absent = rank 1000)
        of the lexical ranking (BM25 x tier weight) and the vector ranking instead
        of the signals (for comparison on evaluation data); the score is then the
        RRF score and the breakdown still shows every signal.

        ``modulate`` steers the ranking at query time: a token string
        (``"suppress:deprecated decay:30 diverse"``; grammar in
        :mod:`tiervault.brain.modulation_spec`) or a
        :class:`~tiervault.brain.modulation_spec.Modulations` value, e.g.
        ``Modulations.build(suppress=["deprecated"], decay_days=30)``. The query text
        is never rewritten.
        """
        if mode not in MODES:
            raise QueryError("mode", f"{mode!r} is not one of {', '.join(MODES)}")
        if fusion not in FUSIONS:
            raise QueryError("fusion", f"{fusion!r} is not one of {', '.join(FUSIONS)}")
        limit_given = limit is not None
        if limit is None:
            limit = DEFAULT_LIMITS[mode]
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise QueryError("limit", f"{limit!r} must be an integer from 1 to {MAX_LIMIT}")
        if not isinstance(query, str):
            raise QueryError("query", f"expected a string, got {type_name(query)}")
        if isinstance(tiers, str):
            tiers = [t.strip() for t in tiers.split(",") if t.strip()]
        # One instant for the whole query: every tier and every stage judges validity
        # at the same moment, and a tier may reuse one filter mask within the query.
        filters = Filters.build(type=type, domain=domain, severity=severity, tags=tags,
                                not_type=not_type, not_domain=not_domain, not_tags=not_tags,
                                exclude_ids=exclude_ids, updated_after=updated_after,
                                updated_before=updated_before, now=time.time())
        if not query.strip() and filters.restricts:
            # Filters alone: the newest matching entries (an empty query without any
            # filter matches nothing, as before).
            from tiervault.brain.listing import filtered_rows

            return SearchResults(filtered_rows(self.manager, filters, mode=mode, limit=limit,
                                               tiers=tiers), limit=limit,
                                 filters=filters.describe())
        mods = Modulations.build(modulate)
        ctx = ScoringContext(
            query=query, mode=mode, limit=limit, limit_given=limit_given, filters=filters,
            tiers=tiers, query_tags=list(dict.fromkeys([*filters.tags, *hashtags(query)])),
            query_domain=filters.domains[0] if len(filters.domains) == 1 else None,
            include_memories=include_memories, explain=explain, fusion=fusion,
            now=self.clock(), config=self.config, modulations=mods)
        with read_scope():  # every stage sees one generation of each tier (one catch-up)
            run_stages(self, ctx)
        return SearchResults(ctx.rows, limit=len(ctx.rows) if ctx.widened else limit,
                             widened=ctx.widened, filters=filters.describe())

    def nudges(self, query: str, ids: list[str], text_relevance: Any, now: float) -> Any:
        """Feedback nudge per candidate (:func:`~tiervault.brain.feedback.entry_nudges`),
        with the query profile taken from the candidates' text relevance."""
        events = self.adaptation.nudge_events(ids, MAX_NUDGE_EVENTS)
        if not events:
            return np.zeros(len(ids))
        profile = query_profile(ids, text_relevance)
        return entry_nudges(query, ids, events, profile, now, trust=self.nudge_trust())

    def nudge_trust(self) -> float | None:
        """The share of the same-query nudge the feedback in force is trusted with
        (:meth:`~tiervault.brain.adaptation.Adaptation.nudge_trust`, text relevance by the
        hybrid base's split: in FTS-only pairs the vector is 0, so it is the semantic signal)."""
        return self.adaptation.nudge_trust(base_weights(True, self.config.weights))

    def matching_count(self, lq: Any, filters: Filters, cap: int) -> int:
        """Entries matching the query and filters, counted exactly only up to ``cap``."""
        return self.manager.count_matches(lq, filters, cap)

    def full_entries(self, pool: Pool, idx: list[int]) -> dict[str, Any]:
        """Complete entries of pool candidates ``idx``, keyed ``tier\\0id``."""
        by_tier: dict[str, list[str]] = {}
        for i in idx:
            by_tier.setdefault(pool.tiers[i], []).append(pool.ids[i])
        out: dict[str, Any] = {}
        for tier, ids in by_tier.items():
            for eid, entry in self.manager.store(tier).get_many(ids).items():
                out[f"{tier}\0{eid}"] = entry
        return out

    def field_texts(self, pool: Pool, idx: list[int],
                    pairs: Sequence[tuple[str, str]] = ()) -> dict[str, Any]:
        """The FTS5 fields (``id``, ``title``, ``description``, ``context``, ``tags``) of
        pool candidates ``idx``, keyed ``tier\0id``: those the pool kept with their light
        rows (``Pool.keep_texts``), else a backend's optional ``field_texts`` (SQLite: five
        columns, no Entry built), else its full entries. With ``pairs`` (term proximity's),
        a row its tier proves to hold no pair's two stems (the optional ``may_hold_pairs``:
        vault/stem_presence.py) is left out: its proximity is 0 unread."""
        by_tier: dict[str, list[str]] = {}
        out: dict[str, Any] = {}
        kept = pool.texts
        for i in idx:
            tier, eid = pool.tiers[i], pool.ids[i]
            row = kept[tier].get(eid) if tier in kept else None
            if row is None:
                by_tier.setdefault(tier, []).append(eid)
            else:
                out[f"{tier}\0{eid}"] = row
        for tier, ids in by_tier.items():
            store = self.manager.store(tier)
            may = getattr(store, "may_hold_pairs", None) if pairs else None
            if may is not None:
                ids = list(compress(ids, may(ids, pairs)))
                if not ids:
                    continue
            read = getattr(store, "field_texts", None) or store.get_many
            for eid, row in read(ids).items():
                out[f"{tier}\0{eid}"] = row
        return out

    # -- second pass, feedback, stats ---------------------------------------------------
    def load_entries(self, ids: Sequence[str]) -> list[LoadedRow]:
        """Complete entries in the order asked, each from the highest-priority tier
        holding it, with its ``links`` (both directions, every tier); a memory id (from
        a search with memories) gives the memory; an unknown id gives
        ``{"id": ..., "found": False, "error": ...}``."""
        if isinstance(ids, str):
            ids = [ids]
        unique = list(dict.fromkeys(ids))
        found = self.manager.get_many(unique)
        memories = self.manager.get_memories([i for i in unique if i not in found])
        links = self.manager.links_of([i for i in unique if i in found])
        out: list[LoadedRow] = []
        for eid in ids:
            if eid in found:
                entry, tier = found[eid]
                out.append({"id": eid, "found": True, "entry": entry.to_dict(), "tier": tier,
                            "links": links[eid]})
            elif eid in memories:
                memory, tier = memories[eid]
                out.append({"id": eid, "found": True, "entry": memory.to_dict(), "tier": tier,
                            "links": []})
            else:
                out.append({"id": eid, "found": False, "error": str(EntryNotFound(eid))})
        return out

    def feedback(self, query: str, entry_id: str, action: str) -> dict[str, Any]:
        """Record feedback in the agent tier (and the team tier when pooling); returns
        the new counts and weights.

        The signal values the learner needs are recomputed here by ranking ``query``
        again (:data:`FEEDBACK_CONTEXT_DEPTH` rows): the CLI's search and feedback
        are separate processes, so nothing of the search survives to this call, and
        the vault as it is now is what the agent judged."""
        check_feedback(self.manager, query, entry_id, action)
        context = context_from_rows(
            self.search_intelligent(query, mode="full", limit=FEEDBACK_CONTEXT_DEPTH), entry_id)
        tier = record_feedback(self.manager, query, entry_id, action, context=context,
                               agent=self.adaptation.agent_id, tiers=self.adaptation.record_tiers)
        self.adaptation.after_feedback({"fts": base_weights(False, self.config.weights),
                                        "hybrid": base_weights(True, self.config.weights)})
        ws = self.weights()
        return {"entryId": entry_id, "action": action, "tier": tier, "recordedIn": "agent",
                "feedback": self.feedback_counts(), "weights": ws.as_dict(), "adapted": ws.adapted}

    def stats(self) -> StatsReport:
        """Entries per tier, the vocabulary (domains, types, severities and the most used
        tags, with counts), the weights in force (how adapted, on how many feedback
        events, and their recent history), and the feedback counts."""
        ws = self.weights()
        history = self.adaptation.history(STATS_HISTORY)
        return {"tiers": self.manager.stats(), "vocabulary": self.manager.vocabulary(),
                "weights": ws.as_dict(), "weightSet": ws.name, "adapted": ws.adapted,
                "feedback": self.feedback_counts(), "agentFeedback": self.agent_feedback_counts(),
                "adaptation": self.config.adaptation, "feedbackPool": self.config.feedback_pool,
                "weightEvents": history[-1].events if ws.adapted and history else 0,
                "nudgeTrust": _rounded(self.nudge_trust()),
                "weightHistory": [h.as_dict() for h in history]}


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def type_name(value: object) -> str:
    return type(value).__name__

