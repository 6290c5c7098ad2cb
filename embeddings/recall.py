"""Federated vector recall over the tiers of a :class:`VaultManager`.

Per tier, one :class:`VectorIndex` of the active model key, built once from
``entry_vectors`` and then caught up by generation before each query: only
vector rows written after the generation the index reflects are read, and
entries deleted since (tombstones) are removed. It is never reloaded per query.

Persistence: a built index is written next to the tier as a memory-mappable
``<tier>.vec-<model>-<token>.npy`` (unit rows, float32) plus
``<tier>.vec-<model>.ids`` (one JSON header line -- tier uid, model, generation,
shape, matrix file name, CRC-32s -- then one id per line). Reopening maps the
matrix as the index's immutable base (never copied: updates go to the index's
small delta, :mod:`tiervault.embeddings.index`) and reads the ids, then catches
up from the stored generation; a cache of another tier (uid), another model or
a newer generation than the tier is ignored. The ids file is replaced last and
names its matrix file, so readers never pair ids with the wrong matrix.

Fold: when the delta outgrows its bound (``VectorIndex.needs_fold``), the live
rows are written block by block to a new matrix file and a new ids file (each
atomically: temporary file, fsync, rename), the new pair is read back and
verified, and the index is rebuilt over the new mapping. A crash at any point
leaves the previous pair (or the new one) whole, and the tier has every row the
cache lacks: the next open catches up from the generation the ids file names.

Verified on open (:func:`read_cache`): header fields, tier uid / model / epoch,
the matrix file's exact size and shape, the CRC-32 of the ids and of the
matrix bytes (one sequential read: ~0.4 s per GB here, paid once per process,
the first scan would read those pages anyway). Any failure costs one warning
and a rebuild from the tier, never a wrong answer.

Pre-filtering: the tier's postings mirror gives a boolean mask over its slots
for the filters (``Postings.mask``); the ids of the allowed slots are mapped to
index rows, so only allowed rows compete (a filter matching 1 % of a tier still
yields its best k). When most entries pass, the complement (the few that do not)
is mapped instead, so the work is ``min(allowed, refused)`` id look-ups.

Federation: tiers are searched in priority order, each for its own top k; hits
are ranked by ``cosine * tier weight``, an id found in several tiers is kept
from the highest-priority one, and the raw cosine and the tier are returned so
the Brain applies its own weighting.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import time
import uuid
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from tiervault.embeddings.index import VectorIndex
from tiervault.errors import StorageError, TierError, TierVaultError, ValidationError
from tiervault.vault.atomic_file import atomic_write
from tiervault.vault.filters import Filters
from tiervault.vault.rows import IdMask

__all__ = ["VectorRecall", "CACHE_VERSION", "cache_paths", "read_cache"]

log = logging.getLogger(__name__)

CACHE_VERSION = 3  # 2: the tier epoch at the cached generation; 3: CRC-32s of ids and matrix
_CHUNK = 1 << 24  # bytes per read when the matrix's CRC-32 is checked


def _slug(model_key: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", model_key)[:48]
    return f"{safe}-{hashlib.sha1(model_key.encode()).hexdigest()[:8]}"


def cache_paths(store: Any, model_key: str) -> tuple[Path, str] | None:
    """(ids file, matrix file prefix) of the persisted index of ``store`` for ``model_key``;
    None when the backend wants no local cache (``cache_prefix()`` is None)."""
    prefix = store.cache_prefix()
    if prefix is None:
        return None
    base = f"{prefix}.vec-{_slug(model_key)}"
    return Path(base + ".ids"), base


@dataclass
class _TierState:
    """The index of one tier and the generation it reflects."""

    index: VectorIndex | None = None
    gen: int = -1  # -1: nothing loaded yet
    epoch: str | None = None  # the tier's epoch at ``gen``: a replaced file is noticed
    saved_rows: int = 0  # rows caught up since the cache was written
    broken: str | None = None
    lock: threading.RLock = field(default_factory=threading.RLock)
    # Index row of each mirror slot (-1: dead slot or no vector), cached until either changes.
    slot_rows: np.ndarray | None = None
    slot_rows_key: tuple | None = None


class VectorRecall:
    """Vector search over every tier of ``manager`` for one model key."""

    def __init__(self, manager: Any, model_key: str, *, persist: bool = True, dtype: str = "float32") -> None:
        self.manager = manager
        self.model_key = model_key
        self.persist = persist
        self.dtype = dtype
        self._tiers: dict[str, _TierState] = {}
        self._lock = threading.Lock()

    # -- queries ---------------------------------------------------------------------
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
        hits: list[tuple[float, int, str, str, float]] = []
        for rank, tier in enumerate(self.manager.ordered(tiers)):
            if k == 0:
                break
            state = self._state(tier.name)
            with state.lock:  # rows move on updates: map ids to rows and search in one go
                # The filter view first: it catches the tier's mirror up, so the index,
                # refreshed next, is never older than the view.
                view = tier.store.filter_mask(filters)
                index = self.index(tier.name)
                if index is None or len(index) == 0:
                    continue
                _check_dim(index, q)
                allowed = allowed_rows(view, index, state)
                ids, cos = index.search(q, k, allowed=allowed)
            hits.extend((-float(c) * tier.weight, rank, str(i), tier.name, float(c)) for i, c in zip(ids, cos))
        hits.sort(key=lambda h: (h[0], h[1]))
        best: dict[str, tuple[float, int, str, str, float]] = {}
        for h in hits:  # an id in several tiers: the highest-priority tier's copy
            if h[2] not in best or h[1] < best[h[2]][1]:
                best[h[2]] = h
        kept = sorted(best.values(), key=lambda h: (h[0], h[1]))[:k]
        return ([h[2] for h in kept], [h[3] for h in kept],
                np.array([h[4] for h in kept], dtype=np.float32))

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
            out[positions] = index.scores_for([pairs[p][1] for p in positions], q)
        return out

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

    def _state(self, tier: str) -> _TierState:
        with self._lock:
            return self._tiers.setdefault(tier, _TierState())

    def _refresh(self, store: Any, state: _TierState) -> None:
        if not store.exists:
            return
        current = store.generation()
        if state.gen == current:
            return
        if state.gen >= 0 and (current < state.gen or _epoch(store, state.gen) != state.epoch):
            state.gen = -1  # the tier file was replaced (a restored copy): start over
        if state.gen < 0:
            state.index, state.gen, state.saved_rows = None, -1, 0
            if self._open_cache(store, state) and state.gen == current:
                return
        if state.gen < 0:
            ch = store.vector_changes_since(self.model_key, -1)
            gen, ids, matrix = ch.generation, ch.ids, ch.matrix
            state.index = self._build(store, ids, matrix) if ids else None
            state.gen, state.epoch = gen, _epoch(store, gen)
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
        state.gen, state.epoch = gen, _epoch(store, gen)
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
                _, ids, matrix = cached
                state.index = self._build(store, ids, matrix) if ids else None
                return
            except (StorageError, TierError):
                raise
            except Exception as exc:  # noqa: BLE001 -- the fold falls back to memory
                log.warning("the vector cache %s of tier %r failed its check right after the fold "
                            "(%s: %s); folding in memory", paths[0], store.name,
                            type(exc).__name__, str(exc)[:200])
        state.index.fold()

    def _build(self, store: Any, ids: Sequence[str], matrix: np.ndarray) -> VectorIndex:
        return VectorIndex.build(ids, matrix, dtype=self.dtype, model=self.model_key,  # type: ignore[arg-type]
                                 tier=store.name, normalized=True)

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
            header, ids, matrix = cached
            n, gen = int(header["n"]), int(header["gen"])
            index = self._build(store, ids, matrix) if n else None
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
        self._refresh(store, state)  # folds (re-saves) when the catch-up outgrew the delta bound
        return True

    def _save(self, store: Any, state: _TierState) -> bool:
        """Write the index atomically next to the tier (fsync, rename; temporary files
        never outlive a failure), block by block (never a second copy of the matrix in
        memory); failure only costs a rebuild. Read-only tiers are never written next
        to. True when the pair was written."""
        paths = cache_paths(store, self.model_key) if self.persist else None
        if paths is None or state.index is None or state.gen < 0 or store.read_only:
            return False
        index = state.index
        ids_path, base = paths
        matrix_path = Path(f"{base}-{uuid.uuid4().hex[:12]}.npy")
        previous = _named_matrix(ids_path)
        try:
            n = len(index)
            ids: list[str] = []
            crc = 0
            # Owner-only like the tier it belongs to (np.save would follow the umask).
            with atomic_write(matrix_path, binary=True, mode=0o600) as fh:
                np.lib.format.write_array_header_1_0(
                    fh, {"descr": np.dtype(np.float32).str, "fortran_order": False, "shape": (n, index.dim)})

                def sink(block_ids: np.ndarray, rows: np.ndarray) -> None:
                    nonlocal crc
                    data = memoryview(np.ascontiguousarray(rows, dtype=np.float32)).cast("B")
                    crc = zlib.crc32(data, crc)
                    fh.write(data)
                    ids.extend(block_ids.tolist())

                # One locked pass: ids and rows taken together, so they always match.
                if index.export(sink) != n:
                    raise StorageError(f"the vector index of tier {store.name!r} changed while it was saved")
            body = "\n".join(ids)
            header = {"version": CACHE_VERSION, "model": self.model_key, "tier_uid": store.uid(),
                      "gen": state.gen, "epoch": state.epoch, "n": n, "dim": index.dim,
                      "matrix": matrix_path.name, "matrix_crc": crc,
                      "ids_crc": zlib.crc32(body.encode("utf-8"))}
            with atomic_write(ids_path, mode=0o600) as fh:
                fh.write(json.dumps(header) + "\n" + body)
        except (OSError, TierVaultError) as exc:
            log.warning("could not cache the vector index of tier %r at %s: %s", store.name, ids_path, exc)
            matrix_path.unlink(missing_ok=True)
            return False
        state.saved_rows = 0
        _remove_stale_matrices(ids_path, base, matrix_path, previous)
        return True


def read_cache(store: Any, ids_path: Path, model_key: str | None = None
               ) -> tuple[dict[str, Any], list[str], np.ndarray] | None:
    """(header, ids, memory-mapped matrix) of the vector cache ``ids_path`` of ``store``.

    None when the cache belongs to another tier, model (``model_key``; None: the one
    its header names), version or history; any damage raises (ValueError, OSError...).
    A header may only name a matrix file of this cache in its own folder.
    """
    uid, current = store.uid(), store.generation()  # the tier's own failures propagate
    with open(ids_path, "r", encoding="utf-8") as fh:
        header = json.loads(fh.readline())
        body = fh.read()
    if not isinstance(header, dict):
        raise ValueError("the header is not a JSON object")
    gen = int(header["gen"])
    model = header.get("model") if model_key is None else model_key
    if not isinstance(model, str) or cache_paths(store, model)[0] != ids_path:
        raise ValueError("the header names a model this file is not the cache of")
    if (header.get("version") != CACHE_VERSION or header.get("model") != model
            or header.get("tier_uid") != uid or gen > current
            or header.get("epoch") != _epoch(store, gen)):
        return None
    n, dim = int(header["n"]), int(header["dim"])
    name = header["matrix"]
    base = cache_paths(store, model)[1]
    if (not isinstance(name, str) or Path(name).name != name
            or not name.startswith(Path(base).name + "-") or not name.endswith(".npy")):
        raise ValueError(f"the header names {str(name)[:80]!r}, not a matrix file of this "
                         "cache in its own folder")
    if zlib.crc32(body.encode("utf-8")) != header.get("ids_crc"):
        raise ValueError("the ids fail their CRC-32")
    ids = body.split("\n") if body else []
    path = ids_path.parent / name
    matrix = np.load(path, mmap_mode="r", allow_pickle=False)
    if (matrix.dtype != np.float32 or matrix.ndim != 2 or matrix.shape != (n, dim)
            or len(ids) != n or (n and dim < 1)):
        raise ValueError(f"shape {matrix.shape} / {len(ids)} ids do not match the header ({n}, {dim})")
    if path.stat().st_size != matrix.offset + matrix.nbytes:
        raise ValueError(f"{name} is {path.stat().st_size} bytes, not {matrix.offset + matrix.nbytes}")
    if _file_crc(path, matrix.offset) != header.get("matrix_crc"):
        raise ValueError(f"{name} fails its CRC-32")
    return header, ids, matrix


def _file_crc(path: Path, start: int) -> int:
    """CRC-32 of the bytes of ``path`` from ``start`` on, read (not mapped) in chunks:
    the pages land in the OS cache, not in this process's resident set."""
    crc = 0
    buf = bytearray(_CHUNK)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as fh:
        fh.seek(start)
        while True:
            got = fh.readinto(buf)
            if not got:
                return crc
            crc = zlib.crc32(view[:got], crc)


