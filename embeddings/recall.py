"""Federated vector recall over the tiers of a :class:`VaultManager`.

Per tier, one :class:`VectorIndex` of the active model key, built once from
``entry_vectors`` and then caught up by generation before each query: only
vector rows written after the generation the index reflects are read, and
entries deleted since (tombstones) are removed. It is never reloaded per query.

Persistence (:mod:`tiervault.embeddings.vector_cache`): a built index is
written next to the tier (float32 unit rows, for an ``int8`` index also its
codes and error bounds, and an ids file naming them, with CRC-32s). Reopening maps
those files as the index's immutable base -- never copied: updates go to the
index's small delta (:mod:`tiervault.embeddings.index`) -- and catches up from
the stored generation; a cache of another tier (uid), model or history is
ignored, a damaged one costs one warning and a rebuild from the tier.

Fold: when the delta outgrows its bound (``VectorIndex.needs_fold``), the live
rows are written to new cache files (block by block, atomically), read back and
verified, and the index is rebuilt over the new mapping. A crash at any point
leaves the previous cache (or the new one) whole, and the tier has every row
the cache lacks: the next open catches up from the generation it names.

Scan precision (``dtype``): ``"int8"`` when SimSIMD (extra ``simd``) is
installed -- same answers as float32 (exact rescoring, see ``VectorIndex``), a
quarter of the bytes scanned --, else ``"float32"``.

Pre-filtering: the tier's postings mirror gives a boolean mask over its slots
for the filters (``Postings.mask``); the ids of the allowed slots are mapped to
index rows, so only allowed rows compete (a filter matching 1 % of a tier still
yields its best k). When most entries pass, the complement (the few that do not)
is mapped instead, so the work is ``min(allowed, refused)`` id look-ups.

Federation: the answer is defined as each tier's own top k, ranked by ``cosine *
tier weight``, an id found in several tiers kept from the highest-priority one's
answer; the raw cosine and the tier are returned so the Brain applies its own
weighting. Compressed scans are rescored once over all tiers
(:mod:`~tiervault.embeddings.tier_scan`: ~k rows read, not ~k per tier), which gives
that answer unless an id of it is also in a higher-priority tier; then each tier
completes its own top k.
"""

from __future__ import annotations

import functools
import logging
import threading
from contextlib import ExitStack
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Callable, NamedTuple, Sequence, TypeVar

import numpy as np

from tiervault.embeddings.index import VectorIndex
from tiervault.embeddings.slot_map import SlotMap, allowed_rows, kept_plan, ids_by_slot, rows_by_slot
from tiervault.embeddings.tier_scan import TierScan, rescore_federated
from tiervault.embeddings.vector_base import VectorRowDamaged
from tiervault.embeddings.vector_cache import CACHE_VERSION, cache_paths, read_cache, tier_epoch, write_cache
from tiervault.embeddings.vector_math import Int8Codes, prefetch_int8, simd_available, unit_query
from tiervault.errors import StorageError, TierError, TierVaultError, ValidationError
from tiervault.vault.filters import Filters
from tiervault.vault.string_table import StringTable

__all__ = ["VectorRecall", "CACHE_VERSION", "cache_paths", "read_cache", "default_dtype"]

log = logging.getLogger(__name__)
_T = TypeVar("_T")


def _recovering(method: Callable[..., _T]) -> Callable[..., _T]:
    """``method`` answered once more after a float32 row of a tier's vector cache failed
    its CRC-32 where it was read: the cache is discarded and that tier's index rebuilt
    from the tier (:meth:`VectorRecall._discard`), the answer the same as from an
    undamaged cache."""

    @functools.wraps(method)
    def again(self: "VectorRecall", *args: Any, **kwargs: Any) -> _T:
        try:
            return method(self, *args, **kwargs)
        except VectorRowDamaged as exc:
            self._discard(exc)
            return method(self, *args, **kwargs)

    return again


