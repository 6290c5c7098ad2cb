"""vault/latent_svd.py against scikit-learn's TruncatedSVD: the same components, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.decomposition import TruncatedSVD

from tiervault.vault import latent_svd


def _sparse(rows: int, cols: int, seed: int, dtype: type) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    m = sp.random(rows, cols, density=0.05, random_state=rng, format="csr", dtype=np.float64)
    m.data = rng.integers(1, 5, m.nnz).astype(np.float64)
    return sp.csr_matrix(m, dtype=dtype)


@pytest.mark.parametrize("rows, cols", [(300, 900), (900, 300), (200, 200)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_components_equal_truncated_svd_bit_for_bit(rows, cols, dtype):
    X = _sparse(rows, cols, seed=rows + cols, dtype=dtype)
    for k in (2, 16):
        want = TruncatedSVD(n_components=k, algorithm="randomized", random_state=0).fit(X).components_
        got = latent_svd.components(X, k, 0)
        assert got.dtype == want.dtype and got.shape == want.shape == (k, cols)
        assert np.array_equal(got, want)
        # another seed is another fit (the seed is used), still scikit-learn's
        other = TruncatedSVD(n_components=k, algorithm="randomized", random_state=7).fit(X).components_
        assert np.array_equal(latent_svd.components(X, k, 7), other)


def test_dense_rows_too_and_bad_shapes_refused():
    X = _sparse(120, 80, seed=3, dtype=np.float32).toarray()
    want = TruncatedSVD(n_components=5, algorithm="randomized", random_state=0).fit(X).components_
    assert np.array_equal(latent_svd.components(X, 5, 0), want)
    with pytest.raises(ValueError, match="components"):
        latent_svd.components(X, 80, 0)
    with pytest.raises(ValueError, match="float"):
        latent_svd.components(X.astype(np.int64), 5, 0)
