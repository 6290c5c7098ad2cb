"""What counting every link row by trigger (schema v6) costs, A/B in alternating fresh processes.

    python bench/link_count_cost.py --a /work/wt/base0 --b . --tiers /tmp/cold-w/n100000/tiers \\
        --workdir /tmp/links/lc --rounds 3 --json bench/results/s13-links-count-cost.json

Each run copies ``team.db`` (and its ``.links.graph``) of a ``bench/run.py`` build into a
work directory of its own (the build is never written), then, in a fresh process of
checkout A or B (A, B, A, B ...: its own ``.venv`` interpreter and code):

1. opens the tier (B migrates schema 5 -> 6: three CREATE TRIGGER, timed as ``open_s``);
2. ``link_ends`` of 20 ids (10 with links) in a new read scope per call, as a search
   asks (the graph exact: B's one check is the change count read with the
   generation), ``--calls`` calls, process CPU per call;
3. ``link`` of ``--links`` new links, one transaction each (what ``bench/run.py``'s
   "links/s" times);
4. ``unlink`` of a fifth of them, one transaction each;
5. ``put_links`` (the link copy of ``tiervault migrate`` / import) of ``--bulk`` new
   links in transactions of 2,000 rows (A: one count bump a transaction, B: a trigger a row).

Rates are links per wall second and per process-CPU second; the links' change count
before and after each step is kept (A counts transactions, B rows).
"""

from __future__ import annotations

import json
import random
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH
from bench.checkouts import ab_parser, commit_of, load_avg, run_worker  # noqa: E402


def _count(store: Any) -> int:
    rows = store.db.query("SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'links.changes'")
    return int(rows[0][0]) if rows else 0


def _timed(fn: Any) -> tuple[float, float]:
    w, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w, time.process_time() - c


