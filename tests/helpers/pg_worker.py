"""Worker processes for the PostgreSQL concurrency test and bench (one role per process).

    python pg_worker.py capture URL SCHEMA WORKER N BATCH     write N entries in batches
    python pg_worker.py search  URL SCHEMA STOPFILE           search until STOPFILE exists

Each role prints one JSON report line on stdout (errors included). Entry
contents are a pure function of (worker, i) (``vault_worker.expected``).
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from vault_worker import expected  # noqa: E402

from tiervault.vault.entry import Entry  # noqa: E402
from tiervault.vault.filters import Filters  # noqa: E402


def capture(url: str, schema: str, worker: int, n: int, batch: int) -> dict:
    from tiervault.vault.postgres import PgTierStore

    store = PgTierStore(url, name="team", schema=schema)
    written, started = 0, time.perf_counter()
    for start in range(0, n, batch):
        entries = [Entry.create(type="pattern", **expected(worker, i))
                   for i in range(start, min(n, start + batch))]
        written += store.capture_many(entries, batch_size=batch)
    store.close()
    return {"written": written, "seconds": time.perf_counter() - started}


def search(url: str, schema: str, stopfile: str) -> dict:
    from tiervault.vault.postgres import PgTierStore

    store = PgTierStore(url, name="team", schema=schema)
    searches, errors, max_seen = 0, [], 0
    while True:
        stop = Path(stopfile).exists()  # read before searching: the last pass sees everything
        try:
            stats = store.term_stats(["concurr"])
            hits = store.lexical_top_k(["concurr"], stats, Filters(), 10)
            max_seen = max(max_seen, stats.n_docs)
            if stats.n_docs and not hits:
                errors.append("a non-empty tier answered nothing")
            searches += 1
        except Exception as exc:  # reported, never swallowed
            errors.append(f"{type(exc).__name__}: {exc}")
        if stop:
            break
        time.sleep(0.01)
    store.close()
    return {"searches": searches, "errors": errors[:5], "last_seen": max_seen}


def main() -> None:
    role, *args = sys.argv[1:]
    try:
        if role == "capture":
            report = capture(args[0], args[1], int(args[2]), int(args[3]), int(args[4]))
        else:
            report = search(args[0], args[1], args[2])
    except Exception:
        report = {"error": traceback.format_exc()}
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
