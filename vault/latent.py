"""Latent semantic (LSA) scores over a tier's own TF-IDF mirror, no model needed.

The storage contract's ``latent_scores`` / ``latent_text_scores`` (vault/backend.py)
are computed here by the tiers that hold a Postings mirror (SQLite, PostgreSQL); a
remote tier asks its server, which computes them over its own mirror of the same rows.

FTS-only queries have no semantic evidence beyond shared words; an entry that answers
a long question and one that only mentions its words look alike to BM25 and TF-IDF.
LSA (Deerwester et al. 1990) gives a soft topical match from the tier's own text:

    T ~ U_k S_k V_k^T        T = the tier's l2 TF-IDF rows (Postings.T, the same matrix
                             as the Brain's TF-IDF cosine), rank-k truncated SVD
    d = row(T) V_k / |row(T) V_k|          an entry's latent vector
    q = tfidf(query) V_k / |...|           the query's (Postings.query_tfidf)
    lsa = max(0, d . q)                    in [0, 1]

The Brain mixes it into the semantic signal (brain/latent.py, brain/combine.py).

Cost: the SVD is fitted once per base matrix of the mirror (a rebuild or compaction
makes a new one; a build caches V_k with the mirror, and the unit vectors ``d`` of every
base row too), on at most ``MAX_FIT_ROWS`` rows
sampled with a fixed seed (every row is then projected); rows written since (the mirror's delta) are folded
in with the same V_k (standard LSA folding-in, like the TF-IDF model itself, whose idf is
fitted on the base rows). The fit depends only on the base matrix (randomized SVD with a
fixed ``random_state``), so two processes holding mirrors of the same rows fit the same
model: a remote tier scores exactly as the same rows in a local file. A tier with no more
rows or terms than k has no latent space: None per candidate (the Brain then uses the
candidate's own lexical signal).
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from tiervault.errors import ValidationError
from tiervault.vault.lazy_sparse import sp
from tiervault.vault.tfidf_rows import TfidfRows

if TYPE_CHECKING:
    from tiervault.vault.checked_array import CheckedArray

__all__ = ["DEFAULT_COMPONENTS", "MAX_COMPONENTS", "MAX_FIT_ROWS", "LatentModel", "MatrixRows",
           "fit_components", "model_for", "project", "saved_rows", "scores", "text_scores"]

#: the SVD is fitted on at most this many base rows (uniform sample, seed 0); every
#: mirror build fits V_k for DEFAULT_COMPONENTS once and caches it with the mirror
#: (vault/mirror_cache.py): a search process then never runs the SVD, whose temporaries
#: (terms x (k + 10) floats, several of them) were its peak memory at 1M rows, and whose
#: fits were most of a 100K vault's cold open when they ran at the first query
MAX_FIT_ROWS = 50_000
#: BrainConfig.lsa_components' default (a test pins the two together)
DEFAULT_COMPONENTS = 16
#: base latent vectors up to this size are held whole by a search process (a 100K-entry
#: vault's tiers: read from the cache, else projected once); larger ones are read row
#: by row when a query asks (projected from each candidate's TF-IDF row when the cache
#: has none, ~0.7 ms CPU a query at 100K: bench/README.md, issue 16 round 3)
EAGER_BASE_BYTES = 8 << 20
#: rows projected at a time in the eager case
PROJECT_ROWS = 65_536
#: The largest k a caller may ask for: a remote caller chooses k, and each k is a new SVD
#: fit (and replaces the cached one), so it is bounded like every other read's size.
MAX_COMPONENTS = 256
SEED = 0

_lock = threading.Lock()
_models: "weakref.WeakKeyDictionary[Any, LatentModel]" = weakref.WeakKeyDictionary()


def _normalise(x: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(x, axis=1, keepdims=True)
    return (x / np.maximum(n, 1e-12)).astype(np.float32)


class MatrixRows:
    """An ``(n, k)`` float32 matrix whose rows are read when asked: an ndarray, or a
    mirror cache file's flat :class:`~tiervault.vault.checked_array.CheckedArray` read with
    ``pread`` (each 64 KiB block checked against its CRC on first read).

    Why: a query reads a few rows of V_k (its own terms) and of the base rows' latent
    vectors (its candidates). Mapped, the kernel made the whole of both resident within
    a few hundred queries (2 MB folios; V_k alone was 71 MB of a 1,000,000-entry search
    process: bench/README.md, issue 16 round 6); read row by row, only the rows asked
    are copied, into short-lived arrays."""

    def __init__(self, data: "np.ndarray | CheckedArray", k: int) -> None:
        if k < 1 or len(data) % k:
            raise ValueError(f"{len(data)} values are not rows of {k}")
        self.data, self.k = data, k
        self.shape = (len(data) // k, k)

    def take(self, rows: np.ndarray) -> np.ndarray:
        """Rows ``rows`` (in range, any order) as a new (len(rows), k) array."""
        rows = np.asarray(rows, dtype=np.int64)
        k = self.k
        if isinstance(self.data, np.ndarray):
            return self.data.reshape(-1, k)[rows]
        out = np.empty((rows.size, k), dtype=np.float32)
        get = self.data.get
        for j, i in enumerate(rows.tolist()):
            out[j] = get(i * k, i * k + k)
        return out

    def verify(self) -> None:
        """Check every block now (``tiervault check``; a damaged one raises CacheDamaged)."""
        if not isinstance(self.data, np.ndarray):
            self.data.all()

    def whole(self) -> np.ndarray:
        """The whole matrix (a copy read from the file, every block checked)."""
        data = self.data if isinstance(self.data, np.ndarray) else self.data.all()
        return np.asarray(data, dtype=np.float32).reshape(-1, self.k)


def _dense(V: "np.ndarray | MatrixRows") -> np.ndarray:
    return V.whole() if isinstance(V, MatrixRows) else V


def project(T: "sp.csr_matrix | TfidfRows", V: np.ndarray) -> np.ndarray:
    """The unit latent vector of every row of ``T`` (``PROJECT_ROWS`` rows at a time).
    Each row's product is computed alone, so a row's vector is the same float32 numbers
    however many rows are projected with it (tested)."""
    rows = T.shape[0]
    out = np.empty((rows, V.shape[1]), dtype=np.float32)
    for lo in range(0, rows, PROJECT_ROWS):
        hi = min(rows, lo + PROJECT_ROWS)
        part = T.rows(lo, hi) if isinstance(T, TfidfRows) else T[lo:hi]
        out[lo:hi] = _normalise(np.asarray(part @ V))
    return out


def saved_rows(T: "sp.csr_matrix | TfidfRows", V: np.ndarray) -> np.ndarray:
    """The base rows' unit latent vectors a mirror build saves with V_k, whatever the
    base's size: a search process then never projects the base. Projecting a small one
    at the first query cost little arithmetic but the import of ``scipy.sparse`` (~0.26 s
    of a 100K cold open + first query on the bench machine of issue 16, session 22);
    a small saved base is read whole, a large one row by row (:class:`LatentModel`).
    ~0.5 s CPU for 493,612 rows x 16."""
    return project(T, V)


class LatentModel:
    """V_k and the unit latent vectors of the base rows of one Postings base matrix.

    ``T``: a SciPy matrix (the base vectors are then all projected at once), or a
    mirror's :class:`~tiervault.vault.tfidf_rows.TfidfRows` (memory-mapped at 1,000,000
    rows), never copied whole: the fit reads its sampled rows in one pass of chunks; the
    base rows' unit latent vectors are held whole (read from the cache, else projected
    at once in chunks) when they take at most ``EAGER_BASE_BYTES``, else a row's vector
    is read from the cache, or projected, when a query asks for it
    (``T_i V_k``, normalised: the same float32 numbers, each row's product is computed
    alone either way) -- at 1,000,000 entries the model then holds V_k only, not 64 bytes
    for every row, for a read of each candidate's row per query (issue 16)."""

    def __init__(self, T: "sp.csr_matrix | TfidfRows", k: int,
                 V: "np.ndarray | MatrixRows | None" = None,
                 stored: MatrixRows | None = None) -> None:
        """``V``: V_k fitted before (cached with the mirror), else fitted now; ``stored``:
        the base rows' unit latent vectors saved with it (:func:`saved_rows`): read whole
        when they take at most ``EAGER_BASE_BYTES``, else by row."""
        rows = T.shape[0]
        if not isinstance(T, TfidfRows):
            T = sp.csr_matrix(T)
        self.V = fit_components(T, k) if V is None else V  # (terms, k)
        self.n_base = rows
        self._T = T if isinstance(T, TfidfRows) else None
        self.base: np.ndarray | None = None
        self.stored = stored if stored is not None and stored.shape == (rows, k) else None
        if self.stored is not None and rows * k * 4 <= EAGER_BASE_BYTES:
            self.base, self.stored = self.stored.whole(), None  # read whole: no projection here
        elif self.stored is not None:
            pass  # a candidate's vector is read from the cache file when asked
        elif self._T is None:
            self.base = _normalise(np.asarray(T @ _dense(self.V)))
        elif rows * k * 4 <= EAGER_BASE_BYTES:
            self.base = project(self._T, _dense(self.V))
        self.delta: np.ndarray = np.zeros((0, k), dtype=np.float32)
        self.delta_parts = 0
        self._query_memo: tuple[Any, np.ndarray | None] | None = None
        self.k, self.t_ref = k, (lambda: None)  # set by model_for

    def query(self, p: Any, words: Sequence[str]) -> np.ndarray | None:
        """The unit latent vector of ``words`` (None: no fitted content word).

        Kept for the last TF-IDF weights object asked (``Postings.query_tfidf`` hands the
        same read-only object to every call of one query's words): the Brain asks each
        tier twice a query (the pool, then its graph neighbours), ~20 us a time."""
        q = p.query_tfidf(list(words))
        if q is None:
            return None
        memo = self._query_memo
        if memo is not None and memo[0] is q:  # the object is held here: its id is not reused
            return memo[1]
        tids, w = q
        V = self.V
        v = w.astype(np.float32) @ (V.take(tids) if isinstance(V, MatrixRows) else V[tids])
        n = float(np.sqrt(v.dot(v)))  # np.linalg.norm's own steps for a real vector, no checks
        out = v / n if n > 0 else None
        if out is not None:
            out.flags.writeable = False  # shared by the calls that find it here
        self._query_memo = (q, out)  # replaced whole: safe across threads
        return out

    def rows(self, p: Any, slots: np.ndarray) -> np.ndarray:
        """Latent vectors of mirror slots (delta rows folded in on first use)."""
        if len(p.delta_T) != self.delta_parts:
            parts = [sp.csr_matrix(d)[:, : self.V.shape[0]] for d in p.delta_T]
            D = sp.vstack(parts).tocsr() if parts else sp.csr_matrix((0, self.V.shape[0]))
            self.delta = _normalise(np.asarray(D @ _dense(self.V))) if D.shape[0] else self.delta[:0]
            self.delta_parts = len(p.delta_T)
        nb = self.n_base
        if self.base is not None and slots.size and int(slots.max()) < nb:
            # base rows only (the usual pool): one gather, the same float32 rows as below
            return self.base[slots]
        out = np.zeros((slots.size, self.V.shape[1]), dtype=np.float32)
        b = slots < nb
        if self.base is not None:
            out[b] = self.base[slots[b]]
        elif self.stored is not None:
            out[b] = self.stored.take(slots[b])
        elif b.any():
            assert self._T is not None
            out[b] = _normalise(np.asarray(self._T.take(slots[b]) @ _dense(self.V)))
        d = ~b & (slots - nb < self.delta.shape[0])
        out[d] = self.delta[slots[d] - nb]
        return out


