"""Issue 16, session 16 probe: ``TfidfRows.sample`` of the latent fit's 50,000 picked rows
from a tier's cached mirror (every block verified first), three times; CPU of each.
Run under each checkout's interpreter (the base weighs every row first).

    python bench/s16_sample_probe.py TIER_DB  (its .postings.mirror beside it)
"""
import sys, time, numpy as np
from tiervault.vault.store import TierStore
import tiervault.vault.postings as P
from tiervault.vault import latent
st = TierStore(sys.argv[1], name="agent")
p = P.Postings.load_cache(st)
T = p.T
T.indices.all(); T.counts.all(); T.norms.all()
rows = T.shape[0]
pick = np.sort(np.random.default_rng(0).choice(rows, 50000, replace=False))
for r in range(3):
    t = time.process_time(); s = T.sample(pick); print(round(time.process_time() - t, 3), end=" ")
print(s.nnz, s.indices.dtype, s.indptr.dtype)
