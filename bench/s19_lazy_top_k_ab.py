"""The federated search's lazy top k against every hit made first, query by query in ONE process.

    python bench/s19_lazy_top_k_ab.py --workdir DIR [--queries 1200] [--hybrid] [--json out.json]

``DIR`` is a work directory made by ``bench/run.py``'s build phase (``agent.yaml``, or
``agent-hybrid.yaml`` with ``--hybrid``). This checkout's ``VaultManager.search`` asks each
tier with an in-process mirror for its top k as slots and BM25 (``SlotHits``) and makes only
the hits the dedup keeps (``dedup.kept_of_tops``: issue 16, session 19); the other variant
asks the same tiers for their top-k hits, every one made (``lexical_top_k``), and goes
through the dedup as before (``dedup.kept``): each tier's store seen through
:class:`WithoutLexicon`, as a tier without an in-process lexicon is.
After 50 warm-up scans, ``--queries`` bench queries run ``search_intelligent(mode="scan")``,
the variant alternating by query, pairs in alternating order (ABBA), so both see the same
load and caches. Wall time and thread CPU per scan (a hybrid scan's vector leg runs on
another thread), thread CPU of ``VaultManager.search`` alone; p50 / mean and
``lazy / every``. Rankings: ``bench/rank_compare.py`` (the two variants answer the same,
``tests/test_lazy_top_k.py``).
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


class WithoutLexicon:
    """A tier's store without its ``lexicon`` attribute (every other one the store's, a
    method kept once read): the federated search then asks it for its top-k hits (the contract's
    ``lexical_top_k``), as it asks a PostgreSQL or remote tier."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def __getattr__(self, name: str) -> Any:
        if name == "lexicon":
            raise AttributeError(name)
        value = getattr(self.store, name)
        if callable(value):
            setattr(self, name, value)  # a method: the next read is a plain attribute
        return value


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=1200)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--hybrid", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    from tiervault.brain.brain import Brain
    from tiervault.vault import manager

    brain = open_hybrid_brain(args.workdir, 384) if args.hybrid else Brain.open(write_config(args.workdir))
    tiers = brain.manager.tiers.values()
    stores = {"lazy": {t.name: t.store for t in tiers},
              "every": {t.name: WithoutLexicon(t.store) for t in tiers}}
    def use(name: str) -> None:
        for t in tiers:
            t.store = stores[name][t.name]

    search = manager.VaultManager.search
    in_search = [0]

    def timed(self: Any, *a: Any, **kw: Any) -> Any:
        t0 = time.thread_time_ns()
        try:
            return search(self, *a, **kw)
        finally:
            in_search[0] += time.thread_time_ns() - t0
    manager.VaultManager.search = timed

    def scan(q: dict[str, Any]) -> None:
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))

    for q in queries(50, 8):
        scan(q)
    load_before = load_avg()
    cpu: dict[str, list[int]] = {"lazy": [], "every": []}
    gather: dict[str, list[int]] = {"lazy": [], "every": []}
    wall: dict[str, list[int]] = {"lazy": [], "every": []}
    for i, q in enumerate(queries(args.queries, args.seed)):
        pair = ("every", "lazy") if (i // 2) % 2 == 0 else ("lazy", "every")
        use(name := pair[i % 2])
        in_search[0] = 0
        w0, t0 = time.perf_counter_ns(), time.thread_time_ns()
        scan(q)
        cpu[name].append(time.thread_time_ns() - t0)
        wall[name].append(time.perf_counter_ns() - w0)
        gather[name].append(in_search[0])
    out: dict[str, Any] = {"workdir": str(args.workdir), "queries": args.queries, "hybrid": args.hybrid,
                           "load_before": load_before, "load_after": load_avg()}
    for name in ("lazy", "every"):
        out[name] = {"scan_wall_ms_p50": round(statistics.median(wall[name]) / 1e6, 4),
                     "scan_cpu_ms_p50": round(statistics.median(cpu[name]) / 1e6, 4),
                     "scan_cpu_ms_mean": round(statistics.mean(cpu[name]) / 1e6, 4),
                     "search_cpu_us_p50": round(statistics.median(gather[name]) / 1e3, 1),
                     "search_cpu_us_mean": round(statistics.mean(gather[name]) / 1e3, 1)}
    for key in ("scan_wall_ms_p50", "scan_cpu_ms_p50", "scan_cpu_ms_mean", "search_cpu_us_p50", "search_cpu_us_mean"):
        out[f"lazy/every {key}"] = round(out["lazy"][key] / out["every"][key], 4)
    use("lazy")
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
