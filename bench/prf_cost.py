"""What pseudo-relevance feedback costs the FTS-only search path (issue 10 / 16).

    python bench/prf_cost.py [--entries 10000] [--queries 200] [--json out.json]

Builds the bench corpus (bench/corpus.py, three tiers, links, mirrors; no vectors),
opens it twice in one process, with the defaults (``prf_terms`` 10) and with PRF
off (``prf_terms`` 0, everything else equal), and times ``search_intelligent`` scan
and full over the same queries, round-robin per query (bench/phases.time_interleaved),
so a burst of load hits both alike: the ratio is the figure.
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    from bench.variants import built_corpus, emit, parse_args, ratios, time_brains

    args = parse_args(__doc__, argv)
    from bench.corpus import queries
    from bench.phases import write_config
    from tiervault.brain.brain import Brain
    from tiervault.config import load_settings

    with built_corpus(args, "tiervault-prf-") as work:
        settings = load_settings(write_config(work), env={})
        on = Brain.open(settings)
        off = Brain.open(replace(settings, brain=replace(settings.brain, prf_terms=0)))
        qs, warm = queries(args.queries, args.seed), queries(30, args.seed + 1)
        res = time_brains({"prf": on, "no_prf": off}, qs, warm)
    pairs = {m: (f"{m}_prf", f"{m}_no_prf") for m in ("scan", "full")}
    emit({"entries": args.entries, "queries": args.queries, "load_avg": os.getloadavg(),
          "results": res, "ratio_p50": ratios(res, pairs, "p50_ms"),
          "ratio_p95": ratios(res, pairs, "p95_ms")}, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
