"""Wall clock of named functions inside warm FTS-only (or hybrid) scans, us a scan and a call.

    python bench/s20_lex_parts.py --workdir DIR [--queries 400] [--hybrid] [--json out.json] \
        [--part MODULE:ATTR ...]

``DIR`` is a work directory made by ``bench/run.py``'s build phase. Each ``--part``
(``tiervault.vault.lexicon:MirrorLexicon._pick``, ``tiervault.vault.postings:Postings.tfidf_at``,
...; default: :data:`PARTS`) is wrapped with ``time.perf_counter_ns`` where the checkout
has it (a part missing from a checkout is left out); after 30 warm-up scans (the bench
queries of seed 8), ``--queries`` scans (seed 7) are timed. Nested parts are inside their
callers' figures; each wrapper adds ~0.3-1 us a call: compare checkouts (run this file
with each one's interpreter) or parts, not absolutes. Issue 16, session 20.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: a checkout's own tiervault

from bench.checkouts import load_avg  # noqa: E402
from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import open_hybrid_brain, query_kwargs, write_config  # noqa: E402

#: the lexical parts of a scan timed by default (session 20's changes and their callers)
PARTS = ("tiervault.vault.manager:VaultManager.search", "tiervault.vault.lexicon:MirrorLexicon._pick",
         "tiervault.vault.lexicon:MirrorLexicon._bm25", "tiervault.vault.term_parts:TermParts.top_k",
         "tiervault.vault.lexicon:SlotHits.hits", "tiervault.vault.postings:Postings.tfidf_at",
         "tiervault.vault.lexicon:MirrorLexicon._scores", "tiervault.vault.postings:Postings.slots_of",
         "tiervault.vault.string_table:StringTable.held", "tiervault.vault.term_matches:TermMatches.terms_bm25",
         "tiervault.vault.latent:scores", "tiervault.vault.dedup:kept_of_tops")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=400)
    ap.add_argument("--hybrid", action="store_true", help="hybrid scans (the hash embedder's vectors)")
    ap.add_argument("--part", action="append", default=[], metavar="MODULE:ATTR")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    import tiervault.vault
    from tiervault.brain.brain import Brain

    spent: dict[str, int] = defaultdict(int)
    calls: dict[str, int] = defaultdict(int)

    def timed(name: str, fn: Any) -> Any:
        def wrapper(*a: Any, **kw: Any) -> Any:
            t0 = time.perf_counter_ns()
            try:
                return fn(*a, **kw)
            finally:
                spent[name] += time.perf_counter_ns() - t0
                calls[name] += 1
        return wrapper

    for spec in args.part or PARTS:
        module_name, _, path = spec.partition(":")
        owner_name, _, attr = path.rpartition(".")
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        owner = getattr(module, owner_name, None) if owner_name else module
        if owner is not None and hasattr(owner, attr):
            setattr(owner, attr, timed(path, getattr(owner, attr)))
    brain = open_hybrid_brain(args.workdir) if args.hybrid else Brain.open(write_config(args.workdir))
    for q in queries(30, 8):
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
    spent.clear()
    calls.clear()
    load_before = load_avg()
    wall = []
    for q in queries(args.queries, 7):
        t0 = time.perf_counter_ns()
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
        wall.append(time.perf_counter_ns() - t0)
    n = args.queries
    order = sorted(spent, key=lambda k: -spent[k])
    emit({"checkout": str(Path(tiervault.vault.__file__).resolve().parent.parent), "workdir": str(args.workdir),
          "hybrid": args.hybrid, "queries": n, "load_before": load_before, "load_after": load_avg(),
          "scan_wall_ms_p50": round(statistics.median(wall) / 1e6, 4),
          "us_a_scan": {k: round(spent[k] / n / 1e3, 1) for k in order},
          "calls_a_scan": {k: round(calls[k] / n, 2) for k in order},
          "us_a_call": {k: round(spent[k] / calls[k] / 1e3, 1) for k in order}}, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