def _check_k(k: Any) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_COMPONENTS:
        raise ValidationError("k", f"{k!r} is not a whole number of latent dimensions from 1 to "
                                   f"{MAX_COMPONENTS} (BrainConfig.lsa_components)")
    return k


def fit_components(T: "sp.csr_matrix | TfidfRows", k: int) -> np.ndarray:
    """V_k (terms x k, float32) of the rank-k truncated SVD of ``T``'s rows (at most
    MAX_FIT_ROWS of them, sampled with a fixed seed): scikit-learn's
    ``TruncatedSVD(n_components=k, algorithm="randomized", random_state=SEED)``'s
    ``components_``, by the two public functions its fit calls with its defaults
    (``randomized_svd``, then ``svd_flip`` on V's rows; a test pins the two equal),
    fitted on the sample's columns that hold a value when it is wider than tall
    (:func:`_present_columns`): the rows of V_k of the terms absent from the sample are 0.

    Why not ``TruncatedSVD`` itself: ``sklearn.decomposition`` imports every
    decomposition (linear models, metrics ...: ~0.13 s of a build worker's start, on
    the first mirror build's critical path), and its fit also projects the sample and
    computes an explained variance this model never reads (issue 16, session 16)."""
    from sklearn.utils.extmath import randomized_svd, svd_flip

    rows = T.shape[0]
    pick = np.arange(rows)
    if rows > MAX_FIT_ROWS:
        pick = np.sort(np.random.default_rng(SEED).choice(rows, MAX_FIT_ROWS, replace=False))
    if isinstance(T, TfidfRows):
        fit = T.sample(pick)
    else:
        fit = T[pick] if rows > MAX_FIT_ROWS else T
    terms = fit.shape[1]
    present = None
    if fit.shape[0] < terms:  # TruncatedSVD's transpose="auto" is True: the sample's rows draw Q
        fit, present = _present_columns(fit)
    # TruncatedSVD's defaults: n_oversamples 10, n_iter 5, power_iteration_normalizer
    # "auto", transpose "auto" (decided on the whole vocabulary, as before); its fit flips
    # the signs by V's rows (u_based_decision=False)
    with np.errstate(invalid="ignore", divide="ignore"):
        U, _, VT = randomized_svd(fit, k, n_oversamples=10, n_iter=5, power_iteration_normalizer="auto",
                                  transpose=present is not None, flip_sign=False, random_state=SEED)
    _, VT = svd_flip(U, VT, u_based_decision=False)
    if present is None:
        return np.ascontiguousarray(VT.T, dtype=np.float32)
    V = np.zeros((terms, VT.shape[0]), dtype=np.float32)
    V[present] = VT.T
    return V


