"""Where ``VaultManager.search`` spends its time inside a scan: perf_counter per part.

    python bench/search_parts.py --workdir DIR [--queries 400] [--warmup 300] \
        [--part MODULE:ATTR ...] [--json out.json]

``DIR`` is a ``bench/run.py`` work directory (``tiers/*.db``). After ``--warmup``
untimed scans (``search_intelligent(mode="scan")``, bench queries), ``--queries``
scans are run with a ``time.perf_counter`` wrapper around each named part of the
federated search (only while ``VaultManager.search`` runs: the same functions
called by other stages are not counted): the term statistics (``lexical_query``),
each tier's top k and its steps, the dedup's look-ups (``dedup.holders``) and
choice (``dedup.keep``), ``_with_tfidf``, ``candidates_of``, and each ``--part``
(e.g. ``tiervault.vault.string_table:StringColumn.take_distinct``: the top k's ids, as
session 12's hits helper timed them). ms a query (sums over
the tiers; nested parts are inside their parent's figure). cProfile inflates Python
calls; these wrappers add ~1 us a call. Compare parts with each other and across
commits at similar load, not with wall time of an unwrapped scan.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: a checkout's own tiervault

from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import query_kwargs, write_config  # noqa: E402

#: (owner module, attribute path, label): the parts timed inside the federated search
PARTS = (
    ("tiervault.vault.manager", "VaultManager.lexical_query", "lexical_query"),
    ("tiervault.vault.manager", "STEMMER.stems", "lexical_query: stemming"),
    ("tiervault.vault.lexicon", "MirrorLexicon.term_stats", "lexical_query: term_stats"),
    ("tiervault.vault.lexicon", "MirrorLexicon.lexical_top_k", "top k"),
    ("tiervault.vault.lexicon", "MirrorLexicon._bm25", "top k: BM25 (slots, scores)"),
    ("tiervault.vault.lexicon", "top_k_from_head", "top k: head"),
    ("tiervault.vault.lexicon", "top_k", "top k: whole mask's top_k"),
    ("tiervault.vault.lexicon", "MirrorLexicon._mask", "top k: mask (whole)"),
    ("tiervault.vault.postings", "Postings.tfidf_at", "top k: TF-IDF at the hits"),
    ("tiervault.vault.dedup", "kept", "dedup.kept (session 12: holders + keep)"),
    ("tiervault.vault.dedup", "holders", "dedup.holders"),
    ("tiervault.vault.lexicon", "MirrorLexicon.lexical_scores", "dedup.holders: lexical_scores"),
    ("tiervault.vault.manager", "_key_columns", "dedup: key_columns (session 12)"),
    ("tiervault.vault.shared_keys", "SharedKeys.shared", "dedup: shared keys (session 12)"),
    ("tiervault.vault.dedup", "keep", "dedup.keep"),
    ("tiervault.vault.manager", "VaultManager._with_tfidf", "_with_tfidf"),
    ("tiervault.vault.manager", "candidates_of", "candidates_of"),
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=400)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--part", action="append", default=[],
                    help="MODULE:ATTR also timed (label: ATTR), e.g. tiervault.vault.hash_table:HashTable.take")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)

    import importlib

    from tiervault.brain.brain import Brain
    from tiervault.vault import manager as manager_mod

    brain = Brain.open(write_config(args.workdir))
    spent: Counter[str] = Counter()
    calls: Counter[str] = Counter()
    inside = [False]

    def wrap(owner: Any, attr: str, label: str) -> None:
        fn = getattr(owner, attr)

        def timed(*a: Any, **kw: Any) -> Any:
            if not inside[0]:
                return fn(*a, **kw)
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                spent[label] += time.perf_counter() - t0
                calls[label] += 1
        setattr(owner, attr, timed)

    extra = [(*spec.split(":"), spec.split(":")[1]) for spec in args.part]
    for module, path, label in (*PARTS, *extra):
        try:
            owner: Any = importlib.import_module(module)
        except ModuleNotFoundError:  # a checkout before the part existed: not timed
            continue
        *parents, attr = path.split(".")
        for name in parents:
            owner = getattr(owner, name)
        if hasattr(owner, attr):  # a checkout before the part existed: not timed
            wrap(owner, attr, label)
    search = manager_mod.VaultManager.search

    def whole(*a: Any, **kw: Any) -> Any:
        inside[0] = True
        t0 = time.perf_counter()
        try:
            return search(*a, **kw)
        finally:
            spent["VaultManager.search"] += time.perf_counter() - t0
            calls["VaultManager.search"] += 1
            inside[0] = False
    manager_mod.VaultManager.search = whole  # type: ignore[method-assign]

    def scan(q: dict[str, Any]) -> Any:
        return brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))

    for q in queries(args.warmup, args.seed + 1):
        scan(q)
    spent.clear()
    calls.clear()
    out: dict[str, Any] = {"workdir": str(args.workdir), "queries": args.queries, "parts_added": args.part,
                           "load_before": [round(x, 2) for x in os.getloadavg()]}
    cpu = []
    for q in queries(args.queries, args.seed):
        c0 = time.process_time()
        scan(q)
        cpu.append((time.process_time() - c0) * 1e3)
    n = args.queries
    out["scan_cpu_ms"] = {"p50": round(statistics.median(cpu), 3), "mean": round(statistics.fmean(cpu), 3)}
    out["ms_per_query"] = {k: round(v * 1e3 / n, 4) for k, v in spent.most_common()}
    out["calls_per_query"] = {k: round(v / n, 2) for k, v in calls.most_common()}
    out["load_after"] = [round(x, 2) for x in os.getloadavg()]
    brain.close()
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
