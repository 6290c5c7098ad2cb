"""Could nudges be shared by query-embedding similarity? (issue 18, hybrid mode)

    python eval/feedback_query_similarity.py [--json eval/results/feedback_query_similarity.json]

Nudges are shared between "similar queries" (docs/feedback.md, Nudges). With an
embedder, the cosine between the two queries' vectors is a candidate similarity.
This embeds every query of the agent set with the ``local`` embedder
(``input_type="query"``, as the Brain embeds a search) and, for both halvings of
eval/feedback_sim.py (``tune``: the tune half split odd/even, where a threshold
would be chosen; ``report``: fed = tune half, unseen = report half), gives each
unseen query's nearest fed query: the cosine, and the Jaccard of their
judged-relevant entry sets (grade >= 1) — what a shared nudge could carry over.
A threshold is useful only if, above it, unseen queries have fed neighbours whose
relevant entries overlap theirs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from eval.beir import make_embedder  # noqa: E402
from eval.feedback_sim import halves, load_set  # noqa: E402

THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7)


def relevant(qrels: dict[str, dict[str, int]], qid: str) -> set[str]:
    return {e for e, g in qrels.get(qid, {}).items() if g >= 1}


def nearest(embedder: Any, fed: list[dict], unseen: list[dict],
            qrels: dict[str, dict[str, int]]) -> dict[str, Any]:
    """Per unseen query: its nearest fed query by cosine and their relevant-set Jaccard."""
    def unit(qs: list[dict]) -> np.ndarray:
        m = np.asarray(embedder.embed([q["text"] for q in qs], "query"), dtype=np.float64)
        return m / np.linalg.norm(m, axis=1, keepdims=True)

    cos = unit(unseen) @ unit(fed).T
    rows = []
    for i, q in enumerate(unseen):
        j = int(cos[i].argmax())
        a, b = relevant(qrels, q["id"]), relevant(qrels, fed[j]["id"])
        rows.append({"unseen": q["id"], "fed": fed[j]["id"], "cosine": round(float(cos[i, j]), 3),
                     "relevant_jaccard": round(len(a & b) / max(len(a | b), 1), 3),
                     "unseen_text": q["text"], "fed_text": fed[j]["text"]})
    rows.sort(key=lambda r: -r["cosine"])
    best = np.array([r["cosine"] for r in rows])
    by_t = {}
    for t in THRESHOLDS:
        above = [r for r in rows if r["cosine"] >= t]
        by_t[str(t)] = {"unseen_with_a_fed_neighbour": len(above),
                        "with_overlapping_relevant_entries": sum(r["relevant_jaccard"] > 0 for r in above)}
    overlap_any = sum(bool(relevant(qrels, q["id"]) & set().union(*(relevant(qrels, f["id"]) for f in fed)))
                      for q in unseen)
    return {"fed": len(fed), "unseen": len(unseen),
            "nearest_cosine_quantiles": {p: round(float(np.quantile(best, float(p))), 3)
                                         for p in ("0", "0.25", "0.5", "0.75", "1")},
            "unseen_sharing_a_relevant_entry_with_any_fed_query": overlap_any,
            "thresholds": by_t, "nearest": rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", type=Path, help="write the report here")
    args = ap.parse_args(argv)
    embedder, why = make_embedder("local", 384)
    if embedder is None:
        raise SystemExit(why)
    queries, qrels = load_set()
    report = {"embedder": embedder.model, "splits": {}}
    for split in ("tune", "report"):
        fed, unseen = halves(queries, split)
        report["splits"][split] = nearest(embedder, fed, unseen, qrels)
        r = report["splits"][split]
        print(f"{split}: nearest cosine {r['nearest_cosine_quantiles']}; "
              f"{r['unseen_sharing_a_relevant_entry_with_any_fed_query']}/{r['unseen']} unseen share a "
              f"relevant entry with some fed query; by threshold {r['thresholds']}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
