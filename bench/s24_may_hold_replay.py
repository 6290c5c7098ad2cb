"""``may_hold_pairs`` (vault/stem_presence.py) as it was before session 24's second pass
and as it is now, timed in turn at each of its calls in 100K hybrid scans (issue 16).

    python bench/s24_may_hold_replay.py --workdir W [--queries 300] [--rounds 3] [--json out.json]

``W``: a ``bench/run.py`` work directory with vectors (``agent-hybrid.yaml`` is written
afresh, the tiers only read). Each scan follows the one-thread NumPy top-10's pass, as in
run.py's hybrid phase. At each call the scan makes, ``--rounds`` times: the old function
(``_columns`` through the vocabulary and W, ``_held`` with ``np.minimum``; copied below) and
the new (the columns the query's BM25 read, ``take(mode="clip")``), in alternating order,
both on the mirror as it stands then; their answers must be equal (exits 1 otherwise).
Reports the mean / p50 us a scan of each, how many scans the new one was lower in, and
how often the new ``_columns`` found every stem read.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

sys.path.append(str(Path(__file__).resolve().parent.parent))

from bench.checkouts import load_avg  # noqa: E402
from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import numpy_topk, open_hybrid_brain, query_kwargs  # noqa: E402


def _old_held(col: np.ndarray | None, slots: np.ndarray) -> np.ndarray:
    if col is None:
        return np.zeros(slots.size, dtype=bool)
    if col.dtype != slots.dtype:
        slots = slots.astype(col.dtype)
    pos = col.searchsorted(slots)
    np.minimum(pos, col.size - 1, out=pos)
    return col[pos] == slots


def _old_columns(p: Any, pairs: Sequence[tuple[str, str]]) -> dict[str, np.ndarray | None]:
    W = p.W
    stems = list(dict.fromkeys(st for pair in pairs for st in pair))
    cols: dict[str, np.ndarray | None] = {}
    for stem, tid in zip(stems, p.vocab.ids(stems)):
        col = None
        if tid is not None and tid < W.n_cols:
            col = W.indices.get(int(W.indptr[tid]), int(W.indptr[tid + 1]))
        cols[stem] = col if col is not None and col.size else None
    return cols


def old_may_hold_pairs(p: Any, ids: Sequence[str], pairs: Sequence[tuple[str, str]]) -> list[bool]:
    """The function before this pass (its damaged-block branch left out: none here)."""
    n = len(ids)
    if not pairs or not n:
        return [False] * n
    base = p.base_rows
    at = [-1 if s is None or s >= base else s for s in p.slots_of(ids)]
    if max(at) < 0:
        return [True] * n
    slots = np.array(at, dtype=np.int32)
    held = {stem: _old_held(col, slots) for stem, col in _old_columns(p, pairs).items()}
    may = slots < 0
    for a, b in pairs:
        may |= held[a] & held[b]
    return may.tolist()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    from tiervault.vault import mirror_search, stem_presence

    new_fn = stem_presence.may_hold_pairs
    spent = {"old": 0.0, "new": 0.0}
    stats = {"calls": 0, "mismatches": 0, "read_hits": 0}
    flip = [False]

    def replay(p: Any, ids: Sequence[str], pairs: Sequence[tuple[str, str]]) -> list[bool]:
        stems = list(dict.fromkeys(st for pair in pairs for st in pair))
        tids = p.read_terms()[0]
        stats["calls"] += 1
        stats["read_hits"] += tids is not None and all(s in tids for s in stems)
        answers = {}
        for _ in range(args.rounds):
            order = ("new", "old") if flip[0] else ("old", "new")
            flip[0] = not flip[0]
            for name in order:
                fn = new_fn if name == "new" else old_may_hold_pairs
                t0 = time.perf_counter()
                answers[name] = fn(p, ids, pairs)
                spent[name] += time.perf_counter() - t0
        stats["mismatches"] += answers["old"] != answers["new"]
        return answers["new"]

    mirror_search.may_hold_pairs = replay
    brain = open_hybrid_brain(args.workdir, 384)
    top = numpy_topk(100_000, 384, args.seed, kernel="einsum")
    for q in queries(30, args.seed + 1):
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
        top(q)
    load_before = load_avg()
    per_scan: list[tuple[float, float]] = []
    for q in queries(args.queries, args.seed):
        top(q)
        spent["old"] = spent["new"] = 0.0
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
        per_scan.append((spent["old"] * 1e6 / args.rounds, spent["new"] * 1e6 / args.rounds))
    old = [o for o, _ in per_scan]
    new = [n for _, n in per_scan]
    emit({"scans": len(per_scan), "rounds": args.rounds, **stats,
          "old_mean_us": round(statistics.fmean(old), 1), "new_mean_us": round(statistics.fmean(new), 1),
          "old_p50_us": round(statistics.median(old), 1), "new_p50_us": round(statistics.median(new), 1),
          "scans_with_calls": sum(o > 0 for o in old),
          "new_lower_in": sum(n < o for o, n in per_scan if o > 0),
          "load_before": load_before, "load_after": load_avg()}, args.json)
    return 1 if stats["mismatches"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
