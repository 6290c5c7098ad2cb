"""The dedup's misses decided by a binary search of a table's keys, or by one bit of its
``KeyFilter`` first (``vault/key_filter.py``), warm and after the caches are evicted.

    python bench/key_filter_cost.py --workdir DIR [--rounds 200] [--keys 40] \
        [--evict-mb 640] [--seed 3] [--json out.json]

The dedup of a federated scan asks each tier's id and hash tables about ~40 strings
(another tier's top-k ids and hashes), most of them held nowhere (issue 16, session 11
added the filter). Here the six tables of ``DIR`` (a ``bench/run.py`` 100K build: ids and
content hashes of 3 tiers) are each asked about ``--keys`` keys drawn from the OTHER
tiers' tables of the same kind (the fingerprints / digest keys the dedup would look up),
by ``keys[searchsorted(keys, want)] == want`` (before the filter) and by
``present(keys, filter, want)`` (the filter's bits, then a search of those that pass),
with the same answers; ``bits_only``: the filter's ``maybe`` alone (what session 11's
uncommitted probe timed against the search: 19 / 55 us against 34 / 145). A round asks all six tables; ``warm``: right after the other
variant's round on the same keys; ``evicted``: after writing a ``--evict-mb`` buffer
(640 MB: larger than this machine's 480 MiB L3, so that the keys, the bitmaps and the
interpreter's own data are read from memory; a smaller one evicts L2 only) -- a scan
started 15-25 ms after the previous one finds some state between the two. Rounds alternate the order.
perf_counter; p50 / mean us a round of six tables.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: a checkout's own tiervault

from bench.checkouts import commit_of, load_avg  # noqa: E402
from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import query_kwargs, write_config  # noqa: E402


def _search(keys: np.ndarray, _filter: Any, want: np.ndarray) -> np.ndarray:
    """The decision before the filter: one binary search of every key."""
    return keys.take(np.searchsorted(keys, want, side="left"), mode="clip") == want


def _bits(_keys: np.ndarray, key_filter: Any, want: np.ndarray) -> np.ndarray:
    """The filter's bits alone (``maybe``): the part session 11's probe timed."""
    return key_filter.maybe(want)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--keys", type=int, default=40)
    ap.add_argument("--evict-mb", type=int, default=640)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    from tiervault.brain.brain import Brain
    from tiervault.vault.key_filter import KeyFilter, present

    brain = Brain.open(write_config(args.workdir))
    for q in queries(5, 8):  # opens every tier's mirror
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
    mirrors = [t.store.postings() for t in brain.manager.ordered()]
    tables = {"ids": [np.asarray(p.ids.base.keys.all()) for p in mirrors],
              "hashes": [np.asarray(p.hashes.base.keys.all()) for p in mirrors]}
    six = [(keys, KeyFilter(keys), kind, i) for kind, ks in tables.items() for i, keys in enumerate(ks)]
    rng = np.random.default_rng(args.seed)
    evict = np.zeros(args.evict_mb << 20, dtype=np.uint8)
    variants = {"search": _search, "filter": present, "bits_only": _bits}
    times: dict[str, dict[str, list[float]]] = {c: {v: [] for v in variants} for c in ("warm", "evicted")}
    held = asked = 0
    load_before = load_avg()
    for r in range(args.rounds):
        wants = []
        for keys, _, kind, i in six:
            others = np.concatenate([k for j, k in enumerate(tables[kind]) if j != i])
            wants.append(others[rng.integers(0, others.size, args.keys)])
        order = list(variants.items()) if r % 2 == 0 else list(variants.items())[::-1]
        for cond in ("evicted", "warm"):
            for name, fn in order:
                if cond == "evicted":
                    evict += 1  # every line of a buffer larger than L3 written
                answers = []
                t0 = time.perf_counter()
                for (keys, filt, _, _), want in zip(six, wants):
                    answers.append(fn(keys, filt, want))
                times[cond][name].append(time.perf_counter() - t0)
                if name == "search" and cond == "warm":
                    held += int(sum(a.sum() for a in answers))
                    asked += sum(a.size for a in answers)
            same = [np.array_equal(_search(k, f, w), present(k, f, w)) for (k, f, _, _), w in zip(six, wants)]
            if not all(same):
                raise SystemExit("the filter's answer differs from the binary search's")
    out: dict[str, Any] = {"commit": commit_of(Path(__file__).resolve().parent.parent),
                           "workdir": str(args.workdir), "rounds": args.rounds, "keys_per_table": args.keys,
                           "table_keys": {k: [int(a.size) for a in v] for k, v in tables.items()},
                           "filter_bytes": [f.nbytes for _, f, _, _ in six],
                           "held_share": round(held / asked, 4), "answers_equal": True,
                           "evict_mb": args.evict_mb, "load_before": load_before}
    for cond, per in times.items():
        out[cond] = {name: {"p50_us": round(statistics.median(xs) * 1e6, 1),
                            "mean_us": round(statistics.fmean(xs) * 1e6, 1)} for name, xs in per.items()}
    out["load_after"] = load_avg()
    brain.close()
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
