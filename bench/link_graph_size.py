"""The link graph files of a bench corpus: build time, size, cold load, memory.

    python bench/link_graph_size.py --entries 1000000 [--dir /tmp/lg] [--json out.json]

The links of ``bench/corpus.py``'s corpus of ``--entries`` (0.3 per entry, grouped by
the tier holding the source, as ``bench/run.py`` stores them) are built into one
:class:`~tiervault.vault.link_graph.LinkGraph` per tier and saved (timed: build,
save; the SQL read of the rows is not part of it). Then a fresh process opens the
three files (every array CRC-checked, the graph validated) and answers one
``touching`` of 5 ids per tier: its wall time and its resident memory before and
after (``VmRSS``), twice -- the second time with the files' pages dropped from
the page cache first where the OS allows (``POSIX_FADV_DONTNEED``), as after a
reboot or eviction.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH
from bench.output import emit  # noqa: E402

_OPEN = r"""
import json, os, sys, time
from pathlib import Path
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
paths = [Path(p) for p in sys.argv[2:]]
if sys.argv[1] == "evict":
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
from tiervault.vault.link_graph import LinkGraph
before = rss()
t0 = time.perf_counter()
graphs = [LinkGraph.load(p)[0] for p in paths]
t1 = time.perf_counter()
ids = [json.loads(p.with_suffix(".ids").read_text()) for p in paths]
t2 = time.perf_counter()
found = sum(len(g.touching(i)) for g, i in zip(graphs, ids))
t3 = time.perf_counter()
print(json.dumps({"load_ms": round((t1 - t0) * 1e3, 1), "first_touching_ms": round((t3 - t2) * 1e3, 2),
                  "links_found": found, "rss_before_mb": round(before, 1), "rss_after_mb": round(rss(), 1)}))
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/link-graph-size"))
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)

    from bench.corpus import generate
    from tiervault.vault.link_graph import LinkGraph

    args.dir.mkdir(parents=True, exist_ok=True)
    corpus = generate(args.entries, args.seed)
    by_tier = corpus.links_by_tier()
    out: dict[str, Any] = {"entries": args.entries, "links": len(corpus.links),
                           "load_before": [round(x, 2) for x in os.getloadavg()], "tiers": {}}
    paths = []
    for tier, rows in sorted(by_tier.items()):
        t0 = time.perf_counter()
        graph = LinkGraph.build(rows, 1, 0, "")
        t1 = time.perf_counter()
        path = args.dir / f"{tier}.links.graph"
        graph.save(path, "bench")
        t2 = time.perf_counter()
        path.with_suffix(".ids").write_text(json.dumps([r[0] for r in rows[:3]] + ["nope-1", "nope-2"]))
        paths.append(str(path))
        out["tiers"][tier] = {"links": len(rows), "endpoints": graph.n,
                              "build_s": round(t1 - t0, 3), "save_s": round(t2 - t1, 3),
                              "file_mb": round(path.stat().st_size / 2**20, 2)}
    del corpus
    for mode in ("warm", "evict"):
        proc = subprocess.run([sys.executable, "-c", _OPEN, mode, *paths], stdout=subprocess.PIPE,
                              text=True, check=True, timeout=600)
        out[f"open_{mode}"] = json.loads(proc.stdout.strip().splitlines()[-1])
    out["build_s_total"] = round(sum(t["build_s"] + t["save_s"] for t in out["tiers"].values()), 3)
    out["file_mb_total"] = round(sum(t["file_mb"] for t in out["tiers"].values()), 2)
    out["load_after"] = [round(x, 2) for x in os.getloadavg()]
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
