"""A filtered int8 scan of a few rows reads their products off the query's prefetch
(embeddings/vector_math.py int8_approx_at) when the scan pool has written it, else
gathers and scans those rows' codes itself: the same answers either way."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from tiervault.embeddings import dot_job, vector_base, vector_math
from tiervault.embeddings.index import VectorIndex

pytestmark = pytest.mark.skipif(not vector_math.simd_available(),
                                reason="needs the simd extra (CI installs it)")


def _index_and_rows(seed: int) -> tuple[VectorIndex, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    n, d = 4000, 48
    index = VectorIndex.build([f"e{i}" for i in range(n)], rng.standard_normal((n, d)).astype(np.float32),
                              dtype="int8", threads=2)
    rows = np.sort(rng.choice(n, 600, replace=False)).astype(np.int64)  # > the gather limit, < n / 4
    q = rng.standard_normal(d).astype(np.float32)
    return index, rows, q


def _recording(monkeypatch) -> tuple[list[int], list[dot_job.DotJob], list[dot_job.DotJob]]:
    scanned: list[int] = []  # rows gathered and scanned by the caller
    real_scan = vector_base.int8_scan
    monkeypatch.setattr(vector_base, "int8_scan",
                        lambda codes, bounds, q, threads=1: scanned.append(codes.shape[0]) or
                        real_scan(codes, bounds, q, threads))
    started: list[dot_job.DotJob] = []
    real_start = dot_job.DotJob.start
    monkeypatch.setattr(dot_job.DotJob, "start", lambda self, helpers: started.append(self) or
                        real_start(self, helpers))
    stopped: list[dot_job.DotJob] = []
    real_stop = dot_job.DotJob.stop
    monkeypatch.setattr(dot_job.DotJob, "stop", lambda self: stopped.append(self) or real_stop(self))
    return scanned, started, stopped


def test_a_finished_prefetch_gives_the_rows_products(monkeypatch) -> None:
    index, rows, q = _index_and_rows(7)
    want = index.search(q, 20, allowed=rows)
    scanned, started, stopped = _recording(monkeypatch)
    assert index.search(q, 20, allowed=rows)[0].tolist() == want[0].tolist()
    assert sum(scanned) == rows.size and not started  # no prefetch: the rows' codes scanned
    scanned.clear()
    unit = vector_math.unit_query(q, index.dim)
    assert vector_math.prefetch_int8(unit, [index.prefetch_codes()])
    deadline = time.monotonic() + 30
    while not started[0].ready():  # the pool writes the products meanwhile
        assert time.monotonic() < deadline
        time.sleep(0.001)
    got = index.search(q, 20, allowed=rows)
    assert got[0].tolist() == want[0].tolist() and got[1].tobytes() == want[1].tobytes()
    assert not scanned and not stopped  # read off the prefetch
    assert dot_job.prefetched(vector_math.query_code(unit)[0], index.prefetch_codes()) is None  # taken


def test_an_unfinished_prefetch_is_stopped_and_the_rows_scanned(monkeypatch) -> None:
    index, rows, q = _index_and_rows(8)
    want = index.search(q, 20, allowed=rows)
    scanned, started, stopped = _recording(monkeypatch)
    pool, held = dot_job.scan_pool(), threading.Semaphore(0)
    release = threading.Event()

    def block() -> None:
        held.release()
        release.wait(30)

    for _ in range(dot_job.pool_threads()):  # the pool busy: the prefetch cannot begin
        pool.submit(block)
    try:
        for _ in range(dot_job.pool_threads()):
            assert held.acquire(timeout=10)
        unit = vector_math.unit_query(q, index.dim)
        assert vector_math.prefetch_int8(unit, [index.prefetch_codes()])
        assert not started[0].ready()
        got = index.search(q, 20, allowed=rows)
    finally:
        release.set()
    assert got[0].tolist() == want[0].tolist() and got[1].tobytes() == want[1].tobytes()
    assert sum(scanned) == rows.size and stopped == started  # its own scan; the job stopped
