"""A real ``tiervault serve`` process's FTS-only scan over HTTP, with and without its restart on
2 MiB pages (the companion of bench/mcp_scan_ab.py, which has the details).

    python bench/serve_scan_ab.py --workdir-a WA --workdir-b WB [--rounds 3] [--queries 300]
        [--warmup 50] [--gap-ms 20] [--checkout .] [--json out.json]

Side A: the default (restarted with ``GLIBC_TUNABLES=glibc.malloc.hugetlb=1
PYTHONMALLOC=malloc``); side B: ``TIERVAULT_HUGE_PAGES=0``. Each round starts one fresh server
per side (order alternating) on 127.0.0.1 over its own copy (``W/agent.yaml``, a token made by
the real ``tiervault token create`` in ``W/state``, ``--rate 0``); one keep-alive client sends
``POST /api/v1/search`` (mode scan, bench/corpus.py's queries and filters). Per call: the
client's wall time and the server's CPU (its threads' ``schedstat``); at the end the server's
peak RSS (``VmHWM``); and the time from spawn to the first answer.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.mcp_scan_ab import SIDES, ab_rounds, ab_setup, figures, status_kb, timed_calls  # noqa: E402
from bench.phases import FILTER_KEYS  # noqa: E402


def _env(extra: dict[str, str]) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith("TIERVAULT_") and k not in ("GLIBC_TUNABLES", "PYTHONMALLOC")}
    return {**base, **extra}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def token_for(python: str, workdir: Path) -> str:
    r = subprocess.run([python, "-m", "tiervault", "--config", str(workdir / "agent.yaml"), "token",
                        "create", "--agent", "bench", "--allow", "project:r,team:r",
                        "--state-dir", str(workdir / "state")], env=_env({"TIERVAULT_HUGE_PAGES": "0"}),
                       capture_output=True, text=True, timeout=120, check=True)
    return r.stdout.strip().splitlines()[0]


def one_run(python: str, workdir: Path, token: str, env: dict[str, str], qs: list[dict[str, Any]],
            warm: list[dict[str, Any]], gap_s: float) -> dict[str, Any]:
    port = _port()
    t0 = time.perf_counter()
    proc = subprocess.Popen([python, "-m", "tiervault", "--config", str(workdir / "agent.yaml"), "serve",
                             "--port", str(port), "--state-dir", str(workdir / "state"), "--rate", "0"],
                            env=_env(env), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as c:
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"serve exited with {proc.returncode}")
                try:
                    if c.get("/healthz").status_code == 200:
                        break
                except httpx.HTTPError:  # not listening yet
                    time.sleep(0.02)

            def search(q: dict[str, Any]) -> None:
                body = {"query": q["text"], "mode": "scan",
                        **{k: v for k, v in q["filters"].items() if k in FILTER_KEYS}}
                r = c.post("/api/v1/search", json=body)
                if r.status_code != 200:
                    raise RuntimeError(f"search: {r.status_code} {r.text[:300]}")

            first, wall, cpu = timed_calls(search, proc.pid, t0, qs, warm, gap_s)
            environ = Path(f"/proc/{proc.pid}/environ").read_bytes()
            hwm = status_kb(proc.pid, "VmHWM")
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    return figures(first, wall, cpu, environ, hwm)


def main() -> int:
    a, python, qs, warm, dirs = ab_setup(__doc__, 20.0)
    tokens = {side: token_for(python, d) for side, d in dirs.items()}
    return ab_rounds(a.rounds, lambda side: one_run(python, dirs[side], tokens[side], SIDES[side], qs,
                                                    warm, a.gap_ms / 1000),
                     " ".join(sys.argv), a.checkout, a.json)


if __name__ == "__main__":
    sys.exit(main())
