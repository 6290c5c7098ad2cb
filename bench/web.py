"""Web page latency at 100K entries: the curator pages over real HTTP vs the same work in-process.

    python bench/web.py [--entries 100000] [--requests 100] [--workdir DIR] [--json OUT]

Builds (or reuses, in ``--workdir``) the synthetic corpus of bench/corpus.py in
three tier files with its links and search mirrors, starts a real ``tiervault
ui`` on 127.0.0.1 over them and times GET requests with an HTTP client (the
full path: HTTP, auth, CSRF token, the query, Jinja2 rendering, the SVG charts).
The baseline is the same library work called directly in this process on a
Brain of its own over the same files, without HTTP or HTML. Page and baseline
are timed round-robin per request so load from other processes hits both alike.

Pages: ``search`` (a query of bench/corpus.py's set, scan mode, 20 rows),
``entry`` (an entry with its links graph and the score breakdown of the query
that found it: a full-mode search of the results page's 20 rows), ``browse`` (a page of 25, newest
first, at a random page 1-40 of a random tier), ``health`` (counts, weights,
coverage), and ``review`` (contradictions and near-duplicates; the title groups
are cached per tier generation, so this is the warm figure; the first visit
after a write rebuilds them and is reported as ``review_cold_ms``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.phases import stats_ms, write_config  # noqa: E402
from bench.run import machine_info  # noqa: E402

TARGET_MS = 100
TIERS = ("agent", "project", "team")


def build(n: int, workdir: Path) -> None:
    """The corpus in workdir/tiers (skipped when a previous run left it there)."""
    from bench.corpus import generate
    from tiervault.vault.entry import Entry
    from tiervault.vault.manager import VaultManager

    marker = workdir / f"built-{n}"
    if marker.exists():
        return
    corpus = generate(n, 7)
    paths = {t: str(workdir / "tiers" / f"{t}.db") for t in TIERS}
    (workdir / "tiers").mkdir(parents=True, exist_ok=True)
    with VaultManager.at(paths) as manager:
        for t in TIERS:
            manager.capture_many((Entry.from_dict(d) for d in corpus.tiers[t]), t)
        for t, rows in corpus.links_by_tier().items():
            store = manager.store(t)
            for s, tgt, ty in rows:
                store.link(s, tgt, ty)
        for t in TIERS:
            manager.store(t).postings()  # writes the mirror caches
    marker.write_text("ok\n")


def start_ui(config: Path) -> tuple[subprocess.Popen, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERVAULT_")}
    proc = subprocess.Popen([sys.executable, "-m", "tiervault", "--config", str(config), "ui"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    line = proc.stdout.readline()  # type: ignore[union-attr]
    match = re.search(r"http://127\.0\.0\.1:\d+/\?token=[\w-]+", line)
    if not match:
        proc.kill()
        raise RuntimeError(f"tiervault ui did not start: {line!r}")
    return proc, match.group(0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=100_000)
    ap.add_argument("--requests", type=int, default=100, help="timed requests per page")
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "tiervault-web-bench"))
    ap.add_argument("--json", default=str(ROOT / "bench" / "results" / "web-100k.json"))
    args = ap.parse_args(argv)

    import httpx

    from bench.corpus import queries
    from tiervault.brain import Brain
    from tiervault.config import load_settings
    from tiervault.web.catalog import Catalog

    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    build(args.entries, workdir)
    print(f"corpus ready in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    config = write_config(workdir)
    info = machine_info()
    brain = Brain.open(load_settings(str(config)))
    catalog = Catalog(brain.manager)
    proc, address = start_ui(config)
    base = address.split("?")[0].rstrip("/")
    client = httpx.Client(base_url=base, timeout=60)
    try:
        client.get(address)  # moves the token into the cookie
        token = address.rsplit("=", 1)[1]
        client.cookies.set("tiervault_token", token)
        rng = random.Random(7)
        qs = [q for q in queries(args.requests * 2, seed=11)][: args.requests]
        found = []
        for q in qs:
            rows = brain.search_intelligent(q["text"], mode="scan", limit=1)
            if rows:
                found.append((q["text"], rows[0]["id"], rows[0]["tier"]))
        counts = {t: brain.manager.store(t).count() for t in TIERS}

        def search_page(i: int) -> Any:
            return client.get("/", params={"q": qs[i]["text"]})

        def search_lib(i: int) -> Any:
            return brain.search_intelligent(qs[i]["text"], mode="scan", limit=20, explain=True,
                                            tiers=list(TIERS))

        def entry_page(i: int) -> Any:
            q, eid, tier = found[i % len(found)]
            return client.get(f"/entry/{eid}", params={"tier": tier, "q": q})

        def entry_lib(i: int) -> Any:
            q, eid, tier = found[i % len(found)]
            brain.manager.get_many([eid], [tier])
            brain.manager.links_touching([eid])
            return brain.search_intelligent(q, mode="full", limit=20, explain=True,
                                            tiers=list(TIERS))

        pages = [(rng.choice(TIERS), rng.randint(1, 40)) for _ in range(args.requests)]

        def browse_page(i: int) -> Any:
            tier, page = pages[i]
            return client.get("/browse", params={"tier": tier, "page": page})

        def browse_lib(i: int) -> Any:
            tier, page = pages[i]
            return catalog.page(tier, page=page, per_page=25)

        def health_page(i: int) -> Any:
            return client.get("/health")

        def health_lib(i: int) -> Any:
            brain.stats()
            return [catalog.distribution(t) for t in TIERS]

        def review_page(i: int) -> Any:
            return client.get("/review")

        def review_lib(i: int) -> Any:
            return catalog.contradictions(list(TIERS)), catalog.duplicates(list(TIERS))

        t0 = time.perf_counter()
        review_cold = client.get("/review")
        review_cold_ms = (time.perf_counter() - t0) * 1e3
        assert review_cold.status_code == 200, review_cold.status_code
        review_lib(0)
        results: dict[str, Any] = {}
        for name, page, lib in [("search", search_page, search_lib), ("entry", entry_page, entry_lib),
                                ("browse", browse_page, browse_lib), ("health", health_page, health_lib),
                                ("review", review_page, review_lib)]:
            results[name] = timed(page, lib, args.requests, proc.pid)
            r = results[name]
            print(f"{name:7s} page p50 {r['page']['p50_ms']:7.1f} ms  p95 {r['page']['p95_ms']:7.1f} ms"
                  f"  cpu {r['page']['server_cpu_mean_ms']:6.1f} ms | in-process p50 "
                  f"{r['library']['p50_ms']:7.1f} ms  p95 {r['library']['p95_ms']:7.1f} ms  cpu "
                  f"{r['library']['cpu_mean_ms']:6.1f} ms", file=sys.stderr)
    finally:
        client.close()
        proc.terminate()
        proc.wait(timeout=20)
        brain.close()
    info["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
    out = {"benchmark": "web pages over HTTP vs in-process", "entries": counts,
           "requests_per_page": args.requests, "target_ms": TARGET_MS, "machine": info,
           "review_cold_ms": round(review_cold_ms, 1), "pages": results,
           "meets_target_p50": {k: v["page"]["p50_ms"] < TARGET_MS for k, v in results.items()},
           "meets_target_p95": {k: v["page"]["p95_ms"] < TARGET_MS for k, v in results.items()}}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({k: {"page_p50": v["page"]["p50_ms"], "page_p95": v["page"]["p95_ms"],
                          "lib_p50": v["library"]["p50_ms"]} for k, v in results.items()}))
    return 0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (Linux /proc; clock-tick resolution)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(page: Callable[[int], Any], lib: Callable[[int], Any], n: int, pid: int) -> dict[str, Any]:
    """Warm up, then page and library round-robin per request; status codes checked.

    Besides wall-clock percentiles, the CPU time each side spent per request on
    average (the server process's from /proc, this process's for the library):
    on a machine shared with other work this moves much less than wall time.
    """
    for i in range(min(5, n)):
        assert page(i).status_code == 200
        lib(i)
    wall: dict[str, list[int]] = {"page": [], "library": []}
    lib_cpu = 0
    sizes = []
    server_cpu0 = cpu_seconds(pid)
    for i in range(n):
        t0 = time.perf_counter_ns()
        r = page(i)
        wall["page"].append(time.perf_counter_ns() - t0)
        if r.status_code != 200:
            raise RuntimeError(f"{r.request.url} answered {r.status_code}")
        sizes.append(len(r.content))
        c0 = time.process_time_ns()
        t0 = time.perf_counter_ns()
        lib(i)
        wall["library"].append(time.perf_counter_ns() - t0)
        lib_cpu += time.process_time_ns() - c0
    server_cpu = cpu_seconds(pid) - server_cpu0
    return {"page": {**stats_ms(wall["page"]), "server_cpu_mean_ms": round(server_cpu * 1e3 / n, 2)},
            "library": {**stats_ms(wall["library"]), "cpu_mean_ms": round(lib_cpu / 1e6 / n, 2)},
            "html_kb_p50": round(sorted(sizes)[len(sizes) // 2] / 1024, 1)}


if __name__ == "__main__":
    sys.exit(main())
