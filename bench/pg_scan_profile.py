"""Where a PostgreSQL-tier scan spends its time, next to the same scan on an SQLite tier.

    python bench/pg_scan_profile.py [--entries 100000] [--queries 200] [--profile 100] [--json out.json]

Starts an embedded server (as bench/postgres.py), loads the bench corpus into a
PostgreSQL team tier *and* into an SQLite team tier, with the same two small
SQLite agent/project tiers beside each, then:

1. times ``Brain.search_intelligent(mode="scan")`` on both stacks round-robin
   (same queries, same filters) -> p50/p95 and the PG/SQLite ratio;
2. counts, per PG scan, the SQL statements executed and the pool checkouts
   (round trips to the server);
3. cProfiles ``--profile`` scans of each stack and prints the top functions.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from bench.cache_dir import run_cache_dir  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import query_kwargs, time_interleaved  # noqa: E402
from bench.run import machine_info  # noqa: E402


class _Done(Exception):
    """Leave after the phases asked for."""


def _brain(team: Any, agent: Any, project: Any) -> Any:
    from tiervault.brain.brain import Brain
    from tiervault.vault.manager import Tier, VaultManager

    return Brain(VaultManager([Tier("agent", str(agent.path), 1.0, store=agent),
                               Tier("project", str(project.path), 0.8, store=project),
                               Tier("team", str(team.path), 0.6, store=team)]))


class _Counting:
    """Counts psycopg statements (by their first words) and pool checkouts while active."""

    def __init__(self) -> None:
        import psycopg
        import psycopg_pool

        self.statements: Counter[str] = Counter()
        self.checkouts = 0
        self.active = False
        cur_exec = psycopg.Cursor.execute  # Connection.execute calls it: counted once
        pool_conn = psycopg_pool.ConnectionPool.connection
        me = self

        def k_exec(self_: Any, query: Any, *a: Any, **k: Any) -> Any:
            if me.active:
                me.statements[" ".join(str(query).split()[:4])[:60]] += 1
            return cur_exec(self_, query, *a, **k)

        def p_conn(self_: Any, *a: Any, **k: Any) -> Any:
            if me.active:
                me.checkouts += 1
            return pool_conn(self_, *a, **k)

        psycopg.Cursor.execute = k_exec  # type: ignore[method-assign]
        psycopg_pool.ConnectionPool.connection = p_conn  # type: ignore[method-assign]


def _profile(fn: Any, qs: list[dict[str, Any]], top: int) -> str:
    prof = cProfile.Profile()
    prof.enable()
    for q in qs:
        fn(q)
    prof.disable()
    out = io.StringIO()
    st = pstats.Stats(prof, stream=out)
    st.sort_stats("tottime").print_stats(top)
    st.sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def exact_vectors_phase(pg: Any, entries: list[Any], n: int, dim: int, n_queries: int) -> dict[str, Any]:
    """The exact vector path (below HNSW_MIN_ROWS): ``vector_search`` vs the statement it used
    before (catalog look-up + distance in select list and ORDER BY) vs a plain ``ORDER BY <=>``."""
    import numpy as np

    from tiervault.vault.filters import Filters
    from tiervault.vault.postgres.vectors import HNSW_MIN_ROWS
    from tiervault.vault.rows import VectorRow

    assert n < HNSW_MIN_ROWS
    rng = np.random.default_rng(5)
    mat = rng.standard_normal((n, dim)).astype(np.float32)
    mat /= np.linalg.norm(mat, axis=1, keepdims=True)
    pg.put_vectors("bench", [VectorRow(e.id, "h", v) for e, v in zip(entries[:n], mat)])
    everything = Filters(include_expired=True, include_future=True)
    qv = rng.standard_normal((n_queries + 20, dim)).astype(np.float32)
    lit = ["[" + ",".join(f"{x:.7g}" for x in v) + "]" for v in qv]
    qs = [{"i": i} for i in range(20, n_queries + 20)]
    warm = [{"i": i} for i in range(20)]

    def ours(q: dict[str, Any]) -> list[Any]:
        return pg.vector_search("bench", qv[q["i"]], 10, filters=everything)

    def previous(q: dict[str, Any]) -> list[tuple]:
        pg.query("SELECT 1 FROM pg_indexes WHERE schemaname = %s AND indexname = %s",
                 (pg.address.schema, "no_such_index"))
        return pg.query("SELECT e.id, 1 - (v.vector <=> %s::vector) AS s FROM entry_vectors v "
                        "JOIN entries e ON e.id = v.entry_id WHERE v.model = 'bench' AND v.dim = "
                        f"{dim} ORDER BY v.vector <=> %s::vector, e.id LIMIT 10",
                        (lit[q["i"]], lit[q["i"]]))

    def plain(q: dict[str, Any]) -> list[tuple]:
        return pg.query("SELECT entry_id FROM entry_vectors ORDER BY vector <=> %s::vector, "
                        "entry_id LIMIT 10", (lit[q["i"]],))

    out = time_interleaved({"vector_search": ours, "previous_statements": previous,
                            "baseline_plain_order_by": plain}, qs, warm)
    agree = [[h.id for h in ours(q)] == [r[0] for r in plain(q)] for q in qs[:50]]
    out["same_top10_as_plain_of_50"] = sum(agree)
    out["ratio_vector_search_to_plain_p50"] = round(
        out["vector_search"]["p50_ms"] / out["baseline_plain_order_by"]["p50_ms"], 2)
    out["ratio_previous_to_plain_p50"] = round(
        out["previous_statements"]["p50_ms"] / out["baseline_plain_order_by"]["p50_ms"], 2)
    out["vectors"], out["dim"], out["load_avg"] = n, dim, [round(x, 2) for x in os.getloadavg()]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--profile", type=int, default=100)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--profile-out", type=Path)
    parser.add_argument("--exact-vectors", type=int, default=0,
                        help="also time the exact vector path on this many 384-d vectors (e.g. 5000)")
    parser.add_argument("--skip-scan", action="store_true")
    args = parser.parse_args(argv)
    from bench.corpus import generate, queries
    from pg_server import start_server
    from tiervault.vault.entry import Entry
    from tiervault.vault.postgres import PgTierStore
    from tiervault.vault.store import TierStore

    counting = _Counting()
    with run_cache_dir("tv-pgscan-cache-"):
        server = start_server(fsync=True)
        result: dict[str, Any] = {"machine": machine_info(), "entries": args.entries}
        try:
            url = server.create_database("tv_bench")
            with tempfile.TemporaryDirectory() as tmp:
                corpus = generate(args.entries)
                entries = [Entry.from_dict(r) for t in ("agent", "project", "team") for r in corpus.tiers[t]]
                pg = PgTierStore(url, name="team", schema="bench_team")
                pg.capture_many(entries, batch_size=5_000)
                pg.postings()
                lite = TierStore(Path(tmp) / "team.db", name="team")
                lite.capture_many(entries)
                small = generate(10_000, seed=11)
                side = {}
                for tier in ("agent", "project"):
                    side[tier] = TierStore(Path(tmp) / f"{tier}.db", name=tier)
                    side[tier].capture_many(Entry.from_dict(r) for r in small.tiers[tier])
                b_pg = _brain(pg, side["agent"], side["project"])
                b_lite = _brain(lite, side["agent"], side["project"])
                qs, warm = queries(args.queries, 7), queries(30, 8)

                def scan(brain: Any) -> Any:
                    return lambda q: brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))

                if args.exact_vectors:
                    result["exact_vectors"] = exact_vectors_phase(pg, entries, args.exact_vectors, 384, 200)
                    print(json.dumps(result["exact_vectors"], indent=2), flush=True)
                if args.skip_scan:
                    pg.close()
                    raise _Done
                out = time_interleaved({"pg_scan": scan(b_pg), "sqlite_scan": scan(b_lite)}, qs, warm)
                out["ratio_pg_to_sqlite_p50"] = round(out["pg_scan"]["p50_ms"]
                                                      / out["sqlite_scan"]["p50_ms"], 2)
                out["load_avg"] = [round(x, 2) for x in os.getloadavg()]
                counting.active = True
                for q in qs[:50]:
                    scan(b_pg)(q)
                counting.active = False
                out["pg_statements_per_scan"] = round(sum(counting.statements.values()) / 50, 2)
                out["pg_pool_checkouts_per_scan"] = round(counting.checkouts / 50, 2)
                out["pg_statement_kinds_per_scan"] = {k: round(v / 50, 2)
                                                      for k, v in counting.statements.most_common()}
                result["scan"] = out
                print(json.dumps(out, indent=2), flush=True)
                text = ("=== PG scan ===\n" + _profile(scan(b_pg), qs[:args.profile], args.top)
                        + "\n=== SQLite scan ===\n" + _profile(scan(b_lite), qs[:args.profile], args.top))
                if args.profile_out:
                    args.profile_out.write_text(text)
                else:
                    print(text)
                pg.close()
        except _Done:  # --skip-scan: the phases asked for are done; the server still stops
            pass
        finally:
            server.stop()
    emit({"pg_scan_profile": result}, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
