"""A/B of the first mirror build between two checkouts, over one set of tier files.

Why: ``bench/write_ab.py`` imports the corpus again before every build (minutes at
1,000,000 entries); the build alone needs only tier files. This writes the bench
corpus (``bench/corpus.py``) into three tiers once (or reuses ``--tiers DIR`` from
an earlier run), copies them once per variant, then runs checkout A, B, A, B ...
each in a fresh process (its own ``.venv`` interpreter, so it imports its own
``tiervault``: a checkout without a ``.venv`` runs this interpreter, whose editable
install maps ``tiervault.vault`` to *its* tree whatever ``PYTHONPATH`` says) that
deletes its copy's ``.postings.mirror`` caches and times ``store.postings()`` of each
tier (the first-ever build, cache file written): wall and process CPU per tier, peak
RSS, load average before / after.

    python bench/build_ab.py --a /path/old --b . --entries 1000000 --rounds 2 \\
        --workdir /tmp/build-ab --json bench/results/mirror-build-ab-1m.json [--profile]

``--first-search``: time instead the manager's first FTS search (``manager.search``),
which builds every tier's mirror as a user's first search does -- in worker processes
where the checkout has them (vault/mirror_workers.py): wall, this process's CPU plus
its finished children's (``RUSAGE_CHILDREN``), and the children's peak RSS; the
workers' own report per tier (rows, wall, CPU) where the checkout has them.

``--no-graphs`` (with ``--first-search``): the link graph files are deleted before
each run too, as bench/run.py's first build meets none (a copy keeps the graphs its
previous run saved).

``--profile``: each run also under cProfile (own-time top 15 per run; inflates
call-heavy code, so time those runs apart from the plain ones).
"""

from __future__ import annotations

import gc
import json
import os
import resource
import shutil
import sys
import time
from pathlib import Path
from typing import Any

TIERS = ("agent", "project", "team")



def _load() -> list[float]:
    """The load averages (a worker runs checkout A's tree: it cannot import bench.checkouts)."""
    return [round(x, 2) for x in os.getloadavg()]


def first_search(tiers: Path, graphs: bool = True) -> dict[str, Any]:
    """One variant's run (in its own process): the manager's first search builds every
    mirror; CPU counts this process and its finished children (the build workers).
    ``graphs=False``: the link graph files are deleted first too (as in bench/run.py's
    first build, right after the import: no graph yet)."""
    import sklearn.decomposition  # noqa: F401  (imported by a build: not timed)
    import sklearn.feature_extraction.text  # noqa: F401

    from tiervault.vault.manager import VaultManager

    for cache in tiers.glob("*.postings.mirror"):
        cache.unlink()
    for cache in ([] if graphs else tiers.glob("*.links.graph")):
        cache.unlink()
    out: dict[str, Any] = {"load_avg_before": _load(), "link_graphs_deleted": not graphs}
    gc.collect()
    me, kids = resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN
    cpu = lambda who: resource.getrusage(who).ru_utime + resource.getrusage(who).ru_stime  # noqa: E731
    t0, c0, k0 = time.perf_counter(), cpu(me), cpu(kids)
    with VaultManager.at({t: str(tiers / f"{t}.db") for t in TIERS}) as manager:
        try:  # what a first search starts with where the checkout has workers: their report
            from tiervault.vault.mirror_workers import build_missing
        except ImportError:
            workers = None
        else:
            workers = [{"tier": o.name, "ok": o.ok, "error": o.error, "rows": o.rows,
                        "wall_s": o.wall_s, "cpu_s": o.cpu_s}
                       for o in build_missing(manager.store(t) for t in TIERS)]
        t1 = time.perf_counter()  # the workers' end (or t0 without workers): the rest is the search
        hits = len(manager.search("error handling retry", limit=10).ids)
        wall = time.perf_counter() - t0
        own, children = cpu(me) - c0, cpu(kids) - k0
        rows = {t: manager.store(t).postings().base_rows for t in TIERS}
    out["mirror_build"] = {"via": "first search", "hits": hits, "rows": rows, "wall_s": round(wall, 3),
                           "cpu_s": round(own + children, 3), "own_cpu_s": round(own, 3),
                           "children_cpu_s": round(children, 3), "workers": workers,
                           "workers_wall_s": round(t1 - t0, 3), "search_after_s": round(t0 + wall - t1, 3)}
    out["peak_rss_mb"] = round(resource.getrusage(me).ru_maxrss / 1024, 1)
    out["children_peak_rss_mb"] = round(resource.getrusage(kids).ru_maxrss / 1024, 1)
    out["load_avg_after"] = _load()
    return out


