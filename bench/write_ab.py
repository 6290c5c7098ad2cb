"""A/B of the write side between two checkouts: JSONL import, store-only import, first mirror build.

Why: the write-side figures of ``bench/run.py`` (its build phase) also generate the
corpus, add links and embed every entry, and on this shared 2-core machine a figure
is only comparable with another taken at the same time. This writes the bench
corpus (``bench/corpus.py``) as JSONL once, then runs checkout A, B, A, B ... each in
a fresh process (its own ``.venv`` interpreter, so it imports its own ``tiervault``)
over its own empty work directory, timing (wall and process CPU):

1. **JSONL import end to end** (``vault.jsonl.import_lines`` = ``tiervault import``)
   of the three tier files into fresh tiers;
2. **store-only import** (``VaultManager.capture_many``) of the same records,
   validated before the clock starts, into other fresh tiers;
3. the **first-ever mirror build** of each of those tiers (``store.postings()``,
   which also writes the ``.postings.mirror`` cache).

    python bench/write_ab.py --a /path/old --b . --entries 100000 --rounds 2 \\
        --json bench/results/write-ab-100k.json [--profile-build 20000]

``--profile-build N``: afterwards, cProfile of checkout B's first build of N rows
of the team tier (top functions by own time). ``--keep-mirror-only``: skip 1 and 2's
JSONL part (build only, for 1,000,000 entries). Growth: run two sizes and read
``k = ln(t2 / t1) / ln(N2 / N1)`` off the two JSON files (``bench/profiling.growth``).
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TIERS = ("agent", "project", "team")


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def worker(src: Path, workdir: Path, jsonl: bool) -> dict[str, Any]:
    """One variant's run (in its own process): the three timed steps."""
    from import_timing import time_jsonl_import  # this script's folder: one harness for A and B
    from tiervault.vault.entry import Entry
    from tiervault.vault.manager import VaultManager

    out: dict[str, Any] = {"load_avg_before": _load()}
    if jsonl:
        written, wall, cpu = time_jsonl_import({t: workdir / "e2e" / f"{t}.db" for t in TIERS}, src)
        out["jsonl"] = {"entries": written, "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
                        "rate": round(written / wall, 1), "cpu_rate": round(written / cpu, 1)}
        shutil.rmtree(workdir / "e2e")
    paths = {t: workdir / "tiers" / f"{t}.db" for t in TIERS}
    store_wall = store_cpu = 0.0
    written = 0
    with VaultManager.at({t: str(p) for t, p in paths.items()}) as manager:
        for t in TIERS:  # one tier's entries in memory at a time
            with open(src / f"{t}.jsonl", encoding="utf-8") as fh:
                entries = [Entry.from_dict(json.loads(line)) for line in fh]
            gc.collect()
            t0, c0 = time.perf_counter(), time.process_time()
            written += manager.capture_many(entries, t)
            store_wall += time.perf_counter() - t0
            store_cpu += time.process_time() - c0
            del entries
        out["store"] = {"entries": written, "wall_s": round(store_wall, 3),
                        "cpu_s": round(store_cpu, 3), "rate": round(written / store_wall, 1),
                        "cpu_rate": round(written / store_cpu, 1)}
        import sklearn.feature_extraction.text  # noqa: F401  (imported by a build: not timed)

        build: dict[str, Any] = {}
        total_wall = total_cpu = 0.0
        for t in TIERS:
            gc.collect()
            t0, c0 = time.perf_counter(), time.process_time()
            rows = manager.store(t).postings().base_rows
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            build[t] = {"rows": rows, "wall_s": round(wall, 3), "cpu_s": round(cpu, 3)}
            total_wall += wall
            total_cpu += cpu
        out["mirror_build"] = {**build, "wall_s": round(total_wall, 3), "cpu_s": round(total_cpu, 3)}
    out["load_avg_after"] = _load()
    return out


