"""Two checkouts rank alike: every answer of ``search_intelligent`` compared, row by row.

    python bench/rank_compare.py --a /path/main --b /path/branch --workdir DIR \
        [--queries 150] [--hybrid [--dim 384]] [--json out.json]

``DIR`` is a work directory made by ``bench/run.py``'s build phase (``tiers/*.db``).
Each checkout answers the bench queries (:func:`bench.corpus.queries`, with their
filters) FTS-only in ``scan`` and ``full`` mode with ``explain=True`` (ids, scores and
every breakdown) at one fixed instant (``--hybrid``: hybrid, with the hash embedder's
``--dim``-d vectors of ``bench/run.py``'s hybrid phase), in its own process (its
``.venv``, ``PYTHONPATH`` = the checkout: :mod:`bench.checkouts`); the rows must be equal (``==`` on the decoded JSON: floats
bit for bit). A speed change that must not change rankings is checked this way.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # after PYTHONPATH: a worker imports its own checkout's tiervault

from bench.checkouts import checkout_env, load_avg, python_of  # noqa: E402
from bench.output import emit  # noqa: E402


NOW = 1_790_000_000.0  # a fixed instant (2026-09-21), after every bench entry's dates


def worker(workdir: Path, n: int, seed: int, out: Path, dim: int = 0) -> None:
    """Answer every query in both modes (hybrid with ``dim``-d hash vectors when
    ``dim``); the rows go to ``out`` as JSON."""
    from bench.corpus import queries
    # the worker's own checkout's bench.phases (PYTHONPATH first): only names every checkout has
    from bench.phases import HASH_EMBEDDING, query_kwargs, write_config
    from tiervault.brain.brain import Brain

    brain = Brain.open(write_config(workdir, {**HASH_EMBEDDING, "dim": dim} if dim else None))
    if dim and brain.vectors is None:
        raise SystemExit(f"{workdir} opens no vectors: build it with them first")
    brain.clock = lambda: NOW  # the decay signal reads the clock: both sides at one instant
    answers: list[dict[str, Any]] = []
    for q in queries(n, seed):
        for mode in ("scan", "full"):
            rows = brain.search_intelligent(q["text"], mode=mode, explain=True,
                                            **query_kwargs(q))
            answers.append({"query": q["text"], "mode": mode, "rows": list(rows)})
    brain.close()
    out.write_text(json.dumps(answers, default=str), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", type=Path)
    ap.add_argument("--b", type=Path)
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=150)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--hybrid", action="store_true", help="rank with the hash embedder's vectors")
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--_worker", dest="worker_out", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker_out:
        worker(args.workdir, args.queries, args.seed, args.worker_out, args.dim if args.hybrid else 0)
        return 0
    answers = {}
    for name, checkout in (("A", args.a), ("B", args.b)):
        out = args.workdir / f"rank-{name}.json"
        cmd = [python_of(checkout), str(Path(__file__).resolve()), "--workdir", str(args.workdir),
               "--queries", str(args.queries), "--seed", str(args.seed), "--_worker", str(out)]
        cmd += ["--hybrid", "--dim", str(args.dim)] if args.hybrid else []
        subprocess.run(cmd, check=True, env=checkout_env(checkout))
        answers[name] = json.loads(out.read_text(encoding="utf-8"))
        out.unlink()
    a, b = answers["A"], answers["B"]
    differ = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
    report = {"a": str(args.a), "b": str(args.b), "queries": args.queries, "hybrid": args.hybrid,
              "answers": len(a), "rows": sum(len(x["rows"]) for x in a),
              "identical": len(a) == len(b) and not differ, "differing": len(differ),
              "first_differing": [a[i]["query"] + " / " + a[i]["mode"] for i in differ[:5]],
              "load": load_avg()}
    emit(report, args.json)
    return 0 if report["identical"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
