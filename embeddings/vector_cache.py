"""The vector index's cache files beside a tier: written atomically, verified on open.

One cache per (tier, model key):

* ``<tier>.vec-<model>-<token>.npy``: the unit rows, float32 (mapped as the
  index's immutable base);
* for an ``int8`` index also ``<token>.i8.npy`` (the codes, int8) and
  ``<token>.bounds.npy`` (per-row scales and error-bound terms, float32 (2, n):
  :func:`~tiervault.embeddings.vector_math.int8_codes`), so a process scans 1 byte
  a component and reads the float32 rows only where it rescores;
* with the int8 files, ``<token>.crc.npy``: the CRC-32 of each float32 row (uint32);
* ``<token>.keys.npy`` / ``<token>.order.npy``: the ids' fingerprint index (uint64,
  sorted; int64 slots), which a reader would otherwise compute (~0.15 s at 500,000 ids:
  :meth:`~tiervault.vault.string_table.StringTable.with_index`);
* ``<tier>.vec-<model>.ids``: one JSON header line -- version, tier uid, model,
  generation and the tier's epoch at it, shape, the names of the files above and
  their CRC-32s, the CRC-32 of the ids -- then one id per line.

Writes (:func:`write_cache`) stream the live rows block by block (never a second
copy of the matrix in memory) into temporary files, fsync and rename them; the
ids file is renamed last and names its files, so readers never pair ids with
the wrong matrix, and a crash at any point leaves the previous cache whole.

Verified on open (:func:`read_cache`): header fields; tier uid, model and epoch
(a cache of another tier, model or history is not used: None); every named file
inside this cache's folder and name, its exact size, dtype and shape, and its
CRC-32 (one sequential read, not mapped: ~0.4 s per GB here, once per process;
the float32 rows' pages land in the OS cache, not in the process) -- but for float32
rows read a row at a time (``vector_base.PREAD_ABOVE_BYTES``), with their rows' CRC-32s
written: each row is then checked where it is read (a 1,000,000-entry vault's open read
1.5 GB of rows it never rescores: ~0.4-0.6 s with the files in the OS cache, seconds
without; issue 16, session 22). Any failure raises. The float32 rows are then mapped;
the int8 codes and bounds, which every scan reads whole, are the bytes that read put in anonymous memory in 2 MiB pages
(:mod:`.page_buffer`: a quarter less time a scan at 1,000,000 rows here), where the
OS gives such pages (else mapped too).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import uuid
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tiervault.embeddings.index import VectorIndex
from tiervault.embeddings.page_buffer import huge_pages, read_resident
from tiervault.embeddings import vector_base
from tiervault.embeddings.vector_ids import table_of_lines
from tiervault.embeddings.vector_math import Int8Codes, int8_codes
from tiervault.errors import StorageError
from tiervault.vault.atomic_file import atomic_write
from tiervault.vault.checksum import crc32
from tiervault.vault.string_table import StringTable

__all__ = ["CACHE_VERSION", "CachedVectors", "cache_paths", "read_cache", "write_cache", "tier_epoch"]

CACHE_VERSION = 3  # 2: the tier epoch at the cached generation; 3: CRC-32s, int8 codes
_CHUNK = 1 << 24  # bytes per read when a file's CRC-32 is checked
_FILES = ("matrix", "codes", "bounds", "row_crcs", "keys", "order")
_DTYPES = {"matrix": np.float32, "codes": np.int8, "bounds": np.float32, "row_crcs": np.uint32,
           "keys": np.uint64, "order": np.int64}


@dataclass(frozen=True)
class CachedVectors:
    """An opened, verified cache: ``ids[i]`` owns ``matrix[i]`` (mapped, read-only);
    ``codes``: the int8 codes and bounds of those rows (read-only, in memory), when written;
    ``row_crcs``: each row's CRC-32 when ``matrix`` was not checked whole (its rows are
    checked where they are read)."""

    header: dict[str, Any]
    ids: StringTable  # NumPy arrays, not a str per id (vector_ids)
    matrix: np.ndarray
    codes: Int8Codes | None
    row_crcs: np.ndarray | None = None


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


def tier_epoch(store: Any, gen: int) -> str | None:
    """The tier's epoch at ``gen`` (None for a backend that keeps none)."""
    epoch_at = getattr(store, "epoch_at", None)
    return epoch_at(gen) if epoch_at is not None else None


