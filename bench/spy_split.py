"""Split a ``py-spy record --format raw`` profile by phase and by own (leaf) frame.

Why: cProfile inflates call-heavy code (a first mirror build is mostly NumPy calls
on whole chunks, with a few Python loops); py-spy samples at a fixed rate, so each
sample is the same slice of wall time of one process. This reads py-spy's "raw"
(collapsed) output -- one line per distinct stack, ``frame;frame;...;leaf COUNT`` --
and prints, per process (``--subprocesses`` puts the process first in each stack):

- the share of samples under each named phase (the first frame, from the root, whose
  function name is one of ``PHASES``), and
- the top own-time frames (the leaf of each stack, native frames included when
  recorded with ``--native``).

    py-spy record --format raw -o prof.txt --rate 200 --subprocesses -- python ...
    python bench/spy_split.py prof.txt [--top 25] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

#: phase name -> the function whose frames (and callees) it counts, outermost match wins
PHASES = {
    "read rows (changes_since)": "changes_since",
    "slot columns": "_register",
    "learn new words (stemmer)": "_learn",
    "row keys, sort, sums": "analyse_rows",
    "assemble (CSR -> CSC)": "assemble",
    "Columns.from_csc": "from_csc",
    "words -> codes (split, look-up)": "blocks",
    "row keys, sort, sums (per block)": "_sums",
    "TF-IDF fit": "_fit",
    "freeze": "_freeze",
    "latent fit (SVD)": "fit_components",
    "latent rows (projection)": "saved_rows",
    "cache write": "save",
    "link graph": "current",
    "worker start": "<module>",
    "imports / start": "_find_and_load",
}
_FRAME = re.compile(r"^(?P<func>[^ (]+) \((?P<file>[^:)]*)(?::(?P<line>\d+))?\)$")


def _func(frame: str) -> str:
    m = _FRAME.match(frame.strip())
    return m.group("func") if m else frame.strip()


def split(lines: list[str]) -> dict[str, dict]:
    """{process: {"samples": n, "phases": {...}, "own": {...}}} from raw py-spy lines."""
    out: dict[str, dict] = {}
    per_phase: dict[str, Counter] = defaultdict(Counter)
    per_own: dict[str, Counter] = defaultdict(Counter)
    totals: Counter = Counter()
    # innermost wins for nested phases (e.g. _learn inside chunk inside analyse_rows)
    wanted = {v: k for k, v in PHASES.items()}
    for line in lines:
        line = line.rstrip("\n")
        if not line or " " not in line:
            continue
        line = line.replace("; ", ", ")  # a worker's `python -c "a; b"` command, not a frame boundary
        stack, _, count = line.rpartition(" ")
        try:
            n = int(count)
        except ValueError:
            continue
        frames = stack.split(";")
        # --subprocesses: each process frame is its parent's callee; the last one is the sampled process
        procs = [f for f in frames if f.startswith("process ")]
        proc = re.sub(r'^process \d+:', "", procs[-1]).strip('"') if procs else "all"
        totals[proc] += n
        phase = "other"
        for f in frames:
            name = _func(f).rpartition(".")[2]
            if name in wanted:
                phase = wanted[name]
        per_phase[proc][phase] += n
        per_own[proc][frames[-1].strip()] += n
    for proc, total in totals.items():
        out[proc] = {"samples": total,
                     "phases": {k: round(v / total, 4) for k, v in per_phase[proc].most_common()},
                     "own": {k: round(v / total, 4) for k, v in per_own[proc].most_common(40)}}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("raw", type=Path)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--rate", type=float, default=200.0, help="py-spy's --rate (samples/s)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    result = split(args.raw.read_text().splitlines())
    for proc, r in sorted(result.items(), key=lambda kv: -kv[1]["samples"]):
        print(f"== {proc[:100]}: {r['samples']} samples (~{r['samples'] / args.rate:.1f} s)")
        for k, v in r["phases"].items():
            print(f"  {v * 100:5.1f}%  ~{v * r['samples'] / args.rate:6.2f} s  {k}")
        print("  own:")
        for k, v in list(r["own"].items())[:args.top]:
            print(f"  {v * 100:5.1f}%  ~{v * r['samples'] / args.rate:6.2f} s  {k[:110]}")
    if args.json:
        args.json.write_text(json.dumps({"rate": args.rate, "processes": result}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