def _epoch(store: Any, gen: int) -> str | None:
    """The tier's epoch at ``gen`` (None for a backend that keeps none)."""
    epoch_at = getattr(store, "epoch_at", None)
    return epoch_at(gen) if epoch_at is not None else None


def _named_matrix(ids_path: Path) -> str | None:
    """The matrix file name the ids file's header names (None: no readable header)."""
    try:
        with open(ids_path, "r", encoding="utf-8") as fh:
            name = json.loads(fh.readline()).get("matrix")
    except (OSError, ValueError, AttributeError):
        return None
    return name if isinstance(name, str) else None


def _remove_stale_matrices(ids_path: Path, base: str, ours: Path, previous: str | None = None) -> None:
    """Delete matrix files the ids file no longer names. A file younger than a minute
    is kept unless it is ours or the one our save replaced (``previous``): another
    process may be about to publish it."""
    current = _named_matrix(ids_path)
    if current is None:
        return
    now = time.time()
    for old in ids_path.parent.glob(Path(base).name + "-*.npy"):
        if old.name == current:
            continue
        try:  # a process still mapping an unlinked file keeps its pages (POSIX)
            if old == ours or old.name == previous or now - old.stat().st_mtime > 60:
                old.unlink()
        except OSError:
            pass


def allowed_rows(view: IdMask, index: VectorIndex,
                 state: _TierState | None = None) -> np.ndarray | None:
    """The pre-filter for ``index``: a boolean row mask, or None when every row passes.

    The tier's filter view (``TierBackend.filter_mask``) says which entry positions
    pass; the position -> row map turns it into rows. That map is cached in
    ``state`` until the view's positions or the index change, so a query costs a
    few vector operations, not id look-ups.
    """
    key = (view.version, index.version, len(index))
    if state is not None and state.slot_rows_key == key:
        slot_rows = state.slot_rows
    else:
        slot_rows = index.rows_of(view.ids)
        if state is not None:
            state.slot_rows, state.slot_rows_key = slot_rows, key
    assert slot_rows is not None
    rows = slot_rows[view.mask]
    rows = rows[rows >= 0]
    if rows.size == len(index):
        return None  # every vector passes (the usual unfiltered query)
    allowed = np.zeros(index.row_count, dtype=bool)
    allowed[rows] = True
    return allowed


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