def worker(db: Path, links: int, bulk: int, calls: int, seed: int) -> dict[str, Any]:
    from tiervault.vault.read_scope import read_scope
    from tiervault.vault.rows import Link
    from tiervault.vault.store import TierStore
    from tiervault.vault.transfer import transfer_for

    out: dict[str, Any] = {"load_before": load_avg()}
    rng = random.Random(seed)
    t0 = time.perf_counter()
    store = TierStore(db, name="team")
    ids = [r[0] for r in store.db.query("SELECT id FROM entries ORDER BY rowid")]
    out["open_s"] = round(time.perf_counter() - t0, 3)
    out["schema"] = store.db.query("PRAGMA user_version")[0][0]
    linked = [r[0] for r in store.db.query("SELECT DISTINCT source_id FROM links ORDER BY source_id")]
    asks = [rng.sample(linked, 10) + rng.sample(ids, 10) for _ in range(64)]
    store.link_ends(asks[0])  # the graph file mapped (exact at the build's count)
    per_call = []
    for block in range(max(1, calls // 250)):
        c = time.process_time()
        for i in range(250):
            with read_scope():
                store.link_ends(asks[(block + i) % 64])
        per_call.append((time.process_time() - c) / 250 * 1e6)
    out["link_ends_cpu_us"] = {"median_block": round(statistics.median(per_call), 2),
                               "blocks": [round(x, 2) for x in per_call],
                               "graph_read": store.graph.current() is not None}
    pairs = []
    while len(pairs) < links:
        s, t = rng.choice(ids), rng.choice(ids)
        if s != t:  # an entry cannot link to itself
            pairs.append((s, t, rng.choice(("supports", "extends", "sequences"))))
    steps: dict[str, Any] = {}
    before = _count(store)

    def one_each() -> None:
        for s, t, ty in pairs:
            store.link(s, t, ty)

    wall, cpu = _timed(one_each)
    steps["link"] = {"links": links, "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
                     "rate": round(links / wall, 1), "cpu_rate": round(links / cpu, 1),
                     "count_moved": _count(store) - before}
    gone = pairs[: links // 5]
    before = _count(store)

    def unlink_each() -> None:
        for s, t, ty in gone:
            store.unlink(s, t, ty)

    wall, cpu = _timed(unlink_each)
    steps["unlink"] = {"links": len(gone), "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
                       "rate": round(len(gone) / wall, 1), "cpu_rate": round(len(gone) / cpu, 1),
                       "count_moved": _count(store) - before}
    rows = [Link(rng.choice(ids), f"bulk-{i}", "supports", "", 0.0, "team") for i in range(bulk)]
    transfer = transfer_for(store)
    before = _count(store)

    def copy() -> None:
        for k in range(0, bulk, 2000):
            transfer.put_links(rows[k:k + 2000])

    wall, cpu = _timed(copy)
    steps["put_links"] = {"links": bulk, "batch": 2000, "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
                          "rate": round(bulk / wall, 1), "cpu_rate": round(bulk / cpu, 1),
                          "count_moved": _count(store) - before}
    out["steps"] = steps
    out["load_after"] = load_avg()
    store.close()
    return out


def main(argv: list[str] | None = None) -> int:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--_worker":
        db, links, bulk, calls, seed = sys.argv[2:7]
        print(json.dumps(worker(Path(db), int(links), int(bulk), int(calls), int(seed))))
        return 0
    ap = ab_parser(__doc__)
    ap.add_argument("--tiers", type=Path, required=True, help="a bench/run.py build's tiers/ (read only)")
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--links", type=int, default=5000)
    ap.add_argument("--bulk", type=int, default=50_000)
    ap.add_argument("--calls", type=int, default=5000)
    args = ap.parse_args(argv)
    runs: list[dict[str, Any]] = []
    for r in range(args.rounds):
        for side, checkout in (("a", args.a), ("b", args.b)):
            work = args.workdir / f"{side}{r}"
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir(parents=True)
            for name in ("team.db", "team.db.links.graph"):
                shutil.copy(args.tiers / name, work / name)
            res = run_worker(checkout.resolve(), str(Path(__file__).resolve()),
                             [str(work / "team.db"), str(args.links), str(args.bulk), str(args.calls),
                              str(args.seed + r)])
            res.update(side=side, round=r)
            runs.append(res)
            s = res["steps"]
            print(f"{side}{r}: schema {res['schema']} open {res['open_s']} s, link_ends "
                  f"{res['link_ends_cpu_us']['median_block']} us, link {s['link']['rate']}/s "
                  f"(cpu {s['link']['cpu_rate']}/s), unlink {s['unlink']['rate']}/s, put_links "
                  f"{s['put_links']['rate']}/s (cpu {s['put_links']['cpu_rate']}/s), load {res['load_before']}",
                  file=sys.stderr)
            shutil.rmtree(work)
    summary: dict[str, Any] = {}
    for side in ("a", "b"):
        mine = [x for x in runs if x["side"] == side]
        summary[side] = {"link_ends_cpu_us": statistics.median(x["link_ends_cpu_us"]["median_block"] for x in mine),
                         "open_s": statistics.median(x["open_s"] for x in mine)}
        for step in ("link", "unlink", "put_links"):
            summary[side][step] = {k: statistics.median(x["steps"][step][k] for x in mine)
                                   for k in ("rate", "cpu_rate")}
    for step in ("link", "unlink", "put_links"):
        summary[f"b_over_a_{step}_cpu_rate"] = round(summary["b"][step]["cpu_rate"] / summary["a"][step]["cpu_rate"], 3)
    summary["b_minus_a_link_ends_cpu_us"] = round(summary["b"]["link_ends_cpu_us"] - summary["a"]["link_ends_cpu_us"], 2)
    doc = {"command": " ".join(sys.argv), "a": str(args.a), "b": str(args.b),
           "a_commit": args.a_commit or commit_of(args.a), "b_commit": args.b_commit or commit_of(args.b),
           "tiers": str(args.tiers), "summary": summary, "runs": runs}
    print(json.dumps(summary, indent=1))
    if args.json:
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