def worker(tiers: Path, profile: bool) -> dict[str, Any]:
    """One variant's run (in its own process): the first build of each tier."""
    import sklearn.decomposition  # noqa: F401  (imported by a build: not timed)
    import sklearn.feature_extraction.text  # noqa: F401

    from tiervault.vault.manager import VaultManager

    for cache in tiers.glob("*.postings.mirror"):
        cache.unlink()
    out: dict[str, Any] = {"load_avg_before": _load()}
    prof = None
    if profile:
        import cProfile

        prof = cProfile.Profile()
    build: dict[str, Any] = {}
    total_wall = total_cpu = 0.0
    with VaultManager.at({t: str(tiers / f"{t}.db") for t in TIERS}) as manager:
        for t in TIERS:
            gc.collect()
            if prof:
                prof.enable()
            t0, c0 = time.perf_counter(), time.process_time()
            rows = manager.store(t).postings().base_rows
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            if prof:
                prof.disable()
            build[t] = {"rows": rows, "wall_s": round(wall, 3), "cpu_s": round(cpu, 3)}
            total_wall += wall
            total_cpu += cpu
    out["mirror_build"] = {**build, "wall_s": round(total_wall, 3), "cpu_s": round(total_cpu, 3)}
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    out["load_avg_after"] = _load()
    if prof:
        import pstats

        stats = pstats.Stats(prof)
        total = stats.total_tt or 1e-12  # type: ignore[attr-defined]
        rows_ = [{"function": f"{Path(f).name}:{line}({name})", "calls": nc,
                  "tottime_s": round(tt, 3), "cumtime_s": round(ct, 3), "share": round(tt / total, 3)}
                 for (f, line, name), (_cc, nc, tt, ct, _c) in stats.stats.items()]  # type: ignore[attr-defined]
        out["profile"] = sorted(rows_, key=lambda r: -r["tottime_s"])[:15]
    return out


def make_tiers(entries: int, seed: int, dest: Path) -> None:
    """The bench corpus stored into three fresh tiers (store-only import)."""
    from bench.corpus import generate
    from tiervault.vault.entry import Entry
    from tiervault.vault.manager import VaultManager

    dest.mkdir(parents=True, exist_ok=True)
    corpus = generate(entries, seed)
    with VaultManager.at({t: str(dest / f"{t}.db") for t in TIERS}) as manager:
        for t in TIERS:
            manager.capture_many([Entry.from_dict(d) for d in corpus.tiers[t]], t)


def run(checkout: Path, tiers: Path, mode: str, extra_env: list[str]) -> dict[str, Any]:
    """``mode``: "search" (--first-search), "1" (per tier, profiled) or "0" (per tier)."""
    from bench.checkouts import run_worker

    return run_worker(checkout, str(Path(__file__).resolve()), [str(tiers), mode], extra_env)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--_worker":
        if argv[2] in ("search", "search-no-graphs"):
            print(json.dumps(first_search(Path(argv[1]), graphs=argv[2] == "search")))
        else:
            print(json.dumps(worker(Path(argv[1]), argv[2] == "1")))
        return 0
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench.checkouts import ab_parser, commit_of

    ap = ab_parser(__doc__)
    ap.add_argument("--workdir", type=Path, required=True,
                    help="scratch directory (kept: its tiers are reused by a later run)")
    ap.add_argument("--tiers", type=Path, help="existing tier files of the corpus (default: "
                                               "WORKDIR/tiers-N, made when missing)")
    ap.add_argument("--profile", action="store_true", help="cProfile every run")
    ap.add_argument("--first-search", action="store_true",
                    help="time the manager's first search (all tiers' builds, workers included)")
    ap.add_argument("--no-graphs", action="store_true",
                    help="with --first-search: delete the link graph files before each run too")
    ap.add_argument("--a-env", action="append", default=[], metavar="KEY=VALUE",
                    help="environment of A's runs (e.g. TIERVAULT_MIRROR_HELPER=0)")
    ap.add_argument("--b-env", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args(argv)
    args.a, args.b = args.a.resolve(), args.b.resolve()
    src = args.tiers or args.workdir / f"tiers-{args.entries}"
    if not (src / "team.db").exists():
        make_tiers(args.entries, args.seed, src)
    copies = {}
    for name in ("A", "B"):
        copies[name] = args.workdir / f"copy-{name}"
        if copies[name].exists():
            shutil.rmtree(copies[name])
        copies[name].mkdir(parents=True)
        for t in TIERS:
            shutil.copy2(src / f"{t}.db", copies[name] / f"{t}.db")
    # the copies' dirty pages written back now, not during the first timed runs (session 14:
    # round 0's A, the first run after ~7 GB of copies, was the slowest run of every A/B)
    os.sync()
    out: dict[str, Any] = {"entries": args.entries, "seed": args.seed, "tiers": str(src),
                           "checkouts": {"A": {"path": str(args.a),
                                               "commit": args.a_commit or commit_of(args.a), "env": args.a_env},
                                         "B": {"path": str(args.b), "commit": args.b_commit or commit_of(args.b),
                                                 "env": args.b_env}},
                           "cores": len(os.sched_getaffinity(0)), "profile": args.profile,
                           "first_search": args.first_search, "no_graphs": args.no_graphs,
                           "runs": []}
    for r in range(args.rounds):
        for name, checkout, extra in (("A", args.a, args.a_env), ("B", args.b, args.b_env)):
            mode = ("search-no-graphs" if args.no_graphs else "search") if args.first_search \
                else ("1" if args.profile else "0")
            row = {"variant": name, "round": r, **run(checkout, copies[name], mode, extra)}
            out["runs"].append(row)
            b = row["mirror_build"]
            print(f"round {r} {name}: build {b['wall_s']} s wall / {b['cpu_s']} s cpu, "
                  f"rss {row['peak_rss_mb']} MB, load {row['load_avg_before'][0]} -> "
                  f"{row['load_avg_after'][0]}", file=sys.stderr, flush=True)
            if args.json:
                args.json.write_text(json.dumps(out, indent=2) + "\n")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
