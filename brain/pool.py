"""The candidate pool of one query: federated search hits plus graph / vector additions.

Parallel per-candidate lists, filled cheaply: scoring fields come from
``TierStore.light_rows`` (no full entries), lexical evidence from the query's
:class:`~tiervault.vault.manager.LexicalQuery` (which scores ANY entry of a
searched tier, so neighbours pulled in later get the same lexical signals).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from tiervault.vault.filters import Filters

__all__ = ["Pool", "passes_filters", "LIGHT"]

# Positions in TierStore.light_rows rows.
LIGHT = {name: i for i, name in enumerate(
    ("id", "type", "domain", "severity", "title", "snippet", "tags", "created_at", "updated_at",
     "valid_from", "valid_until", "content_hash", "chars"))}


def passes_filters(filters: Filters, row: Sequence[Any]) -> bool:
    """The same rules as ``Filters`` applied in SQL / by mask, on one light row."""
    if filters.types and row[LIGHT["type"]] not in filters.types:
        return False
    if filters.domains and row[LIGHT["domain"]] not in filters.domains:
        return False
    if filters.severities and row[LIGHT["severity"]] not in filters.severities:
        return False
    if filters.tags and not set(filters.tags) & set((row[LIGHT["tags"]] or "").split()):
        return False
    now = filters.moment
    until, start = row[LIGHT["valid_until"]], row[LIGHT["valid_from"]]
    if not filters.include_expired and until is not None and until <= now:
        return False
    if not filters.include_future and start is not None and start > now:
        return False
    return True


@dataclass(slots=True)
class Pool:
    """Candidates as parallel lists (index i is one candidate)."""

    ids: list[str] = field(default_factory=list)
    tiers: list[str] = field(default_factory=list)
    via: list[str] = field(default_factory=list)
    also_in: list[tuple[str, ...]] = field(default_factory=list)
    lexical: list[float] = field(default_factory=list)
    tfidf: list[float] = field(default_factory=list)
    tier_weight: list[float] = field(default_factory=list)
    rows: list[tuple] = field(default_factory=list)
    _index: dict[str, int] = field(default_factory=dict)
    _hashes: set[str] = field(default_factory=set)

    def __len__(self) -> int:
        return len(self.ids)

    def __contains__(self, entry_id: str) -> bool:
        return entry_id in self._index

    @classmethod
    def from_candidates(cls, manager, cands) -> "Pool":
        """The manager's candidates with their light rows (one query per tier)."""
        pool = cls()
        by_tier: dict[str, list[str]] = {}
        for eid, tier in zip(cands.ids, cands.tiers):
            by_tier.setdefault(tier, []).append(eid)
        light = {t: manager.store(t).light_rows(ids) for t, ids in by_tier.items()}
        for i, (eid, tier) in enumerate(zip(cands.ids, cands.tiers)):
            row = light[tier].get(eid)
            if row is None:
                continue  # deleted between the search and this read
            pool._append(eid, tier, "search", cands.also_in[i], float(cands.lexical[i]),
                         float(cands.tfidf[i]), float(cands.tier_weight[i]), row)
        return pool

    def _append(self, eid: str, tier: str, via: str, also_in: tuple[str, ...], lexical: float,
                tfidf: float, weight: float, row: tuple) -> None:
        self._index[eid] = len(self.ids)
        self._hashes.add(row[LIGHT["content_hash"]])
        self.ids.append(eid)
        self.tiers.append(tier)
        self.via.append(via)
        self.also_in.append(also_in)
        self.lexical.append(lexical)
        self.tfidf.append(tfidf)
        self.tier_weight.append(weight)
        self.rows.append(row)

    def add_external(self, manager, ids: Sequence[str], via: str, lq, filters: Filters,
                     tiers: Sequence[str] | None, limit: int) -> int:
        """Pull entries found another way (graph neighbours, vector hits) into the pool.

        Each comes from the highest-priority searched tier holding it, must pass
        the filters, and is skipped when the pool already holds it (by id or by
        content hash). Lexical evidence comes from ``lq``. Returns how many joined.
        """
        wanted = [i for i in dict.fromkeys(ids) if i not in self._index]
        added = 0
        found: dict[str, tuple[str, float, tuple]] = {}
        for tier in manager.ordered(tiers):
            missing = [i for i in wanted if i not in found]
            if not missing:
                break
            for eid, row in tier.store.light_rows(missing).items():
                found[eid] = (tier.name, tier.weight, row)
        for eid in wanted:
            if added >= limit:
                break
            hit = found.get(eid)
            if hit is None:
                continue
            tier, weight, row = hit
            if row[LIGHT["content_hash"]] in self._hashes or not passes_filters(filters, row):
                continue
            lexical, tfidf = lq.scores(tier, eid)
            self._append(eid, tier, via, (), lexical, tfidf, weight, row)
            added += 1
        return added

    # -- column views ---------------------------------------------------------------
    def column(self, name: str) -> list[Any]:
        k = LIGHT[name]
        return [r[k] for r in self.rows]

    def times(self, name: str) -> np.ndarray:
        k = LIGHT[name]
        return np.array([np.nan if r[k] is None else r[k] for r in self.rows], dtype=np.float64)

    def tag_lists(self) -> list[list[str]]:
        k = LIGHT["tags"]
        return [(r[k] or "").split() for r in self.rows]
