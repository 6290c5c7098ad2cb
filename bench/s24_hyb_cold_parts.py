"""The wall clock of a 100K hybrid scan's parts in run.py's pairing, where each scan follows
the one-thread NumPy top-10 (cold caches), and without it (issue 16, session 24).

    python bench/s24_hyb_cold_parts.py --workdir W [--queries 300] [--warm] \
        [--part MODULE:ATTR ...] [--json out.json]

``W``: a ``bench/run.py`` work directory with vectors (``agent-hybrid.yaml`` is written
afresh). As ``bench/s20_hyb_parts.py`` (its wrappers and parts, plus the lexical leg's and
the scan's stages below) but each timed scan follows a pass of ``bench.phases.numpy_topk``
(``einsum``, 100K x 384 float32) as in ``bench/run.py``'s hybrid phase, unless ``--warm``.
Parts nest: compare them, do not add them up. Run from another checkout's interpreter with
``PYTHONPATH`` set to it to time that checkout's code.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: a checkout's own tiervault

from bench.checkouts import load_avg  # noqa: E402
from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import numpy_topk, open_hybrid_brain, query_kwargs  # noqa: E402
from bench.s20_hyb_parts import PARTS, summary, wrap  # noqa: E402

def _wrap_stages(spent: dict[str, list[float]]) -> tuple[str, ...]:
    """Each of ``stages.STAGES`` timed as ``stage:NAME`` (run_stages reads the tuple)."""
    from tiervault.brain import stages

    def timed(fn: Any) -> Any:
        name = f"stage:{fn.__name__}"

        def run(*a: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*a)
            finally:
                got = spent.setdefault(name, [0.0, 0])
                got[0] += time.perf_counter() - t0
                got[1] += 1
        return run
    names = tuple(f"stage:{fn.__name__}" for fn in stages.STAGES)
    stages.STAGES = tuple(map(timed, stages.STAGES))
    return names


MORE = (
    ("tiervault.brain.evidence", "cosines"),
    ("tiervault.brain.evidence", "proximity"),
    ("tiervault.vault.manager", "VaultManager.lexical_query"),
    ("tiervault.vault.manager", "VaultManager.lexical_scores"),
    ("tiervault.vault.lexicon", "MirrorLexicon.term_stats"),
    ("tiervault.vault.lexicon", "MirrorLexicon.lexical_top_k_slots"),
    ("tiervault.brain.pool", "Pool.add_external"),
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--warm", action="store_true", help="no NumPy pass before each scan")
    ap.add_argument("--part", action="append", default=[], metavar="MODULE:ATTR")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    spent: dict[str, list[float]] = {}
    parts = PARTS + MORE + tuple(tuple(p.split(":", 1)) for p in args.part)
    for module, attr in parts:
        wrap(module, attr, spent)
    parts += tuple(("", name) for name in _wrap_stages(spent))
    brain = open_hybrid_brain(args.workdir, 384)
    top = numpy_topk(100_000, 384, args.seed, kernel="einsum")
    for q in queries(30, args.seed + 1):
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
        top(q)
    load_before = load_avg()
    rows: list[tuple[float, dict[str, list[float]]]] = []
    for q in queries(args.queries, args.seed):
        if not args.warm:
            top(q)
        spent.clear()
        t0 = time.perf_counter()
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
        rows.append((time.perf_counter() - t0, {k: list(v) for k, v in spent.items()}))
    import tiervault.embeddings as emb

    emit({"tiervault": str(Path(emb.__file__).resolve().parent.parent), "warm": args.warm,
          **summary(rows, parts), "load_before": load_before, "load_after": load_avg()}, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
