"""The scan's reads by system call or through mappings, A/B in ONE process (issue 16, session 16).

    python bench/s16_read_paths_ab.py --workdir W1 --workdir W2 [...] [--variants none,both]
        [--queries 900] [--flip] [--labels A,B] [--json out.json]

``W1``, ``W2``, ...: copies of one ``bench/run.py`` build (``tiers/*.db``), one a variant.
Variants: ``none`` -- every mapping off, as before session 16: ``connection.TIER_MMAP_BYTES
= 0`` (SQLite reads pages with ``pread``) and ``mirror_cache.PREAD_ABOVE_BYTES = -1`` (the
mirror's postings columns, TF-IDF and latent rows read with ``preadv``); ``sqlite`` /
``mirror``: one of them on (this checkout's value: a tier file up to 256 MiB, a cache file
up to 64 MiB read through its mapping); ``both``: the two, a compressed vector base's float32
rows read with ``pread`` (session 16's defaults); ``all``: also that float32 file, up to 128
MiB, read through its mapping where rescored (``vector_base.PREAD_ABOVE_BYTES``, the default
since session 18: it matters with ``--hybrid``, hybrid scans with run.py's hash embedder). Each brain is
warmed (30 scans: its mirrors load then, under its own settings), then each new bench
query is timed (process CPU of ``search_intelligent(mode="scan")``) on one brain, the
brains taken in turn by query (``--flip``: in reverse order), in two conditions alternating
in pairs: ``warm`` (a scan of the same brain just before, untimed) and ``spin`` (a
Python loop reading the clock for 15 ms just before: session 11's stand-in for
run.py's interleave, the cold-cache penalty). ``--labels``: a name per work directory, so
one variant can run on copies that differ in something else (session 18: the page cache's
folio sizes, ``bench/s18_folio_copy.py``). Also counted: read system calls a timed
scan (``syscr`` of ``/proc/self/io``) and the process's RSS at the end (all brains).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: a checkout's own tiervault

from bench.checkouts import load_avg  # noqa: E402
from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import open_hybrid_brain, query_kwargs, write_config  # noqa: E402

SPIN_S = 0.015
#: ``--hybrid``: the bench's hash embedder's dimensions (run.py's default)
HYBRID_DIM = 384
VARIANTS = ("none", "sqlite", "mirror", "both", "all")
#: ``all``: a compressed vector base's float32 file up to this size read through its mapping
VECTOR_MAP_BYTES = 128 << 20


def _syscr() -> int:
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("syscr")).split()[1])


def process_mb(*keys: str) -> dict[str, float]:
    with open("/proc/self/status") as f:
        return {k: round(int(line.split()[1]) / 1024, 1) for line in f for k in keys
                if line.startswith(k + ":")}


def open_brain(workdir: Path, variant: str, hybrid: bool = False) -> Any:
    """A Brain on ``workdir``, its tier files, mirror caches and float32 vector files
    mapped as ``variant`` says, warmed (``hybrid``: with the bench's hash embedder)."""
    from tiervault.brain.brain import Brain
    from tiervault.embeddings import vector_base
    from tiervault.vault import connection, mirror_cache
    saved = connection.TIER_MMAP_BYTES, mirror_cache.PREAD_ABOVE_BYTES, vector_base.PREAD_ABOVE_BYTES
    if variant not in ("sqlite", "both", "all"):
        connection.TIER_MMAP_BYTES = 0
    if variant not in ("mirror", "both", "all"):
        mirror_cache.PREAD_ABOVE_BYTES = -1
    vector_base.PREAD_ABOVE_BYTES = VECTOR_MAP_BYTES if variant == "all" else -1
    try:
        brain = open_hybrid_brain(workdir, HYBRID_DIM) if hybrid else Brain.open(write_config(workdir))
        for q in queries(30, 8):  # mirrors and vectors load (connections open) under these settings
            brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
    finally:
        connection.TIER_MMAP_BYTES, mirror_cache.PREAD_ABOVE_BYTES, vector_base.PREAD_ABOVE_BYTES = saved
    return brain


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, action="append", required=True, help="one per variant")
    ap.add_argument("--variants", default="none,both", help="of " + ", ".join(VARIANTS))
    ap.add_argument("--hybrid", action="store_true", help="hybrid scans (the build must hold vectors)")
    ap.add_argument("--queries", type=int, default=900)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--flip", action="store_true")
    ap.add_argument("--labels", help="a name per --workdir (default: the variants')")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    variants = args.variants.split(",")
    if len(variants) != len(args.workdir) or not set(variants) <= set(VARIANTS):
        ap.error("one --workdir per variant, variants of " + ", ".join(VARIANTS))
    names = args.labels.split(",") if args.labels else variants
    if len(set(names)) != len(variants):
        ap.error("one distinct label per --workdir")
    out: dict[str, Any] = {"load_before": load_avg(), "queries": args.queries, "flip": args.flip,
                           "hybrid": args.hybrid, "labels": dict(zip(args.labels.split(","), variants))
                           if args.labels else None}
    brains = {n: open_brain(w, v, args.hybrid) for n, v, w in zip(names, variants, args.workdir)}
    turn = names[::-1] if args.flip else names

    def scan(v: str, q: dict[str, Any]) -> None:
        brains[v].search_intelligent(q["text"], mode="scan", **query_kwargs(q))

    cpu: dict[str, dict[str, list[float]]] = {c: {v: [] for v in names} for c in ("warm", "spin")}
    reads = {v: 0 for v in names}
    extra = iter(queries(args.queries, args.seed + 1000))
    for i, q in enumerate(queries(args.queries, args.seed)):
        v = turn[i % len(turn)]
        cond = "spin" if (i // len(turn)) % 2 else "warm"
        if cond == "spin":
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < SPIN_S:
                pass
        else:
            scan(v, next(extra))
        r0, c0 = _syscr(), time.process_time()
        scan(v, q)
        cpu[cond][v].append((time.process_time() - c0) * 1e3)
        reads[v] += _syscr() - r0
    for cond, by in cpu.items():
        out[cond] = {v: {"n": len(xs), "cpu_p50_ms": round(statistics.median(xs), 3),
                         "cpu_mean_ms": round(statistics.fmean(xs), 3)} for v, xs in by.items()}
        base = out[cond][names[0]]["cpu_p50_ms"]
        out[cond]["p50 / first variant's"] = {v: round(out[cond][v]["cpu_p50_ms"] / base, 3) for v in names[1:]}
    out["read_syscalls_a_scan"] = {v: round(len(names) * n / args.queries, 1) for v, n in reads.items()}
    out["process_mb_end"] = process_mb("VmHWM", "RssAnon", "RssFile")
    out["load_after"] = load_avg()
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
