"""What the dedup's index (vault/shared_keys.py) costs a process: its full computation,
and its upkeep per search when nothing changed.

    python bench/shared_keys_cost.py --workdir DIR [--rounds 5] [--json out.json]

``DIR`` is a ``bench/run.py`` build (``tiers/*.db``). After one scan (the mirrors
loaded), each round takes every tier's key columns and asks a fresh
:class:`~tiervault.vault.shared_keys.SharedKeys` twice: the first call only notes the
builds, the second computes the sets from every column (what a process's second search
pays, and what a rebuilt large tier costs); the third call on the same columns, the
first upkeep after it. Then the upkeep every search pays when no tier changed: the
mean of 1,000 calls (``before`` and ``shared``; the key columns read apart). Wall and
process-CPU times, median of the rounds; the sets' sizes; the process's peak RSS.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH
from bench.output import emit  # noqa: E402
from bench.phases import write_config  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    from tiervault.brain.brain import Brain
    from tiervault.vault.shared_keys import SharedKeys

    brain = Brain.open(write_config(args.workdir))
    brain.search_intelligent("retry backoff jitter", mode="scan")
    tiers = brain.manager.ordered()
    out: dict = {"workdir": str(args.workdir), "load_before": [round(x, 2) for x in os.getloadavg()]}
    full, full_cpu, upkeep = [], [], []
    sizes: dict = {}
    for _ in range(args.rounds):
        columns = {t.name: t.store.key_columns() for t in tiers}
        index = SharedKeys()
        if index.shared(columns, index.before()) is not None:
            raise SystemExit("the index answered before it saw the same builds twice")
        t0, c0 = time.perf_counter(), time.process_time()
        index.shared(columns, index.before())
        full.append((time.perf_counter() - t0) * 1e3)
        full_cpu.append((time.process_time() - c0) * 1e3)
        t0 = time.perf_counter()
        shared = index.shared(columns, index.before())
        upkeep.append((time.perf_counter() - t0) * 1e3)
        if shared is None:
            raise SystemExit("the index did not answer for unchanged builds")
        sizes = {name: {"ids": len(i), "hashes": len(h)} for name, (i, h) in shared.items()}
    out["slots"] = {t.name: t.store.key_columns().slots for t in tiers}
    out["full_ms"] = round(statistics.median(full), 2)
    out["full_cpu_ms"] = round(statistics.median(full_cpu), 2)
    out["first_upkeep_ms"] = round(statistics.median(upkeep), 4)
    t0 = time.perf_counter()
    for _ in range(1000):
        index.shared(columns, index.before())
    out["upkeep_us"] = round((time.perf_counter() - t0) * 1e3, 2)  # 1,000 calls: ms -> us a call
    t0 = time.perf_counter()
    for _ in range(1000):
        columns = {t.name: t.store.key_columns() for t in tiers}
    out["key_columns_us"] = round((time.perf_counter() - t0) * 1e3, 2)
    out["shared"] = sizes
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    out["load_after"] = [round(x, 2) for x in os.getloadavg()]
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
