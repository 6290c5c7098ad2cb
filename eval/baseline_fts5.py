"""Plain SQLite FTS5 bm25 on a BEIR collection: the floor every tiervault ranking must beat.

    python eval/baseline_fts5.py [--data ../shared/data/beir/scifact] [--json out.json]

Loads title and text into an FTS5 table (``porter unicode61``, default bm25
weights 1, 1) in a temporary directory, runs every judged test query OR-joined
through tiervault's own query transformation (``query_terms`` +
``match_expression``: lowercase, split on punctuation, drop 1-char terms, quote
each term) and reports nDCG@10, Recall@100 and MRR@10. Nothing of tiervault's
store or Brain is involved: this validates the loader and the metrics against
the published anchor (SciFact: nDCG@10 0.686) and is the baseline for the rest.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from eval.beir_data import BeirCollection, load  # noqa: E402
from eval.metrics import evaluate  # noqa: E402
from tiervault.vault.query import match_expression, query_terms  # noqa: E402

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "beir" / "scifact"


def fts5_run(coll: BeirCollection, db_path: Path, depth: int = 100) -> dict[str, dict[str, float]]:
    """Index ``coll`` into a fresh FTS5 table at ``db_path``; top-``depth`` bm25 per query."""
    conn = sqlite3.connect(db_path)
    try:
        conn.execute("CREATE VIRTUAL TABLE docs USING fts5(doc_id UNINDEXED, title, text, "
                     "tokenize = 'porter unicode61')")
        with conn:
            conn.executemany("INSERT INTO docs(doc_id, title, text) VALUES (?, ?, ?)",
                             ((d.id, d.title, d.text) for d in coll.docs))
        run: dict[str, dict[str, float]] = {}
        for qid, text in coll.queries.items():
            expr = match_expression(query_terms(text))
            if not expr:
                run[qid] = {}
                continue
            rows = conn.execute("SELECT doc_id, bm25(docs) FROM docs WHERE docs MATCH ? "
                                "ORDER BY bm25(docs) LIMIT ?", (expr, depth)).fetchall()
            # bm25() is lower-is-better; trec_eval wants higher-is-better.
            run[qid] = {doc_id: -score for doc_id, score in rows}
        return run
    finally:
        conn.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA,
                        help="BEIR collection directory (default: %(default)s)")
    parser.add_argument("--split", default="test", help="qrels split (default: test)")
    parser.add_argument("--json", type=Path, help="also write the result as JSON here")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    coll = load(args.data, args.split)
    with tempfile.TemporaryDirectory(prefix="tiervault-fts5-") as tmp:
        run = fts5_run(coll, Path(tmp) / "fts5.db")
    scores = evaluate(run, coll.qrels)
    elapsed = time.perf_counter() - t0
    print(f"{coll.name}: {len(coll.docs)} docs, {len(coll.queries)} {args.split} queries "
          f"({elapsed:.1f} s)")
    print("| system | nDCG@10 | Recall@100 | MRR@10 |\n| --- | --- | --- | --- |")
    print(f"| FTS5 bm25 (porter unicode61, OR) | {scores['ndcg@10']:.4f} | "
          f"{scores['recall@100']:.4f} | {scores['mrr@10']:.4f} |")
    if args.json:
        args.json.write_text(json.dumps({"dataset": coll.name, "queries": len(coll.queries),
                                         "results": {"bm25": scores}}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
