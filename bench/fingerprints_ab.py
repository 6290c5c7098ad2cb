"""The fingerprints of a look-up's few ids: an older checkout's ``string_table.fingerprints``
against this one's, call by call, on the same ids, in ONE process.

    python bench/fingerprints_ab.py --old /path/to/old/checkout --workdir DIR \
        [--counts 10,40,60] [--trials 2000] [--seed 11] [--json out.json]

Issue 16, session 10 computed a few strings' fingerprints in one padded (n, longest)
matrix (~15 NumPy calls) where the chunked path took ~30 (a quiet micro-benchmark, not
committed: 40 ids 44 -> 15 us). Here ``--counts`` ids drawn at random from the tiers of
``DIR`` (a ``bench/run.py`` build) are encoded once into a blob and offsets, and both
variants (``OLD/vault/string_table.py`` loaded as a separate module) fingerprint them,
in alternating order, the answers compared bit for bit. perf_counter; p50 / mean us a call.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
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


def blob_of(strings: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The strings' UTF-8 bytes as one uint8 blob and their ``len + 1`` offsets."""
    raw = [s.encode() for s in strings]
    offsets = np.zeros(len(raw) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in raw], out=offsets[1:])
    return np.frombuffer(b"".join(raw), dtype=np.uint8), offsets


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", type=Path, required=True)
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--counts", default="10,40,60")
    ap.add_argument("--trials", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    from tiervault.brain.brain import Brain
    from tiervault.vault import string_table as st

    spec = importlib.util.spec_from_file_location("_old_string_table", args.old / "vault" / "string_table.py")
    assert spec is not None and spec.loader is not None
    old_st = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = old_st
    spec.loader.exec_module(old_st)
    brain = Brain.open(write_config(args.workdir))
    for q in queries(5, 8):  # opens every tier's mirror
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
    ids = [s for t in brain.manager.ordered() for s in t.store.postings().ids.base.tolist()]
    out: dict[str, Any] = {"old_checkout": str(args.old), "old_commit": commit_of(args.old),
                           "new_commit": commit_of(Path(__file__).resolve().parent.parent),
                           "ids_pool": len(ids), "trials": args.trials, "load_before": load_avg()}
    rng = random.Random(args.seed)
    variants = (("old", old_st.fingerprints), ("new", st.fingerprints))
    for n in (int(c) for c in args.counts.split(",")):
        times: dict[str, list[float]] = {"old": [], "new": []}
        for i in range(args.trials):
            blob, offsets = blob_of(rng.sample(ids, n))
            answers = []
            for name, fn in (variants if i % 2 == 0 else variants[::-1]):
                t0 = time.perf_counter()
                answers.append(fn(blob, offsets))
                times[name].append(time.perf_counter() - t0)
            if not np.array_equal(answers[0], answers[1]):
                raise SystemExit(f"{n} ids: the fingerprints differ")
        out[f"ids_{n}"] = {name: {"p50_us": round(statistics.median(xs) * 1e6, 1),
                                  "mean_us": round(statistics.fmean(xs) * 1e6, 1)} for name, xs in times.items()}
        out[f"ids_{n}"]["bit_identical"] = True
    out["load_after"] = load_avg()
    brain.close()
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
