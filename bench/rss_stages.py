"""Where the resident memory of a search process goes, stage by stage.

Opens a vault built by ``bench/run.py``'s build phase (``--_phase build``) as the
bench's hybrid (or FTS-only) phase does, then runs: the first query, N scans, N
full searches. After each stage it reads ``/proc/self/status`` (VmHWM = the peak
resident set since the previous stage, VmRSS, RssAnon, RssFile) and resets the
peak (``echo 5 > /proc/self/clear_refs``), so each stage's own peak shows; at the
end, the resident KB of every mapping from ``/proc/self/smaps``, grouped (a cache
file by its name with the random token replaced by ``*``; ``[heap]``, ``[anon]``,
``[libs]``).

    python bench/rss_stages.py WORKDIR [--config agent-hybrid.yaml] [--queries 40] [--json out.json]
    python bench/rss_stages.py WORKDIR --config agent.yaml --like-run [--queries 200 --warmup 30]

``--like-run``: the sequence of ``bench/run.py``'s search phase instead (first query,
``--warmup`` queries, then the queries, each as scan, full and -- FTS-only -- the raw
FTS5 baseline, a stage every 50 queries), then two stages that hand memory back to
tell what it was: ``PRAGMA shrink_memory`` on every tier connection (SQLite's page
cache), then glibc's ``malloc_trim(0)`` (freed heap the allocator kept).

Run it with the checkout's own interpreter (its ``tiervault``), under the bench lock.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
_STATUS = ("VmHWM", "VmRSS", "RssAnon", "RssFile")


def status_mb() -> dict[str, int]:
    """VmHWM / VmRSS / RssAnon / RssFile of this process, MB."""
    out = {}
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            if key in _STATUS:
                out[key] = int(value.split()[0]) // 1024
    return out


def reset_peak() -> None:
    with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
        fh.write("5")  # VmHWM := VmRSS


def mappings_mb(min_mb: float = 1.0) -> dict[str, float]:
    """Resident MB per group of mappings (module docstring), largest first."""
    groups: dict[str, int] = defaultdict(int)
    current = "[anon]"
    with open("/proc/self/smaps", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                parts = line.split(None, 5)
                path = parts[5].strip() if len(parts) > 5 else ""
                if not path:
                    current = "[anon]"
                elif path.startswith("["):
                    current = path
                elif ".so" in path or "/lib" in path:
                    current = "[libs]"
                else:
                    current = re.sub(r"-[0-9a-f]{12}", "-*", Path(path).name)
            elif line.startswith("Rss:"):
                groups[current] += int(line.split()[1])
    ranked = sorted(groups.items(), key=lambda kv: -kv[1])
    return {k: round(v / 1024, 1) for k, v in ranked if v / 1024 >= min_mb}


def like_run(brain: Any, args: argparse.Namespace, qs: list[dict[str, Any]], stage: Any) -> None:
    """bench/run.py's search phase (module docstring), then the hand-back stages."""
    import ctypes

    from bench.corpus import queries
    from bench.phases import fts5_baseline, query_kwargs

    hybrid = brain.vectors is not None
    baseline, close = fts5_baseline(args.workdir)

    def one(q: dict[str, Any]) -> None:
        for mode in ("scan", "full"):
            brain.search_intelligent(q["text"], mode=mode, **query_kwargs(q))
        if not hybrid:
            baseline(q)

    for q in queries(args.warmup, args.seed + 1):
        one(q)
    stage(f"{args.warmup} warm-up")
    for lo in range(0, len(qs), 50):
        for q in qs[lo:lo + 50]:
            one(q)
        stage(f"queries to {min(lo + 50, len(qs))}")
    close()
    for tier in brain.manager.ordered():
        db = getattr(tier.store, "db", None)
        conn = db.reader() if db is not None else None
        if conn is not None:
            conn.execute("PRAGMA shrink_memory")
    stage("PRAGMA shrink_memory")
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    stage("malloc_trim(0)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workdir", type=Path)
    ap.add_argument("--config", default="agent-hybrid.yaml", help="agent.yaml for FTS-only")
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--like-run", action="store_true", help="bench/run.py's search sequence")
    ap.add_argument("--warmup", type=int, default=30, help="--like-run: warm-up queries")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    stages: list[dict[str, Any]] = []

    def stage(name: str, **extra: Any) -> None:
        stages.append({"stage": name, **status_mb(), **extra})
        print(json.dumps(stages[-1]), file=sys.stderr, flush=True)
        reset_peak()

    reset_peak()
    from bench.corpus import queries
    from bench.phases import query_kwargs
    from tiervault.brain.brain import Brain

    stage("imports")
    brain = Brain.open(args.workdir / args.config)
    stage("open")
    first = queries(1, args.seed)[0]
    brain.search_intelligent(first["text"], mode="scan", **query_kwargs(first))
    stage("first query")
    qs = queries(args.queries, args.seed)
    if args.like_run:
        like_run(brain, args, qs, stage)
    for mode in () if args.like_run else ("scan", "full"):
        t0 = time.perf_counter()
        for q in qs:
            brain.search_intelligent(q["text"], mode=mode, **query_kwargs(q))
        stage(f"{len(qs)} {mode}", ms_per_query=round((time.perf_counter() - t0) / len(qs) * 1e3, 1))
    out = {"workdir": str(args.workdir), "config": args.config, "queries": args.queries,
           "peak_mb": max(s["VmHWM"] for s in stages), "stages": stages, "mappings_mb": mappings_mb()}
    brain.close()
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(out["mappings_mb"]), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
