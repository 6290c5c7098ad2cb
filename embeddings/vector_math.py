"""Pure numpy kernels of the vector index (no state; formulas in the docstrings).

Used by :mod:`tiervault.embeddings.index`; importable on their own for tests and
benchmarks.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from tiervault.embeddings import dot_job
from tiervault.embeddings.dot_job import DotJob, scan_pool
from tiervault.errors import ValidationError

__all__ = ["l2_normalize", "cosine_scores", "top_k", "mask_outside", "quantize_int8", "int8_scores",
           "float16_scores", "int8_codes", "int8_scan", "int8_approx", "int8_error", "QueryCode", "Int8Codes",
           "float16_error_bound", "simd_available", "unit_query", "check_finite",
           "forget_query", "prefetch_int8", "query_code", "int8_approx_at"]

# Rows per conversion block: 512 x 384 x 4 B = 768 KB stays in L2 with its codes.
_BLOCK_ROWS = 512
# Below this many rows per thread, a thread costs more than it saves.
_MIN_ROWS_PER_THREAD = 32_768
# SimSIMD's int8 scan: split over threads at once only from this many rows (claims of
# dot_job.CLAIM_ROWS). bench/codes_pages.py --threads 2 (issue 16, session 16; the bench
# builds' codes in 2 MiB pages, cold): the 1M build's tiers (205K-494K rows) 32.1 -> 23.4
# ms wall for the three at load ~2.5 (28.7 -> 15.2 on a free core); the 100K build's
# (21K-49K rows) 3.30 -> 3.81 at load ~2.5: slower. No size between was measured; 8
# claims is the judgement between the two. (A prefetched job is shared at any size.)
_MIN_ROWS_TO_SPLIT = 131_072


class Int8Codes(NamedTuple):
    """The int8 form of a base (:func:`int8_codes`): ``codes`` int8 (n, d) and ``bounds``
    float32 (2, n), e.g. both mapped from a vector cache file."""

    codes: np.ndarray
    bounds: np.ndarray


def l2_normalize(m: np.ndarray) -> np.ndarray:
    """Rows divided by their norm, as a new float32 array: ``x_i / ||x_i||_2``.

    Zero rows stay zero (a vector without direction matches nothing).
    """
    out = np.array(m, dtype=np.float32, copy=True, ndmin=2)
    norms = np.sqrt(np.einsum("ij,ij->i", out, out, dtype=np.float64)).astype(np.float32)
    nz = norms > 0
    out[nz] /= norms[nz, None]
    return out


# The last query's derived values, kept by its bytes (a tuple, swapped whole): one search
# asks them of every tier, and the candidates' cosines of every tier again; the same bytes
# give the same values, so a hit is bit for bit what the computation returns.
_LAST_UNIT: tuple[bytes, np.ndarray] | None = None
_LAST_CODE: tuple[bytes, np.ndarray, float, float, float] | None = None


def forget_query() -> None:
    """Drop the last query's kept values (bench/query_memo_ab.py times the scan without)."""
    global _LAST_UNIT, _LAST_CODE
    _LAST_UNIT = _LAST_CODE = None


def unit_query(query_vec: np.ndarray, dim: int, model: str | None = None) -> np.ndarray:
    """``q / ||q||_2`` as a read-only float32 array (a zero query stays zero), after
    checking it has ``dim`` finite components (``model`` names the index's model in the
    error)."""
    global _LAST_UNIT
    q = np.asarray(query_vec, dtype=np.float32).reshape(-1)
    if q.shape[0] != dim:
        raise ValidationError("query_vec", f"has dimension {q.shape[0]} but this index "
                              f"({model or 'model ?'}) holds {dim}")
    key = q.tobytes()
    last = _LAST_UNIT
    if last is not None and last[0] == key:
        return last[1]
    if not np.isfinite(q).all():
        raise ValidationError("query_vec", "contains NaN or infinite values")
    norm = float(np.linalg.norm(q))
    out = q / norm if norm > 0 else q.copy()
    out.flags.writeable = False
    _LAST_UNIT = (key, out)
    return out


