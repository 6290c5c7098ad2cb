"""Peak RSS of a search process with the scan's reads by system call or through mappings.

    python bench/s16_read_paths_rss.py --workdir W [--variants none,sqlite,mirror,both]
        [--hybrid] [--queries 230] [--json out.json]

One fresh process per variant (``bench/s16_read_paths_ab.py``'s variants, opened by its
``open_brain``; ``--hybrid``: hybrid searches with run.py's hash embedder) on ``W`` (a copy of a ``bench/run.py`` build): ``--queries`` bench queries,
each a scan and a ``full`` search (as run.py's search phase asks them), then the
process's ``VmHWM``, ``RssAnon`` and ``RssFile`` in MB.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: a checkout's own tiervault

from bench.checkouts import load_avg  # noqa: E402
from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import query_kwargs  # noqa: E402
from bench.s16_read_paths_ab import open_brain, process_mb  # noqa: E402


def child(workdir: Path, variant: str, n: int, hybrid: bool) -> dict[str, Any]:
    brain = open_brain(workdir, variant, hybrid)
    for q in queries(n, 7):
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
        brain.search_intelligent(q["text"], mode="full", **query_kwargs(q))
    return {"variant": variant, **process_mb("VmHWM", "RssAnon", "RssFile")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--variants", default="none,sqlite,mirror,both")
    ap.add_argument("--queries", type=int, default=230)
    ap.add_argument("--hybrid", action="store_true", help="hybrid searches (the build must hold vectors)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.workdir, args.child, args.queries, args.hybrid)))
        return 0
    out: dict[str, Any] = {"load_before": load_avg(), "queries": args.queries, "hybrid": args.hybrid,
                           "runs": []}
    for v in args.variants.split(","):
        proc = subprocess.run([sys.executable, __file__, "--workdir", str(args.workdir), "--child", v,
                               "--queries", str(args.queries), *(["--hybrid"] if args.hybrid else [])],
                              capture_output=True, text=True, check=True)
        out["runs"].append(json.loads(proc.stdout.strip().splitlines()[-1]))
    out["load_after"] = load_avg()
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
