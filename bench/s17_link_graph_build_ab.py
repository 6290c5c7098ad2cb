"""Issue 16, session 17 probe (a change tried and not kept): the first step of
``LinkGraph.build`` -- every link end numbered in order of first appearance, sources
before targets, and the ends' codes -- as it is (a ``setdefault`` per end) against the
variant tried (``dict.fromkeys`` over both columns, ``zip`` with a counter, ``map``s),
over one tier's links, alternating in one process; both must give the same numbers.

    python bench/s17_link_graph_build_ab.py TIER_DB [--rounds 5]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from itertools import chain, count
from operator import itemgetter
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from tiervault.vault.store import TierStore


def as_is(rows: Sequence[Any]) -> tuple[dict[str, int], np.ndarray, np.ndarray]:
    """vault/link_graph.py's LinkGraph.build, its first lines."""
    index: dict[str, int] = {}
    src = [index.setdefault(r[0], len(index)) for r in rows]
    tgt = [index.setdefault(r[1], len(index)) for r in rows]
    return index, np.asarray(src, dtype=np.int64), np.asarray(tgt, dtype=np.int64)


def variant(rows: Sequence[Any]) -> tuple[dict[str, int], np.ndarray, np.ndarray]:
    """The variant tried: C loops only."""
    m = len(rows)
    sources, targets = list(map(itemgetter(0), rows)), list(map(itemgetter(1), rows))
    index = dict(zip(dict.fromkeys(chain(sources, targets)), count()))
    return (index, np.fromiter(map(index.__getitem__, sources), dtype=np.int64, count=m),
            np.fromiter(map(index.__getitem__, targets), dtype=np.int64, count=m))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("db", type=Path)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    with TierStore(args.db, name="t") as st:
        rows = st.graph.links.state().rows
    gc.disable()
    cpu: dict[str, list[float]] = {"as_is": [], "variant": []}
    got = {}
    for _ in range(args.rounds):
        for name, fn in (("as_is", as_is), ("variant", variant)):
            t = time.process_time()
            got[name] = fn(rows)
            cpu[name].append(round(time.process_time() - t, 3))
    a, b = got["as_is"], got["variant"]
    same = list(a[0].items()) == list(b[0].items()) and np.array_equal(a[1], b[1]) and np.array_equal(a[2], b[2])
    print(json.dumps({"db": str(args.db), "links": len(rows), "cpu_s": cpu, "same_numbers": same}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
