"""Issue 16, session 14 probe (bench/README.md, "the first mirror build at 1M"): The randomized SVD's steps replicated, one step at a time on 1 BLAS thread: which steps change V_k.

    OPENBLAS_THREAD_TIMEOUT=4 .venv/bin/python bench/s14_fit_ops.py TIER.db
"""
import sys, time, numpy as np, scipy.linalg as linalg
from threadpoolctl import threadpool_limits
from sklearn.utils.extmath import svd_flip
from tiervault.vault.store import TierStore
from tiervault.vault.postings import Postings
from tiervault.vault import latent
from tiervault.vault.tfidf_rows import TfidfRows
store = TierStore(sys.argv[1], name="team")
p = Postings.load_cache(store)
T = p.T
rows = T.shape[0]
pick = np.sort(np.random.default_rng(0).choice(rows, 50000, replace=False))
X = T.sample(pick)
print(type(X), X.dtype, X.shape, flush=True)
def mine(X, th):  # th: dict op -> threads
    rs = np.random.RandomState(0)
    M = X.T
    Q = rs.normal(size=(M.shape[1], 26)).astype(np.float32, copy=False)
    tm = {}
    def run(op, f, *a, **k):
        t0=time.perf_counter()
        with threadpool_limits(th.get(op, 2), user_api="blas"):
            r = f(*a, **k)
        tm[op] = tm.get(op, 0) + time.perf_counter()-t0
        return r
    for _ in range(5):
        Q, _ = run("lu", linalg.lu, run("spmm", lambda: M @ Q), permute_l=True, check_finite=False)
        Q, _ = run("lu", linalg.lu, run("spmm", lambda: M.T @ Q), permute_l=True, check_finite=False)
    Q, _ = run("qr", linalg.qr, run("spmm", lambda: M @ Q), mode="economic", check_finite=False)
    B = run("spmm", lambda: Q.T @ M)
    Uhat, s, Vt = run("svd", linalg.svd, B, full_matrices=False, lapack_driver="gesdd")
    U = run("gemm", lambda: Q @ Uhat)
    U, Vt = svd_flip(U, Vt, u_based_decision=False)
    VT = U[:, :16].T
    # TruncatedSVD: svd_flip(U, VT, u_based_decision=False) again on the transposed-back results
    Uo, VTo = svd_flip(Vt[:16, :].T, VT, u_based_decision=False)
    return np.ascontiguousarray(VTo.T, dtype=np.float32), {k: round(v, 3) for k, v in tm.items()}
with threadpool_limits(2, user_api="blas"):
    ref = latent.fit_components(T, 16)
V, tm = mine(X, {}); print("replica==sklearn:", np.array_equal(V, ref), tm, flush=True)
for ops in ({"lu":1}, {"qr":1}, {"svd":1}, {"gemm":1}, {"spmm":1}, {"lu":1,"qr":1,"svd":1,"gemm":1,"spmm":1}):
    V, tm = mine(X, ops); print(ops, np.array_equal(V, ref), float(np.abs(V-ref).max()), tm, flush=True)
