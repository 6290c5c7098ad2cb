"""The int8 kernel over a build's codes: mapped (4 KiB pages), copied to anonymous 4 KiB
pages, and copied to anonymous memory asked for 2 MiB pages (MADV_HUGEPAGE).

    python bench/codes_pages.py --workdir DIR [--rounds 12] [--threads N] [--json out.json]

``DIR``: a ``bench/run.py`` build with vectors (its tiers' ``*.i8.npy`` vector cache
codes). Each round, for each variant in turn: run.py's cache eviction (the one-thread
NumPy product over 100K x 384 float32), then SimSIMD's ``cdist`` (i8 ``dot``, one
random quantized query) over every tier's codes back to back; wall ms per round, p50
and min, process CPU p50. ``AnonHugePages`` of the process after the copies says whether the OS gave
the 2 MiB pages. Written for issue 16 session 14 (embeddings/page_buffer.py).
"""

from __future__ import annotations

import argparse
import mmap
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

import numpy as np

sys.path.append(str(Path(__file__).resolve().parent.parent))

from bench.checkouts import load_avg  # noqa: E402
from bench.output import emit  # noqa: E402


def anon_copy(c: np.ndarray, huge: bool) -> tuple[np.ndarray, mmap.mmap]:
    m = mmap.mmap(-1, c.nbytes + (2 << 20), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    start = -int(np.frombuffer(m, dtype=np.uint8, count=1).ctypes.data) % (2 << 20)
    if huge:
        m.madvise(mmap.MADV_HUGEPAGE, start, c.nbytes)
    a = np.frombuffer(m, dtype=np.int8, count=c.size, offset=start).reshape(c.shape)
    a[:] = c
    return a, m


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--threads", type=int, default=1,
                    help="also time the 2 MiB copies over this many threads: SimSIMD's own "
                         "(cdist threads=N) and N Python threads each scoring a contiguous part")
    ap.add_argument("--claim-rows", type=int, default=0,
                    help="with --threads: also the library's split scan (dot_job.DotJob) "
                         "with claims of this many rows")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    import simsimd

    files = sorted((args.workdir / "tiers").glob("*.vec-*.i8.npy"))
    if not files:
        raise SystemExit(f"{args.workdir}/tiers holds no int8 vector codes")
    mapped = [np.asarray(np.load(f, mmap_mode="r")) for f in files]
    plain = [anon_copy(c, False) for c in mapped]
    huge = [anon_copy(c, True) for c in mapped]
    rollup = Path("/proc/self/smaps_rollup")
    anon_huge = next((line.split()[1] for line in rollup.read_text().splitlines()
                      if line.startswith("AnonHugePages")), None) if rollup.exists() else None
    rng = np.random.default_rng(1)
    q = rng.standard_normal(mapped[0].shape[1]).astype(np.float32)
    q /= np.linalg.norm(q)
    qc = np.rint(q / (np.abs(q).max() / 127)).astype(np.int8)[None, :]
    m = rng.standard_normal((100_000, q.size), dtype=np.float32)
    variants = {"mapped": mapped, "anon_4k": [a for a, _ in plain], "anon_2m": [a for a, _ in huge]}
    out = {"workdir": str(args.workdir), "rows": [int(c.shape[0]) for c in mapped],
           "bytes": int(sum(c.nbytes for c in mapped)), "anon_huge_kb": anon_huge, "load_before": load_avg()}
    def one(c: np.ndarray) -> None:
        np.asarray(simsimd.cdist(qc, c, metric="dot", out_dtype="float32"))

    def own_threads(c: np.ndarray) -> None:
        np.asarray(simsimd.cdist(qc, c, metric="dot", out_dtype="float32", threads=args.threads))

    pool = ThreadPoolExecutor(max_workers=args.threads)

    def split(c: np.ndarray) -> None:
        # contiguous parts, one per thread (SimSIMD releases the GIL), the caller's included
        cut = [c.shape[0] * i // args.threads for i in range(args.threads + 1)]
        futures = [pool.submit(one, c[cut[i]:cut[i + 1]]) for i in range(1, args.threads)]
        one(c[cut[0]:cut[1]])
        for f in futures:
            f.result()

    kernels: dict[str, tuple[list[np.ndarray], Callable[[np.ndarray], None]]] = {
        name: (codes, one) for name, codes in variants.items()}
    if args.threads > 1:
        kernels[f"anon_2m_simsimd_threads{args.threads}"] = (variants["anon_2m"], own_threads)
        kernels[f"anon_2m_split{args.threads}"] = (variants["anon_2m"], split)
        if args.claim_rows:
            from tiervault.embeddings.dot_job import DotJob

            kernels[f"anon_2m_claims{args.claim_rows}x{args.threads}"] = (
                variants["anon_2m"],
                lambda c: DotJob(simsimd, qc, c, args.claim_rows).start(args.threads - 1).result())
    times: dict[str, list[float]] = {k: [] for k in kernels}
    cpu: dict[str, list[float]] = {k: [] for k in kernels}  # the process's, every thread's
    for _ in range(args.rounds):
        for name, (codes, kernel) in kernels.items():
            np.einsum("ij,j->i", m, q)  # evict, as run.py's paired NumPy top-10
            c0, t0 = time.process_time(), time.perf_counter()
            for c in codes:
                kernel(c)
            times[name].append((time.perf_counter() - t0) * 1e3)
            cpu[name].append((time.process_time() - c0) * 1e3)
    out["kernel_ms"] = {k: {"p50": round(statistics.median(v), 2), "min": round(min(v), 2),
                            "cpu_p50": round(statistics.median(cpu[k]), 2)} for k, v in times.items()}
    out["load_after"] = load_avg()
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
