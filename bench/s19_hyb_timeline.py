"""Where a 100K scan's caller spends its wall clock, part by part and on a timeline
(issue 16, session 19: the hybrid scan after its vector leg, and the pool's work).

    python bench/s19_hyb_timeline.py --workdir W [--config agent-hybrid.yaml] [--queries 300] [--json out.json]

``W``: a ``bench/run.py`` work directory (``agent-hybrid.yaml``: hybrid, hash embedder;
``agent.yaml``: FTS-only). After 50 warm-up scans, ``--queries`` bench scans
(``search_intelligent(mode="scan")``) run with wall-clock wrappers (``perf_counter``)
around public functions and methods of the scan's path (the wrapped names are listed in
``PARTS``). For each part: its time summed per scan (us) and its calls a scan; and on a
timeline, the median over the scans of the first start and the last end of each part,
in ms from the scan's start. The wrappers cost ~1 us a call: compare parts with each
other, not the total with bench/run.py. Parts nest (``add_external`` holds its own
``lexical_scores`` and light-row statements): they are not to be added up.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import query_kwargs  # noqa: E402

#: (module, attribute) of each timed part; ``Class.method`` for a method. The Pool's
#: ``add_external`` is labelled by its ``via`` (vector / graph / expansion).
PARTS = (
    ("tiervault.brain.stages", "gather"), ("tiervault.brain.stages", "expand"),
    ("tiervault.brain.stages", "score"), ("tiervault.brain.stages", "graph_hops"),
    ("tiervault.brain.evidence", "query_vector"), ("tiervault.brain.brain", "Brain.weights"),
    ("tiervault.embeddings.runtime", "EmbeddingRuntime.prefetch"),
    ("tiervault.vault.manager", "VaultManager.search"),
    ("tiervault.vault.manager", "VaultManager.lexical_scores"),
    ("tiervault.embeddings.recall", "VectorRecall.search"),
    ("tiervault.vault.store", "TierStore.filter_mask"),
    ("tiervault.embeddings.dot_job", "DotJob.result"),
    ("tiervault.embeddings.recall", "rescore_federated"),
    ("tiervault.embeddings.recall", "ids_by_slot"),
    ("tiervault.embeddings.index", "VectorIndex.rows_of"),
    ("tiervault.embeddings.recall", "VectorRecall.scores_for"),
    ("tiervault.brain.pool", "Pool.read_rows"), ("tiervault.brain.pool", "Pool.add_external"),
    ("tiervault.vault.store", "TierStore.light_rows_texts"),
    ("tiervault.brain.stages", "evidence.cosines"), ("tiervault.brain.stages", "evidence.proximity"),
    ("tiervault.brain.stages", "evidence.latent_raw"),
)


class Clock:
    """Per-scan sums, call counts and first-start / last-end marks of the wrapped parts."""

    def __init__(self) -> None:
        self.t0 = 0
        self.spent: dict[str, int] = {}
        self.calls: dict[str, int] = {}
        self.first: dict[str, float] = {}
        self.last: dict[str, float] = {}

    def reset(self) -> None:
        self.spent.clear(), self.calls.clear(), self.first.clear(), self.last.clear()
        self.t0 = time.perf_counter_ns()

    def wrap(self, owner: Any, name: str, label: str, via_at: int | None = None) -> None:
        # a class's own attribute as stored (a staticmethod stays one); an inherited one by lookup
        fn = owner.__dict__.get(name) or getattr(owner, name) if isinstance(owner, type) else getattr(owner, name)

        @functools.wraps(fn)
        def timed(*a: Any, **kw: Any) -> Any:
            lab = f"{label}:{a[via_at]}" if via_at is not None and len(a) > via_at else label
            start = time.perf_counter_ns()
            self.first.setdefault(lab, (start - self.t0) / 1e6)
            try:
                return fn(*a, **kw)
            finally:
                end = time.perf_counter_ns()
                self.spent[lab] = self.spent.get(lab, 0) + end - start
                self.calls[lab] = self.calls.get(lab, 0) + 1
                self.last[lab] = (end - self.t0) / 1e6
        setattr(owner, name, timed)


def _owner(module: str, attr: str) -> tuple[Any, str]:
    owner: Any = importlib.import_module(module)
    *path, name = attr.split(".")
    for part in path:
        owner = getattr(owner, part)
    return owner, name


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--config", default="agent-hybrid.yaml")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)

    from tiervault.brain.brain import Brain

    clock = Clock()
    for module, attr in PARTS:
        owner, name = _owner(module, attr)
        # add_external(self, manager, ids, via, ...): labelled by ``via``
        clock.wrap(owner, name, attr, via_at=3 if attr == "Pool.add_external" else None)
    stages = importlib.import_module("tiervault.brain.stages")
    stages.STAGES = tuple(getattr(stages, st.__name__) for st in stages.STAGES)  # the wrapped stages
    brain = Brain.open(args.workdir / args.config)
    scan: Callable[[dict[str, Any]], Any] = lambda q: brain.search_intelligent(  # noqa: E731
        q["text"], mode="scan", **query_kwargs(q))
    for q in queries(50, args.seed + 1):
        scan(q)
    out: dict[str, Any] = {"workdir": str(args.workdir), "config": args.config, "queries": args.queries,
                           "load_before": [round(x, 2) for x in os.getloadavg()]}
    walls: list[float] = []
    spent: dict[str, list[float]] = {}
    calls: dict[str, int] = {}
    first: dict[str, list[float]] = {}
    last: dict[str, list[float]] = {}
    for q in queries(args.queries, args.seed):
        clock.reset()
        scan(q)
        walls.append((time.perf_counter_ns() - clock.t0) / 1e6)
        for lab, ns in clock.spent.items():
            spent.setdefault(lab, []).append(ns / 1e3)
            calls[lab] = calls.get(lab, 0) + clock.calls[lab]
            first.setdefault(lab, []).append(clock.first[lab])
            last.setdefault(lab, []).append(clock.last[lab])
    n = args.queries
    out["scan_wall_p50_ms"] = round(statistics.median(walls), 3)
    out["scan_wall_mean_ms"] = round(statistics.fmean(walls), 3)
    out["parts_us_per_scan"] = {lab: {"us": round(sum(v) / n, 1), "calls": round(calls[lab] / n, 2)}
                                for lab, v in sorted(spent.items(), key=lambda kv: -sum(kv[1]))}
    out["timeline_ms"] = {lab: {"first_start_p50": round(statistics.median(first[lab]), 3),
                                "last_end_p50": round(statistics.median(last[lab]), 3), "scans": len(first[lab])}
                          for lab in sorted(first, key=lambda lab: statistics.median(first[lab]))}
    out["load_after"] = [round(x, 2) for x in os.getloadavg()]
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
