"""Whether a second thread of this process would get a core: measured, per batch.

:func:`~tiervault.vault.write_pipeline.write_pipelined` can hand each batch's
indexing and commit to a writer thread while its caller reads the next batch. That
overlap only pays while a core is free: on a machine whose cores are all busy, the two
threads take turns on what CPU the process gets, and the hand-overs (the GIL, the
scheduler) cost ~7% more CPU than writing the batch in the caller's thread
(bench/README.md, "Issue 16, write side round 3": paired imports of 100,000 entries at
load ~2.8 took 4.46-4.59 s CPU one-threaded against 4.75-5.01 s with the thread, for
the same wall time).

:class:`SpareCores` measures, over the last batch (between two calls), the cores a
second thread could have used::

    spare = idle_cores + max(0, process_cpu / wall - 1)

where ``idle_cores`` is the idle (and I/O-wait) share of every CPU's ticks in
``/proc/stat`` times the number of CPUs, and the second term is what this process
already ran beyond one core (its writer thread, when there was one: without it, the
thread's own use would make the next measurement look busy). :meth:`threaded` is True
when ``spare >= SPARE_FOR_THREAD``, and also when nothing can be measured (no
``/proc/stat``: not Linux), which keeps the writer thread as before.
"""

from __future__ import annotations

import time
from typing import NamedTuple

__all__ = ["SpareCores", "SPARE_FOR_THREAD"]

#: A writer thread is used when at least half a core was spare during the last batch
#: (a judgement, not fitted on data: the middle between "no core free" and "one free").
SPARE_FOR_THREAD = 0.5

_STAT = "/proc/stat"


class _Sample(NamedTuple):
    wall: float
    cpu: float
    idle_ticks: int
    total_ticks: int
    cpus: int


def _sample() -> _Sample | None:
    """Now: wall clock, this process's CPU time, and the machine's tick counters."""
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        with open(_STAT, "rb") as fh:
            text = fh.read(65_536)
    except OSError:
        return None
    lines = text.split(b"\n")
    fields = lines[0].split()
    if len(fields) < 8 or fields[0] != b"cpu":
        return None
    try:  # user nice system idle iowait irq softirq steal
        ticks = [int(f) for f in fields[1:9]]
    except ValueError:
        return None
    cpus = sum(1 for line in lines[1:] if line.startswith(b"cpu"))
    return _Sample(wall, cpu, ticks[3] + ticks[4], sum(ticks), max(cpus, 1))


class SpareCores:
    """Measures the spare cores between successive calls of :meth:`spare`."""

    def __init__(self) -> None:
        self._last = _sample()

    def spare(self) -> float | None:
        """Cores a second thread could have used since the last call (None: unknown)."""
        now, last = _sample(), self._last
        self._last = now
        if now is None or last is None:
            return None
        wall = now.wall - last.wall
        ticks = now.total_ticks - last.total_ticks
        if wall <= 0 or ticks <= 0:
            return None
        idle = (now.idle_ticks - last.idle_ticks) / ticks * now.cpus
        return idle + max(0.0, (now.cpu - last.cpu) / wall - 1.0)

    def threaded(self) -> bool:
        """Use the writer thread for the next batch?"""
        spare = self.spare()
        return spare is None or spare >= SPARE_FOR_THREAD
