"""The mirror's TF-IDF rows kept as counts + row norms (vault/tfidf_rows.py) give the same
float32 weights as scikit-learn's TfidfTransformer, bit for bit, and the latent model
fitted over them (mapped, read in chunks, pages released) equals the one over a copy."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfTransformer

from tiervault.vault import array_file
from tiervault.vault.checked_array import BLOCK_BYTES
from tiervault.vault import latent as vlatent
from tiervault.vault.entry import Entry
from tiervault.vault.manager import VaultManager
from tiervault.vault.tfidf_rows import TfidfRows, fit_tfidf, row_norms


def counts(rows: int, terms: int, seed: int, big: bool = False) -> sp.csr_matrix:
    """Float32 term counts: rows of 0..300 distinct terms (long rows are where a
    pairwise sum would differ from scikit-learn's left-to-right one), in unsorted
    order as a COO build leaves them; ``big``: some counts past 255."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 300, rows)
    lengths[::7] = 0
    r = np.repeat(np.arange(rows), lengths)
    c = np.concatenate([rng.choice(terms, n, replace=False) for n in lengths])
    v = rng.integers(1, 6, r.size).astype(np.float32)
    if big:
        v[::97] = 300 + rng.integers(0, 1000, v[::97].size)
    m = sp.csr_matrix((v, (r, c)), shape=(rows, terms), dtype=np.float32)
    return m


def sklearn_rows(c: sp.csr_matrix) -> sp.csr_matrix:
    out = sp.csr_matrix(TfidfTransformer(smooth_idf=True, norm="l2").fit_transform(c))
    out.sort_indices()
    return out


def truncated(m: sp.csr_matrix, k: int) -> np.ndarray:
    """scikit-learn's TruncatedSVD(k, randomized, random_state SEED)'s V_k, float32."""
    from sklearn.decomposition import TruncatedSVD

    svd = TruncatedSVD(n_components=k, algorithm="randomized", random_state=vlatent.SEED)
    with np.errstate(invalid="ignore", divide="ignore"):
        svd.fit(m)
    return np.ascontiguousarray(svd.components_.T, dtype=np.float32)


def test_weights_equal_scikit_learn_bit_for_bit():
    for seed, big in ((1, False), (2, True)):
        c = counts(400, 2000, seed, big)
        want = sklearn_rows(c)  # before the fit, which takes c over (sorts it in place)
        ref = TfidfTransformer(smooth_idf=True, norm="l2").fit(c).idf_
        idf, rows = fit_tfidf(c)
        got = rows.tocsr()
        assert rows.counts.a.dtype == (np.uint16 if big else np.uint8)
        assert got.dtype == np.float32 == want.dtype
        assert np.array_equal(got.indptr, want.indptr) and np.array_equal(got.indices, want.indices)
        assert np.array_equal(got.data.view(np.uint32), want.data.view(np.uint32))
        assert np.array_equal(idf, ref.astype(np.float64))
        # rows in any order, through the gather a query uses
        slots = np.array([5, 0, 399, 5, 17])
        assert (rows.take(slots) != want[slots]).nnz == 0
        assert (rows.sample(np.array([0, 5, 17, 399]), chunk=7) != want[[0, 5, 17, 399]]).nnz == 0


def test_row_norms_sum_left_to_right():
    x = np.array([1e8, 1.0, -1e8, 3.0, 1.0] * 3, dtype=np.float32)
    indptr = np.array([0, 0, 5, 15])
    sq = (x * x).astype(np.float64)
    want = [0.0, np.sqrt(sum(sq[0:5].tolist())), 0.0]
    acc = 0.0
    for v in sq[5:15].tolist():
        acc += v
    want[2] = np.sqrt(acc)
    assert row_norms(x, indptr).tolist() == want


def test_latent_model_over_mapped_rows_equals_the_one_over_a_copy(tmp_path, monkeypatch):
    """Sampled fit read in chunks, base rows projected when asked: the same V and the
    same float32 latent vectors as the whole-matrix model."""
    rng = np.random.default_rng(3)
    words = [f"t{i}x" for i in range(300)]
    with VaultManager.at({"agent": str(tmp_path / "agent.db")}) as m:
        m.store("agent").capture_many([
            Entry.create(id=f"e{i}", title=" ".join(rng.choice(words, 4)),
                         description=" ".join(rng.choice(words, 20))) for i in range(3000)])
        built = m.store("agent").postings()
        csr = built.T.tocsr()
    cache = tmp_path / "agent.db.postings.mirror"
    f = array_file.read(cache)
    mapped = TfidfRows(f.array("T_indptr"), f.checked("T_indices", read=True),
                       f.checked("T_counts", read=True), f.checked("T_norms"),
                       f.array("idf").astype(np.float32), csr.shape[1])
    monkeypatch.setattr(vlatent, "MAX_FIT_ROWS", 2000)  # the sampled fit, as at 1M rows
    monkeypatch.setattr(vlatent, "PROJECT_ROWS", 1000)
    b = vlatent.LatentModel(csr, 4)
    eager = vlatent.LatentModel(mapped, 4)  # base vectors projected at once, in chunks
    monkeypatch.setattr(vlatent, "EAGER_BASE_BYTES", 0)
    a = vlatent.LatentModel(mapped, 4)  # projected when asked
    assert a.base is None and np.array_equal(a.V, b.V) and np.array_equal(eager.base, b.base)
    slots = np.array([2999, 0, 1500, 17, 17])
    assert np.array_equal(a.rows(built, slots), b.base[slots])
    assert np.array_equal(a.rows(built, np.arange(3000)), b.base)
    assert (mapped.sample(np.array([3, 1000, 2999])) != csr[[3, 1000, 2999]]).nnz == 0
    assert (mapped.tocsr() != csr).nnz == 0


def _random_entries(rng, words, n, prefix, title_words, description_words):
    """``n`` entries of random words (ids ``prefix0``...)."""
    return [Entry.create(id=f"{prefix}{i}", title=" ".join(rng.choice(words, title_words)),
                         description=" ".join(rng.choice(words, description_words)))
            for i in range(n)]


def test_a_large_tier_caches_its_latent_components_with_the_mirror(tmp_path, monkeypatch, caplog):
    """A build fits V_k (default k) once, from a sample of MAX_FIT_ROWS rows when the tier
    is larger, and saves it with the mirror: a reopened tier scores without an SVD, the same numbers; a
    damaged V is refused on open (one warning, rebuilt)."""
    import logging

    from tiervault.config.settings import BrainConfig

    assert BrainConfig().lsa_components == vlatent.DEFAULT_COMPONENTS
    monkeypatch.setattr(vlatent, "MAX_FIT_ROWS", 1000)
    rng = np.random.default_rng(4)
    words = [f"t{i}x" for i in range(300)]
    db = tmp_path / "agent.db"
    k = vlatent.DEFAULT_COMPONENTS
    with VaultManager.at({"agent": str(db)}) as m:
        m.store("agent").capture_many(_random_entries(rng, words, 2000, "e", 4, 20))
        p = m.store("agent").postings()
        assert p.latent_V is not None and p.latent_V.shape == (p.tfidf_terms, k)
        want = m.store("agent").latent_scores(words[:3], ["e1", "e7", "e1999"], k)
    fits = []
    real = vlatent.fit_components
    monkeypatch.setattr(vlatent, "fit_components", lambda T, k: fits.append(k) or real(T, k))
    with VaultManager.at({"agent": str(db)}) as m:
        assert m.store("agent").latent_scores(words[:3], ["e1", "e7", "e1999"], k) == want
        assert fits == []  # V came from the cache file
        m.store("agent").latent_scores(words[:3], ["e1"], 4)
        assert fits == [4]  # another k: fitted in the process
    cache = tmp_path / "agent.db.postings.mirror"
    data = bytearray(cache.read_bytes())
    length = struct.unpack("<8sIIQ", bytes(data[:24]))[3]
    entry = json.loads(bytes(data[24:24 + length]))["arrays"]["latent_V"]
    # a bit flipped in every block: a query reads (and checks) only its own terms' rows of V
    for at in range(entry["offset"] + 100, entry["offset"] + entry["nbytes"], BLOCK_BYTES):
        data[at] ^= 0x10
    cache.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING), VaultManager.at({"agent": str(db)}) as m:
        assert m.store("agent").latent_scores(words[:3], ["e1", "e7", "e1999"], k) == want
    assert sum("search cache" in r.message for r in caplog.records) == 1


