"""The wall clock of a hybrid scan's parts, queries with filters apart from the others
(issue 16, session 20: the filtered queries' vector leg).

    python bench/s20_hyb_parts.py --workdir W [--queries 300] [--filtered] [--seed 11] \
        [--part MODULE:ATTR ...] [--json out.json]

``W``: a ``bench/run.py`` work directory (its ``agent-hybrid.yaml``: hash embedder).
After 50 warm-up scans, ``--queries`` bench scans (``search_intelligent(mode="scan")``;
``--filtered``: only bench queries with filters, ~1 in 4) run with wall-clock wrappers
(``perf_counter``, ~1 us a call) around the public functions and methods named in
``PARTS``; for each kind of query (filtered / unfiltered) the scan's p50 and mean and
each part's mean and p50 in us a scan and its calls a scan. Parts nest (``VectorRecall.
search`` holds the rest): compare them, do not add them up. Run it from another
checkout's interpreter with ``PYTHONPATH`` set to that checkout to time its code (the
bench helpers are this checkout's).
"""

from __future__ import annotations

import argparse
import functools
import importlib
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: a checkout's own tiervault

from bench.checkouts import load_avg  # noqa: E402
from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import open_hybrid_brain, query_kwargs  # noqa: E402

#: (module, attribute) of each timed part; ``Class.method`` for a method.
PARTS = (
    ("tiervault.embeddings.recall", "VectorRecall.search"),
    ("tiervault.vault.store", "TierStore.filter_mask"),
    ("tiervault.vault.postings", "Postings.mask"),
    ("tiervault.embeddings.recall", "allowed_rows"),
    ("tiervault.embeddings.recall", "kept_plan"),
    ("tiervault.embeddings.index", "VectorIndex.scan"),
    ("tiervault.embeddings.dot_job", "DotJob.result"),
    ("tiervault.embeddings.recall", "rescore_federated"),
    ("tiervault.embeddings.recall", "VectorRecall.scores_for"),
    ("tiervault.vault.manager", "VaultManager.search"),
    ("tiervault.brain.pool", "Pool.read_rows"),
)


def wrap(module: str, attr: str, spent: dict[str, list[float]]) -> None:
    """``module.attr`` (``Class.method`` for a method) timed into ``spent[attr]`` ([seconds, calls])."""
    owner: Any = importlib.import_module(module)
    *path, name = attr.split(".")
    for part in path:
        owner = getattr(owner, part)
    fn = getattr(owner, name, None)
    if fn is None:  # a part the timed checkout does not have (another version's): 0 calls
        return

    @functools.wraps(fn)
    def timed(*a: Any, **kw: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*a, **kw)
        finally:
            got = spent.setdefault(attr, [0.0, 0])
            got[0] += time.perf_counter() - t0
            got[1] += 1
    setattr(owner, name, timed)


def summary(rows: list[tuple[float, dict[str, list[float]]]], parts: Any) -> dict[str, Any]:
    """Scans' (seconds, spent) -> their count, wall p50 / mean (ms) and each part's mean /
    p50 us a scan and calls a scan (``parts``: (module, attr) pairs)."""
    scans = [dt * 1e3 for dt, _ in rows]
    timed = {}
    for _, attr in parts:
        us = [p.get(attr, [0.0, 0])[0] * 1e6 for _, p in rows]
        calls = [p.get(attr, [0.0, 0])[1] for _, p in rows]
        timed[attr] = {"mean_us": round(statistics.fmean(us), 1), "p50_us": round(statistics.median(us), 1),
                       "calls": round(statistics.fmean(calls), 2)}
    return {"n": len(rows), "scan_p50_ms": round(statistics.median(scans), 3),
            "scan_mean_ms": round(statistics.fmean(scans), 3), "parts": timed}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--filtered", action="store_true", help="only bench queries with filters")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--part", action="append", default=[], metavar="MODULE:ATTR",
                    help="time this function too (e.g. tiervault.brain.evidence:cosines); repeatable")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    spent: dict[str, list[float]] = {}
    parts = PARTS + tuple(tuple(p.split(":", 1)) for p in args.part)
    for module, attr in parts:
        wrap(module, attr, spent)
    brain = open_hybrid_brain(args.workdir, 384)
    for q in queries(50, 8):
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
    qs = queries(args.queries * (5 if args.filtered else 1), args.seed)
    if args.filtered:
        qs = [q for q in qs if query_kwargs(q)][:args.queries]
    load_before = load_avg()
    runs: dict[str, list[tuple[float, dict[str, list[float]]]]] = {"filtered": [], "unfiltered": []}
    for q in qs:
        spent.clear()
        t0 = time.perf_counter()
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
        dt = time.perf_counter() - t0
        runs["filtered" if query_kwargs(q) else "unfiltered"].append((dt, {k: list(v) for k, v in spent.items()}))
    import tiervault.embeddings as emb

    out: dict[str, Any] = {"tiervault": str(Path(emb.__file__).resolve().parent.parent),
                           "queries": len(qs), "filtered_only": args.filtered, "load_before": load_before}
    for kind, rows in runs.items():
        if not rows:
            continue
        out[kind] = summary(rows, parts)
    out["load_after"] = load_avg()
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
