"""Old and new versions of some scan functions, swapped query by query in ONE process.

    python bench/scan_swap_ab.py --old /path/to/old/checkout --workdir DIR \
        --swap vault/dedup.py:keep --swap vault/string_table.py:StringTable._find ... \
        [--caller tiervault.vault.postings] [--time tiervault.vault.manager:VaultManager._search] \
        [--queries 800] [--hybrid] [--cold] [--per-call] [--filtered] [--drop MODULE:Class.attr] [--json out.json]

Fresh processes on this shared 2-core machine differ by +-10-25 % in scan CPU (other
jobs beside the bench lock), more than a 0.1-0.3 ms change. Here one process (this
checkout's ``tiervault``, ``DIR`` from ``bench/run.py``'s build phase) answers
``--queries`` new bench queries (``search_intelligent(mode="scan")``, after 30 warm-up
scans) with each ``--swap`` target taken from ``OLD`` (the file loaded as a separate
module, its function or class attribute set in place of this checkout's) on even
queries, from this checkout on odd ones, pairs in alternating order (``--flip``: the
other way round; run both: each query is then timed under both variants, in two
processes): both variants see the same load, the same warm caches and the same kind
of queries. Process CPU (and wall clock, and the calling thread's own CPU: a hybrid
scan's pool thread apart) per query; ``old`` / ``new`` medians and means, and ``new / old``. The swapped functions
must be drop-in replacements (rankings are compared by ``bench/rank_compare.py``).
``--shared FILE:NAME``: the old modules loaded from ``FILE`` use this checkout's
``NAME`` (e.g. ``vault/string_table.py:lookup_fingerprints``: one fingerprint memo for
both variants, as session 12's A/B of ``held()`` did by editing the old files).
``--per-call``: each ``--time`` function's calls timed one by one as well, p50 / mean
us a call in each variant, all calls and those whose first argument after ``self`` has
at most ``--few`` items (e.g. ``Postings.slots_of`` of a graph neighbour's few ids).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: a checkout's own tiervault

from bench.checkouts import load_avg  # noqa: E402
from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import numpy_topk, open_hybrid_brain, query_kwargs, write_config  # noqa: E402

#: ``file:attr`` in this session's scan changes (issue 16, session 9)
DEFAULT_SWAPS = ("vault/dedup.py:keep", "vault/string_table.py:StringTable._find",
                 "vault/hash_table.py:HashTable._find", "vault/postings.py:Postings.slots_of",
                 "vault/postings.py:Postings.slots_by_hash", "vault/postings.py:Postings.query_tfidf",
                 "vault/postings.py:Postings.n_alive")


#: every module loaded from OLD: an old function that calls another swapped one by its
#: imported name (old stages -> text_relevance) gets the same variant as the rest
OLD_MODULES: list[Any] = []


class Swap:
    """One target: this checkout's owner object and attribute, the old and new values."""

    def __init__(self, old_root: Path, spec: str, n: int) -> None:
        path, attr = spec.split(":")
        module_name = "tiervault." + path.removesuffix(".py").replace("/", ".")
        new_mod = importlib.import_module(module_name)
        loader = importlib.util.spec_from_file_location(f"_old_swap_{n}", old_root / path)
        assert loader is not None and loader.loader is not None
        old_mod = importlib.util.module_from_spec(loader)
        sys.modules[loader.name] = old_mod  # a dataclass looks its module up while it is built
        loader.loader.exec_module(old_mod)
        OLD_MODULES.append(old_mod)
        *owner_path, self.name = attr.split(".")
        self.owner: Any = new_mod
        old_owner: Any = old_mod
        for part in owner_path:
            self.owner, old_owner = getattr(self.owner, part), getattr(old_owner, part)
        self.new = self.owner.__dict__[self.name] if owner_path else getattr(self.owner, self.name)
        self.old = old_owner.__dict__[self.name] if owner_path else getattr(old_owner, self.name)
        self.spec = spec
        self.path = path
        self.old_mod = old_mod
        # the old code's other classes are this checkout's (an isinstance check in an old
        # function must see the objects the new code builds); the swapped one stays old
        swapped = owner_path[0] if owner_path else self.name
        for name, value in list(vars(old_mod).items()):
            if (name != swapped and isinstance(value, type)
                    and isinstance(getattr(new_mod, name, None), type)):
                setattr(old_mod, name, getattr(new_mod, name))

    def use(self, old: bool, callers: list[Any]) -> None:
        value = self.old if old else self.new
        setattr(self.owner, self.name, value)
        for mod in callers:  # a module that imported the function by name
            if getattr(mod, self.name, None) in (self.old, self.new):
                setattr(mod, self.name, value)


