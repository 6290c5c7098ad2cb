"""Benchmark of federated vector recall (not a test): latency and index open time.

    .venv/bin/python bench/vector_recall.py [--n 100000] [--open-n 1000000] [--dim 384]

A. A real tier with ``--n`` entries and random unit vectors (dim ``--dim``):
   first open (SQL load + build + persist), reopen from the memory-mapped cache,
   top-50 latency through ``VectorRecall.search`` (default filters: postings
   mask + id mapping), through ``VectorIndex.search`` alone, and with a filter
   matching 1 % of the tier.
B. A persisted index of ``--open-n`` vectors: time until the tier's index is
   ready to search (``VectorRecall.index``), then the first and median searches.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import uuid
import zlib
from pathlib import Path

import numpy as np

from tiervault.embeddings.recall import CACHE_VERSION, VectorRecall, cache_paths
from tiervault.vault.entry import Entry
from tiervault.vault.filters import Filters
from tiervault.vault.manager import VaultManager

MODEL = "bench:random"


def unit(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    m = rng.standard_normal((n, dim), dtype=np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    return m


def timed(fn, repeat: int) -> tuple[float, float]:
    """(median ms, p95 ms) of ``repeat`` calls after 3 warm-up calls."""
    for _ in range(3):
        fn()
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    out.sort()
    return round(statistics.median(out), 2), round(out[int(0.95 * (len(out) - 1))], 2)


def part_a(workdir: Path, n: int, dim: int, repeat: int) -> dict:
    rng = np.random.default_rng(1)
    with VaultManager.at({"agent": str(workdir / "a.db")}) as m:
        store = m.store("agent")
        t0 = time.perf_counter()
        store.capture_many(Entry.create(id=f"e{i:07d}", title=f"t {i}", description="d",
                                        domain="rare" if i % 100 == 0 else "common") for i in range(n))
        for s in range(0, n, 20_000):
            ids = [f"e{i:07d}" for i in range(s, min(s + 20_000, n))]
            store.put_vectors(MODEL, zip(ids, ["h"] * len(ids), unit(rng, len(ids), dim)))
        setup_s = time.perf_counter() - t0
        store.postings()  # the BM25 mirror the filters use (built by search anyway)
        t0 = time.perf_counter()
        recall = VectorRecall(m, MODEL)
        index = recall.index("agent")
        first_open = time.perf_counter() - t0
        t0 = time.perf_counter()
        index2 = VectorRecall(m, MODEL).index("agent")
        reopen = time.perf_counter() - t0
        assert len(index2) == n
        qs = unit(rng, 64, dim)
        it = iter(range(10**9))
        q = lambda: qs[next(it) % 64]  # noqa: E731
        rare = Filters.build(domain="rare")
        return {
            "n": n, "dim": dim, "setup_s": round(setup_s, 1),
            "first_open_s (SQL load + build + persist)": round(first_open, 3),
            "reopen_from_cache_s": round(reopen, 3),
            "index.search top50 (ms median, p95)": timed(lambda: index.search(q(), 50), repeat),
            "recall.search top50, default filters (ms)": timed(lambda: recall.search(q(), 50), repeat),
            "recall.search top50, 1% filter (ms)": timed(lambda: recall.search(q(), 50, filters=rare), repeat),
            "numpy m@q + argpartition (ms)": timed(
                lambda: np.argpartition(index.snapshot(copy=False)[1] @ q(), n - 50)[n - 50:], repeat),
        }


def part_b(workdir: Path, n: int, dim: int, repeat: int) -> dict:
    """Open a persisted n x dim index (cache written directly; the tier holds the header's uid/gen)."""
    rng = np.random.default_rng(2)
    with VaultManager.at({"agent": str(workdir / "b.db")}) as m:
        store = m.store("agent")
        store.capture(Entry.create(id="seed", title="seed", description="d"))
        ids_path, base = cache_paths(store, MODEL)
        matrix_path = Path(f"{base}-{uuid.uuid4().hex[:12]}.npy")
        mm = np.lib.format.open_memmap(matrix_path, mode="w+", dtype=np.float32, shape=(n, dim))
        for s in range(0, n, 100_000):
            mm[s:s + 100_000] = unit(rng, min(100_000, n - s), dim)
        mm.flush()
        del mm
        mapped = np.load(matrix_path, mmap_mode="r")
        body = "\n".join(f"x{i:08d}" for i in range(n))
        header = {"version": CACHE_VERSION, "model": MODEL, "tier_uid": store.uid(),
                  "gen": store.generation(), "epoch": store.epoch_at(store.generation()),
                  "n": n, "dim": dim, "matrix": matrix_path.name,
                  "matrix_crc": zlib.crc32(memoryview(np.ascontiguousarray(mapped)).cast("B")),
                  "ids_crc": zlib.crc32(body.encode("utf-8"))}
        del mapped
        ids_path.write_text(json.dumps(header) + "\n" + body)
        size_gb = matrix_path.stat().st_size / 1e9
        # Warm the page cache once (a just-written file usually is); report warm numbers.
        np.load(matrix_path, mmap_mode="r").sum(dtype=np.float64)
        t0 = time.perf_counter()
        recall = VectorRecall(m, MODEL)
        index = recall.index("agent")
        open_s = time.perf_counter() - t0
        assert len(index) == n
        q = unit(rng, 1, dim)[0]
        t0 = time.perf_counter()
        index.search(q, 50)
        first_ms = (time.perf_counter() - t0) * 1000
        t0 = time.perf_counter()
        index.rows_for(["x00000001"])
        id_map_s = time.perf_counter() - t0
        qs = unit(rng, 16, dim)
        it = iter(range(10**9))
        return {
            "n": n, "dim": dim, "matrix_gb": round(size_gb, 2),
            "open_ready_to_search_s": round(open_s, 3),
            "first_search_ms": round(first_ms, 1),
            "id_map_on_first_filtered_or_update_s": round(id_map_s, 3),
            "index.search top50 (ms median, p95)": timed(lambda: index.search(qs[next(it) % 16], 50), repeat),
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--open-n", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--repeat", type=int, default=50)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="tv-bench-recall-") as d:
        out = {"A": part_a(Path(d), args.n, args.dim, args.repeat)}
        print(json.dumps(out, indent=1), flush=True)
        out["B"] = part_b(Path(d), args.open_n, args.dim, max(5, args.repeat // 5))
        print(json.dumps(out["B"], indent=1))


if __name__ == "__main__":
    main()
