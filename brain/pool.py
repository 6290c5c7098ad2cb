"""The candidate pool of one query: federated search hits plus graph / vector additions.

Parallel per-candidate lists, filled cheaply: scoring fields come from the
backends' ``light_rows`` (:class:`~tiervault.vault.rows.LightRow`, no full
entries), lexical evidence from the query's
:class:`~tiervault.vault.manager.LexicalQuery` (``VaultManager.lexical_scores``
scores ANY entry of a searched tier, so neighbours pulled in later get the same
lexical signals).

A pool may be built *pending* (``from_candidates(..., read=False)``): the candidates'
evidence is known, their light rows are read later by :meth:`Pool.read_rows`, in the
same statement per tier as the rows of the entries about to join (graph neighbours,
vector hits), which the next :meth:`Pool.add_external` then takes from there: one
light-row statement a tier instead of one for the candidates plus one per tier asked
for the others (issue 16, session 12).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from tiervault.errors import TierVaultError
from tiervault.vault.filter_compile import matches, row_test
from tiervault.vault.filters import Filters
from tiervault.vault.rows import LIGHT_FIELDS, FieldTexts, LightRow

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
    _pending: bool = False  # the candidates' rows not read yet (read_rows)
    # ids looked up by read_rows beside the candidates (every searched tier, in priority
    # order) and the first row found of each: for the next add_external only
    _asked: set[str] = field(default_factory=set)
    _prefetched: dict[str, tuple[str, float, LightRow]] = field(default_factory=dict)
    # with keep_texts, the FieldTexts by tier and id of the rows read by SQL, from the light
    # rows' own statements where the backend can (``light_rows_texts``; issue 16 session 18):
    # term proximity does not read them again (Brain.field_texts). Rows a mirror's light
    # records answer come without (session 21: proximity reads only those its tier cannot
    # prove to hold no pair, ``may_hold_pairs``)
    keep_texts: bool = False
    texts: dict[str, dict[str, FieldTexts]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.ids)

    def __contains__(self, entry_id: str) -> bool:
        return entry_id in self._index

    @property
    def pending(self) -> bool:
        """True while the candidates' light rows are not read (``rows`` is empty)."""
        return self._pending

    @classmethod
    def from_candidates(cls, manager, cands, *, read: bool = True) -> "Pool":
        """The manager's candidates with their light rows (one query per tier); with
        ``read=False`` pending: :meth:`read_rows` reads them later."""
        pool = cls()
        pool.ids, pool.tiers = list(cands.ids), list(cands.tiers)
        pool.via = ["search"] * len(pool.ids)
        pool.also_in = list(cands.also_in)
        # the arrays as Python floats at once (tolist: the same values as float(a[i]))
        pool.lexical, pool.tfidf = cands.lexical.tolist(), cands.tfidf.tolist()
        pool.tier_weight = cands.tier_weight.tolist()
        pool._index = {eid: i for i, eid in enumerate(pool.ids)}
        pool._pending = True
        if read:
            pool.read_rows(manager, None)
        return pool

    def read_rows(self, manager, tiers: Sequence[str] | None, extra: Sequence[str] = ()) -> bool:
        """Read the pending candidates' light rows, and those of ``extra`` ids (entries
        about to join: :meth:`add_external`'s next call takes them from here) in the same
        statements: each searched tier (``manager.ordered(tiers)``, priority order) is
        asked once, for its own candidates and for the extra ids no higher tier held.

        A candidate without a row (deleted since the search; timestamps the model
        refuses) leaves the pool, and then nothing read for ``extra`` is kept (a
        candidate that left may be one of them: the next ``add_external`` reads as it
        would have). Returns True when a candidate left: evidence computed over the
        pending pool (aligned with its candidates) must be computed again."""
        if not self._pending:
            raise TierVaultError("the pool's light rows were read already (Pool.read_rows)")
        own: dict[str, list[int]] = {}
        for i, tier in enumerate(self.tiers):
            own.setdefault(tier, []).append(i)
        wanted = [i for i in dict.fromkeys(extra) if i not in self._index]
        found: dict[str, tuple[str, float, LightRow]] = {}
        rows: list[LightRow | None] = [None] * len(self.ids)
        ids = self.ids
        for tier in manager.ordered(tiers):
            mine = own.pop(tier.name, ())
            missing = [i for i in wanted if i not in found] if wanted else []
            if not mine and not missing:
                continue
            got = self._light_rows(tier.store, tier.name, [*(ids[i] for i in mine), *missing])
            for i in mine:
                rows[i] = got.get(ids[i])
            for eid in missing:
                row = got.get(eid)
                if row is not None:
                    found[eid] = (tier.name, tier.weight, row)
        for name, mine in own.items():  # a candidate's tier outside ``tiers`` (not expected)
            got = self._light_rows(manager.store(name), name, [ids[i] for i in mine])
            for i in mine:
                rows[i] = got.get(ids[i])
        self._pending = False
        if None not in rows:
            self.rows = rows  # type: ignore[assignment]  # every one read: no None left
            self._hashes = {r.content_hash for r in self.rows}
            self._asked, self._prefetched = set(wanted), found
            return False
        keep = [i for i, r in enumerate(rows) if r is not None]  # deleted between the search and this read
        for name in ("ids", "tiers", "via", "also_in", "lexical", "tfidf", "tier_weight"):
            column = getattr(self, name)
            setattr(self, name, [column[i] for i in keep])
        self.rows = [rows[i] for i in keep]  # type: ignore[misc]
        self._index = {eid: i for i, eid in enumerate(self.ids)}
        self._hashes = {r.content_hash for r in self.rows}
        return True

    def _light_rows(self, store: Any, tier: str, ids: list[str]) -> dict[str, LightRow]:
        """``store.light_rows(ids)``; with ``keep_texts`` their texts kept in ``texts``
        too when the backend reads both at once."""
        read = getattr(store, "light_rows_texts", None) if self.keep_texts else None
        return store.light_rows(ids) if read is None else read(ids, self.texts.setdefault(tier, {}))

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
        if self._pending:
            raise TierVaultError("a pending pool's light rows must be read first (Pool.read_rows)")
        wanted = [i for i in dict.fromkeys(ids) if i not in self._index]
        asked, got = self._asked, self._prefetched  # read beside the candidates (read_rows)
        self._asked, self._prefetched = set(), {}
        found = {i: got[i] for i in wanted if i in got}
        rest = [i for i in wanted if i not in asked] if asked else wanted
        for tier in manager.ordered(tiers):
            missing = [i for i in rest if i not in found]
            if not missing:
                break
            for eid, row in self._light_rows(tier.store, tier.name, missing).items():
                found[eid] = (tier.name, tier.weight, row)
        joining: list[tuple[str, str, float, LightRow]] = []
        hashes = set(self._hashes)
        passes = row_test(filters)  # passes_filters, the filters bound once
        for eid in wanted:
            if len(joining) >= limit:
                break
            hit = found.get(eid)
            if hit is None:
                continue
            tier, weight, row = hit
            if row.content_hash in hashes or not passes(row):
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