def check_finite(m: np.ndarray) -> None:
    """Raise unless every value of ``m`` is finite (stored vectors)."""
    if m.size and not np.isfinite(m).all():
        raise ValidationError("vectors", "contain NaN or infinite values")


def cosine_scores(matrix: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``s_i = <x_i, q>`` for unit rows ``x_i`` and unit ``q``: the cosine similarity.

    One pass over ``matrix`` with NumPy's own SIMD sum-of-products (``einsum``), on
    the calling thread. Not BLAS ``matrix @ q``: OpenBLAS's threaded sgemv
    spin-waits for its worker threads, and on a busy 2-core machine one product
    over 20,000 x 384 cost ~8 ms of CPU against ~0.9 ms here (bench/README.md).
    """
    return np.einsum("ij,j->i", matrix, q)


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` largest ``scores``, best first (ties: lower position first).

    ``argpartition`` selects in O(n), then only the k winners are sorted. A long
    array is first cut to the positions at or above a threshold read off a strided
    sample (:func:`_above_sample`): one compare over it instead of a partition of
    all of it (~15 against ~80 us over 33,000 scores); exact, since the threshold is
    kept only when at least k positions reach it (the k largest are then among them).
    """
    n = scores.shape[0]
    if k <= 0 or n == 0:
        return np.empty(0, dtype=np.int64)
    if k >= n:
        part = np.arange(n)
    else:
        cand = _above_sample(scores, k) if n >= _SAMPLE_MIN_ROWS and k * _SAMPLE_STEP * 4 <= n else None
        if cand is None:
            part = np.argpartition(scores, n - k)[n - k :]  # the k largest, unordered
        else:
            sub = scores[cand]
            part = cand[np.argpartition(sub, sub.shape[0] - k)[sub.shape[0] - k :]]
        part.sort()  # position order first, so the stable sort breaks ties by position
    return part[np.argsort(-scores[part], kind="stable")]


# top_k: arrays of at least this many scores are cut by a sample of every STEP-th one.
_SAMPLE_MIN_ROWS = 8192
_SAMPLE_STEP = 32


def _above_sample(scores: np.ndarray, k: int) -> np.ndarray | None:
    """Positions of the scores at or above ``t``, the ``j``-th largest of every
    ``_SAMPLE_STEP``-th score (``j = 2 ceil(k / STEP) + 1``: about ``2k + STEP``
    positions reach it in an array in no particular order), ascending; None when
    fewer than ``k`` do (scores ordered against the sample) or NaN is in the way."""
    sample = scores[::_SAMPLE_STEP]
    j = min(2 * -(-k // _SAMPLE_STEP) + 1, sample.shape[0])
    t = np.partition(sample, sample.shape[0] - j)[sample.shape[0] - j]
    if np.isnan(t):
        return None
    cand = np.flatnonzero(scores >= t)
    return cand if cand.shape[0] >= k else None


def mask_outside(scores: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Scores with every position not in ``rows`` set to -inf (pre-filter on a full scan)."""
    masked = np.full_like(scores, -np.inf)
    masked[rows] = scores[rows]
    return masked


def int8_codes(m: np.ndarray, step: int = 65536) -> Int8Codes:
    """The int8 form the index scans: ``(codes int8 (n, d), bounds float32 (2, n))`` with
    ``bounds[0] = a_i`` (:func:`quantize_int8`) and ``bounds[1] = ||a_i c_i||_1`` (for
    the per-row error bound of :func:`int8_scan`); ``step`` rows at a time, so the
    temporaries of a large (e.g. mapped) matrix stay small."""
    codes = np.empty(m.shape, dtype=np.int8)
    bounds = np.empty((2, m.shape[0]), dtype=np.float32)
    for s in range(0, m.shape[0], step):
        c, a = quantize_int8(m[s:s + step])
        codes[s:s + step], bounds[0, s:s + step] = c, a
        bounds[1, s:s + step] = a * np.abs(c.astype(np.int16)).sum(axis=1, dtype=np.int32)
    return Int8Codes(codes, bounds)


def quantize_int8(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric per-row int8 codes: ``a_i = max_j |x_ij| / 127``, ``c_ij = round(x_ij / a_i)``.

    Returns ``(codes int8 (n, d), scale float32 (n,))`` with ``x_ij ~= a_i * c_ij``
    (error <= a_i / 2 per component). Zero rows get scale 0 and codes 0.
    """
    m = np.asarray(m, dtype=np.float32)
    scale = (np.abs(m).max(axis=1) / 127.0).astype(np.float32) if m.shape[0] else np.zeros(0, np.float32)
    safe = np.where(scale > 0, scale, 1.0).astype(np.float32)
    codes = np.rint(m / safe[:, None]).clip(-127, 127).astype(np.int8)
    return codes, scale


def _blocked_scores(stored: np.ndarray, q: np.ndarray, block_rows: int, threads: int = 1) -> np.ndarray:
    """``stored @ q`` in f32, converting ``block_rows`` rows at a time (cache-sized).

    With ``threads`` > 1 the rows are split into that many contiguous parts run
    in parallel (numpy releases the GIL in both the conversion and the product).
    """
    n = stored.shape[0]
    out = np.empty(n, dtype=np.float32)
    parts = max(1, min(threads, n // _MIN_ROWS_PER_THREAD))
    bounds = [n * i // parts for i in range(parts + 1)]

    def run(lo: int, hi: int) -> None:
        buf = np.empty((min(block_rows, max(hi - lo, 1)), stored.shape[1]), dtype=np.float32)
        for s in range(lo, hi, block_rows):
            e = min(s + block_rows, hi)
            b = buf[: e - s]
            np.copyto(b, stored[s:e], casting="unsafe")
            np.dot(b, q, out=out[s:e])

    futures = [scan_pool().submit(run, bounds[i], bounds[i + 1]) for i in range(1, parts)]
    run(bounds[0], bounds[1])
    for f in futures:
        f.result()
    return out


def int8_scores(
    codes: np.ndarray, scale: np.ndarray, q: np.ndarray, block_rows: int = _BLOCK_ROWS, threads: int = 1
) -> np.ndarray:
    """Approximate cosines from int8 codes: ``s_i ~= a_i * sum_j c_ij q_j``."""
    out = _blocked_scores(codes, q, block_rows, threads)
    out *= scale
    return out


def float16_scores(m16: np.ndarray, q: np.ndarray, block_rows: int = _BLOCK_ROWS, threads: int = 1) -> np.ndarray:
    """Approximate cosines from half-precision rows: ``s_i ~= <f32(h_i), q>``."""
    return _blocked_scores(m16, q, block_rows, threads)


# -- the int8 scan through SimSIMD (optional extra ``simd``, imported lazily) --------------------
_SIMD: object = None  # None: not tried yet; False: not installed; else the module
# Float rounding of the f32 products on both sides of the bound (a naive sum of 384
# products of size <= 1 errs by <= 384 * 2^-24 ~ 2.3e-5; scores are <= 1 in size).
_ROUNDING = 1e-4


def _simsimd():
    global _SIMD
    if _SIMD is None:
        try:
            import simsimd  # noqa: PLC0415 -- optional extra, imported on first use
        except ImportError:
            _SIMD = False
        else:
            _SIMD = simsimd
    return _SIMD or None


def simd_available() -> bool:
    """Whether the SimSIMD kernels (extra ``simd``) can be used here."""
    return _simsimd() is not None


class QueryCode(NamedTuple):
    """What the per-row error bound of an int8 scan needs of the query (:func:`int8_error`):
    ``l1 = ||q||_1``, ``b`` = the query's own int8 scale (0: the query was not quantized)
    and ``resid = ||q - b r||_2`` (its quantization residual), ``d`` its dimension."""

    l1: float
    b: float
    resid: float
    d: int


def query_code(q: np.ndarray) -> tuple[np.ndarray, float, float, float]:
    """The unit query's int8 code ``r`` (read-only, (1, d)), ``||q||_1``, its scale ``b``
    and residual ``||q - b r||_2`` (:func:`int8_approx`), kept for the last query."""
    global _LAST_CODE
    key = q.dtype.char.encode() + q.tobytes()
    last = _LAST_CODE
    if last is not None and last[0] == key:
        return last[1], last[2], last[3], last[4]
    l1 = float(np.abs(q).sum())
    qcodes, qs = quantize_int8(q[None, :])
    qcodes.flags.writeable = False
    b = float(qs[0])
    resid = float(np.linalg.norm(q.astype(np.float64) - b * qcodes[0].astype(np.float64)))
    _LAST_CODE = (key, qcodes, l1, b, resid)
    return qcodes, l1, b, resid


def prefetch_int8(q: np.ndarray, bases: list[np.ndarray]) -> bool:
    """Start :func:`int8_approx`'s products of the unit query ``q`` with each int8 base
    of ``bases`` smaller than ``_MIN_ROWS_TO_SPLIT`` rows on the scan pool
    (:func:`~tiervault.embeddings.dot_job.prefetch`); its next call for the same query
    and codes takes them. False (nothing started) without SimSIMD or such bases."""
    simd = _simsimd()
    # Only bases below the split size: a large one is split over the pool when its scan
    # comes (measured: the 1M bench scan 46-48 -> 32-37 ms); prefetching those as well was
    # measured only at load 2.5-3.7, unresolved (bench/README.md, session 16), so not done.
    bases = [c for c in bases if 0 < c.shape[0] < _MIN_ROWS_TO_SPLIT]
    if simd is None or not bases:
        return False
    # each base in one claim: the pool's thread takes the GIL back once a base, not once
    # a claim (the caller, busy in Python meanwhile, rarely lets go of it)
    dot_job.prefetch(simd, query_code(q)[0], [(c, c.shape[0]) for c in bases])
    return True


def int8_approx(codes: np.ndarray, scale: np.ndarray, q: np.ndarray, threads: int = 1
                ) -> tuple[np.ndarray, QueryCode]:
    """Approximate cosines of unit rows stored as int8 codes (no bounds: :func:`int8_error`).

    With SimSIMD (AVX-512 VNNI / AVX2 integer dot products, ~4x faster than a
    float32 ``einsum`` over 4x fewer bytes here), the query is quantized too,
    ``q ~= b * r`` (``b = max|q_j| / 127``), and ``s_i ~= a_i * b * sum_j c_ij r_ij``
    in exact integer arithmetic. Without it: :func:`int8_scores` (f32 query, b = 0).
    A base whose products were prefetched (:func:`prefetch_int8`) takes them; a large
    base (``_MIN_ROWS_TO_SPLIT`` rows) with ``threads`` > 1 is split over the scan pool
    (:class:`~tiervault.embeddings.dot_job.DotJob`): the memory-bound scan reads on two
    cores. The same numbers either way.
    """
    simd = _simsimd()
    if simd is None:
        l1 = float(np.abs(q).sum())
        return int8_scores(codes, scale, q, threads=threads), QueryCode(l1, 0.0, 0.0, q.shape[0])
    qcodes, l1, b, resid = query_code(q)
    if codes.shape[0]:
        # Not cdist(..., out=...): SimSIMD 6.5 returns None from it without a reference
        # of its own, so every such call takes one from None and a long-running
        # process dies in none_dealloc (tests/test_vector_delta.py checks the count).
        # Its own result is a writable buffer: viewed, not copied (~20 us at 50K rows).
        job = dot_job.prefetched(qcodes, codes)
        if job is None and threads > 1 and codes.shape[0] >= _MIN_ROWS_TO_SPLIT:
            job = DotJob(simd, qcodes, codes).start(threads - 1)
        if job is not None:
            scores = job.result()
        else:
            scores = np.asarray(simd.cdist(qcodes, codes, metric="dot", out_dtype="float32"))[0]
    else:
        scores = np.empty(0, dtype=np.float32)
    scores *= scale
    scores *= np.float32(b)
    return scores, QueryCode(l1, b, resid, q.shape[0])


def int8_approx_at(codes: np.ndarray, scale: np.ndarray, q: np.ndarray, rows: np.ndarray
                   ) -> tuple[np.ndarray, QueryCode] | None:
    """:func:`int8_approx`'s scores at ``rows`` (aligned with them), read off this query's
    prefetched products over ``codes`` (:func:`prefetch_int8`) when the scan pool has
    written every one already; else None (the caller scores its rows itself), and a
    prefetched job not started yet is stopped (no one will ask for it). The same numbers
    as :func:`int8_approx` of those rows' codes: each product is an exact integer in
    float32, times the same two float32 factors."""
    simd = _simsimd()
    if simd is None or not rows.size:
        return None
    qcodes, l1, b, resid = query_code(q)
    job = dot_job.prefetched(qcodes, codes)
    if job is None:
        return None
    if not job.ready():
        job.stop()
        return None
    scores = job.result()[rows]
    scores *= scale[rows]
    scores *= np.float32(b)
    return scores, QueryCode(l1, b, resid, q.shape[0])


def int8_error(scale: np.ndarray | float, l1: np.ndarray | float, qc: QueryCode) -> np.ndarray | float:
    """``eps_i >= |s_i - <x_i, q>|`` for the scores of :func:`int8_approx`, per row from
    its ``bounds`` columns ``a_i`` (``scale``) and ``||a_i c_i||_1`` (``l1``); arrays or
    scalars. Increasing in both, so the bound of the largest ``a_i`` and ``l1`` bounds
    every row's (:class:`~tiervault.embeddings.vector_base.BaseScan` filters with it first).

    * rows: ``|x_ij - a_i c_ij| <= a_i / 2``, so ``|<x_i - a_i c_i, q>| <= a_i ||q||_1 / 2``;
    * query: ``<a_i c_i, q - b r>`` is at most ``||a_i c_i||_1 * b / 2`` (each component
      of the residual is <= b / 2) and at most ``||a_i c_i||_2 ||q - b r||_2`` (Cauchy-
      Schwarz) with ``||a_i c_i||_2 <= ||x_i||_2 + a_i sqrt(d) / 2 = 1 + a_i sqrt(d) / 2``
      for unit rows; the smaller of the two (the second is ~4x smaller for the hash
      embedder's sparse queries: half the rows rescored);
    * plus a rounding allowance for the float32 products.
    """
    eps = scale * np.float32(qc.l1 / 2) + np.float32(_ROUNDING)
    if qc.b:
        by_l1 = l1 * np.float32(qc.b / 2)
        by_l2 = scale * np.float32(qc.resid * math.sqrt(qc.d) / 2) + np.float32(qc.resid * (1 + 1e-6))
        eps = eps + np.minimum(by_l1, by_l2)
    return eps


def int8_scan(codes: np.ndarray, bounds: np.ndarray, q: np.ndarray, threads: int = 1
              ) -> tuple[np.ndarray, np.ndarray]:
    """Approximate cosines of unit rows stored as int8 codes (:func:`int8_approx`), and
    per-row error bounds (:func:`int8_error`; ``bounds``: see :func:`int8_codes`).
    Returns ``(scores float32 (n,), eps float32 (n,))`` with ``|s_i - <x_i, q>| <= eps_i``."""
    scores, qc = int8_approx(codes, bounds[0], q, threads=threads)
    return scores, np.asarray(int8_error(bounds[0], bounds[1], qc), dtype=np.float32)


def float16_error_bound(q: np.ndarray) -> float:
    """``eps >= |<f16(x_i), q> - <x_i, q>|`` for unit rows: each component of
    magnitude <= 1 is rounded by at most 2^-12 (half an ulp of [0.5, 1)), so the
    error is <= 2^-12 * ||q||_1, plus the rounding allowance."""
    return 2.0 ** -12 * float(np.abs(q).sum()) + _ROUNDING
