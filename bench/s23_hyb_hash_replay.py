"""The manager's ``lexical_scores`` calls of hybrid scans replayed with and without content
hashes (issue 16, session 23: ``content_hashes=False``).

    python bench/s23_hyb_hash_replay.py --workdir DIR [--queries 300] [--json out.json]

``DIR``: a ``bench/run.py --keep`` size directory with vectors (``agent-hybrid.yaml``). The
calls ``VaultManager.lexical_scores`` makes in ``--queries`` bench scans (the pool's vector
hits and graph neighbours) are recorded, then each is asked of its tier's store three times
over with ``content_hashes`` True and False, alternately first: the wall us a call (p50,
mean), the mean saved a scan, and how many answers agree on ids, scores, TF-IDF and verdicts.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent.parent))

from bench.checkouts import load_avg  # noqa: E402
from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import query_kwargs  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    from tiervault.brain.brain import Brain

    brain = Brain.open(args.workdir / "agent-hybrid.yaml")
    m = brain.manager
    calls: list[tuple[Any, str, list[str]]] = []
    scores = m.lexical_scores

    def recorded(lq: Any, tier: str, ids: Any) -> Any:
        calls.append((lq, tier, list(ids)))
        return scores(lq, tier, ids)

    m.lexical_scores = recorded
    for q in queries(args.queries, 7):
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
    m.lexical_scores = scores
    load_before = load_avg()
    spent: dict[bool, list[float]] = {True: [], False: []}
    same = 0
    for r in range(3):
        for i, (lq, tier, ids) in enumerate(calls):
            store = m.store(tier)
            got = {}
            for hashes in ((True, False) if (i + r) % 2 else (False, True)):
                t0 = time.perf_counter()
                got[hashes] = store.lexical_scores(lq.stems, lq.stats, ids=ids, words=lq.words,
                                                   content_hashes=hashes)
                spent[hashes].append((time.perf_counter() - t0) * 1e6)
            same += ([(h.id, h.score, h.tfidf, h.passes) for h in got[True]]
                     == [(h.id, h.score, h.tfidf, h.passes) for h in got[False]])
    mean = {k: statistics.fmean(v) for k, v in spent.items()}
    emit({"workdir": str(args.workdir), "scans": args.queries, "calls": len(calls),
          "calls_a_scan": round(len(calls) / args.queries, 2), "answers_same": same, "answers": 3 * len(calls),
          "with_hashes_us": {"p50": round(statistics.median(spent[True]), 1), "mean": round(mean[True], 1)},
          "without_us": {"p50": round(statistics.median(spent[False]), 1), "mean": round(mean[False], 1)},
          "saved_a_scan_us": round((mean[True] - mean[False]) * len(calls) / args.queries, 1),
          "load_before": load_before, "load_after": load_avg()}, args.json)
    brain.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
