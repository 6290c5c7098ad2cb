"""A string / hash table's ``held()`` of a few fresh strings: an older checkout's against
this one's, call by call, in ONE process.

    python bench/few_held_ab.py --old /path/to/old/checkout --workdir DIR \
        [--trials 3000] [--max-strings 5] [--seed 5] [--json out.json]

The graph neighbours' ``lexical_scores`` ask a tier's id table about 1-7 ids and a
tier's hash table about 1-4 content hashes, most of them not yet in the table's memo
(issue 16, session 12: ``held_few`` answers up to ``FEW`` = 8 strings in plain Python).
Here the tiers of ``DIR`` (a ``bench/run.py`` 100K build, opened and warmed by 10 scans)
are asked, table by table, about 1..``--max-strings`` strings drawn from ALL tiers' ids
(or hashes): some held by the table asked, most not. A trial asks the old ``held``
(``OLD/vault/string_table.py`` / ``hash_table.py`` loaded as separate modules, sharing
this checkout's fingerprint / digest-key functions and memos, as the session-12 A/B
did) and this checkout's, in alternating order, each about its own strings (as many),
drawn without replacement: no string is asked twice in a run, so none is in a table's
look-up memo or the fingerprint / key memo -- fresh, as the neighbours' mostly are.
perf_counter per call; each answer checked against a dict of the table's strings.
p50 / mean us a call, per kind over all tables.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: a checkout's own tiervault

from bench.checkouts import commit_of, load_avg  # noqa: E402
from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import query_kwargs, write_config  # noqa: E402


def _load(path: Path, name: str) -> Any:
    """``path`` executed as the module ``name`` (registered: a dataclass looks it up)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _summary(xs: list[float]) -> dict[str, float]:
    return {"p50_us": round(statistics.median(xs) * 1e6, 1), "mean_us": round(statistics.fmean(xs) * 1e6, 1),
            "n": len(xs)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", type=Path, required=True)
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--trials", type=int, default=3000, help="calls per kind (ids, hashes) and variant")
    ap.add_argument("--max-strings", type=int, default=5)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    from tiervault.brain.brain import Brain
    from tiervault.vault import hash_table as ht
    from tiervault.vault import string_table as st

    old_st = _load(args.old / "vault" / "string_table.py", "_old_string_table")
    old_ht = _load(args.old / "vault" / "hash_table.py", "_old_hash_table")
    # one fingerprint / digest-key function (and memo) for both variants, as in session 12's A/B
    old_st.lookup_fingerprints = st.lookup_fingerprints
    old_ht.digest_keys = ht.digest_keys
    brain = Brain.open(write_config(args.workdir))
    for q in queries(10, 8):  # opens every tier's mirror
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
    mirrors = {t.name: t.store.postings() for t in brain.manager.ordered()}
    kinds = {
        "ids": ([p.ids.base for p in mirrors.values()], old_st.StringTable.__dict__["held"],
                st.StringTable.__dict__["held"]),
        "hashes": ([p.hashes.base for p in mirrors.values()], old_ht.HashTable.__dict__["held"],
                   ht.HashTable.__dict__["held"]),
    }
    out: dict[str, Any] = {"old_checkout": str(args.old), "old_commit": commit_of(args.old),
                           "new_commit": commit_of(Path(__file__).resolve().parent.parent),
                           "workdir": str(args.workdir), "trials": args.trials,
                           "strings_per_call": f"1-{args.max_strings}", "load_before": load_avg()}
    rng = random.Random(args.seed)
    for kind, (tables, old_held, new_held) in kinds.items():
        index: list[dict[str, list[int]]] = []
        for t in tables:  # the reference answer of each table: every slot of each string
            slots: dict[str, list[int]] = {}
            for slot, s in enumerate(t.tolist()):
                slots.setdefault(s, []).append(slot)
            index.append(slots)
        pool = sorted({s for slots in index for s in slots})
        rng.shuffle(pool)  # drawn from the end: no string asked twice
        out[f"{kind}_table_sizes"] = [len(t) for t in tables]
        times: dict[str, list[float]] = {"old": [], "new": []}
        held: list[float] = []
        for i in range(args.trials):
            k = i % len(tables)
            n = rng.randint(1, args.max_strings)
            order = (("old", old_held), ("new", new_held)) if i % 2 == 0 else (("new", new_held), ("old", old_held))
            for name, fn in order:
                strings = [pool.pop() for _ in range(n)]
                t0 = time.perf_counter()
                answer = fn(tables[k], strings)
                times[name].append(time.perf_counter() - t0)
                want = {j: index[k][s] for j, s in enumerate(strings) if s in index[k]}
                if answer != want:
                    raise SystemExit(f"{kind}: the {name} held() answers {answer} for {strings!r}, not {want}")
                held.append(len(want) / n)
        out[kind] = {"old": _summary(times["old"]), "new": _summary(times["new"]),
                     "new_over_old_p50": round(statistics.median(times["new"]) / statistics.median(times["old"]), 3),
                     "held_share_mean": round(statistics.fmean(held), 3), "answers_checked": True}
    out["load_after"] = load_avg()
    brain.close()
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
