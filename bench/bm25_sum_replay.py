"""A small tier's BM25 sum, replayed: the dense sum against the sum at the postings' own slots.

    python bench/bm25_sum_replay.py --workdir DIR [--warmup 300] [--queries 200] [--reps 3] [--json out.json]

``DIR`` is a ``bench/run.py`` work directory. After ``--warmup`` scans
(``search_intelligent(mode="scan")``, bench queries), every ``TermMatches.scored`` call
(a small tier's BM25 for its top k) during ``--queries`` more scans is captured (each
term's slots and BM25 at them, the tier's slot count), then replayed in this process,
``--reps`` times in turn, by (issue 16 session 13):

- ``dense_s12``: session 12's ``TermMatches.scored`` (one ``np.bincount`` into every slot,
  postings joined as they are), then ``dense > 0`` and ``flatnonzero``;
- ``dense``: the same with the postings joined straight into ``intp`` / ``float64``;
- ``sparse``: :func:`tiervault.vault.term_matches.scored_sparse` (the postings' own slots).

Every answer is checked bit for bit against ``dense_s12``. Mean us a call by the share of
the tier's slots the postings cover (``scored`` takes ``sparse`` under 1/SPARSE_SHARE).
Warm replays: the scan's other work does not evict between calls here.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: a checkout's own tiervault

import numpy as np  # noqa: E402

from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import query_kwargs, write_config  # noqa: E402


def _dense_s12(where: list[np.ndarray], parts: list[np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray]:
    keep = [t for t in range(len(where)) if where[t].size]
    if not keep:
        dense = np.zeros(n, dtype=np.float64)
    elif len(keep) == 1:
        dense = np.bincount(where[keep[0]], weights=parts[keep[0]], minlength=n)
    else:
        dense = np.bincount(np.concatenate([where[t] for t in keep]),
                            weights=np.concatenate([parts[t] for t in keep]), minlength=n)
    slots = np.flatnonzero(dense > 0)
    return slots, dense[slots]


def _dense(where: list[np.ndarray], parts: list[np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray]:
    """Session 13's dense sum (``term_matches``' own): the postings joined as intp / float64."""
    keep = [t for t in range(len(where)) if where[t].size]
    if not keep:
        dense = np.zeros(n, dtype=np.float64)
    elif len(keep) == 1:
        dense = np.bincount(where[keep[0]], weights=parts[keep[0]], minlength=n)
    else:
        dense = np.bincount(np.concatenate([where[t] for t in keep], dtype=np.intp),
                            weights=np.concatenate([parts[t] for t in keep], dtype=np.float64),
                            minlength=n)
    slots = np.flatnonzero(dense > 0)
    return slots, dense[slots]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)

    from tiervault.brain.brain import Brain
    from tiervault.vault.term_matches import SPARSE_SHARE, TermMatches, scored_sparse

    calls: list[tuple[list[np.ndarray], list[np.ndarray], int]] = []
    real = TermMatches.scored
    capturing = [False]

    def scored(self: TermMatches, doclen: np.ndarray, idf: np.ndarray, avglen: float,
               memo: Any = None) -> Any:
        if capturing[0]:  # each term's BM25 as the sum reads it (the memo keeps it for real)
            parts = self.terms_bm25(doclen, idf, avglen, memo)
            calls.append(([s.copy() for s in self.slots], [p.copy() for p in parts], len(doclen)))
        return real(self, doclen, idf, avglen, memo)

    brain = Brain.open(write_config(args.workdir))
    for q in queries(args.warmup, 8):
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
    TermMatches.scored = scored  # type: ignore[method-assign]
    capturing[0] = True
    for q in queries(args.queries, 9):
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
    capturing[0] = False
    TermMatches.scored = real  # type: ignore[method-assign]

    variants = {"dense_s12": _dense_s12, "dense": _dense,
                "sparse": lambda w, p, n: scored_sparse(w, p)}
    for where, parts, n in calls:
        want = _dense_s12(where, parts, n)
        for name, fn in variants.items():
            got = fn(where, parts, n)
            if got[0].tolist() != want[0].tolist() or got[1].tobytes() != want[1].tobytes():
                raise SystemExit(f"{name} differs from the dense sum")
    times: dict[str, list[list[float]]] = {k: [[] for _ in calls] for k in variants}
    for _ in range(args.reps):
        for name, fn in variants.items():
            for i, (where, parts, n) in enumerate(calls):
                t0 = time.perf_counter()
                fn(where, parts, n)
                times[name][i].append(time.perf_counter() - t0)
    shares = [sum(w.size for w in where) / n for where, _, n in calls]
    bands: dict[str, Any] = {}
    for label, lo, hi in (("< 1/64", 0, 1 / 64), ("1/64-1/8", 1 / 64, 1 / SPARSE_SHARE),
                          ("1/8-1/4", 1 / SPARSE_SHARE, 1 / 4), (">= 1/4", 1 / 4, 1e9), ("all", 0, 1e9)):
        pick = [i for i, s in enumerate(shares) if lo <= s < hi]
        if pick:
            bands[label] = {"calls": len(pick), **{
                name: round(statistics.fmean(min(times[name][i]) for i in pick) * 1e6, 1)
                for name in variants}}
    emit({"workdir": str(args.workdir), "calls": len(calls), "bit_for_bit": True,
          "postings_p50": statistics.median(sum(w.size for w in c[0]) for c in calls),
          "mean_us_a_call_best_of_reps": bands, "load": [round(x, 2) for x in os.getloadavg()]},
         args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
