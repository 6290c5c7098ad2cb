"""The JSONL import exactly as ``bench/run.py`` times it, A/B: its build phase's first step.

``bench/run.py`` (``phases.build_phase``) generates the corpus in the timing process,
writes the three tier files, and times ``import_timing.time_jsonl_import`` while the
generated corpus is still alive in that process (its ~100,000 dicts are what the
collector walks besides the import's own objects). ``write_ab.py`` writes the files once
and imports them in a fresh process without the corpus. This does what ``run.py`` does,
and only that, for checkout A and B alternately, each round in a fresh process::

    python bench/jsonl_e2e.py --a /path/main --b . --entries 100000 --rounds 3 --json out.json

Reported per run: entries, wall and process-CPU seconds, entries/s by each, and the
load average before and after (the figure ``run.py`` reports is ``rate``).
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

TIERS = ("agent", "project", "team")


def worker(entries: int, seed: int, workdir: Path) -> dict[str, Any]:
    """One run, as ``phases.build_phase`` does it (corpus alive while timing)."""
    import os

    from import_timing import time_jsonl_import  # this script's folder: one harness for A and B
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench.corpus import generate, write_jsonl

    corpus = generate(entries, seed)
    src = workdir / "jsonl"
    src.mkdir(parents=True)
    for t in TIERS:
        write_jsonl(corpus, src / f"{t}.jsonl", t)
    before = [round(x, 2) for x in os.getloadavg()]
    written, wall, cpu = time_jsonl_import({t: workdir / "e2e" / f"{t}.db" for t in TIERS}, src)
    return {"entries": written, "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
            "rate": round(written / wall, 1), "cpu_rate": round(written / cpu, 1),
            "load_avg_before": before, "load_avg_after": [round(x, 2) for x in os.getloadavg()],
            "corpus_alive": len(corpus.tiers["team"]) > 0}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--_worker":
        print(json.dumps(worker(int(argv[1]), int(argv[2]), Path(argv[3]))))
        return 0
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench.checkouts import ab_parser, commit_of, run_worker

    args = ab_parser(__doc__).parse_args(argv)
    out: dict[str, Any] = {"entries": args.entries, "seed": args.seed,
                           "checkouts": {"A": {"path": str(args.a), "commit": args.a_commit or commit_of(args.a)},
                                         "B": {"path": str(args.b), "commit": args.b_commit or commit_of(args.b)}},
                           "runs": []}
    for r in range(args.rounds):
        for name, checkout in (("A", args.a.resolve()), ("B", args.b.resolve())):
            work = Path(tempfile.mkdtemp(prefix="tiervault-e2e-"))
            try:
                row = {"variant": name, "round": r,
                       **run_worker(checkout, str(Path(__file__).resolve()),
                                    [str(args.entries), str(args.seed), str(work)])}
            finally:
                shutil.rmtree(work, ignore_errors=True)
            out["runs"].append(row)
            print(f"round {r} {name}: {row['rate']}/s wall, {row['cpu_rate']}/s per CPU s, "
                  f"load {row['load_avg_before'][0]} -> {row['load_avg_after'][0]}",
                  file=sys.stderr, flush=True)
            if args.json:
                args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
