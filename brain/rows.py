"""Output rows of one query: scan / full rows for entries and memories (shapes.py)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tiervault.brain.pool import Pool
from tiervault.brain.matrix import SignalMatrix
from tiervault.brain.weights import WeightSet
from tiervault.errors import TierVaultError

__all__ = ["EntryRows", "MemoryRows"]


def _r(x: float) -> float:
    return round(float(x), 6)


class EntryRows:
    """Builds output rows for pool candidates (shared state of one query)."""

    def __init__(self, pool: Pool, signals: SignalMatrix, relevance: np.ndarray,
                 prior: np.ndarray, tier_factor: np.ndarray, nudge: np.ndarray,
                 score: np.ndarray, weights: WeightSet, contradicts: dict[str, set[str]],
                 explain: bool, mmr: dict[int, float] | None = None,
                 lsa: np.ndarray | None = None) -> None:
        self.pool, self.signals, self.relevance, self.prior = pool, signals, relevance, prior
        self.lsa = lsa  # brain/latent.py on the per-query scale (None: off)
        self.tier_factor, self.nudge, self.score = tier_factor, nudge, score
        self.weights, self.contradicts, self.explain = weights, contradicts, explain
        self.mmr = mmr  # pool index -> MMR score (``diverse`` only)

    def _explain(self, i: int) -> dict[str, Any]:
        p = self.pool
        return {"lexical": _r(p.lexical[i]), "tfidf": _r(p.tfidf[i]),
                "lsa": _r(self.lsa[i]) if self.lsa is not None else 0.0,
                "tierWeight": _r(p.tier_weight[i]), "relevance": _r(self.relevance[i]),
                "prior": _r(self.prior[i]), "tierFactor": _r(self.tier_factor[i]),
                "feedback": _r(self.nudge[i]), "weights": self.weights.as_dict(),
                "weightSet": self.weights.name, "via": p.via[i], "alsoIn": list(p.also_in[i]),
                "contradicts": sorted(self.contradicts.get(p.ids[i], ()))}

    def scan_row(self, i: int) -> dict[str, Any]:
        row = self.pool.rows[i]
        out = {"id": row.id, "title": row.title, "score": _r(self.score[i]),
               "type": row.type, "domain": row.domain,
               "severity": row.severity, "tags": (row.tags or "").split(),
               "snippet": row.snippet or "",
               "tokenEstimate": int(math.ceil((row.chars or 0) / 4)),
               "tier": self.pool.tiers[i]}
        if self.mmr is not None:
            out["mmr"] = _r(self.mmr[i])
        if self.explain:
            out["explain"] = self._explain(i)
        return out

    def breakdown(self, i: int) -> dict[str, float]:
        out = {k: _r(v) for k, v in self.signals.row(i)}
        out["total"] = _r(self.score[i])
        return out

    def full_row(self, i: int, entries: dict[str, Any]) -> dict[str, Any]:
        tier, eid = self.pool.tiers[i], self.pool.ids[i]
        entry = entries.get(f"{tier}\0{eid}")
        if entry is None:  # deleted since the search: say so rather than drop silently
            raise TierVaultError(f"entry {eid!r} in tier {tier!r} was deleted during the search; retry")
        out = {"entry": entry.to_dict(), "score": _r(self.score[i]), "breakdown": self.breakdown(i),
               "tier": tier}
        if self.mmr is not None:
            out["mmr"] = _r(self.mmr[i])
        if self.explain:
            out["explain"] = self._explain(i)
        return out


class MemoryRows:
    """Builds output rows for memory hits, in the same shapes as entries."""

    def __init__(self, ms: Any, relevance: np.ndarray, prior: np.ndarray, tier_w: np.ndarray,
                 tier_factor: np.ndarray, score: np.ndarray, weights: WeightSet,
                 explain: bool, lsa: np.ndarray | None = None) -> None:
        self.lsa = lsa if lsa is not None and len(lsa) else None
        self.ms, self.relevance, self.prior, self.tier_factor = ms, relevance, prior, tier_factor
        self.tier_w, self.score, self.weights, self.explain = tier_w, score, weights, explain

    def _explain(self, i: int) -> dict[str, Any]:
        return {"lexical": _r(self.ms.lexical[i]), "tfidf": _r(self.ms.tfidf[i]),
                "lsa": _r(self.lsa[i]) if self.lsa is not None else 0.0,
                "tierWeight": _r(self.tier_w[i]), "relevance": _r(self.relevance[i]),
                "prior": _r(self.prior[i]), "tierFactor": _r(self.tier_factor[i]),
                "feedback": 0.0, "weights": self.weights.as_dict(),
                "weightSet": self.weights.name, "via": "memory", "alsoIn": [],
                "contradicts": []}

    def scan_row(self, i: int) -> dict[str, Any]:
        hit, tier = self.ms.hits[i]
        title = hit.summary.strip().splitlines()[0][:120] if hit.summary.strip() else hit.id
        out = {"id": hit.id, "title": title, "score": _r(self.score[i]), "type": "memory",
               "domain": hit.project or "", "severity": "", "tags": hit.topics.split(),
               "snippet": hit.summary[:120],
               "tokenEstimate": int(math.ceil((len(hit.summary) + len(hit.context)) / 4)),
               "tier": tier}
        if self.explain:
            out["explain"] = self._explain(i)
        return out

    def full_row(self, i: int, entries: dict[str, Any]) -> dict[str, Any]:
        from tiervault.vault.entry import format_timestamp

        hit, tier = self.ms.hits[i]
        breakdown = {k: _r(v) for k, v in self.ms.signals.row(i)}
        breakdown["total"] = _r(self.score[i])
        out = {"entry": {"id": hit.id, "type": "memory", "summary": hit.summary,
                         "context": hit.context, "topics": hit.topics.split(),
                         "project": hit.project, "created_at": format_timestamp(hit.created_at)},
               "score": _r(self.score[i]), "breakdown": breakdown, "tier": tier}
        if self.explain:
            out["explain"] = self._explain(i)
        return out