def test_a_small_tier_caches_its_latent_components_too(tmp_path, monkeypatch):
    """Below MAX_FIT_ROWS the build fits V_k as well: a new process's first query runs no
    SVD (it did, in every process, and was most of a 100K vault's cold open)."""
    rng = np.random.default_rng(5)
    words = [f"w{i}y" for i in range(120)]
    db = tmp_path / "agent.db"
    k = vlatent.DEFAULT_COMPONENTS
    with VaultManager.at({"agent": str(db)}) as m:
        m.store("agent").capture_many(_random_entries(rng, words, 300, "s", 3, 12))
        assert m.store("agent").postings().latent_V is not None
        want = m.store("agent").latent_scores(words[:2], ["s0", "s299"], k)
    fits = []
    real = vlatent.fit_components
    monkeypatch.setattr(vlatent, "fit_components", lambda T, k: fits.append(k) or real(T, k))
    with VaultManager.at({"agent": str(db)}) as m:
        assert m.store("agent").latent_scores(words[:2], ["s0", "s299"], k) == want
    assert fits == []


def test_fitting_rows_that_are_all_alike_warns_nothing():
    """No variance (every row the same) makes scikit-learn's unused explained-variance
    ratio 0 / 0: that must not reach the user as a RuntimeWarning from a mirror build."""
    import warnings

    import scipy.sparse as sp

    T = sp.csr_matrix(np.ones((40, 30), dtype=np.float32) / np.sqrt(30))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        V = vlatent.fit_components(T, 4)
    assert V.shape == (30, 4) and np.isfinite(V).all()


