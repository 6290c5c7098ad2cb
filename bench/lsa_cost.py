"""What the FTS-only latent semantic signal (vault/latent.py via the tier contract, brain/latent.py; issue 10 round 4) costs.

    python bench/lsa_cost.py [--entries 10000] [--queries 200] [--json out.json]

Builds the bench corpus (bench/corpus.py, three tiers, links, mirrors), opens it twice
FTS-only in one process — the defaults (``lsa_share`` 0.2, k 16) and ``lsa_share`` 0 (no
SVD, round 3's ranking) — times the one-off SVD fit per tier (``latent.model_for`` on
each tier's mirror, before any query), then ``search_intelligent`` scan and full over the
same queries, round-robin per query (bench/phases.time_interleaved): the ratio to the
``lsa_share`` 0 path of the same run is the figure.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CONFIGS = {"fts_lsa": {}, "fts_no_lsa": {"lsa_share": 0.0}}


def main(argv: list[str] | None = None) -> int:
    from bench.variants import built_corpus, emit, parse_args, ratios, time_brains

    args = parse_args(__doc__, argv)
    from bench.corpus import queries
    from bench.phases import write_config
    from tiervault.vault import latent
    from tiervault.brain.brain import Brain
    from tiervault.config import load_settings

    load_before = os.getloadavg()
    with built_corpus(args, "tiervault-lsa-") as work:
        fts = load_settings(write_config(work), env={})
        brains = {name: Brain.open(replace(fts, brain=replace(fts.brain, **cfg)))
                  for name, cfg in CONFIGS.items()}
        fit = {}
        m = brains["fts_lsa"].manager
        for tier in list(m.tiers):
            p = m.store(tier).postings()
            t0 = time.perf_counter()
            model = latent.model_for(p, fts.brain.lsa_components)
            fit[tier] = {"rows": int(p.T.shape[0]), "terms": int(p.T.shape[1]),
                         "fit_ms": round((time.perf_counter() - t0) * 1e3, 1),
                         "fitted": model is not None}
        qs, warm = queries(args.queries, args.seed), queries(30, args.seed + 1)

        res = time_brains(brains, qs, warm)
    pairs = {m: (f"{m}_fts_lsa", f"{m}_fts_no_lsa") for m in ("scan", "full")}
    emit({"entries": args.entries, "queries": args.queries, "configs": CONFIGS,
          "load_avg_before": load_before, "load_avg_after": os.getloadavg(), "fit": fit,
          "results": res, "ratio_p50_lsa_to_off": ratios(res, pairs, "p50_ms"),
          "ratio_p95_lsa_to_off": ratios(res, pairs, "p95_ms")}, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