def write_cache(store: Any, model_key: str, index: VectorIndex, gen: int, epoch: str | None) -> None:
    """Write the live rows of ``index`` as the cache of ``store`` at generation ``gen``
    (module docstring); raises OSError / TierVaultError, leaving no new file behind."""
    paths = cache_paths(store, model_key)
    assert paths is not None
    ids_path, base = paths
    token = f"{base}-{uuid.uuid4().hex[:12]}"
    names = {"matrix": Path(token + ".npy"), "keys": Path(token + ".keys.npy"),
             "order": Path(token + ".order.npy")}
    if index.dtype == "int8":
        names.update(codes=Path(token + ".i8.npy"), bounds=Path(token + ".bounds.npy"),
                     row_crcs=Path(token + ".crc.npy"))
    previous = _named_files(ids_path)
    n, dim = len(index), index.dim
    ids: list[bytes] = []  # UTF-8 lines per block: no str per id kept for the whole save
    bounds: list[np.ndarray] = []
    row_crcs: list[np.ndarray] = []
    crcs = dict.fromkeys(names, 0)
    try:
        # Owner-only like the tier it belongs to (np.save would follow the umask).
        with atomic_write(names["matrix"], binary=True, mode=0o600) as fm, \
                (atomic_write(names["codes"], binary=True, mode=0o600) if "codes" in names
                 else nullcontext()) as fc:
            handles = {"matrix": fm, "codes": fc}
            for key, fh in handles.items():
                if fh is not None:
                    np.lib.format.write_array_header_1_0(
                        fh, {"descr": np.dtype(_DTYPES[key]).str, "fortran_order": False, "shape": (n, dim)})

            def put(key: str, arr: np.ndarray) -> None:
                data = memoryview(np.ascontiguousarray(arr)).cast("B")
                crcs[key] = crc32(data, crcs[key])
                handles[key].write(data)

            def sink(block_ids: np.ndarray, rows: np.ndarray) -> None:
                exact = np.ascontiguousarray(rows, dtype=np.float32)
                put("matrix", exact)
                if fc is not None:
                    codes, block_bounds = int8_codes(rows)
                    put("codes", codes)
                    bounds.append(block_bounds)
                    raw, rb = memoryview(exact).cast("B"), exact.shape[1] * 4
                    row_crcs.append(np.array([crc32(raw[i * rb:(i + 1) * rb]) for i in range(exact.shape[0])],
                                             dtype=np.uint32))
                ids.append("\n".join(block_ids.tolist()).encode("utf-8"))

            # One locked pass: ids and rows taken together, so they always match.
            if index.export(sink) != n:
                raise StorageError(f"the vector index of tier {store.name!r} changed while it was saved")
        if "bounds" in names:
            crcs["bounds"] = _write_whole(names["bounds"], np.concatenate(bounds, axis=1).astype(np.float32)
                                          if bounds else np.zeros((2, 0), dtype=np.float32))
            crcs["row_crcs"] = _write_whole(names["row_crcs"], np.concatenate(row_crcs) if row_crcs
                                            else np.zeros(0, dtype=np.uint32))
        body = b"\n".join(ids)
        del ids
        # the ids' fingerprint index, so a reader need not compute it (StringTable.with_index)
        table = table_of_lines(body)
        crcs["keys"] = _write_whole(names["keys"], table.keys.a)
        crcs["order"] = _write_whole(names["order"], table.order.a.astype(np.int64))
        del table
        header = {"version": CACHE_VERSION, "model": model_key, "tier_uid": store.uid(), "gen": gen,
                  "epoch": epoch, "n": n, "dim": dim, "ids_crc": crc32(body)}
        for key, path in names.items():
            header[key], header[f"{key}_crc"] = path.name, crcs[key]
        with atomic_write(ids_path, binary=True, mode=0o600) as fh:
            fh.write(json.dumps(header).encode("utf-8") + b"\n")
            fh.write(body)
    except BaseException:
        for path in names.values():
            path.unlink(missing_ok=True)
        raise
    _remove_stale(ids_path, base, {p.name for p in names.values()}, previous)


