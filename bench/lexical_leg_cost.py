"""What the round-3 lexical leg (function words, term proximity) costs the search path
(issue 10).

    python bench/lexical_leg_cost.py [--entries 10000] [--queries 200] [--json out.json]

Builds the bench corpus (bench/corpus.py, three tiers, links, mirrors; no vectors),
opens it three times in one process — the defaults (``query_stopwords`` "function",
``proximity_weight`` 0.3), proximity off, and both off (round 2's lexical leg) — and
times ``search_intelligent`` scan and full over the same queries, round-robin per query
(bench/phases.time_interleaved), so a burst of load hits all alike: the ratios to
"round2" are the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CONFIGS = {"default": {}, "no_proximity": {"proximity_weight": 0.0},
           "round2": {"proximity_weight": 0.0, "query_stopwords": "off"}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--entries", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    from bench.corpus import queries
    from bench.phases import build_phase, query_kwargs, time_interleaved, write_config
    from tiervault.brain.brain import Brain
    from tiervault.config import load_settings

    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="tiervault-lexleg-") as tmp:
        work = Path(tmp)
        build_phase(args.entries, args.seed, work, dim=8, jsonl=False)  # vectors unused here
        settings = load_settings(write_config(work), env={})
        brains = {name: Brain.open(replace(settings, brain=replace(settings.brain, **cfg)))
                  for name, cfg in CONFIGS.items()}
        qs, warm = queries(args.queries, args.seed), queries(30, args.seed + 1)

        def run(b: Brain, mode: str):
            return lambda q: b.search_intelligent(q["text"], mode=mode, **query_kwargs(q))
        res = time_interleaved({f"{mode}_{name}": run(b, mode) for name, b in brains.items()
                                for mode in ("scan", "full")}, qs, warm)
        for b in brains.values():
            b.close()
    out = {"entries": args.entries, "queries": args.queries, "configs": CONFIGS,
           "load_avg_before": load_before, "load_avg_after": os.getloadavg(), "results": res,
           "ratio_p50_to_round2": {f"{m}_{n}": round(res[f"{m}_{n}"]["p50_ms"]
                                                     / res[f"{m}_round2"]["p50_ms"], 3)
                                   for m in ("scan", "full") for n in CONFIGS},
           "ratio_p95_to_round2": {f"{m}_{n}": round(res[f"{m}_{n}"]["p95_ms"]
                                                     / res[f"{m}_round2"]["p95_ms"], 3)
                                   for m in ("scan", "full") for n in CONFIGS}}
    print(json.dumps(out, indent=1))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
