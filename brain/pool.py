"""The candidate pool of one query: federated search hits plus graph / vector additions.

Parallel per-candidate lists, filled cheaply: scoring fields come from the
backends' ``light_rows`` (:class:`~tiervault.vault.rows.LightRow`, no full
entries), lexical evidence from the query's
:class:`~tiervault.vault.manager.LexicalQuery` (``VaultManager.lexical_scores``
scores ANY entry of a searched tier, so neighbours pulled in later get the same
lexical signals).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from tiervault.vault.filter_compile import matches
from tiervault.vault.filters import Filters
from tiervault.vault.rows import LIGHT_FIELDS, LightRow

__all__ = ["Pool", "passes_filters"]

_FIELD_AT = {name: i for i, name in enumerate(LIGHT_FIELDS)}


def passes_filters(filters: Filters, row: LightRow) -> bool:
    """The rules ``Filters`` applies in SQL / by mask, on one light row
    (:func:`~tiervault.vault.filter_compile.matches`)."""
    return matches(filters, row)


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
    rows: list[LightRow] = field(default_factory=list)
    _index: dict[str, int] = field(default_factory=dict)
    _hashes: set[str] = field(default_factory=set)
    _columns: tuple[tuple[Any, ...], ...] = ()  # the rows transposed, for _columns_n rows
    _columns_n: int = -1

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
        # the arrays as Python floats at once (tolist: the same values as float(a[i]))
        lexical, tfidf = cands.lexical.tolist(), cands.tfidf.tolist()
        weight = cands.tier_weight.tolist()
        for i, (eid, tier) in enumerate(zip(cands.ids, cands.tiers)):
            row = light[tier].get(eid)
            if row is None:
                continue  # deleted between the search and this read
            pool._append(eid, tier, "search", cands.also_in[i], lexical[i], tfidf[i], weight[i],
                         row)
        return pool

    def _append(self, eid: str, tier: str, via: str, also_in: tuple[str, ...], lexical: float,
                tfidf: float, weight: float, row: LightRow) -> None:
        self._index[eid] = len(self.ids)
        self._hashes.add(row.content_hash)
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
        found: dict[str, tuple[str, float, LightRow]] = {}
        for tier in manager.ordered(tiers):
            missing = [i for i in wanted if i not in found]
            if not missing:
                break
            for eid, row in tier.store.light_rows(missing).items():
                found[eid] = (tier.name, tier.weight, row)
        joining: list[tuple[str, str, float, LightRow]] = []
        hashes = set(self._hashes)
        for eid in wanted:
            if len(joining) >= limit:
                break
            hit = found.get(eid)
            if hit is None:
                continue
            tier, weight, row = hit
            if row.content_hash in hashes or not passes_filters(filters, row):
                continue
            hashes.add(row.content_hash)
            joining.append((eid, tier, weight, row))
        scores: dict[str, dict[str, tuple[float, float]]] = {}
        for tier in dict.fromkeys(t for _, t, _, _ in joining):
            scores[tier] = manager.lexical_scores(lq, tier, [e for e, t, _, _ in joining if t == tier])
        for eid, tier, weight, row in joining:
            lexical, tfidf = scores[tier].get(eid, (0.0, 0.0))
            self._append(eid, tier, via, (), lexical, tfidf, weight, row)
        return len(joining)

    # -- column views ---------------------------------------------------------------
    def _values(self, name: str) -> tuple[Any, ...]:
        """One field of every row. The rows are transposed once per pool size (one C-level
        ``zip``): the score stage reads seven fields, modulations two more."""
        at = _FIELD_AT.get(name)
        if at is None:
            raise KeyError(f"{name!r} is not a LightRow field ({', '.join(LIGHT_FIELDS)})")
        if self._columns_n != len(self.rows):
            self._columns = tuple(zip(*self.rows)) if self.rows else ((),) * len(LIGHT_FIELDS)
            self._columns_n = len(self.rows)
        return self._columns[at]

    def column(self, name: str) -> list[Any]:
        return list(self._values(name))

    def times(self, name: str) -> np.ndarray:
        """A timestamp field as float64, NaN where it is None (NumPy's float conversion
        of None is NaN: the same array as mapping None to NaN first)."""
        return np.array(self._values(name), dtype=np.float64)

    def tag_lists(self) -> list[list[str]]:
        return [(t or "").split() for t in self._values("tags")]
