"""The Brain: seven-signal rescoring of federated candidates, and the agent-facing calls.

Open one with ``Brain.open(settings)`` (a :class:`~tiervault.config.Settings`,
a path to an agent.yaml, or None for the default lookup), or wrap an existing
manager: ``Brain(manager, settings)``. Then:

- ``search_intelligent(query, mode="scan"|"full", ...)`` -> list of rows
  (:class:`~tiervault.brain.shapes.ScanRow` / :class:`~tiervault.brain.shapes.FullRow`);
- ``load_entries(ids)`` -> complete entries in the order asked (scan-then-full);
- ``feedback(query, entry_id, action)``; ``weights()``; ``stats()``.

Score of a candidate (all signals in [0, 1], weights summing to 1)::

    weightedSum = sum_k weights[k] * signal_k
    score       = tierWeight * weightedSum + feedbackNudge

The tier weight (agent 1.0, project 0.8, team 0.6 by default) multiplies the
whole sum, so of two otherwise-equal entries the higher-priority tier's always
wins, as the federation promises; lexical evidence enters through the
semantic signal (see :func:`tiervault.brain.signals.semantic`).

Measured on SciFact (test, 300 queries; ``python eval/beir.py``), nDCG@10 /
Recall@100 / MRR@10: FTS5 bm25 with the field weights 0.681 / 0.921 / 0.648
(unweighted FTS5 0.686); TF-IDF alone 0.598; ``search_intelligent`` FTS-only
0.691 / 0.921 / 0.659; hybrid with the ``local`` MiniLM embedder and the seed's
hybrid weights 0.744 / 0.962 / 0.709 (RRF of bm25 + dense: 0.718). Other
semantic/vector ratios tried (0.2/0.2, 0.2/0.3, 0.2/0.4, 0.3/0.3) ranked lower.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from tiervault.brain import signals
from tiervault.brain.adaptation import Adaptation, context_from_rows
from tiervault.brain.feedback import MAX_NUDGE_EVENTS, check_feedback, entry_nudges, record_feedback
from tiervault.brain.graph import graph_hops
from tiervault.brain.memories import memory_signals
from tiervault.brain.pool import Pool
from tiervault.brain.rows import EntryRows, MemoryRows
from tiervault.brain.shapes import SIGNALS, LoadedRow, StatsReport
from tiervault.brain.vectors import VectorSource
from tiervault.brain.learning import query_profile
from tiervault.brain.weights import WeightSet, base_weights
from tiervault.errors import EmbeddingError, EntryNotFound, QueryError
from tiervault.vault.filters import Filters
from tiervault.vault.query import hashtags
from tiervault.vault.scoring import top_k

__all__ = ["Brain", "MODES", "DEFAULT_LIMITS", "MAX_LIMIT", "SEEDS", "SMALL_CORPUS"]

log = logging.getLogger(__name__)

MODES = ("scan", "full")
FUSIONS = ("signals", "rrf")
DEFAULT_LIMITS = {"scan": 10, "full": 20}
MAX_LIMIT = 1_000
SEEDS = 5  # graph seeds: top candidates by pass-1 score with semantic > 0
SMALL_CORPUS = 50  # the small-corpus guard applies below this many FTS results
MAX_GRAPH_ADDITIONS = 50
STATS_HISTORY = 20  # refits shown by stats()
FEEDBACK_CONTEXT_DEPTH = 30  # feedback re-ranks its query this deep to record the signals
_SEM, _VEC, _GRAPH = (SIGNALS.index(k) for k in ("semantic", "vector", "graphProximity"))


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
        base_weights(False, self.config.weights)
        base_weights(True, self.config.weights)
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
        store = self._agent_store()
        if store is None:
            return {"accepted": 0, "modified": 0, "dismissed": 0, "failed": 0}
        return store.feedback_counts()

    def weights(self, hybrid: bool | None = None) -> WeightSet:
        """The weights in force: hybrid when vectors are available (or asked), adapted
        by feedback once the threshold is reached. Always sums to 1.0."""
        if hybrid is None:
            hybrid = self.vectors is not None
        base = base_weights(hybrid, self.config.weights)
        return self.adaptation.weights(base, "hybrid" if hybrid else "fts")

    # -- search ---------------------------------------------------------------------------
    def search_intelligent(
        self, query: str, *, mode: str = "scan", limit: int | None = None, domain: Any = None,
        type: Any = None, severity: Any = None, tags: Any = None,  # noqa: A002 - public names
        tiers: Sequence[str] | None = None, include_memories: bool = False, explain: bool = False,
        fusion: str = "signals",
    ) -> list[dict[str, Any]]:
        """Search every tier and rank by the seven signals; rows best first.

        ``mode="scan"`` gives light rows (no full entry is read), ``"full"`` complete
        entries with their score breakdown. ``domain``/``type``/``severity``/``tags``
        filter before the candidate limit (tags: any of them); ``tags`` and ``#tag``
        words in the query also feed the tag-overlap signal, ``domain`` the
        domain-match signal. ``limit`` defaults to 10 (scan) / 20 (full).

        ``fusion="rrf"`` orders by reciprocal-rank fusion (k=60, absent = rank 1000)
        of the lexical ranking (BM25 x tier weight) and the vector ranking instead
        of the weighted signals (for comparison on evaluation data); the score is
        then the RRF score and the breakdown still shows every signal.
        """
        if mode not in MODES:
            raise QueryError("mode", f"{mode!r} is not one of {', '.join(MODES)}")
        if fusion not in FUSIONS:
            raise QueryError("fusion", f"{fusion!r} is not one of {', '.join(FUSIONS)}")
        if limit is None:
            limit = DEFAULT_LIMITS[mode]
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise QueryError("limit", f"{limit!r} must be an integer from 1 to {MAX_LIMIT}")
        if not isinstance(query, str):
            raise QueryError("query", f"expected a string, got {type_name(query)}")
        if isinstance(tiers, str):
            tiers = [t.strip() for t in tiers.split(",") if t.strip()]
        filters = Filters.build(type=type, domain=domain, severity=severity, tags=tags)
        if not query.strip() and (filters.types or filters.domains or filters.severities
                                  or filters.tags):
            # Filters alone: the newest matching entries (an empty query without any
            # filter matches nothing, as before).
            from tiervault.brain.listing import filtered_rows

            return filtered_rows(self.manager, filters, mode=mode, limit=limit, tiers=tiers)
        query_tags = list(dict.fromkeys([*filters.tags, *hashtags(query)]))
        query_domain = filters.domains[0] if len(filters.domains) == 1 else None
        now = self.clock()

        qvec = self._query_vector(query)
        weights = self.weights(hybrid=qvec is not None)
        fetch = max(3 * limit, 30)
        cands = self.manager.search(query, filters=filters, limit=fetch, tiers=tiers)
        complete = len(cands) < fetch  # every matching entry is in the candidate set
        if not complete and fetch < SMALL_CORPUS and self.config.small_corpus_guard:
            total = self.manager.count_matches(cands.query, filters, SMALL_CORPUS)
            if total < SMALL_CORPUS:
                cands = self.manager.search(query, filters=filters, limit=max(total, 1), tiers=tiers)
                complete = True
        pool = Pool.from_candidates(self.manager, cands)
        n_fts = len(pool)
        if qvec is not None:
            hits = self.vectors.search(qvec, fetch, [t.name for t in self.manager.ordered(tiers)],
                                       filters)  # type: ignore[union-attr]
            pool.add_external(self.manager, [h[0] for h in hits], "vector", cands.query, filters,
                              tiers, fetch)

        values = self._signals(pool, qvec, query_tags, query_domain, now)
        weight_arr = weights.array
        tier_w = np.asarray(pool.tier_weight, dtype=np.float64)
        pass1 = tier_w * (values @ weight_arr)
        seed_idx = top_k(pass1, SEEDS, values[:, _SEM] > 0)
        graph = graph_hops(self.manager, [pool.ids[i] for i in seed_idx])
        if graph.hops:
            ordered = sorted(graph.hops, key=lambda e: graph.hops[e])
            added = pool.add_external(self.manager, ordered, "graph", cands.query, filters, tiers,
                                      MAX_GRAPH_ADDITIONS)
            if added:
                values = self._signals(pool, qvec, query_tags, query_domain, now)
                tier_w = np.asarray(pool.tier_weight, dtype=np.float64)
        hops = np.array([graph.hops.get(e, -1) for e in pool.ids], dtype=np.int64)
        values[:, _GRAPH] = signals.graph_proximity(hops)
        weighted = values @ weight_arr
        nudge = self._nudges(query, pool.ids, values, now)
        score = tier_w * weighted + nudge
        if fusion == "rrf":
            score = _rrf_scores(pool, values[:, _VEC] if qvec is not None else None, tier_w)

        rank_of = {t.name: r for r, t in enumerate(self.manager.ordered())}
        order = sorted(range(len(pool)), key=lambda i: (-score[i], rank_of.get(pool.tiers[i], 99), i))
        keep = limit
        if self.config.small_corpus_guard and complete and n_fts < SMALL_CORPUS and len(order) > 0 \
                and (len(order) - limit) / len(order) > 0.5:
            keep = len(order)  # the seed's guard: a small vault returns everything it found
        ctx = EntryRows(pool, values, weighted, nudge, score, weights, graph.contradicts, explain)
        rows = [(float(score[i]), ctx, i) for i in order[:keep]]
        if include_memories and not (filters.types or filters.severities or filters.domains):
            rows.extend(self._memory_rows(query, cands.query, query_tags, weights, now, limit,
                                          explain, filters))
            rows.sort(key=lambda r: -r[0])
            rows = rows[:keep]
        if mode == "scan":
            return [c.scan_row(i) for _, c, i in rows]
        entries = self._full_entries(pool, [i for _, c, i in rows if isinstance(c, EntryRows)])
        return [c.full_row(i, entries) for _, c, i in rows]

    def _query_vector(self, query: str) -> np.ndarray | None:
        if self.vectors is None:
            return None
        try:
            return self.vectors.embed_query(query)
        except EmbeddingError as exc:
            # This query falls back to the FTS-only weights (not hybrid with a zero term).
            log.warning("embedding the query failed (%s); ranking without vectors", exc)
            return None

    def _signals(self, pool: Pool, qvec: np.ndarray | None, query_tags: list[str],
                 query_domain: str | None, now: float) -> np.ndarray:
        n = len(pool)
        values = np.zeros((n, len(SIGNALS)), dtype=np.float64)
        values[:, _SEM] = signals.semantic(np.asarray(pool.tfidf), np.asarray(pool.lexical))
        if qvec is not None and n:
            cos = np.full(n, np.nan)
            by_tier: dict[str, list[int]] = {}
            for i, t in enumerate(pool.tiers):
                by_tier.setdefault(t, []).append(i)
            for t, idx in by_tier.items():
                cos[idx] = self.vectors.similarities(qvec, t, [pool.ids[i] for i in idx])  # type: ignore[union-attr]
            values[:, _VEC] = signals.vector(cos, n)
        values[:, 2] = signals.severity(pool.column("severity"))
        values[:, 3] = signals.temporal_decay(pool.times("updated_at"), pool.times("created_at"),
                                              pool.times("valid_from"), pool.times("valid_until"),
                                              now, self.config.half_life_days)
        values[:, 4] = signals.tag_overlap(query_tags, pool.tag_lists())
        values[:, 5] = signals.domain_match(query_domain, pool.column("domain"))
        return values

    def _nudges(self, query: str, ids: list[str], values: np.ndarray, now: float) -> np.ndarray:
        events = self.adaptation.nudge_events(ids, MAX_NUDGE_EVENTS)
        if not events:
            return np.zeros(len(ids))
        profile = query_profile(ids, values[:, _SEM] + values[:, _VEC])
        return entry_nudges(query, ids, events, profile, now)

    def _memory_rows(self, query: str, lq: Any, query_tags: list[str], weights: WeightSet,
                     now: float, limit: int, explain: bool, filters: Filters) -> list[tuple]:
        hits = self.manager.search_memories(query, limit)
        if filters.tags:
            hits = [h for h in hits if set(filters.tags) & set(h[0].topics.split())]
        if not hits:
            return []
        ms = memory_signals(hits, lq, manager=self.manager, now=now,
                            half_life_days=self.config.half_life_days,
                            query_tags=query_tags)
        tier_w = np.array([self.manager.tiers[t].weight for _, t in hits])
        weighted = ms.values @ weights.array
        score = tier_w * weighted
        ctx = MemoryRows(ms, weighted, score, tier_w, weights, explain)
        return [(float(score[i]), ctx, i) for i in range(len(hits)) if ms.content[i]]

    def _full_entries(self, pool: Pool, idx: list[int]) -> dict[str, Any]:
        by_tier: dict[str, list[str]] = {}
        for i in idx:
            by_tier.setdefault(pool.tiers[i], []).append(pool.ids[i])
        out: dict[str, Any] = {}
        for tier, ids in by_tier.items():
            for eid, entry in self.manager.store(tier).get_many(ids).items():
                out[f"{tier}\0{eid}"] = entry
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
                "feedback": self.feedback_counts(),
                "adaptation": self.config.adaptation, "feedbackPool": self.config.feedback_pool,
                "weightEvents": history[-1].events if ws.adapted and history else 0,
                "weightHistory": [h.as_dict() for h in history]}


def type_name(value: object) -> str:
    return type(value).__name__


def _rrf_scores(pool: Pool, cosines: np.ndarray | None, tier_w: np.ndarray) -> np.ndarray:
    """RRF of the lexical ranking and (when there are vectors) the vector ranking."""
    from tiervault.brain.fusion import rrf

    n = len(pool)
    lex = np.asarray(pool.lexical) * tier_w
    rankings = [[pool.ids[i] for i in sorted(range(n), key=lambda i: -lex[i]) if lex[i] > 0]]
    if cosines is not None:
        rankings.append([pool.ids[i] for i in sorted(range(n), key=lambda i: -cosines[i])
                         if cosines[i] > 0])
    fused = rrf(rankings)
    return np.array([fused.get(e, 0.0) for e in pool.ids], dtype=np.float64)
