"""Feedback simulations over several seeds: the mean and the spread of each curve.

    python eval/feedback_seeds.py --json eval/results/feedback_guard_seeds.json \
        VARIANT=RUN.json [VARIANT=RUN.json ...]

Each RUN.json is an ``eval/feedback_sim.py --seed N`` report (the seed drives the noisy
agent's random verdicts and the order of the fed queries in each round). Runs are grouped
by (variant, split, embedder); for each adaptation / policy / checkpoint the unseen and fed
nDCG@10 gains over the 0-event start are averaged over the seeds, with their minimum and
maximum. One checkpoint of one run moves by a few hundredths with the lists the fit happened
to see (docs/feedback.md), so choices between guard variants are read from these means.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", help="VARIANT=path/to/feedback_sim.json")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for item in args.runs:
        variant, path = item.split("=", 1)
        report = json.loads(Path(path).read_text())
        key = (variant, report["split"], report["embedder"])
        groups.setdefault(key, []).append(report)
    out: list[dict[str, Any]] = []
    for (variant, split, embedder), reports in sorted(groups.items()):
        row: dict[str, Any] = {"variant": variant, "split": split, "embedder": embedder,
                               "seeds": [r.get("seed", 7) for r in reports],
                               "overrides": reports[0]["overrides"], "curves": {}}
        for adaptation, runs in reports[0]["runs"].items():
            for policy in runs:
                curves = [r["runs"][adaptation][policy]["curve"] for r in reports
                          if policy in r["runs"].get(adaptation, {})]
                points = []
                for i, p in enumerate(curves[0]):
                    point: dict[str, Any] = {"events": p["events"]}
                    for half in ("fed", "unseen"):
                        gains = [c[i][half] - c[0][half] for c in curves]
                        point[f"{half}_gain_mean"] = round(sum(gains) / len(gains), 4)
                        point[f"{half}_gain_min"] = round(min(gains), 4)
                        point[f"{half}_gain_max"] = round(max(gains), 4)
                        point[f"{half}_per_seed"] = [c[i][half] for c in curves]
                    points.append(point)
                row["curves"][f"{adaptation}/{policy}"] = points
        out.append(row)
        for name, points in row["curves"].items():
            print(f"{variant:6s} {split:6s} {embedder:5s} {name:15s} unseen " + "  ".join(
                f"{p['events']}: {p['unseen_gain_mean']:+.3f} [{p['unseen_gain_min']:+.3f}, "
                f"{p['unseen_gain_max']:+.3f}]" for p in points[1:]), file=sys.stderr)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"groups": out}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
