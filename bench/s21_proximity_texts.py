"""Term proximity's texts in a hybrid scan: what is read, and what the mirror clears.

    python bench/s21_proximity_texts.py --workdir DIR [--queries 300] [--warmup 30] [--json out.json]

``DIR`` is a ``bench/run.py`` build with hash vectors (``bench.phases.open_hybrid_brain``).
One process (this checkout's ``tiervault``, or another's through ``PYTHONPATH``) answers
the bench queries with ``search_intelligent(mode="scan")`` and counts, a scan, the calls,
ids and wall time of the tier methods that read light rows and texts
(``light_rows``, ``light_rows_texts``, ``field_texts``, ``may_hold_pairs`` where the
checkout has it). With ``--selectivity`` (a checkout with ``vault/stem_presence.py``)
it also classifies every entry term proximity considers (the ``max(limit, min_fetch)``
best lexical matches of each ``evidence.proximity`` call): cleared by the mirror
(``may_hold_pairs`` False), passing the old joined-text prefix test, holding a pair
(proximity > 0). ``--stages``: instead, the wall time a scan of ``evidence.proximity``, its
``proximities`` (entry_proximity's Python) and ``Brain.field_texts``. Issue 16, session 21.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: a checkout's own tiervault

from bench.checkouts import load_avg  # noqa: E402
from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import open_hybrid_brain, query_kwargs  # noqa: E402

METHODS = ("light_rows", "light_rows_texts", "field_texts", "may_hold_pairs")
#: ``--stages``: term proximity's parts (owner module, attribute, label)
STAGES = (("tiervault.brain.evidence", "proximity", "evidence.proximity (all)"),
          ("tiervault.brain.evidence", "proximities", "proximities (Python)"),
          ("tiervault.brain.brain", "Brain.field_texts", "Brain.field_texts (clearing + SQL)"))


def _count_calls(calls: Counter, spent: Counter) -> None:
    from tiervault.vault.store import TierStore

    for name in METHODS:
        fn = getattr(TierStore, name, None)
        if fn is None:
            continue

        def timed(self: Any, ids: Any, *a: Any, _fn: Any = fn, _name: str = name, **kw: Any) -> Any:
            t = time.perf_counter()
            out = _fn(self, ids, *a, **kw)
            spent[_name] += time.perf_counter() - t
            calls[_name] += 1
            calls[_name + " ids"] += len(ids)
            return out

        setattr(TierStore, name, timed)


def _time_stages(spent: Counter) -> None:
    import importlib

    for module, attr, label in STAGES:
        owner: Any = importlib.import_module(module)
        *path, name = attr.split(".")
        for part in path:
            owner = getattr(owner, part)
        fn = getattr(owner, name)

        def timed(*a: Any, _fn: Any = fn, _label: str = label, **kw: Any) -> Any:
            t = time.perf_counter()
            out = _fn(*a, **kw)
            spent[_label] += time.perf_counter() - t
            return out

        setattr(owner, name, timed)


def _classify(seen: Counter) -> None:
    """Wrap ``evidence.proximity``: each entry it considers counted by class."""
    import numpy as np

    from tiervault.brain import evidence, stages
    from tiervault.brain.proximity import stem_prefix

    real = evidence.proximity

    def proximity(brain: Any, ctx: Any, start: int) -> np.ndarray:
        out = real(brain, ctx, start)
        pool = ctx.pool
        if not ctx.pairs or len(pool) <= start:
            return out
        lex = np.asarray(pool.lexical)
        depth = max(ctx.limit, ctx.config.min_fetch)
        best = start + np.argsort(-lex[start:], kind="stable")[:depth]
        idx = sorted(int(i) for i in best if lex[i] > 0)
        texts = brain.field_texts(pool, idx)  # every one (no pairs: nothing cleared)
        pre = {st: stem_prefix(st) for pair in ctx.pairs for st in pair}
        for i in idx:
            store = brain.manager.store(pool.tiers[i])
            row = texts.get(f"{pool.tiers[i]}\0{pool.ids[i]}")
            whole = "\n".join(v if isinstance(v, str) else " ".join(v or ()) for v in row).lower()
            seen["entries"] += 1
            seen["prefix test passed"] += any(pre[a] in whole and pre[b] in whole for a, b in ctx.pairs)
            seen["mirror: may hold"] += store.may_hold_pairs([pool.ids[i]], ctx.pairs)[0]
            seen["proximity > 0"] += bool(out[i] > 0)
        seen["calls"] += 1
        return out

    stages.evidence.proximity = proximity  # type: ignore[attr-defined]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--seed", type=int, default=9)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--selectivity", action="store_true")
    ap.add_argument("--stages", action="store_true", help="wall time of proximity's parts instead")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    brain = open_hybrid_brain(args.workdir, args.dim)
    qs = queries(args.queries + args.warmup, seed=args.seed)
    for q in qs[:args.warmup]:
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
    calls: Counter = Counter()
    spent: Counter = Counter()
    seen: Counter = Counter()
    if args.selectivity:
        _classify(seen)
    elif args.stages:
        _time_stages(spent)
    else:
        _count_calls(calls, spent)
    load = [load_avg()]
    for q in qs[args.warmup:]:
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
    load.append(load_avg())
    n = args.queries
    emit({"workdir": str(args.workdir), "queries": n,
          "per_scan": {k: round(v / n, 3) for k, v in sorted(calls.items())},
          "ms_per_scan": {k: round(v / n * 1e3, 4) for k, v in sorted(spent.items())},
          "entries_considered": dict(seen), "load": load}, args.json)


if __name__ == "__main__":
    main()