def _present_columns(fit: "sp.csr_matrix") -> "tuple[sp.csr_matrix, np.ndarray]":
    """``fit`` without its columns that hold no value, and the columns kept (ascending).

    Why: a 1M tier's 50,000-row sample holds ~48,000 of its ~547,000 terms; the SVD's
    power iterations factor (columns x 26) blocks ten times (LU) and its last step one
    more (QR), all of them ~90 % zero rows that end as zero rows of V_k: 1.76 -> 0.35 s
    of CPU a team tier (issue 16, session 24). With the columns kept in their order and
    ``transpose=True`` (the sample's rows draw the random start, as before), it is the
    same algorithm on the same values: V_k moves by float rounding only (<= 2e-5 on the
    1M tiers; the old fit itself moves by up to 2.8e-5 between 1 and 2 BLAS threads),
    rankings and SciFact unchanged (bench/README.md)."""
    fit = sp.csr_matrix(fit)
    present = np.flatnonzero(np.bincount(fit.indices, minlength=fit.shape[1]))
    at = np.zeros(fit.shape[1], dtype=fit.indices.dtype)
    at[present] = np.arange(present.size, dtype=fit.indices.dtype)
    return sp.csr_matrix((fit.data, at[fit.indices], fit.indptr), shape=(fit.shape[0], present.size)), present


