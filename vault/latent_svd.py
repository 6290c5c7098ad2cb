"""The latent model's rank-k truncated SVD: scikit-learn's randomized algorithm, step for step.

Why not ``sklearn.decomposition.TruncatedSVD`` itself: a first mirror build fits V_k in
each build worker process, and importing scikit-learn cost each ~0.6 s of CPU (issue
16, session 14) for this one call; its ``fit`` also computed the transformed rows and
their explained variance, which the mirror never reads. This is the same computation
as ``TruncatedSVD(n_components=k, algorithm="randomized", random_state=seed).fit(X)``
(scikit-learn 1.x: ``_randomized_svd`` with ``n_iter=5``, ``n_oversamples=10``, LU
power iterations, the QR range, the ``gesdd`` SVD of the projection, then
``svd_flip(u_based_decision=False)``), with the same NumPy / SciPy calls in the same
order on the same dtypes, so ``components_`` comes out **bit for bit** the same
(tests/test_latent_svd.py compares with the installed scikit-learn on matrices of both
shapes). The LAPACK calls still run on the BLAS threads of the process: their results
depend on the thread count (a single thread changes V_k in the last bits).
"""

from __future__ import annotations

from functools import partial

import numpy as np
import scipy.linalg as linalg
import scipy.sparse as sp

__all__ = ["N_ITER", "N_OVERSAMPLES", "components"]

#: TruncatedSVD's defaults (the model the cached V_k of every mirror was fitted with)
N_ITER = 5
N_OVERSAMPLES = 10


def _flip_by_rows(u: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's ``svd_flip(u, v, u_based_decision=False)``: each row of ``v``
    gets the sign that makes its largest absolute entry positive (``u``'s columns too)."""
    max_abs_v_rows = np.argmax(np.abs(v), axis=1)
    shift = np.arange(v.shape[0])
    indices = max_abs_v_rows + shift * v.shape[1]
    signs = np.sign(np.take(np.reshape(v, (-1,)), indices, axis=0))
    u *= signs[np.newaxis, :]
    v *= signs[:, np.newaxis]
    return u, v


def _range_finder(A: "sp.spmatrix | np.ndarray", size: int, n_iter: int,
                  random_state: np.random.RandomState) -> np.ndarray:
    """``sklearn.utils.extmath._randomized_range_finder`` with the LU normaliser."""
    Q = random_state.normal(size=(A.shape[1], size))
    if A.dtype == np.float32:
        Q = Q.astype(np.float32, copy=False)
    Q = np.asarray(Q)
    qr_normalizer = partial(linalg.qr, mode="economic", check_finite=False)
    normalizer = partial(linalg.lu, permute_l=True, check_finite=False) if n_iter > 2 \
        else (lambda x: (x, None))
    for _ in range(n_iter):
        Q, _ = normalizer(A @ Q)
        Q, _ = normalizer(A.T @ Q)
    Q, _ = qr_normalizer(A @ Q)
    return Q


def components(X: "sp.csr_matrix | np.ndarray", k: int, seed: int) -> np.ndarray:
    """``TruncatedSVD(n_components=k, algorithm="randomized", random_state=seed).fit(X)
    .components_`` (k x features, X's float dtype) of a float32 or float64 matrix with
    more than k rows and columns."""
    if X.dtype not in (np.float32, np.float64):
        raise ValueError(f"the latent fit needs float rows, not {X.dtype}")
    if not 0 < k < min(X.shape):
        raise ValueError(f"{k} components of a {X.shape[0]} x {X.shape[1]} matrix")
    random_state = np.random.RandomState(seed)  # check_random_state(seed)
    M = X
    transpose = M.shape[0] < M.shape[1]
    if transpose:
        M = M.T
    Q = _range_finder(M, size=k + N_OVERSAMPLES, n_iter=N_ITER, random_state=random_state)
    B = Q.T @ M
    Uhat, s, Vt = linalg.svd(B, full_matrices=False, lapack_driver="gesdd")
    del B
    U = Q @ Uhat
    if transpose:
        U, VT = Vt[:k, :].T, U[:, :k].T
    else:
        U, VT = U[:, :k], Vt[:k, :]
    _U, VT = _flip_by_rows(U, VT)
    return VT
