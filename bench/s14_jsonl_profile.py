"""Profile of the JSONL import end to end (the three tiers, as ``bench/run.py`` imports them).

    python bench/s14_jsonl_profile.py --entries 100000 --src /tmp/jsonl/src100k [--cprofile out.json]

    python bench/s14_jsonl_profile.py --summarize prof.txt --json out.json   # py-spy --format raw

Writes the bench corpus's tier files once into ``--src`` (reused when present), then imports
them into fresh tiers in a temporary folder: wall / CPU and, with ``--cprofile``, the top
functions by own time (JSON). Run it under ``py-spy record`` for a sampling profile.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TIERS = ("agent", "project", "team")


def summarize(raw: Path, top: int = 30) -> dict:
    """A ``py-spy record --native --format raw`` profile of this script: the samples inside
    the timed import (``import_timing.py``'s ``import_lines`` call), each counted at its
    innermost ``vault/`` frame (or at its innermost frame when none), plus the innermost
    frames overall (own time, e.g. the collector, libc's writes)."""
    import collections
    by_vault: collections.Counter = collections.Counter()
    own: collections.Counter = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        frames = stack.split(";")
        if not any(f.startswith("time_jsonl_import") and "import_lines" not in f and ":39)" in f
                   for f in frames):
            continue
        total += int(n)
        vault = [f for f in frames if "(vault/" in f or "contextlib" in f]
        by_vault[vault[-1] if vault else frames[-1]] += int(n)
        own[frames[-1]] += int(n)
    return {"samples_in_import": total,
            "by_innermost_vault_frame": [{"share": round(c / total, 4), "frame": f}
                                         for f, c in by_vault.most_common(top)],
            "own": [{"share": round(c / total, 4), "frame": f} for f, c in own.most_common(top)]}


def main() -> int:
    if sys.argv[1:2] == ["--summarize"]:
        out = summarize(Path(sys.argv[2]))
        if sys.argv[3:4] == ["--json"]:
            Path(sys.argv[4]).write_text(json.dumps(out, indent=2) + "\n")
        for r in out["by_innermost_vault_frame"][:25]:
            print(f"{r['share']:6.3f} {r['frame']}")
        return 0
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--entries", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--src", type=Path, required=True)
    ap.add_argument("--cprofile", type=Path)
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--no-gc", action="store_true", help="collector off for the import (probe)")
    ap.add_argument("--serial", action="store_true",
                    help="every batch written in the caller's thread (profiles comparable by thread)")
    ap.add_argument("--switch", type=float, help="sys.setswitchinterval for the import (probe)")
    args = ap.parse_args()
    if not (args.src / "team.jsonl").exists():
        from bench.corpus import generate, write_jsonl
        corpus = generate(args.entries, args.seed)
        args.src.mkdir(parents=True, exist_ok=True)
        for t in TIERS:
            write_jsonl(corpus, args.src / f"{t}.jsonl", t)
        del corpus
    from import_timing import time_jsonl_import
    work = Path(tempfile.mkdtemp(prefix="s14-jsonl-prof-"))
    try:
        prof = cProfile.Profile() if args.cprofile else None
        load = os.getloadavg()[0]
        if args.serial:
            from tiervault.vault import write_pipeline

            class _Serial:
                def threaded(self) -> bool:
                    return False
            write_pipeline.new_chooser = _Serial
        if args.switch:
            sys.setswitchinterval(args.switch)
        if args.no_gc:
            import gc
            gc.disable()
        if prof:
            prof.enable()
        res = time_jsonl_import({t: work / f"{t}.db" for t in TIERS}, args.src)
        if prof:
            prof.disable()
        out = {"entries": res.written, "wall_s": round(res.wall_s, 3), "cpu_s": round(res.cpu_s, 3),
               "rate": round(res.written / res.wall_s, 1), "cpu_rate": round(res.written / res.cpu_s, 1),
               "load_before": round(load, 2), "load_after": round(os.getloadavg()[0], 2)}
        if prof:
            st = pstats.Stats(prof)
            prof.dump_stats(str(args.cprofile.with_suffix(".pstats")))
            rows = []
            for (fn, line, name), (cc, nc, tt, ct, _) in st.stats.items():  # type: ignore[attr-defined]
                rows.append({"function": f"{Path(fn).name}:{line} {name}", "calls": nc,
                             "own_s": round(tt, 4), "cum_s": round(ct, 4)})
            rows.sort(key=lambda r: -r["own_s"])
            out["cprofile_top_own"] = rows[: args.top]
            args.cprofile.write_text(json.dumps(out, indent=2) + "\n")
        print(json.dumps({k: v for k, v in out.items() if k != "cprofile_top_own"}))
        if prof:
            for r in out["cprofile_top_own"]:
                print(f"{r['own_s']:8.3f} {r['cum_s']:8.3f} {r['calls']:8d}  {r['function']}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
