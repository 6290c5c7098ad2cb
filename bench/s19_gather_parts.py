"""Where a warm FTS-only scan's federated search (the gather) spends its time, by part.

    python bench/s19_gather_parts.py --workdir DIR [--queries 600] [--json out.json]

``DIR`` is a work directory made by ``bench/run.py``'s build phase. After 50 warm-up scans
(``search_intelligent(mode="scan")``, the bench queries), ``--queries`` scans run with a
wall clock (``time.perf_counter_ns``) around each part of ``VaultManager.search`` this
checkout has (a part missing from a checkout is left out): the term statistics
(``lexical_query``), each tier's top k (``MirrorLexicon.lexical_top_k`` / ``_pick``) with
its BM25 (``_bm25``), the hits made (``SlotHits.hits``: TF-IDF ``Postings.tfidf_at``, ids
``StringColumn.take_distinct``, hashes ``HashTable.take``), the dedup (``dedup.kept`` /
``kept_of_tops``, its look-ups ``holders`` and ``_walk``), ``_with_tfidf`` and
``candidates_of``; us a scan (nested parts are inside their callers' figures). Each
wrapper adds ~0.3-1 us a call: compare checkouts (run it with each one's venv) or parts,
not absolutes. Issue 16, session 19. ``--part MODULE:OWNER.ATTR`` (repeatable): those
functions instead, any module (session 20: the lexical parts, ``bench/README.md``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: a checkout's own tiervault

from bench.checkouts import load_avg  # noqa: E402
from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import query_kwargs, write_config  # noqa: E402
from bench.profiling import CallTimers  # noqa: E402

#: (module, owner in it or "", attribute): the parts timed, where the checkout has them
PARTS = (("manager", "VaultManager", "search"), ("manager", "VaultManager", "lexical_query"),
         ("lexicon", "MirrorLexicon", "lexical_top_k"), ("lexicon", "MirrorLexicon", "_pick"),
         ("lexicon", "MirrorLexicon", "_bm25"), ("lexicon", "SlotHits", "hits"),
         ("postings", "Postings", "tfidf_at"), ("string_table", "StringColumn", "take_distinct"),
         ("hash_table", "HashTable", "take"), ("dedup", "", "kept"), ("dedup", "", "kept_of_tops"),
         ("dedup", "", "holders"), ("dedup", "", "_walk"), ("manager", "VaultManager", "_with_tfidf"),
         ("manager", "", "candidates_of"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=600)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--part", action="append", default=[], metavar="MODULE:OWNER.ATTR",
                    help="time these instead (e.g. tiervault.vault.term_parts:TermParts.top_k; "
                         "a module function: MODULE:ATTR); session 20")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    import importlib

    import tiervault.vault
    from tiervault.brain.brain import Brain

    timers = CallTimers()
    spent, calls = timers.spent, timers.calls

    parts = [(f"tiervault.vault.{m}", o, a) for m, o, a in PARTS]
    if args.part:
        parts = [(spec.partition(":")[0], *spec.partition(":")[2].rpartition(".")[::2]) for spec in args.part]
    for module_name, owner_name, attr in parts:
        try:
            module = importlib.import_module(module_name)
        except ImportError:  # a module this checkout does not have
            continue
        owner = getattr(module, owner_name, None) if owner_name else module
        if owner is not None and hasattr(owner, attr):
            name = f"{owner_name or module_name.rpartition('.')[2]}.{attr}"
            setattr(owner, attr, timers.wrap(getattr(owner, attr), name))
    brain = Brain.open(write_config(args.workdir))
    for q in queries(50, 8):
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
    timers.clear()

    load_before = load_avg()
    wall = []
    for q in queries(args.queries, args.seed):
        t0 = time.perf_counter_ns()
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
        wall.append(time.perf_counter_ns() - t0)
    n = args.queries
    emit({"checkout": str(Path(tiervault.vault.__file__).resolve().parent.parent), "workdir": str(args.workdir),
          "queries": n, "load_before": load_before, "load_after": load_avg(),
          "scan_wall_ms_p50": round(statistics.median(wall) / 1e6, 4),
          "parts_us_a_scan": {k: round(v / n / 1e3, 1) for k, v in sorted(spent.items(), key=lambda kv: -kv[1])},
          "calls_a_scan": {k: round(v / n, 2) for k, v in sorted(calls.items(), key=lambda kv: -kv[1])},
          "us_a_call": {k: round(v / calls[k] / 1e3, 1) for k, v in sorted(spent.items(), key=lambda kv: -kv[1])}},
         args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
