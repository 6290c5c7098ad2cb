"""One query's int8 dot products over a base, shared by threads in claims, startable early.

The int8 scan (:func:`~tiervault.embeddings.vector_math.int8_approx`) is memory-bound:
one core reads the codes at ~12.5 GB/s on the bench machine, two nearly twice as fast,
and SimSIMD releases the GIL while it reads. A :class:`DotJob` computes

    out[i] = sum_j r_j c_ij        (SimSIMD's i8 ``dot``; r: the query's codes)

for every row ``c_i`` of ``codes``, in claims of ``CLAIM_ROWS`` rows: each claim is one
SimSIMD call writing its slice of ``out``, so the numbers are one call's, bit for bit,
whoever computes them. Threads of the process's scan pool (:func:`scan_pool`) claim
rows once started; the thread that asks for the result (:meth:`DotJob.result`) claims
whatever is left, then waits only for claims already running. A pool task that has not
started by then is cancelled, so with no core free a job costs one thread's work plus
at most one claim's wait.

Two uses:

* a large base is split over the pool at once (``int8_approx``: ``threads`` > 1);
* :func:`prefetch` starts a query's jobs before the search gets to them: a hybrid search
  names its query vector before its lexical leg, so the pool's thread reads the codes
  while the calling thread does the lexical work (Python releasing the GIL now and then:
  SQLite calls, file reads, NumPy loops), and :func:`prefetched` hands the job to the
  vector leg. The pool takes the bases last-asked first; the caller, when it comes,
  claims the first ones itself. Jobs are kept for one query at a time (the last
  :func:`prefetch`); a job not asked for is stopped at the next one.
"""

from __future__ import annotations

import itertools
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

__all__ = ["CLAIM_ROWS", "DotJob", "pool_threads", "scan_pool", "prefetch", "prefetched"]

#: Rows a thread claims at a time (6 MB of 384-d codes, ~0.5 ms on one core).
CLAIM_ROWS = 16_384

_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def pool_threads() -> int:
    """Threads of :func:`scan_pool`: one fewer than the process's CPUs, at least one."""
    return max(1, (os.cpu_count() or 2) - 1)


def scan_pool() -> ThreadPoolExecutor:
    """The process's vector-scan threads (:func:`pool_threads`), made on first use."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=pool_threads(), thread_name_prefix="tiervault-vscan")
        return _POOL


class DotJob:
    """SimSIMD's i8 ``dot`` of ``qcodes`` (1, d) with every row of ``codes`` (n, d),
    claimed ``CLAIM_ROWS`` rows at a time (module docstring)."""

    def __init__(self, simd: Any, qcodes: np.ndarray, codes: np.ndarray, claim_rows: int = 0) -> None:
        self.simd, self.qcodes, self.codes = simd, qcodes, codes
        self.out = np.empty(codes.shape[0], dtype=np.float32)
        self.claim_rows = max(1, claim_rows or CLAIM_ROWS)
        self.chunks = -(-codes.shape[0] // self.claim_rows)
        self._claims = itertools.count()  # next() is one C call: each claim goes to one thread
        self._finished = itertools.count(1)  # claims written, counted as _claims (ready())
        self._written = 0
        self._stopped = False
        self._helpers: list[Future] = []
        self.started = threading.Event()  # a pool thread has begun claiming

    def start(self, helpers: int) -> "DotJob":
        """Let up to ``helpers`` pool threads claim rows from now on."""
        pool = scan_pool()
        self._helpers += [pool.submit(self._work, True) for _ in range(min(helpers, self.chunks))]
        return self

    def stop(self) -> None:
        """Pool threads claim no more rows of this job (one no one will ask for)."""
        self._stopped = True
        for f in self._helpers:
            f.cancel()

    def ready(self) -> bool:
        """Whether every claim is written already: :meth:`result` would return at once.
        (Two threads finishing claims together may leave the count one short: then
        False, never True too early.)"""
        return self._written >= self.chunks

    def result(self) -> np.ndarray:
        """Every row's product (the caller claims what is left), float32 (n,)."""
        try:
            self._work(False)
        finally:
            for f in self._helpers:
                if not f.cancel():
                    f.result()
        return self.out

    def _work(self, helper: bool) -> None:
        if helper:
            self.started.set()
        rows, qcodes, codes, simd = self.claim_rows, self.qcodes, self.codes, self.simd
        while not (helper and self._stopped):  # checked before a claim: a claim taken is done
            i = next(self._claims)
            if i >= self.chunks:
                return
            s = i * rows
            self.out[s:s + rows] = np.asarray(
                simd.cdist(qcodes, codes[s:s + rows], metric="dot", out_dtype="float32"))[0]
            self._written = next(self._finished)


# The last prefetch: (query codes' bytes, {id(codes): (codes, job)}), swapped whole.
_PREFETCHED: tuple[bytes, dict[int, tuple[np.ndarray, DotJob]]] | None = None


#: How long :func:`prefetch` waits for the pool's thread to begin (seconds). The pool
#: thread needs the GIL to begin, and a caller busy in Python hands it over only every
#: ``sys.getswitchinterval()`` (5 ms): waiting here hands it over now. With a core free
#: the thread starts at once; with none, the caller goes on after this long (what a
#: hybrid search may lose on a busy machine: a judgement, not fitted) and the job is
#: claimed by whoever gets to it.
START_WAIT_S = 0.0002


def prefetch(simd: Any, qcodes: np.ndarray, bases: list[tuple[np.ndarray, int]]) -> None:
    """Start a job for each ``(codes, claim_rows)`` of ``bases`` on the pool, the last
    first, waiting up to ``START_WAIT_S`` for it to begin; the previous prefetch's jobs
    are stopped.

    ``bases`` come in the order the caller will ask for them (:func:`prefetched`). The
    pool takes them from the end, so a caller that comes before the pool is done finds
    its first bases unclaimed and scans them itself while the pool finishes the last:
    the two meet in the middle instead of the caller waiting for the pool's whole queue
    (100K hybrid bench, 3 tiers: the caller asked at ~3.1 ms, the pool ended at ~4.6;
    bench/README.md, issue 16 session 17)."""
    global _PREFETCHED
    last = _PREFETCHED
    if last is not None:
        for _, job in last[1].values():
            job.stop()
    jobs = {id(codes): (codes, DotJob(simd, qcodes, codes, rows).start(1))
            for codes, rows in reversed(bases)}
    _PREFETCHED = (qcodes.tobytes(), jobs)
    if jobs:
        next(iter(jobs.values()))[1].started.wait(START_WAIT_S)


def prefetched(qcodes: np.ndarray, codes: np.ndarray) -> DotJob | None:
    """The prefetched job of this query's codes over exactly this ``codes`` array, taken
    (a job is asked for once), or None."""
    last = _PREFETCHED
    if last is None or last[0] != qcodes.tobytes():
        return None
    found = last[1].pop(id(codes), None)
    return found[1] if found is not None and found[0] is codes else None
