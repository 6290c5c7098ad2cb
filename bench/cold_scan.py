"""The cold-cache penalty of one FTS-only scan: warm, flushed, run.py's interleave, per stage.

    python bench/cold_scan.py --workdir DIR [--queries 300] [--conditions warm,flush,interleave]
        [--stages [--time MODULE:ATTR ...]] [--old CHECKOUT --swap FILE:ATTR ...] [--json out.json]

``DIR`` is a work directory made by ``bench/run.py``'s build phase (``tiers/*.db``).
``bench/run.py`` times a scan right after a ``full`` search and a raw FTS5 query
(``bench/phases.py`` ``time_interleaved``); in a loop of scans (``scan_profile.py``)
the same code costs ~1 ms less CPU. This script times each scan in a condition decided
by what ran just before it, untimed (always the previous query's scan first):

* ``warm``: nothing more (a loop of scans);
* ``flush``: a pass over a 64 MB NumPy buffer (read and written: more than the 32 MB L3
  and both L2s); ``flush4k``: the same over a mapping kept off huge pages; ``tlb``: one
  byte of each 4 KiB page of that mapping (16,384 pages, 1 MB of lines);
* ``interleave``: the previous query's ``full`` search and raw FTS5 query
  (``bench.phases.fts5_baseline``), as in run.py; ``full`` / ``fts5``: one of the two;
* ``pread``: 565 random 4 KiB ``os.pread`` of the tier files (the raw FTS5 query's
  SQLite page reads a query, by strace); ``py``: a sort of 60,000 short strings;
* ``spin`` (15 ms), ``spin2`` / ``spin5`` / ``spin50``: a Python loop reading the clock
  for that long (no memory, one tiny code path); ``sleep``: 15 ms asleep.

Pairing: every query is asked once per process (a query asked twice would be served
by the search's memos); with k conditions the query's condition is ``(i + r) % k`` in
process ``r``, so over k fresh processes every query is timed once in every condition,
with the same history of earlier queries, and each process mixes all of them (a slow
minute of the machine hits every condition alike). Reported: CPU (process and thread)
and wall p50 / mean per condition, sys time and minor faults, the gap (wall ms from
the end of the previous scan to the timed one), the median of the per-query paired
differences to ``warm``, and with ``--stages`` the CPU of each stage
(wrappers of ``scan_profile.py``, alike in every condition) and of the mirror's string
/ hash tables and checked arrays inside them.

A/B: ``--old CHECKOUT --swap FILE:ATTR`` takes those functions from an older checkout
(``bench/scan_swap_ab.py``'s swaps) on half the queries of each condition; 2k processes
time every query in every condition with both variants; the pairs add ``X/new - X/old``.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH (A/B: a checkout's own tiervault)

from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import fts5_baseline, query_kwargs, write_config  # noqa: E402

CONDITIONS = ("warm", "flush", "interleave")
#: More conditions (``--conditions``): parts of the interleave, alone.
EXTRA_CONDITIONS = ("full", "fts5", "pread", "py", "tlb", "flush4k", "spin", "sleep", "spin2", "spin5",
                    "spin50")
#: ``pread``: this many random 4 KiB ``os.pread`` of the tier files (the raw FTS5 query
#: makes ~565 a query, SQLite's page reads: strace); ``py``: Python work of ~10 ms
#: (a sort of 60,000 short strings), other bytecode over other objects.
PREADS = 565
#: ``spin``: a Python loop reading the clock for this long (little memory, one code path);
#: ``sleep``: the process sleeps as long (the core runs others or idles).
PAUSE_S = 0.015
#: ``tlb``: one byte written in each 4 KiB page of a 64 MB mapping kept off huge pages
#: (16,384 pages: more than the data TLBs hold, 1 MB of cache lines); ``flush4k``: every
#: line of that mapping (``flush``'s NumPy buffer may sit in 2 MB pages: few TLB entries).
FLUSH_BYTES = 64 << 20
#: Stages timed with --stages (not nested in each other; "rest" is the scan minus these).
STAGES = ("manager.search", "pool.from_candidates", "pool.add_external", "graph_hops",
          "latent.scores", "stage score", "stage rank", "stage render")
#: Also timed with --stages, inside the stages above (not added to "rest"): the mirror's
#: string / hash tables (look-ups, takes) and its checked arrays, outermost calls only.
TABLES = "vault tables (inside the stages)"


class StageCpu:
    """Process-CPU of named stages inside the current timed call (reset per query)."""

    def __init__(self) -> None:
        self.now: dict[str, float] = defaultdict(float)
        self.depth: dict[str, int] = defaultdict(int)

    def wrap_outer(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """As :meth:`wrap`, but a call made inside another call of the group is not
        counted again."""
        def timed(*a: Any, **kw: Any) -> Any:
            self.depth[name] += 1
            if self.depth[name] > 1:
                try:
                    return fn(*a, **kw)
                finally:
                    self.depth[name] -= 1
            c0 = time.process_time()
            try:
                return fn(*a, **kw)
            finally:
                self.now[name] += time.process_time() - c0
                self.depth[name] -= 1
        return timed

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*a: Any, **kw: Any) -> Any:
            c0 = time.process_time()
            try:
                return fn(*a, **kw)
            finally:
                self.now[name] += time.process_time() - c0
        return timed


def _patch_extra(clock: StageCpu, specs: tuple[str, ...]) -> None:
    """Wrap each ``MODULE:ATTR`` (``tiervault.brain.stages:gather``,
    ``tiervault.vault.lexicon:MirrorLexicon._top_k``) in a CPU timer of its own name,
    outermost calls only, not subtracted from "rest" (they may nest in the stages)."""
    import importlib

    for spec in specs:
        module_name, attr = spec.split(":")
        owner: Any = importlib.import_module(module_name)
        *path, name = attr.split(".")
        for part in path:
            owner = getattr(owner, part)
        fn = owner.__dict__[name] if path else getattr(owner, name)
        if isinstance(fn, (staticmethod, classmethod)):
            raise SystemExit(f"--time {spec}: a static or class method is not wrapped")
        setattr(owner, name, clock.wrap_outer(spec, fn))
        if not path and module_name.endswith(".stages") and name in ("gather", "expand", "score",
                                                                      "modulate", "rank", "render"):
            stages = importlib.import_module(module_name)
            stages.STAGES = tuple(getattr(stages, s) for s in ("gather", "expand", "score",
                                                                "modulate", "rank", "render"))


def _patch_stages(brain: Any, extra: tuple[str, ...] = ()) -> StageCpu:
    from tiervault.brain import latent, pool, stages

    clock = StageCpu()
    manager = brain.manager
    manager.search = clock.wrap("manager.search", manager.search)
    # the candidates' light rows: read by from_candidates, or (session 12 on) by read_rows
    # later with the neighbours' / vector hits' (from_candidates may call it: counted once)
    pool.Pool.from_candidates = clock.wrap_outer("pool.from_candidates", pool.Pool.from_candidates)
    if hasattr(pool.Pool, "read_rows"):
        pool.Pool.read_rows = clock.wrap_outer("pool.from_candidates", pool.Pool.read_rows)
    pool.Pool.add_external = clock.wrap("pool.add_external", pool.Pool.add_external)
    stages.graph_hops = clock.wrap("graph_hops", stages.graph_hops)
    latent.scores = clock.wrap("latent.scores", latent.scores)
    for st in ("score", "rank", "render"):
        setattr(stages, st, clock.wrap(f"stage {st}", getattr(stages, st)))
    from tiervault.vault import checked_array, hash_table, string_table

    for cls, names in ((string_table.StringTable, ("find", "held", "take")),
                       (string_table.StringColumn, ("slots", "held", "slots_many", "take", "take_distinct")),
                       (hash_table.HashTable, ("find", "held", "take")),
                       (checked_array.CheckedArray, ("get", "at", "check_ranges"))):
        for attr in names:
            setattr(cls, attr, clock.wrap_outer(TABLES, getattr(cls, attr)))
    stages.STAGES = tuple(getattr(stages, s) for s in ("gather", "expand", "score", "modulate",
                                                        "rank", "render"))
    _patch_extra(clock, extra)
    return clock


def collapse_heap() -> dict[str, int]:
    """Diagnostic (``--collapse``): ``madvise(MADV_COLLAPSE)`` over every private
    anonymous read-write mapping of this process of at least 2 MiB (the malloc heap,
    Python's arenas, NumPy's buffers): the kernel (6.1+) backs them with 2 MiB pages
    now, whatever the THP mode. What the scan's TLB misses cost, not a fix: it acts on
    the whole process."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    madv_collapse, huge = 25, 2 << 20
    out = {"ranges": 0, "bytes": 0, "failed": 0}
    for line in Path("/proc/self/maps").read_text().splitlines():
        parts = line.split()
        span, perms = parts[0], parts[1]
        name = parts[5] if len(parts) > 5 else ""
        if not perms.startswith("rw") or perms[3] != "p" or name not in ("", "[heap]"):
            continue
        lo, hi = (int(x, 16) for x in span.split("-"))
        lo, hi = (lo + huge - 1) // huge * huge, hi // huge * huge
        if hi - lo < huge:
            continue
        out["ranges"] += 1
        out["bytes"] += hi - lo
        if libc.madvise(lo, hi - lo, madv_collapse) != 0:
            out["failed"] += 1
    return out