class Drop:
    """``MODULE:Class.attr`` (``--drop``): removed from its class on the old side, put back on the new."""

    def __init__(self, spec: str) -> None:
        module_name, attr = spec.split(":")
        owner_name, self.name = attr.rsplit(".", 1)
        self.owner: Any = importlib.import_module(module_name)
        for part in owner_name.split("."):
            self.owner = getattr(self.owner, part)
        self.value = self.owner.__dict__[self.name]

    def use(self, old: bool) -> None:
        if old:
            if self.name in self.owner.__dict__:
                delattr(self.owner, self.name)
        else:
            setattr(self.owner, self.name, self.value)


def _timed(spec: str, spent: dict[str, float], calls: list[tuple[float, int]] | None = None) -> None:
    """Wrap ``MODULE:ATTR`` (``tiervault.vault.lexicon:MirrorLexicon.lexical_top_k``) so
    its wall time (perf_counter) is added to ``spent[spec]`` on every call; with ``calls``,
    each call's time and its first argument's length (after ``self`` for a method; -1
    if it has none) are appended there too."""
    module_name, attr = spec.split(":")
    owner: Any = importlib.import_module(module_name)
    *owner_path, name = attr.split(".")
    for part in owner_path:
        owner = getattr(owner, part)
    fn = owner.__dict__[name] if owner_path else getattr(owner, name)

    method = bool(owner_path)

    def timed(*a: Any, **kw: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*a, **kw)
        finally:
            dt = time.perf_counter() - t0
            spent[spec] = spent.get(spec, 0.0) + dt
            if calls is not None:
                arg = a[1] if method and len(a) > 1 else a[0] if a and not method else None
                calls.append((dt, len(arg) if hasattr(arg, "__len__") else -1))
    setattr(owner, name, timed)


