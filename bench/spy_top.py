"""Top frames of a py-spy raw profile (``py-spy record --format raw``), within stacks
that hold a frame containing ``--focus`` and none containing ``--exclude``.

    python bench/spy_top.py PROFILE.txt [--focus TEXT] [--exclude TEXT] [--top 25] [--json out.json]

Own (leaf) frames and inclusive frames (a frame counted once a stack), as shares of the
samples kept. Frames are named without their directories. Written for issue 16 session 14.
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))

from bench.output import emit  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profile", type=Path)
    ap.add_argument("--focus")
    ap.add_argument("--exclude")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    own: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    with open(args.profile) as fh:
        for line in fh:
            stack, _, count = line.rstrip().rpartition(" ")
            frames = stack.split(";")
            if args.focus and not any(args.focus in f for f in frames):
                continue
            if args.exclude and any(args.exclude in f for f in frames):
                continue
            n = int(count)
            total += n
            own[re.sub(r" \(.*", "", frames[-1])] += n
            for f in set(re.sub(r"\s*\((?:[^()]*/)?([^()/]*)\)$", r" (\1)", f) for f in frames):
                incl[f] += n
    pct = lambda c: round(100 * c / total, 1) if total else 0.0  # noqa: E731
    emit({"profile": str(args.profile), "focus": args.focus, "exclude": args.exclude, "samples": total,
          "own_pct": {k: pct(c) for k, c in own.most_common(args.top) if not k.startswith("0x")},
          "inclusive_pct": {k: pct(c) for k, c in incl.most_common(args.top * 2) if not k.startswith("0x")}},
         args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
