"""What the round-3 lexical leg (function words, term proximity) costs the search path
(issue 10).

    python bench/lexical_leg_cost.py [--entries 10000] [--queries 200] [--json out.json]

Builds the bench corpus (bench/corpus.py, three tiers, links, mirrors, hash-embedder
vectors of dim 8), opens it in one process FTS-only — the defaults (``query_stopwords``
"function", proximity off), FTS proximity on (``proximity_weight`` 0.3, opt-in), and
round 2's lexical leg (both off) — and hybrid with the offline ``hash`` embedder — the
defaults (``hybrid_proximity_weight`` 0.3), hybrid proximity off, round 2 — and times
``search_intelligent`` scan and full over the same queries, round-robin per query
(bench/phases.time_interleaved), so a burst of load hits all alike: the ratios to
"round2" of the same path are the figures. The hash embedder costs ~nothing per query,
so the hybrid ratio overstates what proximity adds to a hybrid search with the
``local`` MiniLM embedder (whose query embedding is several ms: bench/README.md).
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ROUND2 = {"proximity_weight": 0.0, "hybrid_proximity_weight": 0.0, "query_stopwords": "off"}
CONFIGS = {"fts_default": {}, "fts_proximity": {"proximity_weight": 0.3}, "fts_round2": ROUND2,
           "hybrid_default": {}, "hybrid_no_proximity": {"hybrid_proximity_weight": 0.0},
           "hybrid_round2": ROUND2}


def main(argv: list[str] | None = None) -> int:
    from bench.variants import built_corpus, emit, parse_args, ratios, time_brains

    args = parse_args(__doc__, argv)
    from bench.corpus import queries
    from bench.phases import HASH_EMBEDDING, write_config
    from tiervault.brain.brain import Brain
    from tiervault.config import load_settings

    load_before = os.getloadavg()
    with built_corpus(args, "tiervault-lexleg-") as work:
        fts = load_settings(write_config(work), env={})
        hyb = load_settings(write_config(work, {**HASH_EMBEDDING, "dim": 8}), env={})
        brains = {name: Brain.open(replace(hyb if name.startswith("hybrid") else fts,
                                           brain=replace(fts.brain, **cfg)))
                  for name, cfg in CONFIGS.items()}
        qs, warm = queries(args.queries, args.seed), queries(30, args.seed + 1)

        res = time_brains(brains, qs, warm)
    pairs = {f"{m}_{n}": (f"{m}_{n}", f"{m}_{n.split('_')[0]}_round2")
             for m in ("scan", "full") for n in CONFIGS}
    emit({"entries": args.entries, "queries": args.queries, "configs": CONFIGS,
          "load_avg_before": load_before, "load_avg_after": os.getloadavg(), "results": res,
          "ratio_p50_to_round2": ratios(res, pairs, "p50_ms"),
          "ratio_p95_to_round2": ratios(res, pairs, "p95_ms")}, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