@dataclass
class _TierState:
    """The index of one tier and the generation it reflects."""

    index: VectorIndex | None = None
    gen: int = -1  # -1: nothing loaded yet
    epoch: str | None = None  # the tier's epoch at ``gen``: a replaced file is noticed
    saved_rows: int = 0  # rows caught up since the cache was written
    broken: str | None = None
    lock: threading.RLock = field(default_factory=threading.RLock)
    slots: SlotMap = field(default_factory=SlotMap)  # mirror slot <-> index row (slot_map.py)


class VectorRecall:
    """Vector search over every tier of ``manager`` for one model key."""

    def __init__(self, manager: Any, model_key: str, *, persist: bool = True, dtype: str | None = None,
                 federated: bool = True) -> None:
        self.manager = manager
        self.model_key = model_key
        self.persist = persist
        self.dtype = dtype or default_dtype()
        # One rescoring over every tier's compressed scan (tier_scan.py); False: each tier
        # rescores its own top k (the same answers; bench/vector_leg.py times both).
        self.federated = federated
        self._tiers: dict[str, _TierState] = {}
        self._lock = threading.Lock()

    # -- queries ---------------------------------------------------------------------
    @_recovering
    def search(self, query_vec: np.ndarray, k: int, *, filters: Filters | None = None,
               tiers: Sequence[str] | None = None) -> tuple[list[str], list[str], np.ndarray]:
        """Top ``k`` entries by ``cosine * tier weight`` over ``tiers`` (default: all).

        Returns ``(ids, tiers, cosine)`` best first; ``cosine`` is the raw float32
        similarity (the Brain applies weights). ``filters`` pre-filter every tier
        (default ``Filters()``: expired and not-yet-valid entries excluded).
        """
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise ValidationError("k", f"must be an integer >= 0, got {k!r}")
        q = _query(query_vec)
        filters = filters if filters is not None else Filters()
        scans: list[tuple[int, Any, VectorIndex, TierScan]] = []
        slot_maps: list[SlotMap] = []  # each scan's tier's, to read the hits' ids by slot
        with ExitStack() as held:  # every tier's rows stay put until its ids are read
            for rank, tier in enumerate(self.manager.ordered(tiers)):
                if k == 0:
                    break
                state = self._state(tier.name)
                held.enter_context(state.lock)  # priority order, as every search: no deadlock
                # The filter view first: it catches the tier's mirror up, so the index,
                # refreshed next, is never older than the view.
                view = tier.store.filter_mask(filters)
                index = self.index(tier.name)
                if index is None or len(index) == 0:
                    continue
                _check_dim(index, q)
                allowed = allowed_rows(view, index, state.slots)
                plan = kept_plan(state.slots, index, allowed)
                scans.append((rank, tier, index, index.scan(q, k, allowed=allowed, plan=plan)))
                slot_maps.append(state.slots)
            hits = None
            if self.federated and rescore_federated([(tier.weight, scan) for _, tier, _, scan in scans], k):
                hits = _hits(scans, slot_maps)
            if hits is None or _shadowed(hits[:k], scans):
                for *_, scan in scans:  # each tier's own top k, as a higher tier's copy may decide
                    scan.complete()
                hits = _hits(scans, slot_maps)
            kept = _dedup(hits, k)
        return ([h.id for h in kept], [h.tier for h in kept],
                np.array([h.cosine for h in kept], dtype=np.float32))

    def prefetch(self, query_vec: np.ndarray, tiers: Sequence[str] | None = None) -> bool:
        """Start reading the int8 codes of ``tiers``' bases for ``query_vec`` on the scan
        pool (``vector_math.prefetch_int8``), for a :meth:`search` with the same vector
        soon after: the caller does other work meanwhile (the Brain: its lexical leg). Only
        indexes already open, at their current base (nothing read, refreshed or checked: a
        search that scans other codes, or another query, computes its own). True if
        something was started."""
        q = _query(query_vec)
        unit, bases = None, []
        for tier in self.manager.ordered(tiers):
            state = self._tiers.get(tier.name)
            index = state.index if state is not None else None
            if index is None or index.dim != q.shape[0]:
                continue
            codes = index.prefetch_codes()
            if codes is not None:
                unit = unit if unit is not None else unit_query(q, index.dim, index.model)
                bases.append(codes)
        return unit is not None and prefetch_int8(unit, bases)

    @_recovering
    def scores_for(self, query_vec: np.ndarray, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """Cosine of the query with each ``(tier, id)``; NaN where there is no vector
        (unknown tier, entry not embedded yet). float32, aligned with ``pairs``."""
        q = _query(query_vec)
        out = np.full(len(pairs), np.nan, dtype=np.float32)
        by_tier: dict[str, list[int]] = {}
        for pos, (tier, _) in enumerate(pairs):
            by_tier.setdefault(tier, []).append(pos)
        for tier, positions in by_tier.items():
            if tier not in self.manager.tiers or self.manager.tiers[tier].store is None:
                continue
            index = self.index(tier)
            if index is None or len(index) == 0:
                continue
            _check_dim(index, q)
            ids = [pairs[p][1] for p in positions]
            state = self._state(tier)
            with state.lock:  # the slot -> row map and the index it was made for, together
                rows = rows_by_slot(state.slots, index, ids)
                if rows is None:
                    out[positions] = index.scores_for(ids, q)
                elif (hit := rows >= 0).any():
                    out[np.asarray(positions)[hit]] = index.scores_for(rows[hit], q)
        return out

    @_recovering
    def vectors_for(self, tier: str, ids: Sequence[str]) -> np.ndarray | None:
        """(n, dim) float32 vectors of ``ids`` in ``tier`` (NaN rows: no vector);
        None while the tier holds no vector of this model."""
        if tier not in self.manager.tiers or self.manager.tiers[tier].store is None:
            return None
        index = self.index(tier)
        if index is None or len(index) == 0:
            return None
        return index.vectors_for(list(ids))

    # -- indexes -------------------------------------------------------------------------
    def index(self, tier: str) -> VectorIndex | None:
        """The caught-up index of ``tier`` (None while it holds no vector of this model)."""
        state = self._state(tier)
        store = self.manager.store(tier)
        with state.lock:
            if state.broken is None:
                try:
                    self._refresh(store, state)
                except StorageError as exc:
                    state.broken = str(exc)
                    state.index = None
                    log.warning("vector search skips tier %r: %s", tier, exc)
            return state.index

    def warm(self, tiers: Sequence[str] | None = None) -> dict[str, int]:
        """Build / catch up the indexes of ``tiers`` and persist them; {tier: vectors}."""
        out: dict[str, int] = {}
        for tier in self.manager.ordered(tiers):
            state = self._state(tier.name)
            state.broken = None
            index = self.index(tier.name)
            with state.lock:
                if index is not None and state.saved_rows:
                    self._save(tier.store, state)
            out[tier.name] = len(index) if index is not None else 0
        return out

    def _discard(self, exc: VectorRowDamaged) -> None:
        """The tier whose cache file ``exc`` names: its cache deleted (never opened again),
        its index dropped, rebuilt from the tier at the next read."""
        for tier in self.manager.ordered():
            paths = cache_paths(tier.store, self.model_key) if self.persist and tier.store is not None else None
            if paths is None or not exc.path.startswith(paths[1] + "-"):
                continue
            log.warning("vector search: %s; rebuilding the index of tier %r from the tier", exc, tier.name)
            state = self._state(tier.name)
            with state.lock:
                paths[0].unlink(missing_ok=True)
                state.index, state.gen, state.saved_rows, state.slots = None, -1, 0, SlotMap()
            return
        raise exc  # not a cache of this recall's tiers

    def _state(self, tier: str) -> _TierState:
        state = self._tiers.get(tier)  # no new state (and lock) built per call to be dropped
        if state is None:
            with self._lock:
                state = self._tiers.setdefault(tier, _TierState())
        return state

    def _refresh(self, store: Any, state: _TierState) -> None:
        if not store.exists:
            return
        current = store.generation()
        if state.gen == current:
            return
        if state.gen >= 0 and (current < state.gen or tier_epoch(store, state.gen) != state.epoch):
            state.gen = -1  # the tier file was replaced (a restored copy): start over
        if state.gen < 0:
            state.index, state.gen, state.saved_rows = None, -1, 0
            if self._open_cache(store, state) and state.gen == current:
                return
        if state.gen < 0:
            ch = store.vector_changes_since(self.model_key, -1)
            gen, ids, matrix = ch.generation, ch.ids, ch.matrix
            state.index = self._build(store, ids, matrix) if ids else None
            state.gen, state.epoch = gen, tier_epoch(store, gen)
            if ids:
                state.saved_rows = len(ids)
                self._save(store, state)
            return
        ch = store.vector_changes_since(self.model_key, state.gen)
        gen, ids, matrix, dead = ch.generation, ch.ids, ch.matrix, ch.deleted
        if state.index is not None and ids and matrix.shape[1] != state.index.dim:
            # Same model key, new dimension (vectors being rebuilt): start over.
            state.index, state.gen = None, -1
            self._refresh(store, state)
            return
        if state.index is None:
            if ids:
                state.index = self._build(store, ids, matrix)
        else:
            if dead:
                state.index.remove(dead)
            if ids:
                state.index.upsert(ids, matrix)
        state.gen, state.epoch = gen, tier_epoch(store, gen)
        state.saved_rows += len(ids) + len(dead)
        if state.index is not None and state.index.needs_fold:
            self._fold(store, state)

    def _fold(self, store: Any, state: _TierState) -> None:
        """Make the index's live rows its new base: through a new cache file mapped
        back (verified) where the tier keeps a cache, else in memory."""
        assert state.index is not None
        paths = cache_paths(store, self.model_key) if self.persist else None
        if paths is not None and self._save(store, state):
            try:
                cached = read_cache(store, paths[0], self.model_key)
                if cached is None:
                    raise ValueError("the cache just written does not match the tier")
                state.index = (self._build(store, cached.ids, cached.matrix, cached.codes, cached.row_crcs)
                               if cached.ids else None)
                return
            except (StorageError, TierError):
                raise
            except Exception as exc:  # noqa: BLE001 -- the fold falls back to memory
                log.warning("the vector cache %s of tier %r failed its check right after the fold "
                            "(%s: %s); folding in memory", paths[0], store.name,
                            type(exc).__name__, str(exc)[:200])
        state.index.fold()

    def _build(self, store: Any, ids: Sequence[str] | StringTable, matrix: np.ndarray,
               codes: Int8Codes | None = None, row_crcs: np.ndarray | None = None) -> VectorIndex:
        return VectorIndex.build(ids, matrix, dtype=self.dtype, model=self.model_key,  # type: ignore[arg-type]
                                 tier=store.name, normalized=True, codes=codes, row_crcs=row_crcs)

    # -- persistence -----------------------------------------------------------------------
    def _open_cache(self, store: Any, state: _TierState) -> bool:
        """Load the persisted index if it fits this tier/model/history; then catch up.

        The cache is disposable: anything wrong with it (unreadable, truncated, wrong
        shape, a matrix name outside its own folder) costs one warning and a rebuild.
        """
        paths = cache_paths(store, self.model_key) if self.persist else None
        if paths is None:
            return False
        ids_path, base = paths
        if not ids_path.exists():
            return False
        try:
            cached = read_cache(store, ids_path, self.model_key)
            if cached is None:
                return False
            header = cached.header
            n, gen = int(header["n"]), int(header["gen"])
            index = self._build(store, cached.ids, cached.matrix, cached.codes, cached.row_crcs) if n else None
        except (KeyboardInterrupt, SystemExit):
            raise
        except (StorageError, TierError):
            raise  # the tier itself failed, not its cache
        except Exception as exc:  # noqa: BLE001 -- a damaged cache must never break search
            log.warning("ignoring the vector cache %s of tier %r (%s: %s); rebuilding from the tier",
                        ids_path, store.name, type(exc).__name__, str(exc)[:200])
            return False
        state.index = index
        state.gen, state.epoch = gen, header.get("epoch")
        state.saved_rows = 0
        if index is not None and self.dtype == "int8" and cached.codes is None:
            self._save(store, state)  # codes computed from the rows once: keep them
        self._refresh(store, state)  # folds (re-saves) when the catch-up outgrew the delta bound
        return True

    def _save(self, store: Any, state: _TierState) -> bool:
        """Write the index as the tier's cache (:func:`write_cache`: atomic, block by
        block); failure only costs a rebuild. Read-only tiers are never written next
        to. True when the cache was written."""
        paths = cache_paths(store, self.model_key) if self.persist else None
        if paths is None or state.index is None or state.gen < 0 or store.read_only:
            return False
        try:
            write_cache(store, self.model_key, state.index, state.gen, state.epoch)
        except (OSError, TierVaultError) as exc:
            log.warning("could not cache the vector index of tier %r at %s: %s", store.name, paths[0], exc)
            return False
        state.saved_rows = 0
        return True


def default_dtype() -> str:
    """``"int8"`` where SimSIMD's integer kernels are installed (extra ``simd``), else
    ``"float32"`` (numpy's own int8 -> f32 conversion costs more than it saves)."""
    return "int8" if simd_available() else "float32"


def _query(query_vec: np.ndarray) -> np.ndarray:
    q = np.asarray(query_vec, dtype=np.float32)
    if q.ndim == 2 and q.shape[0] == 1:
        q = q[0]
    if q.ndim != 1 or q.size == 0:
        raise ValidationError("query_vec", f"must be one vector, got shape {q.shape}")
    return q


def _check_dim(index: VectorIndex, q: np.ndarray) -> None:
    if q.shape[0] != index.dim:
        raise ValidationError("query_vec", f"has dimension {q.shape[0]} but the vectors of "
                              f"{index.model} in tier {index.tier!r} have {index.dim}")


class VectorHit(NamedTuple):
    """One tier's answer row, ranked by ``(key, rank)`` ascending: best first, ties
    to the higher-priority tier."""

    key: float  # -cosine * tier weight
    rank: int  # the tier's place in priority order (0: highest)
    id: str
    tier: str
    cosine: float  # raw, float32 rounded to a Python float


# Ranking key of a hit, read in C (a lambda reading fields costs ~25% more here).
_rank_key = attrgetter("key", "rank")
_new_tuple = tuple.__new__


def _hits(scans: list[tuple[int, Any, VectorIndex, TierScan]], slot_maps: list[SlotMap]) -> list[VectorHit]:
    """The tiers' answers ranked by ``cosine * tier weight`` (ties: the higher-priority tier);
    ids read by mirror slot where a tier's map allows (:func:`ids_by_slot`)."""
    hits: list[VectorHit] = []
    for (rank, tier, index, scan), slots in zip(scans, slot_maps):
        rows, cos = scan.best()
        weight, name = tier.weight, tier.name
        # tuple.__new__ skips the NamedTuple's Python-level __new__ (the same object;
        # ~105 hits a hybrid query: 35 us here against 48 through VectorHit(...)).
        # The index's ids are str already (VectorIndex.upsert / the string table).
        hits.extend([_new_tuple(VectorHit, (-c * weight, rank, i, name, c))
                     for i, c in zip(ids_by_slot(slots, index, rows), cos.tolist())])
    hits.sort(key=_rank_key)
    return hits


def _dedup(hits: list[VectorHit], k: int) -> list[VectorHit]:
    """The top ``k`` of ranked ``hits``, an id in several tiers kept from the
    highest-priority one."""
    best: dict[str, VectorHit] = {}
    for h in hits:
        seen = best.get(h.id)
        if seen is None or h.rank < seen.rank:
            best[h.id] = h
    return sorted(best.values(), key=_rank_key)[:k]


def _shadowed(top: list[VectorHit], scans: list[tuple[int, Any, VectorIndex, TierScan]]) -> bool:
    """Whether an id of ``top``, the k best hits of the tiers' partial answers
    (:func:`~tiervault.embeddings.tier_scan.rescore_federated`; before the ids are made
    unique), is also held by a higher-priority tier searched. Only then can a tier's own
    top k change the answer: that tier's copy shadows this one when it is in it. Rows
    filtered out count too (a needless completion, never a wrong answer)."""
    for rank, _, index, _ in scans:
        lower = [h.id for h in top if h.rank > rank]
        if not lower:
            break
        if (index.rows_of(lower) >= 0).any():
            return True
    return False
