"""How far can a ranking of lexical matches go on the agent dev set? (issue 10)

    python eval/lexical_ceiling.py [--split report] [--json eval/results/lexical-ceiling.json]

For every query: the entries FTS5 matches at all (any query term, the query's
filters applied; what BM25 and the FTS-only Brain can rank) and the nDCG@10 of the
*ideal* order of those matches (graded entries first by grade). That is the ceiling
of any re-ranking of lexical candidates; the judged entries that share no term
with the query are out of reach without vectors (or an expansion that finds them).
Reported overall and per kind, next to BM25 and the Brain FTS-only from
``eval/results/agent-starter.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval import agent as A  # noqa: E402
from eval.metrics import per_query  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--split", choices=("tune", "report", "all"), default="report")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    from tiervault.vault.filters import Filters
    from tiervault.vault.query import query_terms

    ds = A.dev_set_half("agent", args.split)
    queries, qrels, now = ds.queries, ds.qrels, ds.now
    with tempfile.TemporaryDirectory() as tmp:
        runner = A.AgentRunner(ds.pack, Path(tmp), now)
        store = runner.manager.store(A.TIER)
        matched = {q["id"]: set(store.search_fts(
            query_terms(q["text"]), Filters.build(**q.get("filters", {}), now=now), 1000).ids)
            for q in queries}
        runner.close()
    ideal = {}
    unreachable = {}
    for q in queries:
        judged = qrels[q["id"]]
        hits = sorted((e for e in matched[q["id"]] if judged.get(e, 0) > 0),
                      key=lambda e: -judged[e])
        ideal[q["id"]] = {e: float(100 - i) for i, e in enumerate(hits)}
        unreachable[q["id"]] = sorted(e for e in judged if e not in matched[q["id"]])
    nd = per_query(ideal, {q["id"]: qrels[q["id"]] for q in queries})
    report = json.loads((Path(__file__).parent / "results" / "agent-starter.json").read_text())
    out = {"split": args.split, "kinds": {}, "unreachable": unreachable}
    for label in ("all", *A.KINDS):
        group = [q for q in queries if label == "all" or q["kind"] == label]
        if not group:
            continue
        cell = {"n": len(group),
                "lexical_ceiling": round(sum(nd[q["id"]]["ndcg@10"] for q in group) / len(group), 4),
                "judged_unreachable": sum(len(unreachable[q["id"]]) for q in group),
                "judged": sum(len(qrels[q["id"]]) for q in group)}
        for m in A.METHODS:
            cell[m] = round(sum(report["per_query"][m][q["id"]]["ndcg@10"] for q in group)
                            / len(group), 4)
        out["kinds"][label] = cell
        print(label, json.dumps(cell))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