def _rss_mb() -> dict[str, float]:
    """This process's resident memory now (``/proc/self/status``: anonymous, file-backed)."""
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
            fields[key] = round(int(value.split()[0]) / 1024, 1)
    return fields


def child(workdir: Path, n: int, seed: int, rotation: int, with_stages: bool, warmup: int,
          conditions: tuple[str, ...], mmap_mib: int = 0, old: Path | None = None,
          swap_specs: tuple[str, ...] = (), extra: tuple[str, ...] = (),
          collapse: bool = False) -> dict[str, Any]:
    """One process: every query once, in condition ``(i + rotation) % len(conditions)``;
    with ``old``, the ``swap_specs`` functions taken from that checkout on half the queries
    (variant ``(i // k + rotation // k) % 2``, k conditions: over 2k processes each query
    meets every condition with each variant)."""
    import resource

    import numpy as np

    from tiervault.brain.brain import Brain

    swaps: list[Any] = []
    callers: list[Any] = []
    if old is not None:
        import importlib

        from bench import scan_swap_ab
        from tiervault.brain import stages
        from tiervault.vault import manager, postings

        swaps = [scan_swap_ab.Swap(old, spec, i) for i, spec in enumerate(swap_specs)]
        callers = [manager, stages, postings, *scan_swap_ab.OLD_MODULES,
                   *(importlib.import_module("tiervault." + sp.split(":")[0].removesuffix(".py")
                                             .replace("/", ".")) for sp in swap_specs)]
    brain = Brain.open(write_config(workdir))
    if mmap_mib:  # a diagnostic: SQLite reads its pages through a mapping of the file
        for t in brain.manager.ordered():
            getattr(t.store, "db").conn.execute(f"PRAGMA mmap_size = {mmap_mib << 20}")
    baseline, close = fts5_baseline(workdir)
    buf = np.zeros(FLUSH_BYTES // 8, dtype=np.int64)
    rng = np.random.default_rng(seed)
    files = [os.open(p, os.O_RDONLY) for p in sorted((workdir / "tiers").glob("*.db"))]
    sizes = [os.fstat(fd).st_size // 4096 for fd in files]
    small = mmap.mmap(-1, FLUSH_BYTES)
    if hasattr(small, "madvise") and hasattr(mmap, "MADV_NOHUGEPAGE"):
        small.madvise(mmap.MADV_NOHUGEPAGE)
    pages = np.frombuffer(small, dtype=np.uint8)
    lines = np.frombuffer(small, dtype=np.int64)
    words = [f"w{x:x}" for x in rng.integers(0, 1 << 40, 60_000).tolist()]

    def scan(q: dict[str, Any]) -> Any:
        return brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))

    def full(q: dict[str, Any]) -> Any:
        return brain.search_intelligent(q["text"], mode="full", **query_kwargs(q))

    for q in queries(warmup, seed + 1):
        scan(q), full(q), baseline(q)
    collapsed = collapse_heap() if collapse else None
    clock = _patch_stages(brain, extra) if with_stages else None
    qs = queries(n, seed)
    rows = []
    prev = queries(1, seed + 2)[0]
    for i, q in enumerate(qs):
        k = len(conditions)
        cond = conditions[(i + rotation) % k]
        variant = ""
        if swaps:
            is_old = (i // k + rotation // k) % 2 == 1
            for sw in swaps:
                sw.use(is_old, callers)
            variant = "/old" if is_old else "/new"
        scan(prev)
        prev_end = time.perf_counter_ns()
        if cond == "flush":
            buf += 1  # read and write every line: evicts the scan's lines from L2 and L3
        if cond in ("interleave", "full"):
            full(prev)
        if cond in ("interleave", "fts5"):
            baseline(prev)
        if cond == "pread":
            for k, page in zip(rng.integers(0, len(files), PREADS).tolist(), rng.random(PREADS).tolist()):
                os.pread(files[k], 4096, int(page * sizes[k]) * 4096)
        if cond == "tlb":
            pages[::4096] += 1
        if cond == "flush4k":
            lines += 1
        if cond.startswith("spin"):
            end = time.perf_counter() + (int(cond[4:]) / 1e3 if cond[4:] else PAUSE_S)
            while time.perf_counter() < end:
                pass
        if cond == "sleep":
            time.sleep(PAUSE_S)
        if cond == "py":
            sorted(words, key=str.upper)
        if clock is not None:
            clock.now.clear()
        ru0 = resource.getrusage(resource.RUSAGE_SELF)
        c0, t0, h0 = time.process_time_ns(), time.perf_counter_ns(), time.thread_time_ns()
        scan(q)
        wall, cpu = time.perf_counter_ns() - t0, time.process_time_ns() - c0
        thread = time.thread_time_ns() - h0
        ru1 = resource.getrusage(resource.RUSAGE_SELF)
        row = {"i": i, "cond": cond + variant, "cpu_ms": cpu / 1e6, "wall_ms": wall / 1e6, "thread_ms": thread / 1e6,
               "gap_ms": (t0 - prev_end) / 1e6,
               "sys_ms": (ru1.ru_stime - ru0.ru_stime) * 1e3, "minflt": ru1.ru_minflt - ru0.ru_minflt}
        if clock is not None:
            row["stages"] = {k: v * 1e3 for k, v in clock.now.items()}
        rows.append(row)
        prev = q
    close()
    brain.close()
    for fd in files:
        os.close(fd)
    del pages, lines
    small.close()
    return {"rotation": rotation, "rows": rows, "rss_mb_end": _rss_mb(), "collapsed": collapsed,
            "threads": [t.name for t in threading.enumerate()]}


def _stats(xs: list[float]) -> dict[str, float]:
    s = sorted(xs)
    return {"p50": round(statistics.median(s), 3), "mean": round(statistics.fmean(s), 3),
            "p95": round(s[min(len(s) - 1, int(0.95 * len(s)))], 3), "n": len(s)}


def summarize(children: list[dict[str, Any]], conditions: tuple[str, ...],
              extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """Per condition: CPU / wall stats, stages' mean CPU; per-query paired differences."""
    by: dict[str, dict[int, dict[str, Any]]] = {c: {} for c in conditions}
    for ch in children:
        for r in ch["rows"]:
            by[r["cond"]][r["i"]] = r
    out: dict[str, Any] = {}
    for c in conditions:
        rows = list(by[c].values())
        if not rows:
            continue
        d: dict[str, Any] = {"cpu_ms": _stats([r["cpu_ms"] for r in rows]),
                             "wall_ms": _stats([r["wall_ms"] for r in rows]),
                             "thread_cpu_ms": _stats([r["thread_ms"] for r in rows]),
                             "gap_ms": _stats([r.get("gap_ms", 0.0) for r in rows]),
                             "sys_ms_mean": round(statistics.fmean(r["sys_ms"] for r in rows), 3),
                             "minor_faults_mean": round(statistics.fmean(r["minflt"] for r in rows), 1)}
        if "stages" in rows[0]:
            st = {k: round(statistics.fmean(r["stages"].get(k, 0.0) for r in rows), 3) for k in STAGES}
            st["rest"] = round(statistics.fmean(r["cpu_ms"] for r in rows) - sum(st.values()), 3)
            for k in (TABLES, *extra):
                st[k] = round(statistics.fmean(r["stages"].get(k, 0.0) for r in rows), 3)
            d["stage_cpu_ms_mean"] = st
        out[c] = d
    paired: dict[str, Any] = {}
    pairs = [(c, "warm" + c[len(c.split("/")[0]):]) for c in conditions if not c.startswith("warm")]
    pairs += [(c, c[:-4] + "/old") for c in conditions if c.endswith("/new")]
    for c, base in pairs:
        common = sorted(set(by[c]) & set(by[base]))
        if not common:
            continue
        diff = [by[c][i]["cpu_ms"] - by[base][i]["cpu_ms"] for i in common]
        p = {"queries": len(common), "cpu_ms_p50": round(statistics.median(diff), 3),
             "sys_ms_mean": round(statistics.fmean(by[c][i]["sys_ms"] - by[base][i]["sys_ms"]
                                                   for i in common), 3),
             "cpu_ms_mean": round(statistics.fmean(diff), 3)}
        if "stages" in by[c][common[0]]:
            p["stage_cpu_ms_mean"] = {
                k: round(statistics.fmean(by[c][i]["stages"].get(k, 0.0)
                                          - by[base][i]["stages"].get(k, 0.0) for i in common), 3)
                for k in (*STAGES, TABLES, *extra)}
        paired[f"{c} - {base}"] = p
    out["paired"] = paired
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--conditions", default=",".join(CONDITIONS),
                    help=f"comma-separated, warm first; of {CONDITIONS + EXTRA_CONDITIONS}")
    ap.add_argument("--processes", type=int, help="rotations (default: one per condition, so "
                    "each query is timed in each condition)")
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--stages", action="store_true", help="per-stage CPU (wrappers)")
    ap.add_argument("--mmap-mib", type=int, default=0,
                    help="diagnostic: PRAGMA mmap_size (MiB) on the Brain's tier connections")
    ap.add_argument("--collapse", action="store_true",
                    help="diagnostic: the process's anonymous memory put in 2 MiB pages after the "
                    "warm-up (MADV_COLLAPSE)")
    ap.add_argument("--old", type=Path, help="A/B: an older checkout whose --swap functions "
                    "answer half the queries (bench/scan_swap_ab.py's swaps)")
    ap.add_argument("--swap", action="append", default=[], help="FILE:ATTR taken from --old")
    ap.add_argument("--time", action="append", default=[], metavar="MODULE:ATTR",
                    help="with --stages: also the CPU of this function (outermost calls), "
                    "e.g. tiervault.brain.stages:gather")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    conditions = tuple(args.conditions.split(","))
    if conditions[0] != "warm" or not set(conditions) <= set(CONDITIONS + EXTRA_CONDITIONS):
        ap.error(f"--conditions: warm first, then any of {CONDITIONS[1:] + EXTRA_CONDITIONS}")
    if bool(args.old) != bool(args.swap):
        ap.error("--old and --swap go together")
    processes = args.processes or len(conditions) * (2 if args.old else 1)
    if args.child is not None:
        print(json.dumps(child(args.workdir, args.queries, args.seed, args.child, args.stages,
                               args.warmup, conditions, args.mmap_mib, args.old, tuple(args.swap),
                               tuple(args.time), args.collapse)))
        return 0
    labels = tuple(f"{c}/{v}" for c in conditions for v in ("new", "old")) if args.old else conditions
    out: dict[str, Any] = {"workdir": str(args.workdir), "queries": args.queries,
                           "conditions": conditions, "mmap_mib": args.mmap_mib,
                           "collapse": args.collapse, "processes": processes,
                           "stages": args.stages, "time": args.time, "old": str(args.old) if args.old else None,
                           "swaps": args.swap, "runs": []}
    children = []
    for r in range(processes):
        before = [round(x, 2) for x in os.getloadavg()]
        cmd = [sys.executable, __file__, "--workdir", str(args.workdir), "--queries", str(args.queries),
               "--warmup", str(args.warmup), "--seed", str(args.seed), "--child", str(r),
               "--conditions", args.conditions, "--mmap-mib", str(args.mmap_mib)]
        if args.old:
            cmd += ["--old", str(args.old), *(x for sp in args.swap for x in ("--swap", sp))]
        if args.collapse:
            cmd.append("--collapse")
        if args.stages:
            cmd += ["--stages", *(x for sp in args.time for x in ("--time", sp))]
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True)
        ch = json.loads(proc.stdout.strip().splitlines()[-1])
        children.append(ch)
        out["runs"].append({"rotation": r, "load_before": before,
                            "load_after": [round(x, 2) for x in os.getloadavg()],
                            "rss_mb_end": ch["rss_mb_end"], "threads": ch["threads"],
                            "collapsed": ch.get("collapsed"),
                            **summarize([ch], labels, tuple(args.time))})
        print(f"process {r}: load {before[0]}", file=sys.stderr)
    out["all"] = summarize(children, labels, tuple(args.time))
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