def read_cache(store: Any, ids_path: Path, model_key: str | None = None) -> CachedVectors | None:
    """The verified vector cache ``ids_path`` of ``store`` (module docstring).

    None when the cache belongs to another tier, model (``model_key``; None: the one
    its header names), version or history; any damage raises (ValueError, OSError...).
    A header may only name files of this cache in its own folder.
    """
    uid, current = store.uid(), store.generation()  # the tier's own failures propagate
    with open(ids_path, "rb") as fh:
        header = json.loads(fh.readline())
        body = fh.read()  # bytes: the ids become a string table, never one str each
    if not isinstance(header, dict):
        raise ValueError("the header is not a JSON object")
    gen = int(header["gen"])
    model = header.get("model") if model_key is None else model_key
    if not isinstance(model, str) or cache_paths(store, model)[0] != ids_path:
        raise ValueError("the header names a model this file is not the cache of")
    if (header.get("version") != CACHE_VERSION or header.get("model") != model
            or header.get("tier_uid") != uid or gen > current
            or header.get("epoch") != tier_epoch(store, gen)):
        return None
    n, dim = int(header["n"]), int(header["dim"])
    if crc32(body) != header.get("ids_crc"):
        raise ValueError("the ids fail their CRC-32")
    prefix = Path(cache_paths(store, model)[1]).name + "-"
    arrays: dict[str, np.ndarray] = {}
    by_row = "row_crcs" in header and "codes" in header  # the rows may be checked where read
    for key in _FILES:
        if key not in header and key != "matrix":
            continue
        name = header[key]
        if (not isinstance(name, str) or Path(name).name != name
                or not name.startswith(prefix) or not name.endswith(".npy")):
            raise ValueError(f"the header names {str(name)[:80]!r}, not a file of this cache in its own folder")
        path = ids_path.parent / name
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
        shape = (2, n) if key == "bounds" else (n,) if key in ("row_crcs", "keys", "order") else (n, dim)
        if arr.dtype != _DTYPES[key] or arr.shape != shape:
            raise ValueError(f"{name}: {arr.dtype} {arr.shape}, not {np.dtype(_DTYPES[key])} {shape}")
        if path.stat().st_size != arr.offset + arr.nbytes:
            raise ValueError(f"{name} is {path.stat().st_size} bytes, not {arr.offset + arr.nbytes}")
        if key == "matrix" and by_row and arr.nbytes > vector_base.PREAD_ABOVE_BYTES:
            arrays[key] = arr  # read with pread, each row checked against its CRC-32 there
            continue
        if key != "matrix" and huge_pages():  # scanned whole every query: into 2 MiB pages
            arr, crc = read_resident(path, arr.offset, arr.dtype, arr.shape)
        else:  # mapped (the float32 rows: read only where rows are rescored)
            crc = _file_crc(path, arr.offset)
        if crc != header.get(f"{key}_crc"):
            raise ValueError(f"{name} fails its CRC-32")
        arrays[key] = arr
    if ("codes" in arrays) != ("bounds" in arrays):
        raise ValueError("the header names int8 codes without bounds (or bounds without codes)")
    saved = "keys" in arrays and "order" in arrays  # the ids' fingerprint index, else computed
    ids = table_of_lines(body, (np.asarray(arrays["keys"]), np.asarray(arrays["order"])) if saved else None)
    del body
    if len(ids) != n or (n and dim < 1):
        raise ValueError(f"{len(ids)} ids do not match the header ({n}, {dim})")
    codes = Int8Codes(arrays["codes"], arrays["bounds"]) if "codes" in arrays else None
    checked_whole = not (by_row and arrays["matrix"].nbytes > vector_base.PREAD_ABOVE_BYTES)
    return CachedVectors(header, ids, arrays["matrix"], codes,
                         None if checked_whole else np.asarray(arrays["row_crcs"]))


def _write_whole(path: Path, arr: np.ndarray) -> int:
    """``arr`` written as an owner-only ``.npy`` file; the CRC-32 of its data."""
    data = np.ascontiguousarray(arr)
    with atomic_write(path, binary=True, mode=0o600) as fh:
        np.save(fh, data)
    return crc32(memoryview(data).cast("B"))


def _file_crc(path: Path, start: int) -> int:
    """CRC-32 of the bytes of ``path`` from ``start`` on, read (not mapped) in chunks."""
    crc = 0
    buf = bytearray(_CHUNK)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as fh:
        fh.seek(start)
        while True:
            got = fh.readinto(buf)
            if not got:
                return crc
            crc = crc32(view[:got], crc)


def _named_files(ids_path: Path) -> set[str]:
    """The file names the ids file's header names (empty: no readable header)."""
    try:
        with open(ids_path, "r", encoding="utf-8") as fh:
            header = json.loads(fh.readline())
    except (OSError, ValueError):
        return set()
    if not isinstance(header, dict):
        return set()
    return {header[k] for k in _FILES if isinstance(header.get(k), str)}


def _remove_stale(ids_path: Path, base: str, ours: set[str], previous: set[str]) -> None:
    """Delete cache files the ids file no longer names. A file younger than a minute
    is kept unless it is ours or one our save replaced (``previous``): another
    process may be about to publish it."""
    current = _named_files(ids_path)
    if not current:
        return
    now = time.time()
    for old in ids_path.parent.glob(Path(base).name + "-*.npy"):
        if old.name in current:
            continue
        try:  # a process still mapping an unlinked file keeps its pages (POSIX)
            if old.name in ours or old.name in previous or now - old.stat().st_mtime > 60:
                old.unlink()
        except OSError:
            pass
