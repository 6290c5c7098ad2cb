"""Wall time of named functions inside real FTS-only scans, us a scan (issue 16, session 19).

    python bench/s19_scan_parts.py --workdir W [--queries 300] [--part MODULE:ATTR ...] [--json out.json]

``W``: a copy of a ``bench/run.py`` build. A Brain on it answers 50 warm-up scans, then
``--queries`` bench queries (``search_intelligent(mode="scan")``) with each ``--part``
(default: the Brain's work after gather) wrapped by a ``perf_counter_ns`` timer: its
time and calls a scan, and the whole scan's (``TOTAL``). A name a stage module imported
(``tiervault.brain.stages:text_relevance``) is timed where that module calls it; the
stages are re-read from their module after wrapping. Run it with each checkout's
interpreter (an A/B: this checkout's ``tiervault`` is the one timed). The wrappers cost
~0.1 us a call: compare parts with each other and across checkouts, not with plain scans.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: a checkout's own tiervault

from bench.checkouts import load_avg  # noqa: E402
from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import query_kwargs, write_config  # noqa: E402

PARTS = ("tiervault.brain.stages:expand", "tiervault.brain.stages:score",
         "tiervault.brain.stages:rank", "tiervault.brain.stages:render",
         "tiervault.brain.stages:_graph", "tiervault.brain.stages:graph_hops",
         "tiervault.brain.stages:text_relevance", "tiervault.brain.stages:top_k",
         "tiervault.brain.evidence:latent_raw", "tiervault.brain.evidence:cosines",
         "tiervault.brain.evidence:proximity", "tiervault.brain.pool:Pool.read_rows",
         "tiervault.brain.pool:Pool.add_external", "tiervault.brain.brain:Brain.nudges",
         "tiervault.vault.postings:Postings.slots_of",
         "tiervault.vault.latent:LatentModel.query", "tiervault.vault.latent:LatentModel.rows")


def wrap(spec: str, spent: Counter, calls: Counter) -> None:
    """Replace ``MODULE:ATTR`` (``Class.method`` too) by a timed wrapper."""
    module_name, attr = spec.split(":")
    owner: Any = importlib.import_module(module_name)
    *path, name = attr.split(".")
    for part in path:
        owner = getattr(owner, part)
    fn = getattr(owner, name)

    def timed(*a: Any, **kw: Any) -> Any:
        t0 = time.perf_counter_ns()
        try:
            return fn(*a, **kw)
        finally:
            spent[spec] += time.perf_counter_ns() - t0
            calls[spec] += 1

    setattr(owner, name, timed)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--part", action="append", default=[], help="MODULE:ATTR (default: after gather)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    from tiervault.brain import stages
    from tiervault.brain.brain import Brain

    brain = Brain.open(write_config(args.workdir))
    for q in queries(50, 8):
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
    spent: Counter = Counter()
    calls: Counter = Counter()
    for spec in args.part or PARTS:
        wrap(spec, spent, calls)
    stages.STAGES = tuple(getattr(stages, s) for s in ("gather", "expand", "score", "modulate",
                                                        "rank", "render"))
    load_before = load_avg()
    for q in queries(args.queries, 7):
        t0 = time.perf_counter_ns()
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
        spent["TOTAL"] += time.perf_counter_ns() - t0
        calls["TOTAL"] += 1
    n = args.queries
    out = {"workdir": str(args.workdir), "queries": n, "load_before": load_before,
           "load_after": load_avg(),
           "us_per_scan": {k: round(v / n / 1e3, 1) for k, v in spent.most_common()},
           "calls_per_scan": {k: round(calls[k] / n, 2) for k, _ in spent.most_common()}}
    brain.close()
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
