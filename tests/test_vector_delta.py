"""VectorIndex with a mapped base plus an in-memory delta, against a brute force.

Property: after any sequence of upserts (new ids, rewrites of base ids, rewrites of
delta ids, ids that were deleted), deletes and in-memory folds, the index answers
every search (unfiltered, filtered by mask or by rows, any k) exactly as a float64
brute force over the logical set {id: last vector written}; the mapped base file is
never written and never copied.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tiervault.embeddings import index as index_module
from tiervault.embeddings import vector_base, vector_math
from tiervault.embeddings.index import VectorIndex
from tiervault.embeddings.vector_math import int8_codes, quantize_int8

DIM = 16
N_BASE = 400


@pytest.fixture(scope="module")
def base_file(tmp_path_factory):
    rng = np.random.default_rng(2)
    m = rng.standard_normal((N_BASE, DIM)).astype(np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    path = tmp_path_factory.mktemp("base") / "base.f32"
    m.tofile(path)
    return path, m


def check(index: VectorIndex, truth: dict[str, np.ndarray], q: np.ndarray, k: int,
          allowed_ids: set[str] | None, how: str) -> None:
    """The answer is a correct top k of the allowed live set (ties may go either way)."""
    keys = [i for i in truth if allowed_ids is None or i in allowed_ids]
    qn = q / np.linalg.norm(q)
    true = {i: float(truth[i] @ qn) for i in keys}
    want = sorted(true.values(), reverse=True)[:k]
    allowed = None
    if allowed_ids is not None:
        rows = index.rows_for(sorted(allowed_ids))
        if how == "mask":
            allowed = np.zeros(index.row_count, dtype=bool)
            allowed[rows] = True
        else:
            allowed = rows
    ids, scores = index.search(q, k, allowed=allowed)
    assert len(ids) == len(want) == len(set(ids.tolist()))
    assert scores.dtype == np.float32
    np.testing.assert_allclose(scores, want, atol=2e-6)
    for i, s in zip(ids.tolist(), scores):
        assert i in true and abs(true[i] - s) <= 2e-6  # each id carries its own score


OPS = st.lists(st.tuples(st.sampled_from(["new", "rewrite_base", "rewrite_delta", "delete", "revive",
                                           "fold", "search"]),
                         st.integers(0, 2**31 - 1)), min_size=1, max_size=25)


# float32; int8 through SimSIMD with the codes handed over (as mapped from a cache file),
# int8 through numpy (SimSIMD switched off); float16. First pools of k rows (the default)
# and of 64.
MODES = ["float32", "int8", "int8-numpy", "float16"]


@pytest.mark.parametrize("mode", MODES)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS, fold_min=st.sampled_from([10**9, 60]), pool=st.sampled_from([1, 64]),
       gather=st.sampled_from([256, 0]))
def test_base_plus_delta_equals_brute_force(base_file, monkeypatch, mode, ops, fold_min, pool, gather) -> None:
    path, m = base_file
    monkeypatch.setattr(index_module, "FOLD_MIN_ROWS", fold_min)
    # 0: a compressed base never scores allowed rows one by one, its scan of their codes does
    monkeypatch.setattr(index_module, "_GATHER_ROWS_COMPRESSED", gather)
    monkeypatch.setattr(vector_math, "_SIMD", False if mode == "int8-numpy" else None)
    mapped = np.memmap(path, dtype=np.float32, mode="r", shape=(N_BASE, DIM))
    base_ids = [f"b{i}" for i in range(N_BASE)]
    dtype = mode.split("-")[0]
    codes = int8_codes(m) if mode == "int8" else None
    index = VectorIndex.build(base_ids, mapped, normalized=True, dtype=dtype, rescore_pool=pool,
                              codes=codes)  # type: ignore[arg-type]
    truth = {i: m[r].astype(np.float64) for r, i in enumerate(base_ids)}
    gone: list[str] = []
    counter = 0
    for kind, seed in ops:
        rng = np.random.default_rng(seed)
        in_delta = [i for i in truth if not i.startswith("b") or i in index.ids[-index.delta_rows:]]
        if kind == "new":
            batch = [f"n{counter + j}" for j in range(int(rng.integers(1, 40)))]
            counter += len(batch)
        elif kind == "rewrite_base":
            batch = [i for i in rng.choice(base_ids, 20).tolist() if i in truth]
        elif kind == "rewrite_delta":
            batch = rng.choice(in_delta, min(10, len(in_delta))).tolist() if in_delta else []
        elif kind == "revive":
            batch = gone[: int(rng.integers(1, 10))]
        if kind in ("new", "rewrite_base", "rewrite_delta", "revive") and batch:
            batch = batch + batch[:1]  # a repeated id in one batch: the last vector wins
            vecs = rng.standard_normal((len(batch), DIM)) * rng.uniform(0.5, 3.0)
            index.upsert(batch, vecs)
            for i, v in zip(batch, vecs):
                truth[i] = v / np.linalg.norm(v)
                if i in gone:
                    gone.remove(i)
        elif kind == "delete" and truth:
            victims = rng.choice(sorted(truth), min(len(truth), int(rng.integers(1, 30))), replace=False).tolist()
            assert index.remove(victims + ["never-there"]) == len(victims)
            for v in victims:
                del truth[v]
                gone.append(v)
        elif kind == "fold":
            index.fold()
            assert index.delta_rows == 0 and not index.mapped and index.dtype == dtype
        if index.needs_fold:  # what the owner does (recall folds through a file)
            index.fold()
        assert len(index) == len(truth) and set(index.ids.tolist()) == set(truth)
        q = rng.standard_normal(DIM)
        for k in (1, int(rng.integers(2, 60)), len(truth) + 5):
            check(index, truth, q, k, None, "none")
        if truth:
            live = sorted(truth)
            for fraction in (0.05, 0.6):  # the gather path and the masked full scan
                chosen = set(rng.choice(live, max(1, int(len(live) * fraction)), replace=False).tolist())
                check(index, truth, q, 25, chosen, "mask")
                check(index, truth, q, 25, chosen, "rows")
            probe = live[: 5] + ["never-there"]
            got = index.scores_for(probe, q)
            np.testing.assert_allclose(got[:-1], [truth[i] @ (q / np.linalg.norm(q)) for i in probe[:-1]],
                                       atol=2e-6)
            assert np.isnan(got[-1])
            np.testing.assert_allclose(index.vectors_for(probe[:2]), [truth[i] for i in probe[:2]], atol=2e-6)
    assert np.array_equal(np.fromfile(path, dtype=np.float32).reshape(N_BASE, DIM), m)  # never written


def test_upserts_never_copy_the_mapped_base(base_file) -> None:
    path, m = base_file
    mapped = np.memmap(path, dtype=np.float32, mode="r", shape=(N_BASE, DIM))
    index = VectorIndex.build([f"b{i}" for i in range(N_BASE)], mapped, normalized=True)
    before = index.owned_bytes
    rng = np.random.default_rng(4)
    index.upsert(["b3", "b7", "x"], rng.standard_normal((3, DIM)))
    index.remove(["b9", "x"])
    assert index.mapped and index.delta_rows == 5  # b3, b7 in the delta; b3, b7, b9 tombstoned
    assert len(index) == N_BASE - 1 and index.row_count == N_BASE + 2
    # The delta's first allocation (1,024 rows) and the tombstone mask, not a copy of the base.
    assert index.owned_bytes - before <= 1024 * DIM * 4 + 1024 * 8 + N_BASE
    assert not index.needs_fold


def test_needs_fold_bound(monkeypatch) -> None:
    rng = np.random.default_rng(1)
    index = VectorIndex.build([f"b{i}" for i in range(1000)], rng.standard_normal((1000, DIM)))
    monkeypatch.setattr(index_module, "FOLD_MIN_ROWS", 30)
    monkeypatch.setattr(index_module, "FOLD_FRACTION", 0.05)  # bound max(30, 50) = 50
    index.upsert([f"n{i}" for i in range(40)], rng.standard_normal((40, DIM)))
    index.remove([f"b{i}" for i in range(10)])
    assert index.delta_rows == 50 and not index.needs_fold
    index.remove(["b10"])
    assert index.needs_fold
    index.fold()
    assert index.delta_rows == 0 and len(index) == 1029 and index.row_count == 1029


def test_simd_and_numpy_int8_scans_agree_within_their_bounds(monkeypatch) -> None:
    rng = np.random.default_rng(6)
    m = rng.standard_normal((5000, 384)).astype(np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    codes, bounds = int8_codes(m, step=700)  # several blocks
    whole_codes, whole_scale = quantize_int8(m)
    assert np.array_equal(codes, whole_codes) and np.array_equal(bounds[0], whole_scale)
    q = rng.standard_normal(384).astype(np.float32)
    q /= np.linalg.norm(q)
    exact = m.astype(np.float64) @ q
    assert vector_math.simd_available()  # the extra is installed wherever the tests run
    simd, eps_simd = vector_math.int8_scan(codes, bounds, q)
    monkeypatch.setattr(vector_math, "_SIMD", False)
    plain, eps_plain = vector_math.int8_scan(codes, bounds, q)
    assert np.all(np.abs(simd - exact) <= eps_simd) and np.all(np.abs(plain - exact) <= eps_plain)
    assert np.all(eps_plain < eps_simd) and eps_simd.max() < 0.05  # the query's quantization adds


def test_int8_scans_keep_the_reference_count_of_none() -> None:
    """SimSIMD 6.5's ``cdist(..., out=buf)`` returns None without taking a reference:
    thousands of scans through it made a 1M hybrid bench process die in
    ``none_dealloc``. A scan must leave None's count where it was."""
    rng = np.random.default_rng(12)
    m = rng.standard_normal((200, 64)).astype(np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    codes, bounds = int8_codes(m)
    before = sys.getrefcount(None)
    for _ in range(3000):
        vector_math.int8_scan(codes, bounds, m[7])
    assert abs(sys.getrefcount(None) - before) < 100


def test_a_compressed_mapped_base_reads_float32_rows_with_pread(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(vector_base, "PREAD_ABOVE_BYTES", 0)  # every file counts as large
    rng = np.random.default_rng(8)
    m = rng.standard_normal((300, DIM)).astype(np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    path = tmp_path / "m.npy"
    np.save(path, m)
    mapped = np.load(path, mmap_mode="r")
    ids = [f"r{i}" for i in range(300)]
    index = VectorIndex.build(ids, mapped, normalized=True, dtype="int8", codes=int8_codes(m))
    q = rng.standard_normal(DIM)
    want = VectorIndex.build(ids, m, dtype="float32", normalized=True).search(q, 7)
    got = index.search(q, 7)
    assert got[0].tolist() == want[0].tolist() and np.array_equal(got[1], want[1])  # bit for bit
    monkeypatch.setattr(index_module, "_GATHER_ROWS_COMPRESSED", 0)  # not one by one:
    some = index.rows_for(ids[::9])  # the scan of those 34 rows' codes, then rescoring
    got = index.search(q, 7, allowed=some)
    want = VectorIndex.build(ids, m, dtype="float32", normalized=True).search(q, 7, allowed=some)
    assert got[0].tolist() == want[0].tolist() and np.array_equal(got[1], want[1])
    np.testing.assert_array_equal(index.vectors_for(["r5", "r299"]), m[[5, 299]])
    snap_ids, snap = index.snapshot()
    assert snap_ids.tolist() == ids and np.array_equal(snap, m)
    assert resident_kb(path) == 0  # no page of the float32 file was read through the mapping


def test_a_small_compressed_mapped_base_reads_float32_rows_through_its_mapping(tmp_path, monkeypatch) -> None:
    """Up to ``PREAD_ABOVE_BYTES`` (128 MiB since issue 16 session 18), no row is read
    with a system call; the answers are the same, bit for bit."""
    monkeypatch.setattr(vector_base, "PREAD_ABOVE_BYTES", 128 << 20)
    rng = np.random.default_rng(9)
    m = rng.standard_normal((300, DIM)).astype(np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    path = tmp_path / "m.npy"
    np.save(path, m)
    assert m.nbytes <= vector_base.PREAD_ABOVE_BYTES

    def no_pread(*args, **kwargs):
        raise AssertionError("a small file's row was read with a system call")

    monkeypatch.setattr(os, "pread", no_pread)
    index = VectorIndex.build([f"r{i}" for i in range(300)], np.load(path, mmap_mode="r"),
                              normalized=True, dtype="int8", codes=int8_codes(m))
    exact = VectorIndex.build([f"r{i}" for i in range(300)], m, dtype="float32", normalized=True)
    for _ in range(5):
        q = rng.standard_normal(DIM)
        got, want = index.search(q, 7), exact.search(q, 7)
        assert got[0].tolist() == want[0].tolist() and np.array_equal(got[1], want[1])  # bit for bit
    np.testing.assert_array_equal(index.vectors_for(["r5", "r299"]), m[[5, 299]])
    assert resident_kb(path) > 0  # read through the mapping


def resident_kb(path) -> int:
    """Resident KB of this process's mappings of ``path`` (/proc/self/smaps)."""
    total, current = 0, None
    with open("/proc/self/smaps", encoding="utf-8") as fh:
        for line in fh:
            head = line.split()
            if "-" in head[0] and len(head) >= 5 and ":" in head[3]:  # a mapping's first line
                current = head[5] if len(head) > 5 else None
            elif head[0] == "Rss:" and current == str(path):
                total += int(head[1])
    return total


@pytest.mark.parametrize("dtype", ["float32", "int8", "float16"])
def test_an_unfiltered_search_scores_the_delta_as_its_rows_one_by_one(base_file, dtype) -> None:
    """An unfiltered search scores every delta row through the delta's view (no copy of its
    rows a query); each delta hit's score is, bit for bit, the exact cosine of that id's own
    row (``scores_for``, which gathers the rows)."""
    path, m = base_file
    mapped = np.memmap(path, dtype=np.float32, mode="r", shape=(N_BASE, DIM))
    codes = int8_codes(m) if dtype == "int8" else None
    index = VectorIndex.build([f"b{i}" for i in range(N_BASE)], mapped, normalized=True, dtype=dtype,
                              codes=codes)  # type: ignore[arg-type]
    rng = np.random.default_rng(11)
    fresh = [f"n{i}" for i in range(150)]
    index.upsert(fresh + ["b5", "b9"], rng.standard_normal((152, DIM)))
    assert index.delta_rows >= 152 and index.mapped
    for _ in range(5):
        q = rng.standard_normal(DIM)
        ids, scores = index.search(q, index.row_count)
        delta = {"b5", "b9", *fresh}
        got = {i: s for i, s in zip(ids.tolist(), scores.tolist()) if i in delta}
        assert set(got) == delta  # every delta row answered
        want = index.scores_for(sorted(delta), q)
        assert [got[i] for i in sorted(delta)] == want.tolist()  # the same float32 bits
