"""Instructions a JSONL line, A vs B, under valgrind's callgrind (the load cannot move them).

    python bench/s14_jsonl_callgrind.py --a /work/wt/base1 --b . --src /tmp/jsonl/src100k/team.jsonl \
        --lines 10000 --json bench/results/s14-jsonl-callgrind.json

Each checkout imports the first ``--lines`` lines of ``--src`` (``import_lines`` into a fresh
tier, as ``tiervault import`` does) under callgrind, and once with 0 lines; the difference
of the two totals over the lines is the instructions a line (start-up and imports cancel).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

WORKER = r"""
import sys, tempfile, os
from itertools import islice
from tiervault.vault.jsonl import import_lines
from tiervault.vault.manager import VaultManager
src, n = sys.argv[1], int(sys.argv[2])
d = tempfile.mkdtemp()
with VaultManager.at({"team": os.path.join(d, "team.db")}) as m:
    with open(src, encoding="utf-8") as fh:
        r = import_lines(m, "team", islice(fh, n))
assert not r.errors and r.written == n, (r.errors[:3], r.written)
"""


def instructions(python: Path, src: Path, lines: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cg.out"
        subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                        str(python), "-c", WORKER, str(src), str(lines)],
                       check=True, capture_output=True)
        text = out.read_text()
    m = re.search(r"^summary:\s+(\d+)", text, re.M) or re.search(r"^totals:\s+(\d+)", text, re.M)
    assert m, "no callgrind summary"
    return int(m.group(1))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--a", type=Path, required=True)
    ap.add_argument("--b", type=Path, required=True)
    ap.add_argument("--src", type=Path, required=True)
    ap.add_argument("--lines", type=int, default=10_000)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    out: dict = {"src": str(args.src), "lines": args.lines, "checkouts": {}}
    for name, checkout in (("A", args.a), ("B", args.b)):
        python = checkout.resolve() / ".venv" / "bin" / "python"
        commit = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
        zero = instructions(python, args.src, 0)
        full = instructions(python, args.src, args.lines)
        out["checkouts"][name] = {"path": str(checkout), "commit": commit, "ir_zero": zero,
                                  "ir_full": full, "ir_per_line": round((full - zero) / args.lines)}
        print(name, out["checkouts"][name], file=sys.stderr, flush=True)
    a, b = (out["checkouts"][k]["ir_per_line"] for k in ("A", "B"))
    out["b_over_a"] = round(b / a, 4)
    print(f"instructions a line: A {a}, B {b}, B/A {out['b_over_a']}", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
