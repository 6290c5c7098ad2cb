"""VectorIndex against a plain NumPy reference (exact top-k) on random data."""

from __future__ import annotations

import numpy as np
import pytest

from tiervault.embeddings.index import (
    VectorIndex,
    cosine_scores,
    float16_scores,
    int8_scores,
    l2_normalize,
    quantize_int8,
    top_k,
)
from tiervault.embeddings import dot_job, vector_math
from tiervault.errors import ValidationError

DTYPES = ["float32", "int8", "float16"]


def unit(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    m = rng.standard_normal((n, d))
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def reference(vectors: dict[str, np.ndarray], q: np.ndarray, k: int, allowed: set[str] | None = None):
    """Exact top-k by float64 cosine over a plain dict: the ground truth."""
    keys = [i for i in vectors if allowed is None or i in allowed]
    if not keys:
        return [], np.empty(0)
    m = np.array([vectors[i] for i in keys], dtype=np.float64)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    qn = q / np.linalg.norm(q)
    s = m @ qn
    order = np.argsort(-s, kind="stable")[:k]
    return [keys[i] for i in order], s[order]


def assert_same(got: tuple[np.ndarray, np.ndarray], want: tuple[list[str], np.ndarray]) -> None:
    ids, scores = got
    assert ids.tolist() == want[0]
    assert scores.dtype == np.float32
    np.testing.assert_allclose(scores, want[1], atol=2e-6)


@pytest.fixture(scope="module")
def data() -> tuple[list[str], np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    n, d = 20_000, 384
    # Deliberately not unit length: the index normalises.
    m = (rng.standard_normal((n, d)) * rng.uniform(0.5, 3.0, size=(n, 1))).astype(np.float32)
    qs = rng.standard_normal((8, d)).astype(np.float32)
    return [f"e{i:05d}" for i in range(n)], m, qs


@pytest.mark.parametrize("dtype", DTYPES)
def test_search_equals_numpy_reference(data, dtype: str) -> None:
    ids, m, qs = data
    index = VectorIndex.build(ids, m, dtype=dtype, model="m", tier="project")  # type: ignore[arg-type]
    truth = dict(zip(ids, m.astype(np.float64)))
    assert len(index) == len(ids) and index.dim == 384
    for q in qs:
        assert_same(index.search(q, 50), reference(truth, q, 50))
    assert_same(index.search(qs[0], 1), reference(truth, qs[0], 1))
    assert index.search(qs[0], 0)[0].size == 0


@pytest.mark.parametrize("dtype", DTYPES)
def test_prefiltered_search_returns_best_of_the_allowed(data, dtype: str) -> None:
    ids, m, qs = data
    rng = np.random.default_rng(3)
    index = VectorIndex.build(ids, m, dtype=dtype)  # type: ignore[arg-type]
    truth = dict(zip(ids, m.astype(np.float64)))
    for fraction in (0.01, 0.5):  # gather path and full-scan-with-mask path
        chosen = sorted(rng.choice(len(ids), int(len(ids) * fraction), replace=False).tolist())
        allowed_ids = {ids[i] for i in chosen}
        rows = index.rows_for(sorted(allowed_ids))
        mask = np.zeros(len(index), dtype=bool)
        mask[rows] = True
        for q in qs[:3]:
            want = reference(truth, q, 50, allowed_ids)
            assert len(want[0]) == 50  # a 1% filter (200 rows) still yields a full page
            assert_same(index.search(q, 50, allowed=rows), want)
            assert_same(index.search(q, 50, allowed=mask), want)
    few = index.rows_for(["e00003", "e00004", "nope"])
    assert few.tolist() == [3, 4]
    got_ids, _ = index.search(qs[0], 10, allowed=few)
    assert sorted(got_ids.tolist()) == ["e00003", "e00004"]  # k larger than the filter
    assert index.search(qs[0], 10, allowed=np.array([], dtype=np.int64))[0].size == 0
    assert index.search(qs[0], 10, allowed=np.zeros(len(index), dtype=bool))[0].size == 0


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_kept_plan_is_used_only_by_its_index_at_its_version(dtype: str) -> None:
    """scan(plan=index.plan(allowed)) answers as scan(allowed=...); a plan made before an
    update, or by another index, is not used (the rows it names moved)."""
    rng = np.random.default_rng(19)
    d, n = 48, 3000
    m = unit(rng, n, d).astype(np.float32)
    ids = [f"p{i}" for i in range(n)]
    truth = dict(zip(ids, m.astype(np.float64)))
    index = VectorIndex.build(ids, m, dtype=dtype, normalized=True)  # type: ignore[arg-type]
    keep = {ids[i] for i in range(n) if i % 5}  # a mask scanned in full (80% pass)
    mask = np.zeros(index.row_count, dtype=bool)
    mask[index.rows_for(sorted(keep))] = True
    plan = index.plan(mask)
    assert plan.excluded is not None and plan.base_count == len(keep)

    def answer(q: np.ndarray, allowed: np.ndarray, plan=None) -> tuple[np.ndarray, np.ndarray]:
        scan = index.scan(q, 20, allowed=allowed, plan=plan)
        scan.complete()
        rows, scores = scan.best()
        return index.ids_at(rows), scores

    q = rng.standard_normal(d).astype(np.float32)
    assert_same(answer(q, mask, plan), reference(truth, q, 20, keep))
    # An update: row p1's vector moves to the delta (its base row dies), p2 leaves.
    index.upsert(["p1"], q[None, :])
    index.remove(["p2"])
    truth["p1"] = q.astype(np.float64)
    del truth["p2"]
    keep -= {"p2"}
    mask = np.zeros(index.row_count, dtype=bool)
    mask[index.rows_for(sorted(keep))] = True
    got = answer(q, mask, plan)  # the old plan would miss p1's new row and keep p2's old one
    assert got[0][0] == "p1"
    assert_same(got, reference(truth, q, 20, keep))
    other = VectorIndex.build(ids, m, dtype=dtype, normalized=True)  # type: ignore[arg-type]
    other.upsert(["p1"], q[None, :])
    other.remove(["p2"])
    assert other.version == index.version
    stranger = other.plan(np.ones(other.row_count, dtype=bool))  # same version, all rows
    assert_same(answer(q, mask, stranger), reference(truth, q, 20, keep))


@pytest.mark.parametrize("dtype", DTYPES)
def test_incremental_updates_match_reference(dtype: str) -> None:
    rng = np.random.default_rng(11)
    d = 32
    start = unit(rng, 300, d)
    truth = {f"a{i}": start[i] for i in range(300)}
    index = VectorIndex.build(list(truth), start, dtype=dtype, normalized=True)  # type: ignore[arg-type]
    counter = 0
    for step in range(40):
        if step % 3 == 2 and truth:
            victims = rng.choice(sorted(truth), size=min(len(truth), int(rng.integers(1, 40))), replace=False).tolist()
            assert index.remove(victims + ["never-there"]) == len(victims)
            for v in victims:
                del truth[v]
        else:
            # New ids plus overwrites of existing ones, with a duplicate in the batch.
            new_ids = [f"n{counter + j}" for j in range(int(rng.integers(1, 120)))]
            counter += len(new_ids)
            old = rng.choice(sorted(truth), size=min(5, len(truth)), replace=False).tolist() if truth else []
            batch = new_ids + old + new_ids[:1]
            vecs = rng.standard_normal((len(batch), d)) * 4.0
            index.upsert(batch, vecs)
            for i, vid in enumerate(batch):
                truth[vid] = vecs[i]  # the later duplicate wins, as in the index
        assert len(index) == len(truth)
        assert set(index.ids.tolist()) == set(truth)
        q = rng.standard_normal(d)
        assert_same(index.search(q, 25), reference(truth, q, 25))
    snap_ids, snap_m = index.snapshot()
    again = VectorIndex.build(snap_ids, snap_m, dtype=dtype, normalized=True)  # type: ignore[arg-type]
    q = rng.standard_normal(d)
    assert_same(again.search(q, 25), reference(truth, q, 25))
    index.remove(list(truth)[:3])
    assert len(snap_ids) == len(truth) == len(snap_m)  # a copy: unaffected by later updates
    assert index.capacity >= len(index)
    assert index.capacity <= max(len(index) * 1.25, len(index) + 1024 + 300)  # bounded slack


def test_scores_for_ids_and_rows(data) -> None:
    ids, m, qs = data
    index = VectorIndex.build(ids[:1000], m[:1000])
    q = qs[0]
    want = l2_normalize(m[[5, 17, 3]]) @ (q / np.linalg.norm(q))
    got = index.scores_for(["e00005", "e00017", "missing", "e00003"], q)
    np.testing.assert_allclose(got[[0, 1, 3]], want, atol=1e-6)
    assert np.isnan(got[2])  # "no vector" is not "similarity 0"
    np.testing.assert_allclose(index.scores_for(np.array([5, 17, 3]), q), want, atol=1e-6)
    with pytest.raises(ValidationError, match="outside"):
        index.scores_for(np.array([1000]), q)
    assert index.scores_for([], q).shape == (0,)


def test_k_larger_than_index_and_zero_query() -> None:
    rng = np.random.default_rng(0)
    m = unit(rng, 7, 16)
    index = VectorIndex.build([str(i) for i in range(7)], m)
    q = rng.standard_normal(16)
    got_ids, got_scores = index.search(q, 100)
    assert len(got_ids) == 7 and np.all(np.diff(got_scores) <= 0)
    assert index.search(np.zeros(16), 5)[0].size == 0
    empty = VectorIndex(16)
    assert empty.search(q, 5)[0].size == 0
    empty.upsert(["x"], q)  # a single 1-D vector is accepted
    assert empty.search(q, 5)[0].tolist() == ["x"]
    np.testing.assert_allclose(empty.search(q, 5)[1], [1.0], atol=1e-6)


def test_build_from_readonly_memmap_copies_on_first_write(tmp_path) -> None:
    rng = np.random.default_rng(5)
    m = unit(rng, 500, 24).astype(np.float32)
    path = tmp_path / "vectors.f32"
    m.tofile(path)
    mapped = np.memmap(path, dtype=np.float32, mode="r", shape=(500, 24))
    index = VectorIndex.build([f"v{i}" for i in range(500)], mapped, normalized=True)
    truth = {f"v{i}": m[i].astype(np.float64) for i in range(500)}
    q = rng.standard_normal(24)
    assert_same(index.search(q, 10), reference(truth, q, 10))
    fresh = rng.standard_normal(24)
    index.remove(["v0"])
    index.upsert(["new"], fresh)
    assert np.array_equal(np.fromfile(path, dtype=np.float32).reshape(500, 24), m)  # file untouched
    del truth["v0"]
    truth["new"] = fresh
    assert_same(index.search(q, 10), reference(truth, q, 10))


def test_validation_errors() -> None:
    index = VectorIndex(8, model="text-embedding-3-small")
    with pytest.raises(ValidationError, match="dimension 4.*holds 8"):
        index.search(np.ones(4), 3)
    with pytest.raises(ValidationError, match=r"shape \(n, 8\)"):
        index.upsert(["a"], np.ones((1, 4)))
    with pytest.raises(ValidationError, match="2 ids for 1 vectors"):
        index.upsert(["a", "b"], np.ones((1, 8)))
    with pytest.raises(ValidationError, match="NaN"):
        index.upsert(["a"], np.full((1, 8), np.nan))
    with pytest.raises(ValidationError, match="duplicates"):
        VectorIndex.build(["a", "a"], np.ones((2, 8)))
    with pytest.raises(ValidationError, match="duplicates"):  # a trusted base too (one NumPy pass)
        VectorIndex.build(["a", "b", "a"], np.eye(3, dtype=np.float32), normalized=True)
    with pytest.raises(ValidationError, match="2 ids for 3 rows"):
        VectorIndex.build(["a", "b"], np.ones((3, 8)))
    index.upsert(["a", "b"], np.eye(8)[:2])
    with pytest.raises(ValidationError, match="length 2"):
        index.search(np.ones(8), 1, allowed=np.ones(5, dtype=bool))
    with pytest.raises(ValidationError, match="row numbers"):
        index.search(np.ones(8), 1, allowed=np.array([0, 2]))
    with pytest.raises(ValidationError, match="dtype"):
        VectorIndex(8, dtype="bfloat16")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="k"):
        index.search(np.ones(8), -1)


def test_pure_functions() -> None:
    rng = np.random.default_rng(2)
    m = unit(rng, 200, 64).astype(np.float32)
    codes, scale = quantize_int8(m)
    assert codes.dtype == np.int8 and np.abs(codes).max() == 127
    assert np.all(np.abs(codes * scale[:, None] - m) <= scale[:, None] / 2 + 1e-7)
    zc, zs = quantize_int8(np.zeros((2, 4), dtype=np.float32))
    assert not zc.any() and not zs.any()
    s = np.array([0.1, 0.9, 0.5, 0.9, -1.0], dtype=np.float32)
    assert top_k(s, 3).tolist() == [1, 3, 2]  # tie broken by position
    assert top_k(s, 10).tolist() == [1, 3, 2, 0, 4]
    assert top_k(s, 0).size == 0
    q = m[0]
    np.testing.assert_allclose(cosine_scores(m, q)[0], 1.0, atol=1e-6)
    big = unit(rng, 70_000, 16).astype(np.float32)  # enough rows for the threaded scan
    bc, bs = quantize_int8(big)
    qq = big[123]
    one, two = int8_scores(bc, bs, qq, threads=1), int8_scores(bc, bs, qq, threads=2)
    np.testing.assert_array_equal(one, two)
    np.testing.assert_allclose(one, big @ qq, atol=0.02)
    np.testing.assert_allclose(float16_scores(big.astype(np.float16), qq, threads=2), big @ qq, atol=2e-3)
    z = l2_normalize(np.array([[3.0, 4.0], [0.0, 0.0]]))
    np.testing.assert_allclose(z, [[0.6, 0.8], [0.0, 0.0]])


def test_the_last_querys_derived_values_are_kept_by_its_bytes() -> None:
    """unit_query and int8_approx keep the last query's unit vector and int8 code: the same
    bytes again give the very values computed for them (read-only), other bytes new ones."""
    rng = np.random.default_rng(8)
    m = unit(rng, 500, 64).astype(np.float32)
    codes, scale = quantize_int8(m)
    q1, q2 = (rng.standard_normal(64).astype(np.float32) for _ in range(2))

    def fresh(q: np.ndarray) -> np.ndarray:
        return q / np.float32(np.linalg.norm(q))

    u1 = vector_math.unit_query(q1, 64)
    assert not u1.flags.writeable and np.array_equal(u1, fresh(q1))
    assert vector_math.unit_query(q1.copy(), 64) is u1  # same bytes, another array
    u2 = vector_math.unit_query(q2, 64)
    assert np.array_equal(u2, fresh(q2)) and not np.array_equal(u1, u2)
    with pytest.raises(ValueError):
        u2[0] = 1.0  # shared by every caller: never written
    with pytest.raises(ValidationError):
        vector_math.unit_query(q2, 32)  # the dimension is checked before the kept value
    zero = vector_math.unit_query(np.zeros(64, dtype=np.float32), 64)
    assert not zero.any()
    first = [vector_math.int8_approx(codes, scale, u) for u in (u1, u2)]
    again = [vector_math.int8_approx(codes, scale, u.copy()) for u in (u2, u1)][::-1]
    for (s_a, qc_a), (s_b, qc_b) in zip(first, again):
        assert np.array_equal(s_a, s_b) and qc_a == qc_b
    assert first[0][1] != first[1][1]
    np.testing.assert_allclose(first[0][0], m @ u1, atol=0.05)


def test_top_k_of_a_long_array_cut_by_a_sample_is_exact() -> None:
    """Arrays of 8,192+ scores are first cut at a threshold read off every 32nd score;
    whatever their order, the answer is the partition's (or it falls back to it)."""
    rng = np.random.default_rng(4)
    n = 40_000
    shuffled = rng.standard_normal(n).astype(np.float32)
    cases = {
        "random": shuffled,
        "ascending": np.sort(shuffled),
        "descending": np.sort(shuffled)[::-1].copy(),
        # the sample sees only the small ones: fewer than k reach its threshold
        "against the sample": np.where(np.arange(n) % 32 == 0, np.float32(-5), shuffled),
        "mostly excluded": np.where(rng.random(n) < 0.999, np.float32(-np.inf), shuffled),
    }
    for name, s in cases.items():
        for k in (1, 10, 30, 300):
            got = top_k(s, k)
            want = np.argsort(-s.astype(np.float64), kind="stable")[:k]
            assert np.array_equal(s[got], s[want]), (name, k)  # the k largest, best first
            finite = np.isfinite(s[want])
            assert np.array_equal(got[finite], want[finite]), (name, k)  # no ties among these
    ties = np.zeros(n, dtype=np.float32)
    ties[[5, 17, 40_000 - 1]] = 1.0
    assert top_k(ties, 3).tolist() == [5, 17, n - 1]


def test_int8_bound_holds_and_is_tighter_for_sparse_queries() -> None:
    """The query's quantization term of int8_error is the smaller of its L1 form
    (``||a_i c_i||_1 b / 2``) and its L2 form (``(1 + a_i sqrt(d) / 2) ||q - b r||_2``):
    every row's error stays within it, for dense and sparse (hash embedder-like) rows
    and queries, and for sparse queries it is well below the L1-only bound."""
    rng = np.random.default_rng(9)
    d = 384

    def sparse(n: int, nnz: int) -> np.ndarray:
        m = np.zeros((n, d), dtype=np.float32)
        for row in m:
            row[rng.choice(d, nnz, replace=False)] = rng.choice([-1.0, 1.0], nnz) * rng.random(nnz)
        return m / np.linalg.norm(m, axis=1, keepdims=True)

    for rows in (unit(rng, 3000, d).astype(np.float32), sparse(3000, 50)):
        codes, bounds = vector_math.int8_codes(rows)
        for q in (unit(rng, 1, d)[0].astype(np.float32), sparse(1, 12)[0]):
            approx, qc = vector_math.int8_approx(codes, bounds[0], q)
            eps = vector_math.int8_error(bounds[0], bounds[1], qc)
            exact = rows.astype(np.float64) @ q.astype(np.float64)
            assert np.all(np.abs(approx - exact) <= eps)
            l1_only = bounds[0] * (qc.l1 / 2) + bounds[1] * (qc.b / 2) + 1e-4
            assert np.all(eps <= l1_only + 1e-7)
            cap = vector_math.int8_error(float(bounds[0].max()), float(bounds[1].max()), qc)
            assert np.all(eps <= cap)  # increasing in a_i and l1_i: the largest bound all
    q = sparse(1, 12)[0]
    rows = sparse(3000, 50)
    codes, bounds = vector_math.int8_codes(rows)
    _, qc = vector_math.int8_approx(codes, bounds[0], q)
    eps = vector_math.int8_error(bounds[0], bounds[1], qc)
    l1_only = bounds[0] * (qc.l1 / 2) + bounds[1] * (qc.b / 2) + 1e-4
    assert np.median(eps) < 0.75 * np.median(l1_only)


@pytest.mark.skipif(not vector_math.simd_available(), reason="needs the simd extra (CI installs it)")
@pytest.mark.parametrize("rows", [7 * 512, 7 * 512 + 1, 8 * 512 + 300, 40 * 512 + 17])
def test_a_large_int8_scan_split_over_threads_gives_the_same_numbers(monkeypatch, rows: int) -> None:
    """The claims of a split scan (dot_job.DotJob) cover every row once, in place: the
    scores equal one SimSIMD call's bit for bit, below and above the split size, with a
    last claim short or whole."""
    monkeypatch.setattr(dot_job, "CLAIM_ROWS", 512)
    monkeypatch.setattr(vector_math, "_MIN_ROWS_TO_SPLIT", 8 * 512)
    rng = np.random.default_rng(rows)
    m = vector_math.l2_normalize(rng.standard_normal((rows, 48)).astype(np.float32))
    codes, bounds = vector_math.int8_codes(m)
    calls: list[int] = []
    real = dot_job.DotJob.result
    monkeypatch.setattr(dot_job.DotJob, "result", lambda self: calls.append(1) or real(self))
    for seed in range(3):
        q = rng.standard_normal(48).astype(np.float32)
        q /= np.float32(np.linalg.norm(q))
        one, qc1 = vector_math.int8_approx(codes, bounds[0], q, threads=1)
        two, qc2 = vector_math.int8_approx(codes, bounds[0], q, threads=2)
        assert one.tobytes() == two.tobytes() and qc1 == qc2
    assert len(calls) == (3 if rows >= 8 * 512 else 0)


@pytest.mark.skipif(not vector_math.simd_available(), reason="needs the simd extra (CI installs it)")
def test_a_split_scan_does_not_wait_for_a_pool_thread_that_never_started(monkeypatch) -> None:
    """With the pool's only thread busy elsewhere, the caller claims every chunk itself
    and returns (the queued helper is cancelled, not awaited): the same numbers."""
    import threading

    monkeypatch.setattr(dot_job, "CLAIM_ROWS", 256)
    monkeypatch.setattr(vector_math, "_MIN_ROWS_TO_SPLIT", 256)
    rng = np.random.default_rng(5)
    m = vector_math.l2_normalize(rng.standard_normal((5000, 32)).astype(np.float32))
    codes, bounds = vector_math.int8_codes(m)
    q = rng.standard_normal(32).astype(np.float32)
    q /= np.float32(np.linalg.norm(q))
    pool = dot_job.scan_pool()
    release, started = threading.Event(), threading.Semaphore(0)

    def block() -> None:
        started.release()
        release.wait(30)

    for _ in range(dot_job.pool_threads()):
        pool.submit(block)
    try:
        for _ in range(dot_job.pool_threads()):
            assert started.acquire(timeout=10)
        done = threading.Event()
        got: list[np.ndarray] = []
        worker = threading.Thread(target=lambda: (got.append(
            vector_math.int8_approx(codes, bounds[0], q, threads=2)[0]), done.set()))
        worker.start()
        assert done.wait(10), "the split scan waited for a pool thread that never started"
        assert got[0].tobytes() == vector_math.int8_approx(codes, bounds[0], q, threads=1)[0].tobytes()
    finally:
        release.set()


@pytest.mark.skipif(not vector_math.simd_available(), reason="needs the simd extra (CI installs it)")
def test_a_prefetched_scan_is_taken_once_by_its_query_and_codes_only(monkeypatch) -> None:
    """prefetch_int8 starts each base's products on the scan pool; int8_approx of the same
    query over the very same codes takes them (once), and the numbers are those of a
    scan of its own. Another query, another array holding equal codes, or a second call
    computes its own; a new prefetch stops the old jobs."""
    import simsimd

    rng = np.random.default_rng(11)
    bases = [vector_math.int8_codes(vector_math.l2_normalize(
        rng.standard_normal((n, 40)).astype(np.float32))) for n in (900, 3000)]
    q1, q2 = (vector_math.unit_query(rng.standard_normal(40).astype(np.float32), 40) for _ in range(2))
    plain = {(i, j): vector_math.int8_approx(c, b[0], q, threads=1)[0].tobytes()
             for i, (c, b) in enumerate(bases) for j, q in enumerate((q1, q2))}
    taken: list[int] = []
    real = dot_job.DotJob.result
    monkeypatch.setattr(dot_job.DotJob, "result", lambda self: taken.append(self.codes.shape[0]) or real(self))
    assert vector_math.prefetch_int8(q1, [c for c, _ in bases])
    for i, (c, b) in enumerate(bases):
        assert vector_math.int8_approx(c, b[0], q1, threads=1)[0].tobytes() == plain[(i, 0)]
    assert taken == [900, 3000]
    c, b = bases[0]
    assert vector_math.int8_approx(c, b[0], q1, threads=1)[0].tobytes() == plain[(0, 0)]
    assert vector_math.int8_approx(c.copy(), b[0], q1, threads=1)[0].tobytes() == plain[(0, 0)]
    assert vector_math.int8_approx(c, b[0], q2, threads=1)[0].tobytes() == plain[(0, 1)]
    assert taken == [900, 3000]  # none of those three was a prefetched job
    stopped: list[dot_job.DotJob] = []
    real_stop = dot_job.DotJob.stop
    monkeypatch.setattr(dot_job.DotJob, "stop", lambda self: stopped.append(self) or real_stop(self))
    assert vector_math.prefetch_int8(q1, [c, bases[1][0]])
    mine = dot_job.prefetched(vector_math.query_code(q1)[0], c)  # taken: its caller's now
    assert mine is not None and dot_job.prefetched(vector_math.query_code(q1)[0], c) is None
    assert vector_math.prefetch_int8(q2, [c])
    assert [j.codes is bases[1][0] for j in stopped] == [True]  # the job no one took
    raw = simsimd.cdist(vector_math.query_code(q1)[0], c, metric="dot", out_dtype="float32")
    assert mine.result().tobytes() == np.asarray(raw)[0].tobytes()
    assert not vector_math.prefetch_int8(q2, [c[:0]])  # nothing to start


@pytest.mark.skipif(not vector_math.simd_available(), reason="needs the simd extra (CI installs it)")
def test_a_stopped_job_still_answers_its_caller_whole(monkeypatch) -> None:
    """stop() only keeps pool threads from claiming more: result() claims the rest."""
    import simsimd

    monkeypatch.setattr(dot_job, "CLAIM_ROWS", 64)
    rng = np.random.default_rng(3)
    codes, bounds = vector_math.int8_codes(vector_math.l2_normalize(
        rng.standard_normal((1000, 16)).astype(np.float32)))
    q = vector_math.unit_query(rng.standard_normal(16).astype(np.float32), 16)
    qcodes = vector_math.query_code(q)[0]
    job = dot_job.DotJob(simsimd, qcodes, codes)
    job.stop()
    job.start(1)
    want = np.asarray(simsimd.cdist(qcodes, codes, metric="dot", out_dtype="float32"))[0]
    assert job.result().tobytes() == want.tobytes()


@pytest.mark.skipif(not vector_math.simd_available(), reason="needs the simd extra (CI installs it)")
def test_only_bases_below_the_split_size_are_prefetched(monkeypatch) -> None:
    """A base of _MIN_ROWS_TO_SPLIT rows or more is split when its scan comes, not
    prefetched (the prefetch of such bases was not measured to pay)."""
    monkeypatch.setattr(vector_math, "_MIN_ROWS_TO_SPLIT", 1000)
    rng = np.random.default_rng(9)
    small, large = (vector_math.int8_codes(vector_math.l2_normalize(
        rng.standard_normal((n, 16)).astype(np.float32)))[0] for n in (999, 1000))
    q = vector_math.unit_query(rng.standard_normal(16).astype(np.float32), 16)
    assert not vector_math.prefetch_int8(q, [large])
    assert vector_math.prefetch_int8(q, [large, small])
    qcodes = vector_math.query_code(q)[0]
    assert dot_job.prefetched(qcodes, large) is None and dot_job.prefetched(qcodes, small) is not None
