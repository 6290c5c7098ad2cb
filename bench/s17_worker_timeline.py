"""Issue 16, session 17 probe: the first search's process timeline at 1M, from an
``strace -f -ttt`` record of ``bench/build_ab.py --_worker COPY search-no-graphs``:
when the build worker starts (its ``execve``), forks its second share (``clone``), when
each share ends and when the worker's exit reaches the searching process (``wait4``).

    strace -f -ttt --seccomp-bpf -e trace=execve,clone,clone3,exit_group,wait4 -o TRACE \\
        python bench/build_ab.py --_worker COPY search-no-graphs > RUN.json
    python bench/s17_worker_timeline.py TRACE [--json out.json]

Seconds from the searching process's own ``execve``. Threads (``clone3`` with
``CLONE_THREAD``) are left out; the worker is the process whose ``execve`` runs ``-c``.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.output import emit  # noqa: E402

_LINE = re.compile(r"^(\d+)\s+(\d+\.\d+)\s+(.*)$")


def timeline(lines: list[str]) -> dict[str, float]:
    """The events of one traced first search (module docstring), in seconds."""
    events = []
    for line in lines:
        m = _LINE.match(line)
        if m:
            events.append((int(m.group(1)), float(m.group(2)), m.group(3)))
    t0 = events[0][1]
    search = events[0][0]
    worker = next(pid for pid, _, call in events if call.startswith("execve(") and '"-c"' in call)
    fork = next((t, call) for pid, t, call in events
                if pid == worker and call.startswith("clone(") and "CLONE_THREAD" not in call)
    child = int(fork[1].rsplit("=", 1)[1])
    out = {"worker_execve_s": next(t for pid, t, call in events if pid == worker) - t0,
           "worker_fork_s": fork[0] - t0}
    out["worker_start_to_fork_s"] = out["worker_fork_s"] - out["worker_execve_s"]
    out["forking_share_done_s"] = next(t for pid, t, call in events
                                       if pid == worker and call.startswith(f"wait4({child},")) - t0
    out["forked_share_exit_s"] = next(t for pid, t, call in events
                                      if pid == child and call.startswith("exit_group")) - t0
    out["worker_exit_s"] = next(t for pid, t, call in events
                                if pid == worker and call.startswith("exit_group")) - t0
    out["search_wait_done_s"] = next(t for pid, t, call in events
                                     if pid == search and "wait4 resumed" in call) - t0
    out["worker_exit_after_last_share_s"] = out["worker_exit_s"] - max(out["forked_share_exit_s"],
                                                                       out["forking_share_done_s"])
    return {k: round(v, 3) for k, v in out.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", type=Path)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    emit({"trace": str(args.trace), **timeline(args.trace.read_text().splitlines())}, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
