"""One function's calls captured from bench scans, replayed in an older checkout's version
and this one's, alternating, in ONE process.

    python bench/call_replay.py --old /path/to/old/checkout --workdir DIR \
        --target embeddings/vector_base.py:BaseScan._approx_at [--with FILE:ATTR ...] [--hybrid] \
        [--queries 300] [--seed 7] [--rounds 9] [--size-arg 2] [--json out.json]

A change of ~0.01-0.1 ms a query in one function is below what a whole-scan A/B
resolves on this shared 2-core machine (``bench/scan_swap_ab.py``: +-0.05-0.1 ms). Here
this checkout's ``tiervault`` answers ``--queries`` bench queries (``search_intelligent(
mode="scan")``, hybrid with ``--hybrid``: ``DIR``'s hash-embedder vectors, as
``bench/run.py`` builds them; 30 warm-up scans first) with ``--target`` (``FILE:ATTR`` as
in ``scan_swap_ab.py``) wrapped to record every call's arguments. Then each recorded call
is made once by each variant and the answers compared (``identical``: arrays equal and of
one dtype, a callable in an answer compared on the positions of the answer's first array),
and ``--rounds`` timed rounds replay all the calls with the old version (``OLD/FILE``
loaded as a separate module: ``bench/scan_swap_ab.py``'s ``Swap``) and this one's,
the order alternating round by round; each ``--with`` attribute (another function the
old target calls through ``self`` or its module, e.g. ``HashTable._rows`` under
``HashTable.take``) is the old checkout's while the old version runs. Process CPU a round; medians over the rounds, a
call and a query. The replayed calls see warm caches (the same arguments again):
compare the variants with each other, not with a scan's in-situ share.

Written in session 13 to reproduce session 12's uncommitted replay probes (the gathered
compressed scans' ``take``, term proximity's reject); any function whose calls can be
repeated with the same arguments (no state learnt from them) can be replayed so.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: a checkout's own tiervault

from bench.checkouts import commit_of, load_avg  # noqa: E402
from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import open_hybrid_brain, query_kwargs, write_config  # noqa: E402
from bench.scan_swap_ab import Swap  # noqa: E402

Call = tuple[tuple[Any, ...], dict[str, Any]]


def _first_len(x: Any) -> int | None:
    """The length of the first array in ``x`` (itself, or an item of a tuple / list)."""
    if isinstance(x, np.ndarray):
        return len(x)
    if isinstance(x, (tuple, list)):
        for item in x:
            if (n := _first_len(item)) is not None:
                return n
    return None


def same(a: Any, b: Any, n: int | None = None) -> bool:
    """``a`` and ``b`` equal: arrays element for element and of one dtype, sequences item
    by item, callables on ``arange(n)`` (``n``: the enclosing answer's first array's length)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype
                and a.shape == b.shape and bool(np.array_equal(a, b)))
    if isinstance(a, (tuple, list)):
        n = _first_len(a) if n is None else n
        return (isinstance(b, (tuple, list)) and len(a) == len(b)
                and all(same(x, y, n) for x, y in zip(a, b)))
    if callable(a) and callable(b):
        at = np.arange(n or 0)
        return same(np.asarray(a(at)), np.asarray(b(at)))
    return bool(a == b)


def _capture(swap: Swap, record: list[Call]) -> list[tuple[Any, str, Any]]:
    """Wrap ``swap``'s new function so that each call's arguments land in ``record``, on its
    owner and in every ``tiervault`` module that imported it by name; the undo list."""
    fn = swap.new

    def recording(*a: Any, **kw: Any) -> Any:
        record.append((a, kw))
        return fn(*a, **kw)
    undo = [(swap.owner, swap.name, getattr(swap.owner, swap.name))]
    setattr(swap.owner, swap.name, recording)
    for mod in list(sys.modules.values()):
        if (getattr(mod, "__name__", "").startswith("tiervault.") and mod is not swap.owner
                and getattr(mod, swap.name, None) is fn):
            undo.append((mod, swap.name, fn))
            setattr(mod, swap.name, recording)
    return undo


def replay(fn: Any, calls: list[Call]) -> float:
    """Process CPU (s) of every call of ``calls`` made with ``fn``."""
    c0 = time.process_time()
    for a, kw in calls:
        fn(*a, **kw)
    return time.process_time() - c0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", type=Path, required=True, help="the older checkout (its FILE is loaded)")
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--target", required=True, help="FILE:ATTR, e.g. brain/proximity.py:proximities")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--hybrid", action="store_true", help="hybrid scans (DIR's hash-embedder vectors)")
    ap.add_argument("--with", dest="also", action="append", default=[],
                    help="FILE:ATTR also taken from OLD while the old target runs (its helpers)")
    ap.add_argument("--size-arg", type=int,
                    help="report the mean len() of this positional argument (0 = the first; self counts)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    from tiervault.brain.brain import Brain

    swap = Swap(args.old, args.target, 0)
    helpers = [Swap(args.old, spec, i + 1) for i, spec in enumerate(args.also)]
    callers = [m for name, m in list(sys.modules.items()) if name.startswith("tiervault.")]

    def variant(old: bool) -> None:
        for h in helpers:
            h.use(old, callers)
    brain = open_hybrid_brain(args.workdir, 384) if args.hybrid else Brain.open(write_config(args.workdir))

    def scan(q: dict[str, Any]) -> Any:
        return brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))

    for q in queries(30, 8):
        scan(q)
    calls: list[Call] = []
    undo = _capture(swap, calls)
    for q in queries(args.queries, args.seed):
        scan(q)
    for owner, name, value in undo:
        setattr(owner, name, value)
    out: dict[str, Any] = {"old_checkout": str(args.old), "old_commit": commit_of(args.old),
                           "new_commit": commit_of(Path(__file__).resolve().parent.parent),
                           "target": args.target, "with": args.also, "hybrid": args.hybrid, "queries": args.queries,
                           "seed": args.seed, "calls": len(calls), "load_before": load_avg()}
    if not calls:
        raise SystemExit(f"{args.target} was not called in {args.queries} scans")
    if args.size_arg is not None:  # e.g. the rows a gather copies, the entries proximity reads
        out[f"arg{args.size_arg}_len_mean"] = round(statistics.fmean(len(a[args.size_arg]) for a, _ in calls), 1)
    old_fn, new_fn = swap.old, swap.new
    answers = []
    for old, fn in ((True, old_fn), (False, new_fn)):
        variant(old)
        answers.append([fn(*a, **kw) for a, kw in calls])
    out["identical"] = all(same(x, y) for x, y in zip(*answers))
    del answers
    totals: dict[str, list[float]] = {"old": [], "new": []}
    for r in range(args.rounds):
        order = (("old", old_fn), ("new", new_fn)) if r % 2 == 0 else (("new", new_fn), ("old", old_fn))
        for name, fn in order:
            variant(name == "old")
            totals[name].append(replay(fn, calls))
    variant(False)
    for name in ("old", "new"):
        med = statistics.median(totals[name])
        out[name] = {"rounds_ms_total": [round(t * 1e3, 2) for t in totals[name]],
                     "us_per_call": round(med * 1e6 / len(calls), 2),
                     "ms_per_call": round(med * 1e3 / len(calls), 4),
                     "ms_per_query": round(med * 1e3 / args.queries, 4)}
    out["new_over_old"] = round(out["new"]["us_per_call"] / out["old"]["us_per_call"], 3)
    out["load_after"] = load_avg()
    brain.close()
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