def model_for(p: Any, k: int) -> LatentModel | None:
    """The cached model of mirror ``p``'s base matrix (fitted now if it is new); None when
    the tier is too small for k latent dimensions (min(rows, terms) <= k): there LSA at
    full rank is the TF-IDF cosine; the Brain puts the candidate's lexical signal there
    (doubling TF-IDF's weight reordered a 5-entry tier for the worse, tests/test_modulated_search)."""
    if p is None or k < 1 or p.tfidf_terms == 0:
        return None
    with _lock:
        m = _models.get(p)
        # the base matrix object itself (a weak reference: an id could be reused)
        if m is not None and m.k == k and m.t_ref() is p.T:
            return m
        if min(p.T.shape) <= k:
            return None
        cached = getattr(p, "latent_V", None)
        if cached is None or cached.shape[1] != k:
            m = LatentModel(p.T, k)
        else:
            stored = getattr(p, "latent_rows", None)
            if isinstance(stored, np.ndarray):
                stored = MatrixRows(stored.reshape(-1), k)
            m = LatentModel(p.T, k, cached, stored)
        m.k, m.t_ref = k, weakref.ref(p.T)
        _models[p] = m
        return m


def scores(p: Any, words: Sequence[str], ids: Sequence[str], k: int) -> list[float | None]:
    """lsa of each entry id of mirror ``p`` for the query ``words`` (0.0: not in the
    mirror, or no fitted query word; None each: no latent space, see :func:`model_for`);
    ValidationError for a k outside 1..MAX_COMPONENTS."""
    m = model_for(p, _check_k(k))
    if m is None:
        no_space = p is None or bool(p.tfidf_terms)  # an empty model scores 0, not "none"
        return [None if no_space else 0.0 for _ in ids]
    out: list[float | None] = [0.0] * len(ids)
    q = m.query(p, words)
    if q is None:
        return out
    slots = p.slots_of(list(ids))
    if None not in slots:  # every id held (the pool's candidates): the scores in order
        # ndarray.clip is np.clip's ufunc call without its wrappers; floats of the float32s
        return (m.rows(p, np.array(slots, dtype=np.int64)) @ q).clip(0.0, 1.0).tolist()
    have = [j for j, s in enumerate(slots) if s is not None]
    if have:
        vecs = m.rows(p, np.array([slots[j] for j in have], dtype=np.int64))
        for j, v in zip(have, (vecs @ q).clip(0.0, 1.0).tolist()):
            out[j] = v
    return out


def text_scores(p: Any, words: Sequence[str], docs: Sequence[Sequence[str]],
                k: int) -> list[float | None]:
    """lsa of free texts (lists of words: memories) under mirror ``p``'s model (None as
    in :func:`scores`)."""
    m = model_for(p, _check_k(k))
    if m is None:
        no_space = p is None or bool(p.tfidf_terms)
        return [None if no_space else 0.0 for _ in docs]
    out: list[float | None] = [0.0] * len(docs)
    q = m.query(p, words)
    if q is None:
        return out
    for i, doc in enumerate(docs):
        d = m.query(p, doc)
        if d is not None:
            out[i] = max(0.0, float(d @ q))
    return out