def test_fit_refuses_counts_that_are_not_whole_numbers():
    for bad in (1.5, -1.0, np.nan, 0.25):
        c = counts(50, 300, 3)
        c.data[7] = bad
        with pytest.raises(ValueError, match="whole numbers|NaN"):  # NaN: scikit-learn refuses first
            fit_tfidf(c)
    c = counts(50, 300, 3, big=True)
    _idf, rows = fit_tfidf(c)  # whole counts past 255: uint16, every count kept
    assert rows.counts.a.dtype == np.uint16
    assert np.array_equal(rows.counts.a.astype(np.float32), sp.csr_matrix(c).data)


def test_fit_components_equals_truncated_svd_bit_for_bit(monkeypatch):
    """V_k by scikit-learn's public randomized_svd + svd_flip is TruncatedSVD's
    components_ (its randomized fit, random_state SEED) to the last bit: over a SciPy
    matrix, and over TfidfRows sampled in chunks (MAX_FIT_ROWS lowered to sample)."""
    for seed, k in ((11, 4), (12, 16)):
        c = counts(300, 900, seed)
        want_rows = sklearn_rows(c)
        got = vlatent.fit_components(want_rows, k)
        assert got.dtype == np.float32 and got.tobytes() == truncated(want_rows, k).tobytes()
        _idf, rows = fit_tfidf(c)
        monkeypatch.setattr(vlatent, "MAX_FIT_ROWS", 120)
        pick = np.sort(np.random.default_rng(vlatent.SEED).choice(300, 120, replace=False))
        assert vlatent.fit_components(rows, k).tobytes() == truncated(want_rows[pick], k).tobytes()
        monkeypatch.undo()


