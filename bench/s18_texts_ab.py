"""The hybrid scan with and without the pool's texts read with its light rows, swapped
query by query in ONE process (issue 16, session 18).

    python bench/s18_texts_ab.py --workdir W [--queries 300] [--rounds 2] [--json out.json]

``W``: a ``bench/run.py`` work directory with vectors (``agent-hybrid.yaml``). A hybrid
scan's pool reads term proximity's field texts in its light-row statements
(``Pool.keep_texts``, set by the gather stage). Here each bench query is answered twice
in a row, once with ``keep_texts`` forced off before the pool's first read (proximity
then reads its texts by its own statement, the code before session 18) and once as the
gather stage set it, the order alternating query by query and round by round: both
variants see the same load and caches. Wall ms per scan (p50 / mean), process CPU, and
how many answers (ids and scores) were equal.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.checkouts import load_avg  # noqa: E402
from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import open_hybrid_brain, query_kwargs  # noqa: E402
from bench.s16_read_paths_ab import HYBRID_DIM  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)

    from tiervault.brain.pool import Pool

    brain = open_hybrid_brain(args.workdir, HYBRID_DIM)
    texts_on = [True]
    read_rows = Pool.read_rows

    def forced(self: Any, *a: Any, **kw: Any) -> Any:
        # the pool's first read: keep_texts as the variant says (off: the old statements)
        self.keep_texts = self.keep_texts and texts_on[0]
        return read_rows(self, *a, **kw)

    Pool.read_rows = forced  # type: ignore[method-assign]
    for q in queries(30, 8):
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
    wall: dict[str, list[float]] = {"off": [], "on": []}
    cpu: dict[str, list[float]] = {"off": [], "on": []}
    equal = 0
    load = [load_avg()]
    qs = queries(args.queries, 7)
    for r in range(args.rounds):
        for j, q in enumerate(qs):
            answers = {}
            for name in (("off", "on") if (j + r) % 2 == 0 else ("on", "off")):
                texts_on[0] = name == "on"
                c0, t0 = time.process_time(), time.perf_counter()
                out = brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
                wall[name].append((time.perf_counter() - t0) * 1e3)
                cpu[name].append((time.process_time() - c0) * 1e3)
                answers[name] = [(row["id"], row["score"]) for row in out]
            equal += answers["off"] == answers["on"]
        load.append(load_avg())
    result: dict[str, Any] = {"workdir": str(args.workdir), "queries": args.queries,
                              "rounds": args.rounds, "load": load, "equal_answers": equal,
                              "answers": args.queries * args.rounds}
    for name in ("off", "on"):
        result[name] = {"wall_p50_ms": round(statistics.median(wall[name]), 3),
                        "wall_mean_ms": round(statistics.mean(wall[name]), 3),
                        "cpu_p50_ms": round(statistics.median(cpu[name]), 3)}
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
