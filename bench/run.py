"""tiervault benchmark: import rate, file size, cold start, search latency, capture, RSS.

    python bench/run.py --entries 10000,100000[,1000000] [--vectors 384] [--queries 200]
                        [--json out.json] [--plot out.png] [--workdir DIR] [--keep]

Per corpus size, in a process of its own (so sizes do not pollute each other's
memory): generate the corpus (bench/corpus.py, untimed), import it end to end
from JSONL (parse + validate + store, like ``tiervault import``) and store-only
(``VaultManager.capture_many`` of validated entries) into three tier files,
add the links, build the search mirrors once (the first-ever build), and time a
NumPy brute-force top-k over random unit vectors. Then a fresh process opens the
tiers and answers one query (cold open + first query, persisted mirror caches
included), runs ``search_intelligent`` scan and full over the query set after a
warm-up, records its peak RSS, runs the raw FTS5 ``bm25()`` baseline on the same
files, and times single captures into the populated vault. A third process
measures hybrid search when the embeddings runtime is available (hash embedder
vectors) and says why not otherwise.

Output: a markdown table on stdout, ``--json`` (see bench/README.md for the keys),
``--plot`` a PNG of latency vs corpus size (matplotlib, the ``[bench]`` extra).
"""

from __future__ import annotations

import time

_T_START = time.perf_counter()  # the cold-start clock of a --_phase search process

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere: `import bench.*`

#: Targets of issue 5 at 100,000 entries (ms unless stated).
TARGETS = {"scan_fts_p50": 10, "scan_fts_p95": 25, "hybrid_p50": 20, "import_rate": 20_000,
           "capture_p50": 5, "cold_ms": 1000, "rss_mb": 300}
PHASE_TIMEOUT_S = 3 * 3600


def embedder_summary(summary: dict[str, Any], machine: dict[str, Any]) -> dict[str, Any]:
    """``bench/embedder.py``'s summary when it was measured on this run's CPU (model name and
    cores); otherwise not available, saying where it was measured: another machine's
    embedder rate must not pass for this one's."""
    here = (machine.get("cpu"), machine.get("cores"))
    there = (summary.get("cpu"), summary.get("cores"))
    if there == here:
        return summary
    where = f"{there[0]} x{there[1]}" if there[0] else "a machine it does not name"
    return {"entries_per_s": None, "available": False,
            "reason": f"bench/results/local-embedder.json was measured on {where}, not on this "
                      f"{here[0]} x{here[1]}: run python bench/embedder.py here"}


def machine_info() -> dict[str, Any]:
    """What the numbers were taken on (CPU, cores, memory, versions, load)."""
    import sqlite3

    import numpy

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:  # no /proc (not Linux): the platform's processor name stays
        pass
    mem_gb = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem_gb = round(int(line.split()[1]) / 2**20, 1)
    except OSError:  # no /proc (not Linux): the memory is reported as unknown (None)
        pass
    try:
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        commit = None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cpu": cpu, "cores": cores, "memory_gb": mem_gb, "platform": platform.platform(),
            "python": platform.python_version(), "numpy": numpy.__version__,
            "sqlite": sqlite3.sqlite_version, "commit": commit,
            "load_avg_start": [round(x, 2) for x in os.getloadavg()]}


