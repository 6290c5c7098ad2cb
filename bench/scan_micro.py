"""Two kernels of the FTS-only scan, an older checkout's against this one's, in one process.

    python bench/scan_micro.py --old /path/to/old/checkout --workdir DIR [--json out.json]

End-to-end scan timings on this shared 2-core machine move by +-10-15 % between
fresh processes, more than a 0.1 ms change; so each kernel is timed call by call,
old and new interleaved on the same inputs, in one process (``DIR`` from
``bench/run.py``'s build phase, 100K entries, 3 tiers):

- ``tfidf_query.scores_at`` (TF-IDF at 30 slots of each tier, the words of 300 bench
  queries; the answers compared bit for bit), loaded from ``OLD/vault/tfidf_query.py``;
- the fingerprints of a string-table look-up of 3 / 10 / 30 / 60 ids of another tier
  (the rule choosing plain Python or NumPy: OLD = up to 32 strings in Python).
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import sqlite3
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: a checkout's own tiervault

from bench.checkouts import load_avg  # noqa: E402
from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import write_config  # noqa: E402


def _us(xs: list[float]) -> float:
    return round(statistics.median(xs) * 1e6, 1)


def _old_rule(strings: list[str], st: Any) -> np.ndarray:
    if len(strings) <= 32:
        return np.fromiter((st._py_fingerprint(s.encode()) for s in strings), dtype=np.uint64,
                           count=len(strings))
    return st.fingerprints(*st._encode(strings))


def _new_rule(strings: list[str], st: Any) -> np.ndarray:
    if sum(map(len, strings)) <= st._PY_CHARS:
        return np.fromiter((st._py_fingerprint(s.encode()) for s in strings), dtype=np.uint64,
                           count=len(strings))
    return st.fingerprints(*st._encode(strings))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", type=Path, required=True)
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    from tiervault.brain.brain import Brain
    from tiervault.vault import string_table as st
    from tiervault.vault import tfidf_query as tq
    from tiervault.vault.query import query_terms

    spec = importlib.util.spec_from_file_location("old_tfidf_query",
                                                  args.old / "vault" / "tfidf_query.py")
    assert spec is not None and spec.loader is not None
    old_tq = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(old_tq)
    brain = Brain.open(write_config(args.workdir))
    mirrors = {t.name: t.store.postings() for t in brain.manager.ordered()}
    out: dict[str, Any] = {"old": str(args.old), "load_before": load_avg()}
    times: dict[str, list[float]] = {"old": [], "new": []}
    same = True
    rng = np.random.default_rng(7)
    for q in queries(300, 31):
        words = query_terms(q["text"])
        for p in mirrors.values():
            qw = p.query_tfidf(words)
            if qw is None:
                continue
            slots = np.sort(rng.choice(p.base_rows, 30, replace=False)).astype(np.int64)
            columns: dict = {}  # as a query keeps them (the first call reads the columns)
            answers = []
            for name, fn in (("old", old_tq.scores_at), ("new", tq.scores_at)):
                c0 = time.perf_counter()
                answers.append(fn(qw, slots, p.W, p.T, p.base_rows, None, columns))
                times[name].append(time.perf_counter() - c0)
            same &= bool(np.array_equal(answers[0], answers[1]))
    out["tfidf_at_30_slots_us"] = {"old": _us(times["old"]), "new": _us(times["new"]),
                                   "calls": len(times["old"]), "bit_identical": same}
    first = next(iter(mirrors))
    db = Path(brain.manager.tiers[first].path)
    others = [r[0] for r in sqlite3.connect(f"file:{db}?mode=ro", uri=True).execute(
        "SELECT id FROM entries")]
    pick = random.Random(5)
    for n in (3, 10, 30, 60):
        t: dict[str, list[float]] = {"old": [], "new": []}
        for _ in range(300):
            strings = pick.sample(others, n)
            answers = []
            for name, rule in (("old", _old_rule), ("new", _new_rule)):
                c0 = time.perf_counter()
                answers.append(rule(strings, st))
                t[name].append(time.perf_counter() - c0)
            assert np.array_equal(answers[0], answers[1])
        out[f"fingerprints_{n}_ids_us"] = {"old": _us(t["old"]), "new": _us(t["new"])}
    out["load_after"] = load_avg()
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
