"""Would a learned type / domain affinity carry feedback to unseen queries? (issue 18)

    python eval/feedback_affinity.py [--split tune|report] [--json eval/results/feedback_affinity.json]

An idea for feedback that generalises: a team that keeps accepting "security"
entries (or "pattern"s) wants them higher for every query. Measured offline, not
built: the agent gives the judged feedback of eval/feedback_sim.py (accept
judged-relevant entries of the top 10, dismiss judged-irrelevant ones of the top 3)
on the fed queries, two passes over the first rankings; per value v of the field
(type or domain) the smoothed accept share, centred on the overall one::

    affinity(v) = (acc_v + 2 p) / (acc_v + dis_v + 2) - p,   p = acc / (acc + dis)

then each unseen query's first 30 rows (full mode, today's Brain, no feedback in
force) are re-scored ``score * (1 + a * affinity(field(entry)))`` for a grid of
amplitudes a and nDCG@10 of the unseen half is taken (trec_eval, eval/metrics.py).
a = 0 is the Brain as it is. Splits as in eval/feedback_sim.py (``tune`` = choose).
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from eval.feedback_sim import PACK, Sim, actions, halves, load_set  # noqa: E402
from eval.metrics import per_query  # noqa: E402

AMPLITUDES = (0.0, 0.1, 0.2, 0.4, 0.8)
FIELDS = ("type", "domain")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split", choices=("report", "tune"), default="tune")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    queries, qrels = load_set()
    fed, unseen = halves(queries, args.split)
    pack = {e["id"]: e for e in (json.loads(line) for line in PACK.read_text().splitlines() if line.strip())}
    out: dict = {"split": args.split, "fed": [q["id"] for q in fed],
                 "unseen": [q["id"] for q in unseen], "fields": {}}
    with tempfile.TemporaryDirectory(prefix="tv-fbaff-") as tmp:
        sim = Sim(Path(tmp), "learned")
        try:
            verdicts = [(eid, a) for _ in range(2) for q in fed
                        for eid, a in actions("judged", sim.ranked(q, 10), qrels.get(q["id"], {}),
                                              random.Random(0))]
            lists = {q["id"]: [(r["entry"]["id"], r["score"]) for r in sim.brain.search_intelligent(
                q["text"], mode="full", limit=30, **q.get("filters", {}))] for q in unseen}
        finally:
            sim.close()
    for field in FIELDS:
        acc, dis = collections.Counter(), collections.Counter()
        for eid, action in verdicts:
            (acc if action == "accepted" else dis)[pack[eid][field]] += 1
        p = sum(acc.values()) / max(1, sum(acc.values()) + sum(dis.values()))
        aff = {v: (acc[v] + 2 * p) / (acc[v] + dis[v] + 2) - p for v in sorted(set(acc) | set(dis))}
        grid = {}
        for amp in AMPLITUDES:
            run = {}
            for qid, rows in lists.items():
                scored = sorted(((eid, s * (1 + amp * aff.get(pack[eid][field], 0.0))) for eid, s in rows),
                                key=lambda x: -x[1])
                run[qid] = {eid: float(len(scored) - i) for i, (eid, _) in enumerate(scored[:20])}
            vals = per_query(run, {qid: qrels.get(qid, {}) for qid in lists})
            grid[str(amp)] = round(sum(v["ndcg@10"] for v in vals.values()) / len(vals), 4)
        out["fields"][field] = {"affinity": {k: round(v, 3) for k, v in aff.items()},
                                "unseen_ndcg@10_by_amplitude": grid}
        print(field, grid)
    out["events"] = len(verdicts)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