def _calls_summary(xs: list[tuple[float, int]], few: int, queries: int) -> dict[str, Any]:
    def stats(ts: list[float]) -> dict[str, Any]:
        return ({"calls_per_query": round(len(ts) / queries, 2), "p50_us": round(statistics.median(ts) * 1e6, 1),
                 "mean_us": round(statistics.fmean(ts) * 1e6, 1)} if ts else {"calls_per_query": 0})
    return {"all": stats([t for t, _ in xs]), f"first_arg_len_le_{few}": stats([t for t, n in xs if 0 <= n <= few])}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", type=Path, required=True)
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--swap", action="append", default=[], help="FILE:ATTR (default: this session's)")
    ap.add_argument("--queries", type=int, default=800)
    ap.add_argument("--seed", type=int, default=9)
    ap.add_argument("--flip", action="store_true",
                    help="the other assignment of queries to variants (run both, same seed)")
    ap.add_argument("--caller", action="append", default=[],
                    help="another module importing a swapped function by name (tiervault.vault.postings)")
    ap.add_argument("--time", action="append", default=[],
                    help="MODULE:ATTR timed (perf_counter, summed per query) in each variant; not a swapped one")
    ap.add_argument("--cold", action="store_true",
                    help="before each scan (untimed) bench/run.py's one-thread NumPy top-10 over 100K x 384 "
                         "float32 rows, as its paired pass (caches evicted)")
    ap.add_argument("--hybrid", action="store_true",
                    help="hybrid scans: DIR's vectors with the hash embedder (bench/run.py's build)")
    ap.add_argument("--drop", action="append", default=[], metavar="MODULE:Class.attr",
                    help="an optional method looked up by name, absent on the old side's queries "
                         "(this checkout's code without it: its fallback)")
    ap.add_argument("--shared", action="append", default=[],
                    help="FILE:NAME: the old modules of FILE use this checkout's NAME (a shared memo)")
    ap.add_argument("--per-call", action="store_true", help="each --time function's calls timed one by one too")
    ap.add_argument("--few", type=int, default=8, help="with --per-call: the calls with at most this many items")
    ap.add_argument("--filtered", action="store_true",
                    help="only bench queries that carry filters (~1 in 4; drawn until --queries are found)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    from tiervault.brain import stages
    from tiervault.brain.brain import Brain
    from tiervault.vault import manager

    swaps = [Swap(args.old, s, i) for i, s in enumerate(args.swap or ([] if args.drop else DEFAULT_SWAPS))]
    drops = [Drop(spec) for spec in args.drop]
    callers = [manager, stages, *(importlib.import_module(m) for m in args.caller), *OLD_MODULES]
    for spec in args.shared:
        path, name = spec.split(":")
        new_value = getattr(importlib.import_module("tiervault." + path.removesuffix(".py").replace("/", ".")), name)
        for s in swaps:
            if s.path == path:
                setattr(s.old_mod, name, new_value)
    spent: dict[str, float] = {}
    per_call: dict[str, list[tuple[float, int]]] = {spec: [] for spec in args.time}
    for spec in args.time:
        _timed(spec, spent, per_call[spec] if args.per_call else None)
    sides: dict[str, dict[str, list[tuple[float, int]]]] = {"old": {}, "new": {}}
    brain = open_hybrid_brain(args.workdir, 384) if args.hybrid else Brain.open(write_config(args.workdir))

    def scan(q: dict[str, Any]) -> Any:
        return brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))

    for q in queries(30, 8):
        scan(q)
    out: dict[str, Any] = {"old_checkout": str(args.old), "swaps": [s.spec for s in swaps], "drops": args.drop,
                           "shared": args.shared,
                           "queries": args.queries, "flip": args.flip, "hybrid": args.hybrid,
                           "cold": args.cold, "filtered": args.filtered,
                           "load_before": load_avg()}
    cpu: dict[str, list[float]] = {"old": [], "new": []}
    wall: dict[str, list[float]] = {"old": [], "new": []}  # a hybrid scan's second thread: CPU != wall
    caller: dict[str, list[float]] = {"old": [], "new": []}  # the calling thread's CPU only (no scan pool)
    parts: dict[str, dict[str, list[float]]] = {"old": {}, "new": {}}
    qs = queries(args.queries * (5 if args.filtered else 1), args.seed)
    if args.filtered:  # the same set of queries, those with filters, as many as asked
        qs = [q for q in qs if query_kwargs(q)][:args.queries]
    evict = numpy_topk(100_000, 384, args.seed, kernel="einsum") if args.cold else None
    for i, q in enumerate(qs):
        # pairs (2j, 2j+1): old first in even pairs, new first in odd ones
        old = ((i % 2 == 0) != ((i // 2) % 2 == 1)) != args.flip
        for s in swaps:
            s.use(old, callers)
        for d in drops:
            d.use(old)
        spent.clear()
        for xs in per_call.values():
            xs.clear()
        if evict is not None:
            evict(q)
        c0, w0, t0 = time.process_time(), time.perf_counter(), time.thread_time()
        scan(q)
        side = "old" if old else "new"
        caller[side].append((time.thread_time() - t0) * 1e3)
        cpu[side].append((time.process_time() - c0) * 1e3)
        wall[side].append((time.perf_counter() - w0) * 1e3)
        for spec in args.time:
            parts[side].setdefault(spec, []).append(spent.get(spec, 0.0) * 1e3)
            sides[side].setdefault(spec, []).extend(per_call[spec])
    for s in swaps:
        s.use(False, callers)
    for d in drops:
        d.use(False)
    for name, xs in cpu.items():
        xs.sort()
        out[name] = {"cpu_p50_ms": round(statistics.median(xs), 3),
                     "cpu_mean_ms": round(statistics.fmean(xs), 3),
                     "cpu_p95_ms": round(xs[int(0.95 * len(xs))], 3), "n": len(xs),
                     "caller_cpu_p50_ms": round(statistics.median(caller[name]), 3),
                     "caller_cpu_mean_ms": round(statistics.fmean(caller[name]), 3),
                     "wall_p50_ms": round(statistics.median(wall[name]), 3),
                     "wall_mean_ms": round(statistics.fmean(wall[name]), 3),
                     "timed_ms": {spec: {"p50": round(statistics.median(ys), 4),
                                         "mean": round(statistics.fmean(ys), 4)}
                                  for spec, ys in parts[name].items()}}
    if args.per_call:
        half = args.queries / 2
        out["per_call"] = {spec: {side: _calls_summary(sides[side].get(spec, []), args.few, half)
                                  for side in sides} for spec in args.time}
    out["new_over_old_p50"] = round(out["new"]["cpu_p50_ms"] / out["old"]["cpu_p50_ms"], 3)
    out["new_over_old_mean"] = round(out["new"]["cpu_mean_ms"] / out["old"]["cpu_mean_ms"], 3)
    out["new_over_old_wall_p50"] = round(out["new"]["wall_p50_ms"] / out["old"]["wall_p50_ms"], 3)
    out["new_over_old_caller_cpu_p50"] = round(out["new"]["caller_cpu_p50_ms"] / out["old"]["caller_cpu_p50_ms"], 3)
    out["load_after"] = load_avg()
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
