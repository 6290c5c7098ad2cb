"""A real ``tiervault mcp`` server's FTS-only scan, with and without its restart on 2 MiB pages.

    python bench/mcp_scan_ab.py --workdir-a WA --workdir-b WB [--rounds 3] [--queries 300]
        [--warmup 50] [--gap-ms 0] [--checkout .] [--json out.json]

Side A: the default (the command re-executes itself once with ``GLIBC_TUNABLES=
glibc.malloc.hugetlb=1 PYTHONMALLOC=malloc``, tiervault/cli/huge_pages.py); side B: the
opt-out ``TIERVAULT_HUGE_PAGES=0`` (4 KiB pages, Python's own allocator). Each round starts
one fresh server process per side, the order alternating, each over its own copy of a
bench build (``WA/agent.yaml``, ``WB/agent.yaml``; FTS-only). The client speaks JSON-RPC over
the process's stdin / stdout (initialize, then ``search_intelligent`` mode scan with
bench/corpus.py's queries and filters, as bench/run.py's search phase) and measures per call:
the wall time seen by the client and the server's CPU time (the sum of its threads'
``/proc/PID/task/*/schedstat``, ns). Also: the time from spawn to the first answer (the
restart included) and the server's peak RSS (``VmHWM``) after the calls. ``--gap-ms``
sleeps between calls (a server's requests do not come back to back).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, NamedTuple

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.corpus import queries  # noqa: E402
from bench.phases import FILTER_KEYS  # noqa: E402

SIDES = {"A_huge_pages": {}, "B_opt_out": {"TIERVAULT_HUGE_PAGES": "0"}}


def server_cpu_ns(pid: int) -> int:
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, IndexError, ValueError):  # a thread that ended meanwhile
            continue
    return total


def status_kb(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def timed_calls(search: Callable[[dict[str, Any]], None], pid: int, t0: float,
                qs: list[dict[str, Any]], warm: list[dict[str, Any]],
                gap_s: float) -> tuple[float, list[int], list[int]]:
    """The first answer's time since ``t0`` (the spawn), the warm-up, then each timed call's
    client wall and server CPU (ns), ``gap_s`` asleep before each."""
    search(qs[0])
    first_answer_s = time.perf_counter() - t0
    for q in warm:
        search(q)
    wall, cpu = [], []
    for q in qs:
        if gap_s:
            time.sleep(gap_s)
        c0 = server_cpu_ns(pid)
        w0 = time.perf_counter_ns()
        search(q)
        wall.append(time.perf_counter_ns() - w0)
        cpu.append(server_cpu_ns(pid) - c0)
    return first_answer_s, wall, cpu


def figures(first_answer_s: float, wall: list[int], cpu: list[int], environ: bytes,
            hwm_kb: int) -> dict[str, Any]:
    w, c = np.asarray(wall) / 1e6, np.asarray(cpu) / 1e6
    return {"first_answer_s": round(first_answer_s, 3),
            "wall_p50_ms": round(float(np.percentile(w, 50)), 3),
            "wall_p95_ms": round(float(np.percentile(w, 95)), 3),
            "cpu_p50_ms": round(float(np.percentile(c, 50)), 3),
            "cpu_mean_ms": round(float(c.mean()), 3),
            "peak_rss_mb": round(hwm_kb / 1024, 1),
            "huge_pages_env": b"glibc.malloc.hugetlb=1" in environ, "n": len(wall)}


def ab_rounds(rounds: int, run_side: Callable[[str], dict[str, Any]], command: str,
              checkout: Path, out_json: Path | None) -> int:
    """``rounds`` rounds of both sides (order alternating), each result printed; the runs and
    a per-side summary written to ``out_json``."""
    runs: list[dict[str, Any]] = []
    for r in range(rounds):
        for side in (list(SIDES) if r % 2 == 0 else list(SIDES)[::-1]):
            res = run_side(side)
            res.update(side=side, round=r, load=os.getloadavg()[0])
            runs.append(res)
            print(json.dumps(res), flush=True)
    out = {"command": command, "checkout": str(checkout), "runs": runs,
           "summary": {side: {k: [x[k] for x in runs if x["side"] == side]
                              for k in ("cpu_p50_ms", "cpu_mean_ms", "wall_p50_ms", "wall_p95_ms",
                                        "peak_rss_mb", "first_answer_s", "load")}
                       for side in SIDES}}
    if out_json:
        out_json.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out["summary"], indent=1))
    return 0


class Server:
    """One ``tiervault mcp`` process and a line-by-line JSON-RPC client."""

    def __init__(self, python: str, config: Path, env: dict[str, str]) -> None:
        base = {k: v for k, v in os.environ.items()
                if not k.startswith("TIERVAULT_") and k not in ("GLIBC_TUNABLES", "PYTHONMALLOC")}
        self.t0 = time.perf_counter()
        self.proc = subprocess.Popen([python, "-m", "tiervault", "--config", str(config), "mcp"],
                                     env={**base, **env}, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.next_id = 0

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params or {}}
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"server closed stdout (exit {self.proc.poll()})")
            reply = json.loads(line)
            if reply.get("id") == self.next_id:
                if "error" in reply or reply.get("result", {}).get("isError"):
                    raise RuntimeError(f"{method}: {str(reply)[:300]}")
                return reply["result"]

    def notify(self, method: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps({"jsonrpc": "2.0", "method": method}) + "\n").encode())
        self.proc.stdin.flush()

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=120)


def search_args(q: dict[str, Any]) -> dict[str, Any]:
    args: dict[str, Any] = {"query": q["text"], "mode": "scan"}
    for k, v in q["filters"].items():
        if k in FILTER_KEYS:
            args[k] = v
    return args


def one_run(python: str, workdir: Path, env: dict[str, str], qs: list[dict[str, Any]],
            warm: list[dict[str, Any]], gap_s: float) -> dict[str, Any]:
    srv = Server(python, workdir / "agent.yaml", env)
    try:
        srv.call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                "clientInfo": {"name": "bench", "version": "1"}})
        srv.notify("notifications/initialized")

        def search(q: dict[str, Any]) -> None:
            srv.call("tools/call", {"name": "search_intelligent", "arguments": search_args(q)})

        first, wall, cpu = timed_calls(search, srv.proc.pid, srv.t0, qs, warm, gap_s)
        environ = Path(f"/proc/{srv.proc.pid}/environ").read_bytes()
        hwm, rss = status_kb(srv.proc.pid, "VmHWM"), status_kb(srv.proc.pid, "VmRSS")
    finally:
        srv.close()
    return {**figures(first, wall, cpu, environ, hwm), "rss_mb": round(rss / 1024, 1)}


class Setup(NamedTuple):
    args: argparse.Namespace
    python: str
    qs: list[dict[str, Any]]
    warm: list[dict[str, Any]]
    dirs: dict[str, Path]


def ab_setup(doc: str, gap_ms: float) -> Setup:
    """The A/B scripts' command line (``gap_ms``: the default pause between calls), the
    checkout's interpreter, the timed and warm-up queries, each side's work directory."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--workdir-a", type=Path, required=True)
    ap.add_argument("--workdir-b", type=Path, required=True)
    ap.add_argument("--checkout", type=Path, default=ROOT)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--gap-ms", type=float, default=gap_ms)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    venv = a.checkout / ".venv" / "bin" / "python"
    return Setup(a, str(venv if venv.exists() else Path(sys.executable)),
                 queries(a.queries, a.seed), queries(a.warmup, a.seed + 1),
                 {"A_huge_pages": a.workdir_a, "B_opt_out": a.workdir_b})


def main() -> int:
    a, python, qs, warm, dirs = ab_setup(__doc__, 0.0)
    return ab_rounds(a.rounds, lambda side: one_run(python, dirs[side], SIDES[side], qs, warm,
                                                    a.gap_ms / 1000),
                     " ".join(sys.argv), a.checkout, a.json)


if __name__ == "__main__":
    sys.exit(main())