def run_phase(phase: str, params: dict[str, Any], timeout: float = PHASE_TIMEOUT_S) -> dict[str, Any]:
    """Run one phase in a fresh interpreter; its JSON result comes back on stdout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERVAULT_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--_phase", phase,
           "--_params", json.dumps(params)]
    # stderr passes through: progress lines of long phases, and tracebacks, show as they come.
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, timeout=timeout, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"bench phase {phase!r} failed (exit {proc.returncode}); "
                           "its traceback is above")
    return json.loads(proc.stdout.strip().splitlines()[-1])


_IMPORT_BRAIN = ("import time; t = time.perf_counter(); from tiervault.brain.brain import Brain; "
                 "print(round((time.perf_counter() - t) * 1e3, 1))")


def import_costs(rounds: int = 3) -> dict[str, Any]:
    """The Brain's import in fresh processes, ms (median of ``rounds``), from source and
    from cached bytecode, alternating: a machine setting PYTHONDONTWRITEBYTECODE (as this
    one does) compiles tiervault's ~100 modules in every process, which an installed wheel
    (compiled by pip) or a default interpreter (``__pycache__``) does not. The bytecode
    goes to a temporary PYTHONPYCACHEPREFIX, written by one untimed import first; the
    "source" runs read no bytecode only while the checkout has no ``__pycache__``."""
    with tempfile.TemporaryDirectory(prefix="tiervault-pyc-") as cache:
        source = {k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"}
        source["PYTHONDONTWRITEBYTECODE"] = "1"
        cached = {k: v for k, v in source.items() if k != "PYTHONDONTWRITEBYTECODE"}
        cached["PYTHONPYCACHEPREFIX"] = cache

        def once(env: dict[str, str]) -> float:
            out = subprocess.run([sys.executable, "-c", _IMPORT_BRAIN], env=env, capture_output=True,
                                 text=True, timeout=120, check=True)
            return float(out.stdout.split()[-1])

        once(cached)
        runs: dict[str, list[float]] = {"source": [], "bytecode": []}
        for _ in range(rounds):
            runs["source"].append(once(source))
            runs["bytecode"].append(once(cached))
    return {"source_ms": statistics.median(runs["source"]), "bytecode_ms": statistics.median(runs["bytecode"]),
            "runs": runs}


def measure_size(n: int, args: argparse.Namespace, base: Path) -> dict[str, Any]:
    """Every figure for one corpus size (three processes over one work directory)."""
    from bench.corpus import queries

    workdir = base / f"n{n}"
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    common = {"workdir": str(workdir), "entries": n, "seed": args.seed, "dim": args.vectors,
              "queries": args.queries, "captures": args.captures, "jsonl": not args.no_jsonl,
              "warmup": args.warmup}
    load_before = [round(x, 2) for x in os.getloadavg()]
    t0 = time.perf_counter()
    log(f"[{n:,}] generating and importing ...")
    build = run_phase("build", common)
    first = {"first_query": queries(1, args.seed)[0]}
    log(f"[{n:,}] FTS-only search in a fresh process ...")
    search = run_phase("search", {**common, **first})
    log(f"[{n:,}] hybrid search in a fresh process ...")
    hybrid = run_phase("hybrid", {**common, **first})
    brain_import = import_costs()
    imp = build["import"]
    na = {"p50_ms": None, "p95_ms": None, "available": False, "reason": hybrid.get("reason")}
    row: dict[str, Any] = {
        "entries": n,
        "import_rate": imp.get("jsonl_rate", imp["store_rate"]),
        "cold_first_query_ms": search["cold"]["total_ms"],
        "rss_mb": search["rss_mb"],
        "scan_fts": search["scan_fts"],
        "full_fts": search["full_fts"],
        "scan_hybrid": hybrid.get("scan_hybrid", na),
        "full_hybrid": hybrid.get("full_hybrid", na),
        "capture": search["capture"],
        "baseline_fts5": search["baseline_fts5"],
        "baseline_numpy_topk": hybrid["baseline_numpy_topk"],
        "baseline_numpy_topk_1t": hybrid.get("baseline_numpy_topk_1t"),
        "import": imp,
        "file_mb": build["file_mb"],
        "file_mb_per_tier": build["file_mb_per_tier"],
        "mirror_build_s": build["mirror_build_s"],
        "mirror_cache_mb": build["mirror_cache_mb"],
        "cold": {**search["cold"], "brain_import": brain_import,
                 # the cold start with tiervault's bytecode cached: the import measured
                 # above swapped for the difference of the two fresh-process imports
                 "total_bytecode_ms": round(search["cold"]["total_ms"] - brain_import["source_ms"]
                                            + brain_import["bytecode_ms"], 1)},
        "rss_build_mb": build["rss_build_mb"],
        "hybrid": {k: v for k, v in hybrid.items()
                   if k not in ("scan_hybrid", "full_hybrid", "baseline_numpy_topk",
                                "baseline_numpy_topk_1t", "profile")},
        "profile": {"build": build.get("profile"), **search.get("profile", {}),
                    **hybrid.get("profile", {})},
        "vectors": build.get("vectors"),
        "generate_s": build["generate_s"],
        "wall_s": round(time.perf_counter() - t0, 1),
        "load_avg_before": load_before,
        "load_avg_after": [round(x, 2) for x in os.getloadavg()],
    }
    row["ratios"] = ratios(row)
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return row


def ratios(row: dict[str, Any]) -> dict[str, float | None]:
    """p50 over p50 of systems timed round-robin on the same queries in one process
    (the Brain's overhead as a number that a busy machine disturbs least)."""
    def r(a: dict[str, Any] | None, b: dict[str, Any] | None) -> float | None:
        x, y = (a or {}).get("p50_ms"), (b or {}).get("p50_ms")
        return round(x / y, 2) if x is not None and y else None

    return {"scan_fts_vs_fts5": r(row["scan_fts"], row["baseline_fts5"]),
            "full_fts_vs_fts5": r(row["full_fts"], row["baseline_fts5"]),
            "scan_hybrid_vs_numpy": r(row["hybrid"].get("scan_hybrid_paired"),
                                      row["baseline_numpy_topk"]),
            "scan_hybrid_vs_numpy_1t": r(row["hybrid"].get("scan_hybrid_paired"),
                                         row.get("baseline_numpy_topk_1t")),
            "scan_hybrid_vs_scan_fts": r(row["scan_hybrid"], row["scan_fts"])}


def _fmt(x: Any, digits: int = 1) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, float):
        return f"{x:,.{digits}f}"
    return f"{x:,}" if isinstance(x, int) else str(x)


