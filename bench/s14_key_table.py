"""Issue 16, session 14 probe (bench/README.md, "the first mirror build at 1M"): KeyTable.get over 1.2M Zipf-drawn keys of a 600K-key table (10 calls, mean ms).

    cd TREE && .venv/bin/python bench/s14_key_table.py
"""
import numpy as np, time
from tiervault.vault.word_codes import KeyTable
rng = np.random.default_rng(0)
keys = np.unique(rng.integers(1, 2**63, 600000, dtype=np.uint64))
t = KeyTable()
t.add(keys, np.arange(keys.size, dtype=np.int64))
q = keys[rng.zipf(1.3, 1200000) % keys.size]
t.get(q)
t0 = time.perf_counter()
for _ in range(10): r = t.get(q)
print("get ms", round((time.perf_counter() - t0) * 100, 2), t.bits)