def test_sample_is_the_picked_rows_bit_for_bit():
    """TfidfRows.sample weighs only the picked rows: the same CSR arrays as the rows
    cut from the whole matrix, picks in one chunk, across chunks, empty rows, none."""
    c = counts(500, 1500, 21, big=True)
    _idf, rows = fit_tfidf(c)
    whole = rows.tocsr()
    rng = np.random.default_rng(4)
    for pick, chunk in ((np.arange(500), 65_536), (np.array([0, 7, 14, 499]), 7),
                        (np.sort(rng.choice(500, 60, replace=False)), 33),
                        (np.array([1]), 1), (np.zeros(0, dtype=np.int64), 50)):
        got, want = rows.sample(pick, chunk=chunk), whole[pick]
        assert got.shape == want.shape and got.dtype == np.float32
        assert np.array_equal(got.indptr, want.indptr) and np.array_equal(got.indices, want.indices)
        assert got.data.tobytes() == want.data.tobytes()


def test_row_norms_equal_a_sequential_loop():
    """Random rows (empty, long, values of every magnitude, squares that overflow
    float32): each norm the square root of the float64 sum of float32 squares added one
    by one in order, bit for bit."""
    rng = np.random.default_rng(8)
    for trial in range(20):
        lengths = rng.integers(0, 90, int(rng.integers(1, 60)))
        lengths[::5] = 0
        indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32 if trial % 2 else np.int64)
        x = (rng.standard_normal(int(indptr[-1])) * 10.0 ** rng.integers(-25, 25, int(indptr[-1]))).astype(np.float32)
        with np.errstate(over="ignore"):
            sq = (x * x).astype(np.float64).tolist()
            got = row_norms(x, indptr)
        want = []
        for a, b in zip(indptr[:-1].tolist(), indptr[1:].tolist()):
            acc = 0.0
            for v in sq[a:b]:
                acc += v
            want.append(np.sqrt(acc))
        assert got.dtype == np.float64 and got.tobytes() == np.array(want, dtype=np.float64).tobytes()


def test_fit_components_factors_only_the_sampled_terms(monkeypatch):
    """A sample narrower in terms than the vocabulary (a 1M tier's 50,000 rows hold ~9 %
    of its terms): V_k is TruncatedSVD's fitted on the sample's columns that hold a value,
    bit for bit, with rows of exactly 0 for the absent terms, and the power iterations'
    LU factors have one row per present term, not per vocabulary term; it stays within
    float rounding of the fit over every column (same algorithm, same random start)."""
    import scipy.linalg

    for seed, k in ((31, 4), (32, 16)):
        # ~30,000 counts over 20,000 terms (many absent), then seven terms absent at the end
        c = sp.csr_matrix(sp.hstack([counts(200, 20_000, seed), sp.csr_matrix((200, 7), dtype=np.float32)]))
        m = sklearn_rows(c)
        present = np.flatnonzero(np.diff(m.tocsc().indptr))
        assert 0 < present.size < m.shape[1] - 7
        shapes: list[tuple[int, int]] = []
        real_lu = scipy.linalg.lu
        monkeypatch.setattr(scipy.linalg, "lu", lambda a, **kw: shapes.append(a.shape) or real_lu(a, **kw))
        got = vlatent.fit_components(m, k)
        monkeypatch.undo()
        assert got.dtype == np.float32 and got.shape == (m.shape[1], k)
        assert shapes and {s[0] for s in shapes} == {present.size, m.shape[0]}
        absent = np.setdiff1d(np.arange(m.shape[1]), present)
        assert not got[absent].any()
        assert got[present].tobytes() == truncated(m[:, present], k).tobytes()
        # rounding only (random counts have a flat spectrum, the least stable case: <= 1.5e-4
        # here; the 1M bench tiers' V_k moved by <= 2e-5)
        assert np.abs(got - truncated(m, k)).max() < 1e-3
        _idf, rows = fit_tfidf(c)  # the mirror's rows: the same fit
        assert vlatent.fit_components(rows, k).tobytes() == got.tobytes()