def _lat(d: dict[str, Any]) -> str:
    if not d or d.get("p50_ms") is None:
        return "not yet available" if d and d.get("available") is False else "n/a"
    text = f"{d['p50_ms']:.2f} / {d['p95_ms']:.2f}"
    if d.get("cpu_p50_ms") is not None:
        text += f" (cpu {d['cpu_p50_ms']:.2f} / {d['cpu_p95_ms']:.2f})"
    return text


def markdown(result: dict[str, Any]) -> str:
    """Metrics as rows, corpus sizes as columns. Latencies: wall-clock p50 / p95, then
    the process CPU time of the same calls (steadier on a shared machine)."""
    sizes = result["sizes"]
    head = "| metric | " + " | ".join(f"{s['entries']:,}" for s in sizes) + " |"
    lines = [head, "|---" * (len(sizes) + 1) + "|"]

    def add(name: str, fn: Any) -> None:
        lines.append(f"| {name} | " + " | ".join(fn(s) for s in sizes) + " |")

    add("import, JSONL end to end (entries/s)", lambda s: _fmt(s["import"].get("jsonl_rate"), 0))
    add("import, JSONL end to end, per CPU second of the process (entries/s)",
        lambda s: _fmt(s["import"].get("jsonl_cpu_rate"), 0))
    add("import, store only: capture_many (entries/s)", lambda s: _fmt(s["import"]["store_rate"], 0))
    add("links (links/s, one transaction each)", lambda s: _fmt(s["import"].get("links_rate"), 0))
    add("tier files (MB, 3 files)", lambda s: _fmt(s["file_mb"]))
    add("first-ever mirror build (s, 3 tiers)", lambda s: _fmt(s["mirror_build_s"]["total"], 2))
    add("first-ever mirror build, CPU (s)", lambda s: _fmt(s["mirror_build_s"].get("cpu"), 2))
    add("mirror caches on disk (MB)", lambda s: _fmt(s["mirror_cache_mb"]))
    add("cold open + first query (ms, fresh process)", lambda s: _fmt(s["cold_first_query_ms"]))
    add("&nbsp;&nbsp;of which import / open / first query (ms)",
        lambda s: f"{s['cold']['import_ms']:.0f} / {s['cold']['open_ms']:.0f} / "
                  f"{s['cold']['first_query_ms']:.0f}")
    add("cold open + first query, tiervault's bytecode cached (ms)",
        lambda s: _fmt(s["cold"].get("total_bytecode_ms")))
    add("&nbsp;&nbsp;Brain import, fresh process: from source / from bytecode (ms)",
        lambda s: f"{s['cold']['brain_import']['source_ms']:.0f} / {s['cold']['brain_import']['bytecode_ms']:.0f}"
        if "brain_import" in s["cold"] else "-")
    add("search_intelligent scan, FTS-only (p50 / p95 ms)", lambda s: _lat(s["scan_fts"]))
    add("search_intelligent full, FTS-only (p50 / p95 ms)", lambda s: _lat(s["full_fts"]))
    add("search_intelligent scan, hybrid (p50 / p95 ms)", lambda s: _lat(s["scan_hybrid"]))
    add("search_intelligent full, hybrid (p50 / p95 ms)", lambda s: _lat(s["full_hybrid"]))
    add("vectors: hash-embed + store every entry (entries/s)",
        lambda s: _fmt((s.get("vectors") or {}).get("embed_rate"), 0))
    add("cold open + first hybrid query (ms, fresh process)",
        lambda s: _fmt(s["hybrid"].get("cold", {}).get("total_ms")))
    add("baseline: raw FTS5 bm25(), 3 files (p50 / p95 ms)", lambda s: _lat(s["baseline_fts5"]))
    add("baseline: NumPy top-10, random unit vectors (p50 / p95 ms)",
        lambda s: _lat(s["baseline_numpy_topk"]))
    add("baseline: NumPy top-10, one-thread einsum (p50 / p95 ms)",
        lambda s: _lat(s.get("baseline_numpy_topk_1t") or {}))
    add("ratio: scan FTS-only / raw FTS5 (p50, same queries round-robin)",
        lambda s: _fmt(s["ratios"]["scan_fts_vs_fts5"], 2))
    add("ratio: full FTS-only / raw FTS5 (p50)", lambda s: _fmt(s["ratios"]["full_fts_vs_fts5"], 2))
    add("ratio: scan hybrid / NumPy top-10 (p50, same queries round-robin)",
        lambda s: _fmt(s["ratios"]["scan_hybrid_vs_numpy"], 2))
    add("ratio: scan hybrid / NumPy one-thread top-10 (p50, round-robin)",
        lambda s: _fmt(s["ratios"].get("scan_hybrid_vs_numpy_1t"), 2))
    add("ratio: scan hybrid / scan FTS-only (p50)",
        lambda s: _fmt(s["ratios"]["scan_hybrid_vs_scan_fts"], 2))
    add("capture into the populated vault (p50 / p95 ms)", lambda s: _lat(s["capture"]))
    add("capture with embed-on-write, hash (p50 / p95 ms)",
        lambda s: _lat(s["hybrid"].get("capture_embed_on_write", {})))
    add("peak RSS, search process FTS-only (MB)", lambda s: _fmt(s["rss_mb"]))
    add("peak RSS, hybrid process (MB)", lambda s: _fmt(s["hybrid"].get("rss_mb")))
    add("load average before / after (1 min)",
        lambda s: f"{s['load_avg_before'][0]:.1f} / {s['load_avg_after'][0]:.1f}")
    out = "\n".join(lines)
    for span, ks in (result.get("growth") or {}).items():
        shown = ", ".join(f"{k} {v:.2f}" for k, v in ks.items() if v is not None)
        out += f"\n\ngrowth exponents {span} (cost ~ N^k): {shown}"
    notes = {s["hybrid"].get("reason") for s in sizes if s["hybrid"].get("reason")}
    for note in notes:
        out += f"\n\nhybrid: {note}"
    return out


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def parse_sizes(text: str) -> list[int]:
    try:
        sizes = [int(x.replace("_", "")) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--entries: {text!r} is not a comma list of integers") from None
    if not sizes or min(sizes) < 50:
        raise argparse.ArgumentTypeError("--entries: sizes must be integers >= 50")
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=parse_sizes, default=parse_sizes("10000,100000"),
                        help="comma-separated corpus sizes (default: 10000,100000)")
    parser.add_argument("--vectors", type=int, default=384, help="vector dimension (default 384)")
    parser.add_argument("--queries", type=int, default=200, help="timed queries per measure (default 200)")
    parser.add_argument("--captures", type=int, default=200, help="timed single captures (default 200)")
    parser.add_argument("--warmup", type=int, default=30,
                        help="untimed warm-up queries before each timed set (default 30)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path, help="write the results as JSON here")
    parser.add_argument("--plot", type=Path, help="write a PNG of latency vs corpus size here")
    parser.add_argument("--workdir", type=Path, help="where the tier files go (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the tier files after the run")
    parser.add_argument("--no-jsonl", action="store_true",
                        help="skip the JSONL end-to-end import (store-only import is always timed)")
    parser.add_argument("--include", type=Path, action="append", default=[],
                        help="a previous --json result whose sizes join this one's for the "
                             "growth exponents (e.g. a separate 1,000,000 run); repeatable")
    parser.add_argument("--_phase", dest="phase", help=argparse.SUPPRESS)
    parser.add_argument("--_params", dest="phase_params", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.phase:
        from bench.phases import main_worker

        result = main_worker(args.phase, json.loads(args.phase_params), _T_START)
        print(json.dumps(result))
        return 0
    if args.queries < 1 or args.vectors < 2 or args.captures < 1 or args.warmup < 0:
        parser.error("--queries and --captures must be >= 1, --vectors >= 2, --warmup >= 0")
    base = args.workdir or Path(tempfile.mkdtemp(prefix="tiervault-bench-"))
    base.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"machine": machine_info(), "sizes": []}
    result["machine"]["settings"] = {"queries": args.queries, "captures": args.captures,
                                     "warmup": args.warmup, "vectors": args.vectors,
                                     "seed": args.seed}
    try:
        for n in args.entries:
            result["sizes"].append(measure_size(n, args, base))
            if args.json:  # partial results survive a later size failing
                args.json.write_text(json.dumps(result, indent=2) + "\n")
    finally:
        if not args.workdir and not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    result["machine"]["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
    from bench.profiling import growth

    measured = {s["entries"] for s in result["sizes"]}
    included = [s for path in args.include for s in json.loads(path.read_text())["sizes"]
                if s["entries"] not in measured]
    if included:
        result["included_sizes"] = {"from": [str(p) for p in args.include],
                                    "entries": sorted(s["entries"] for s in included)}
    result["growth"] = growth(result["sizes"] + included)
    # The local embedder is timed by bench/embedder.py (issue 16); its summary joins here.
    embedder_json = Path(__file__).resolve().parent / "results" / "local-embedder.json"
    if embedder_json.is_file():
        result["local_embedder"] = embedder_summary(
            json.loads(embedder_json.read_text())["local_embedder"], result["machine"])
    print(markdown(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    if args.plot:
        from bench.plot import plot

        plot(result, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
