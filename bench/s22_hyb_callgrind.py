"""Instructions of warm 100K hybrid scans under valgrind's callgrind (the load cannot move them).

    valgrind --tool=callgrind --collect-atstart=no --callgrind-out-file=OUT \
        python bench/s22_hyb_callgrind.py --workdir DIR [--queries 40] [--warmup 20]
    callgrind_annotate OUT | head        # "PROGRAM TOTALS": the scans' instructions

``DIR``: a ``bench/run.py --keep`` size directory with vectors (``agent-hybrid.yaml``: hash
embedder). After ``--warmup`` scans (not collected), ``--queries`` bench scans
(``search_intelligent(mode="scan")``, their filters) are collected one by one
(``CALLGRIND_TOGGLE_COLLECT`` around each, through a helper compiled with ``cc``: needs
valgrind's headers). Every thread's instructions count (the scan pool's int8 products are
the same whoever computes them). Run it from each checkout's interpreter with
``PYTHONPATH`` set to that checkout for an A/B (issue 16, session 22: the hybrid scan).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH (A/B: a checkout's own tiervault)

from bench.cold_callgrind import callgrind_toggle  # noqa: E402
from bench.corpus import queries  # noqa: E402
from bench.phases import query_kwargs  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    from tiervault.brain.brain import Brain

    with tempfile.TemporaryDirectory() as tmp:
        toggle = callgrind_toggle(Path(tmp))
        brain = Brain.open(args.workdir / "agent-hybrid.yaml")
        if brain.vectors is None:
            raise SystemExit(f"{args.workdir}/agent-hybrid.yaml opens no vectors")
        for q in queries(args.warmup, args.seed + 1):
            brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
        for q in queries(args.queries, args.seed):
            toggle()
            brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
            toggle()
        brain.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
