"""A loop of FTS-only scans for py-spy, and the summary of py-spy's raw output.

    py-spy record --rate 2000 --native -f raw -o spy.txt -- \
        python bench/s16_spy_summary.py --loop --workdir W [--queries 1500]
    python bench/s16_spy_summary.py --raw spy.txt [--json out.json]

``--loop``: a Brain on ``W`` (a copy of a ``bench/run.py`` build), 50 warm-up scans,
then ``--queries`` new bench queries, ``search_intelligent(mode="scan")`` each.
``--raw``: of the samples inside ``search_intelligent``, the share of each function's
own time (top 40), of each function with its callees (tiervault's, top 60), and which
Python function the read system calls (``pread64`` / ``preadv64v2``) came from.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: a checkout's own tiervault

from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import query_kwargs, write_config  # noqa: E402


def loop(workdir: Path, n: int) -> None:
    from tiervault.brain.brain import Brain
    brain = Brain.open(write_config(workdir))
    for q in queries(50, 8):
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
    time.sleep(0.5)
    for q in queries(n, 13):
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))


def summary(raw: Path) -> dict[str, Any]:
    own: Counter[str] = Counter()
    within: Counter[str] = Counter()
    reads: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, n_text = line.rsplit(" ", 1)
        frames = [re.sub(r":\d+\)$", ")", f) for f in stack.split(";")]
        if not any(f.startswith("Brain.search_intelligent") for f in frames):
            continue
        n = int(n_text)
        total += n
        own[frames[-1]] += n
        within.update(dict.fromkeys(set(frames), n))
        if frames[-1].startswith(("pread64", "preadv64v2")):
            py = [f for f in frames if ".py)" in f]
            reads[f"{frames[-1].split(' ')[0]} <- {' <- '.join(reversed(py[-2:]))}"] += n
    share = lambda c, k: [{"function": f, "share": round(v / total, 4)} for f, v in c.most_common(k)]  # noqa: E731
    return {"samples": total, "own": share(own, 40),
            "with_callees": [r for r in share(within, 400) if "vault/" in r["function"] or "brain/" in r["function"]][:60],
            "read_syscalls": share(reads, 10)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loop", action="store_true")
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--queries", type=int, default=1500)
    ap.add_argument("--raw", type=Path)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    if args.loop:
        loop(args.workdir, args.queries)
    else:
        emit(summary(args.raw), args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
