"""The CPU of a scan's lexical contract calls, one level under the other, per call.

    python bench/s18_lexical_calls.py --workdir DIR [--hybrid] [--queries 300] [--json out.json]

``DIR`` is a work directory made by ``bench/run.py``'s build phase (``--hybrid``: its
``agent-hybrid.yaml``, hash-embedder vectors; else ``agent.yaml``). After 30 warm-up
scans (``search_intelligent(mode="scan")``, the bench queries), ``--queries`` scans run
with a thread-CPU clock (``time.thread_time_ns``: a wait for the GIL or the pool
thread's own work is not counted) around each of: ``VaultManager.lexical_scores``
(the pool's vector hits and graph neighbours joining), ``TierStore.lexical_scores``,
``TierStore.postings`` (the mirror caught up: every contract call asks it),
``MirrorLexicon._scores``, ``_bm25`` and ``Postings.slots_of`` / ``tfidf_at`` /
``SlotScores.at`` (issue 16, session 18: "lexical look-ups"). Calls a query, p50 /
mean us a call and us a query; the wrappers' own cost (~0.3 us a call) is in every
figure: compare checkouts (run it with each one's venv) or levels, not absolutes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: a checkout's own tiervault

from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import query_kwargs  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--hybrid", action="store_true")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    from tiervault.brain.brain import Brain
    from tiervault.vault import lexicon, manager, postings, store

    brain = Brain.open(args.workdir / ("agent-hybrid.yaml" if args.hybrid else "agent.yaml"))

    def scan(q: dict[str, Any]) -> Any:
        return brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))

    for q in queries(30, args.seed + 1):
        scan(q)
    spent: dict[str, list[float]] = defaultdict(list)

    def clocked(owner: Any, name: str) -> None:
        f: Callable[..., Any] = getattr(owner, name)
        label = f"{owner.__name__}.{name}"

        def timed(*a: Any, **k: Any) -> Any:
            t0 = time.thread_time_ns()
            try:
                return f(*a, **k)
            finally:
                spent[label].append((time.thread_time_ns() - t0) / 1e3)
        setattr(owner, name, timed)

    for owner, name in ((manager.VaultManager, "lexical_scores"), (store.TierStore, "lexical_scores"),
                        (store.TierStore, "postings"), (lexicon.MirrorLexicon, "_scores"),
                        (lexicon.MirrorLexicon, "_bm25"), (postings.Postings, "slots_of"),
                        (postings.Postings, "tfidf_at"), (lexicon.SlotScores, "at")):
        clocked(owner, name)
    for t in brain.manager.ordered():  # the lexicon holds the bound method: the clocked one
        if isinstance(t.store, store.TierStore):
            t.store.lexicon.mirror = t.store.postings
    qs = queries(args.queries, args.seed)
    out: dict[str, Any] = {"workdir": str(args.workdir), "hybrid": args.hybrid, "queries": len(qs),
                           "load_before": [round(x, 2) for x in os.getloadavg()]}
    for q in qs:
        scan(q)
    out["thread_cpu_us"] = {k: {"calls_per_query": round(len(v) / len(qs), 2),
                                "p50_us": round(statistics.median(v), 1),
                                "mean_us": round(statistics.fmean(v), 1),
                                "per_query_us": round(sum(v) / len(qs), 1)}
                            for k, v in sorted(spent.items())}
    out["load_after"] = [round(x, 2) for x in os.getloadavg()]
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