def profile_build(checkout: Path, src: Path, rows: int) -> list[dict[str, Any]]:
    """cProfile (top functions by own time) of ``checkout``'s first build of ``rows``
    rows of the team tier, in a fresh process."""
    from bench.checkouts import checkout_env, python_of

    code = f"""
import json, sys
from itertools import islice
from pathlib import Path
sys.path.insert(0, {str(checkout)!r})
from bench.profiling import profile_calls
from tiervault.vault.entry import Entry
from tiervault.vault.manager import VaultManager
import sklearn.feature_extraction.text
work = Path({str(src)!r}) / "profile"
with VaultManager.at({{"team": str(work / "team.db")}}) as m:
    with open(Path({str(src)!r}) / "team.jsonl") as fh:
        m.capture_many([Entry.from_dict(json.loads(l)) for l in islice(fh, {rows})], "team")
    print(json.dumps(profile_calls(lambda st: st.postings(), [m.store("team")], top=15)))
"""
    proc = subprocess.run([python_of(checkout), "-c", code], stdout=subprocess.PIPE, text=True,
                          env=checkout_env(checkout), timeout=3600, check=True)
    shutil.rmtree(src / "profile", ignore_errors=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run(checkout: Path, src: Path, workdir: Path, jsonl: bool) -> dict[str, Any]:
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    from bench.checkouts import run_worker

    result = run_worker(checkout, str(Path(__file__).resolve()),
                        [str(src), str(workdir), "1" if jsonl else "0"])
    shutil.rmtree(workdir)
    return result


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--_worker":
        print(json.dumps(worker(Path(argv[1]), Path(argv[2]), argv[3] == "1")))
        return 0
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench.checkouts import ab_parser, commit_of

    ap = ab_parser(__doc__)
    ap.add_argument("--workdir", type=Path, help="scratch directory (default: a temp dir)")
    ap.add_argument("--no-jsonl", action="store_true", help="skip the JSONL end-to-end import")
    ap.add_argument("--profile-build", type=int, default=0, metavar="ROWS")
    args = ap.parse_args(argv)
    args.a, args.b = args.a.resolve(), args.b.resolve()
    from bench.corpus import generate, write_jsonl

    base = args.workdir or Path(tempfile.mkdtemp(prefix="tiervault-write-ab-"))
    src = base / "jsonl"
    src.mkdir(parents=True, exist_ok=True)
    corpus = generate(args.entries, args.seed)
    for t in TIERS:
        write_jsonl(corpus, src / f"{t}.jsonl", t)
    del corpus
    gc.collect()
    out: dict[str, Any] = {"entries": args.entries, "seed": args.seed,
                           "checkouts": {"A": {"path": str(args.a),
                                                "commit": args.a_commit or commit_of(args.a)},
                                         "B": {"path": str(args.b), "commit": args.b_commit or commit_of(args.b)}},
                           "cores": len(os.sched_getaffinity(0)), "runs": []}
    try:
        for r in range(args.rounds):
            for name, checkout in (("A", args.a), ("B", args.b)):
                row = {"variant": name, "round": r,
                       **run(checkout, src, base / f"w{name}", not args.no_jsonl)}
                out["runs"].append(row)
                jl = row.get("jsonl", {})
                print(f"round {r} {name}: jsonl {jl.get('rate')}/s (cpu {jl.get('cpu_rate')}/s), "
                      f"store {row['store']['rate']}/s, build {row['mirror_build']['wall_s']} s "
                      f"wall / {row['mirror_build']['cpu_s']} s cpu, load {row['load_avg_before'][0]}"
                      f" -> {row['load_avg_after'][0]}", file=sys.stderr, flush=True)
                if args.json:
                    args.json.write_text(json.dumps(out, indent=2) + "\n")
        if args.profile_build:
            out["profile_build"] = {"rows": args.profile_build,
                                    "B": profile_build(args.b, src, args.profile_build)}
    finally:
        if not args.workdir:
            shutil.rmtree(base, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
