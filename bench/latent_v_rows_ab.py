"""Probe (issue 16, session 13): V_k rows kept per latent model, or read by ``pread`` each time.

    python bench/latent_v_rows_ab.py --workdir DIR [--queries 2000] [--json out.json]

``DIR`` is a work directory made by ``bench/run.py``'s build phase. After one scan (the
mirrors and their latent models loaded), each bench query's words are turned into each
tier's query vector (``LatentModel.query``) by this checkout's code (V_k's rows read from
the mirror file through ``MatrixRows.take``: one ``pread`` a row) and by the variant of
commit cd83dba (rows read once kept in a dict per model, ``V_ROWS_KEPT`` = 8,192; inlined
here), in alternating order, the query's TF-IDF weights recomputed each time. Both
vectors are compared bit for bit. Wall clock per call, medians and means.
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

from bench.checkouts import load_avg  # noqa: E402
from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import write_config  # noqa: E402

KEPT = 8192


def kept_query(m: Any, p: Any, words: list[str], kept: dict[int, np.ndarray]) -> np.ndarray | None:
    """cd83dba's LatentModel.query with its ``_v_at`` (rows read once kept)."""
    q = p.query_tfidf(list(words))
    if q is None:
        return None
    tids, w = q
    at = tids.tolist()
    missing = [t for t in dict.fromkeys(at) if t not in kept]
    if missing:
        if len(kept) + len(missing) > KEPT:
            kept.clear()
        kept.update(zip(missing, m.V.take(np.array(missing, dtype=np.int64))))
    rows = np.array([kept[t] for t in at], dtype=np.float32) if at else np.empty((0, m.k), np.float32)
    v = w.astype(np.float32) @ rows
    n = float(np.sqrt(v.dot(v)))
    return v / n if n > 0 else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    from tiervault.brain.brain import Brain
    from tiervault.vault import latent as vl

    load_before = load_avg()
    brain = Brain.open(write_config(args.workdir))
    brain.search_intelligent("rollback api deploy", mode="scan")
    ps = [brain.manager.store(t).postings() for t in ("agent", "project", "team")]
    ms = [vl.model_for(p, 16) for p in ps]
    assert all(isinstance(m.V, vl.MatrixRows) for m in ms), "V_k is not read from the file here"
    kept: list[dict[int, np.ndarray]] = [{} for _ in ms]
    spent: dict[str, list[float]] = {"read_each_time": [], "kept": []}
    for i, q in enumerate(queries(args.queries, seed=3)):
        words = q["text"].split()
        for j, (p, m) in enumerate(zip(ps, ms)):
            got = {}
            for name in (("read_each_time", "kept") if i % 2 else ("kept", "read_each_time")):
                m._query_memo = None  # noqa: SLF001 -- a probe: every call computes the vector
                p._query_weights = None  # noqa: SLF001
                t = time.perf_counter()
                got[name] = (m.query(p, words) if name == "read_each_time"
                             else kept_query(m, p, words, kept[j]))
                spent[name].append(time.perf_counter() - t)
            a, b = got["read_each_time"], got["kept"]
            assert (a is None and b is None) or a.tobytes() == b.tobytes()
    out = {"workdir": str(args.workdir), "queries": args.queries, "load_before": load_before,
           **{k: {"us_p50": round(statistics.median(v) * 1e6, 2),
                  "us_mean": round(statistics.mean(v) * 1e6, 2), "calls": len(v)}
              for k, v in spent.items()},
           "rows_kept": [len(k) for k in kept], "load_after": load_avg()}
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
