"""Issue 16, session 14 probe (bench/README.md, "the first mirror build at 1M"): The team tier's latent fit (from its mirror cache) with 2 and 1 BLAS threads: time, and whether V_k is equal.

    OPENBLAS_THREAD_TIMEOUT=4 .venv/bin/python bench/s14_fit_threads.py TIER.db
"""
import sys, time, os, numpy as np
from threadpoolctl import threadpool_limits
from tiervault.vault.store import TierStore
from tiervault.vault.postings import Postings
from tiervault.vault import latent
store = TierStore(sys.argv[1], name="team")
p = Postings.load_cache(store)
T = p.T
print("T", T.shape, flush=True)
res = {}
for rnd in range(2):
    for th in (2, 1):
        with threadpool_limits(th, user_api="blas"):
            t0, c0 = time.perf_counter(), time.process_time()
            V = latent.fit_components(T, 16)
            print(rnd, th, "wall %.2f cpu %.2f" % (time.perf_counter()-t0, time.process_time()-c0), flush=True)
        res.setdefault(th, V)
print("identical:", np.array_equal(res[1], res[2]), "max diff", float(np.abs(res[1]-res[2]).max()))
