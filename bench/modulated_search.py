"""End-to-end modulated search: ``search_intelligent`` with suppress + decay + diverse at
100K entries (hash vectors), against the unmodulated search in the same run.

    python bench/modulated_search.py [--entries 100000] [--queries 100] [--dim 384]
                                     [--json bench/results/modulation.json] [--workdir DIR]

Builds the bench corpus (bench/corpus.py, three tiers, links, every entry embedded by
the offline ``hash`` embedder; untimed), opens the Brain as an agent would, and times
per query, round-robin (the machine is shared: read the ratio):

- ``plain``: ``search_intelligent(text, mode="scan", limit=10)`` (hybrid weights; the limit
  is given so the small-corpus guard never widens an answer: both return 10 rows);
- ``modulated``: the same call with
  ``modulate="suppress:@<plain top result> decay:30 diverse"`` -- suppress the answer
  the agent has already seen, prefer the last month, spread the top 10.

The suppressed id is found by an untimed plain call first. Writes p50 / p95 (wall and
CPU) and the ratio under ``modulation.search_intelligent`` of the JSON file (other keys
of the file are kept), with the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere: `import bench.*`

TOKENS = "suppress:@{top} decay:30 diverse"
LIMIT = 10


def _prepared(brain: Any, qs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Queries with a plain answer, each with its modulate string (untimed)."""
    from bench.phases import query_kwargs

    out = []
    for q in qs:
        rows = brain.search_intelligent(q["text"], mode="scan", limit=LIMIT, **query_kwargs(q))
        if rows and rows[0]["type"] != "memory":
            out.append({**q, "modulate": TOKENS.format(top=rows[0]["id"]), "top": rows[0]["id"]})
    return out


def run(entries: int, n_queries: int, dim: int, seed: int, workdir: Path) -> dict[str, Any]:
    from bench.corpus import queries
    from bench.phases import build_phase, query_kwargs, time_interleaved
    from tiervault.brain.brain import Brain

    load_before = [round(x, 2) for x in os.getloadavg()]
    build = build_phase(entries, seed, workdir, dim=dim, jsonl=False)
    with Brain.open(workdir / "agent-hybrid.yaml") as brain:
        if brain.vectors is None:
            raise RuntimeError("the embeddings runtime did not attach: no hybrid search to bench")
        qs = _prepared(brain, queries(n_queries, seed))
        warm = _prepared(brain, queries(20, seed + 1))
        answers: dict[str, list[str]] = {}

        def plain(q: dict[str, Any]) -> Any:
            return brain.search_intelligent(q["text"], mode="scan", limit=LIMIT, **query_kwargs(q))

        def modulated(q: dict[str, Any]) -> Any:
            rows = brain.search_intelligent(q["text"], mode="scan", limit=LIMIT,
                                            modulate=q["modulate"], **query_kwargs(q))
            answers[q["id"]] = [r["id"] for r in rows]
            return rows

        timed = time_interleaved({"plain": plain, "modulated": modulated}, qs, warm)
    first_kept = sum(1 for q in qs if answers.get(q["id"], [None])[0] == q["top"])
    with_mmr = sum(1 for q in qs if answers.get(q["id"]))
    base = timed["plain"]["p50_ms"]
    return {
        "entries": entries, "dim": dim, "queries": len(qs), "seed": seed,
        "embedder": (build.get("vectors") or {}).get("source"),
        "modulate": TOKENS, "limit": LIMIT, "plain": timed["plain"], "modulated": timed["modulated"],
        "ratio_p50": round(timed["modulated"]["p50_ms"] / base, 3) if base else None,
        "ratio_cpu_p50": (round(timed["modulated"]["cpu_p50_ms"] / timed["plain"]["cpu_p50_ms"], 3)
                          if timed["plain"].get("cpu_p50_ms") else None),
        "suppressed_still_first": first_kept, "answered": with_mmr,
        "load_avg_before": load_before, "load_avg_after": [round(x, 2) for x in os.getloadavg()],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--workdir", type=Path, help="build here and keep it (default: a temp dir)")
    args = ap.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="tv-modbench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        res = run(args.entries, args.queries, args.dim, args.seed, workdir)
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"\nsearch_intelligent at {args.entries:,} entries x {args.dim} (hash vectors), "
          f"{res['queries']} queries; modulate={TOKENS!r}")
    print("| system | p50 ms | p95 ms | cpu p50 ms | ratio p50 |\n|---|---|---|---|---|")
    for name in ("plain", "modulated"):
        r = res[name]
        ratio = 1.0 if name == "plain" else res["ratio_p50"]
        print(f"| {name} | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} | {r.get('cpu_p50_ms', 0):.1f} "
              f"| {ratio:.2f} |")
    print(f"suppressed top result still first: {res['suppressed_still_first']} of "
          f"{res['queries']}; load average {res['load_avg_before']} -> {res['load_avg_after']}")
    if args.json:
        data = json.loads(args.json.read_text()) if args.json.exists() else {}
        data.setdefault("modulation", {})["search_intelligent"] = res
        args.json.write_text(json.dumps(data, indent=2) + "\n")


if __name__ == "__main__":
    main()
