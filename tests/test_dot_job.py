"""The scan pool's jobs (embeddings/dot_job.py): who computes which base of a prefetch."""

from __future__ import annotations

import threading

import numpy as np

from tiervault.embeddings import dot_job


class _RecordingSimd:
    """SimSIMD's ``cdist`` as far as DotJob calls it: records which thread scanned how
    many rows, and holds the scan of ``hold_rows`` rows until ``hold`` is set."""

    def __init__(self, hold_rows: int) -> None:
        self.calls: list[tuple[str, int]] = []
        self.hold_rows, self.hold = hold_rows, threading.Event()

    def cdist(self, qcodes, codes, metric: str, out_dtype: str):
        assert metric == "dot" and out_dtype == "float32"
        if codes.shape[0] == self.hold_rows:
            assert self.hold.wait(30)
        self.calls.append((threading.current_thread().name, codes.shape[0]))
        return (codes.astype(np.int32) @ qcodes[0].astype(np.int32)).astype(np.float32)[None, :]


def test_the_pool_takes_a_prefetch_from_its_last_base_and_the_caller_from_its_first() -> None:
    """The caller names its bases in the order it will ask for them. The pool's thread
    starts with the last; a caller that comes before the pool is done scans its first
    bases itself instead of waiting behind the pool's queue, and takes the pool's work
    for the last. The numbers are the products whoever computed them."""
    rng = np.random.default_rng(5)
    sizes = (30, 50, 70)  # asked in this order
    bases = [rng.integers(-127, 128, (n, 8), dtype=np.int8) for n in sizes]
    qcodes = rng.integers(-127, 128, (1, 8), dtype=np.int8)
    simd = _RecordingSimd(hold_rows=sizes[-1])
    pool = dot_job.scan_pool()
    gate, held, spare = threading.Event(), threading.Semaphore(0), threading.Event()

    def block(until: threading.Event) -> None:
        held.release()
        until.wait(30)

    # one pool thread serves the prefetch (the others, on machines with more CPUs, held)
    pool.submit(block, gate)
    for _ in range(dot_job.pool_threads() - 1):
        pool.submit(block, spare)
    try:
        for _ in range(dot_job.pool_threads()):
            assert held.acquire(timeout=10)
        dot_job.prefetch(simd, qcodes, [(b, b.shape[0]) for b in bases])
        jobs = [dot_job.prefetched(qcodes, b) for b in bases]
        assert all(j is not None for j in jobs)
        first = jobs[0].result()  # the pool is busy: the caller scans its first base itself
        gate.set()
        assert jobs[-1].started.wait(10), "the pool's thread did not begin with the last base"
        assert not jobs[1].started.is_set()  # it is inside the last base's scan (held)
        middle = jobs[1].result()
        simd.hold.set()
        last = jobs[-1].result()
    finally:
        gate.set()
        simd.hold.set()
        spare.set()
    me = threading.current_thread().name
    assert simd.calls[:2] == [(me, sizes[0]), (me, sizes[1])]
    assert simd.calls[2][1] == sizes[2] and simd.calls[2][0] != me
    for got, b in zip((first, middle, last), bases):
        assert got.tolist() == (b.astype(np.int32) @ qcodes[0].astype(np.int32)).tolist()
