"""Issue 16, session 16 probe: ``word_codes._split_ascii``'s steps timed one by one over
the NUL-joined fields of the first 200,000 rows of a tier (5,000-row blocks): where its
CPU goes (the step bodies restate the function's, with a timer between them).

    python bench/s16_split_steps.py TIER_DB
"""
import sys, time, gc, numpy as np
from tiervault.vault.store import TierStore
import tiervault.vault.mirror_analysis as ma
import tiervault.vault.word_codes as wc
store = TierStore(sys.argv[1], name="team"); gc.disable()
bigs = []
with store.rows_in_chunks(20000) as (gen, chunks):
    for i, ch in enumerate(chunks):
        for name in ma.TEXT_FIELDS:
            f = list(getattr(ch, name))
            for a in range(0, len(f), 5000):
                bigs.append(wc._joined(f[a:a+5000]))
        if i == 9: break
T = {}
def tick(k, t0):
    t = time.perf_counter(); T[k] = T.get(k, 0) + t - t0; return t
def split(big):
    t = time.perf_counter()
    raw = big.encode("ascii").translate(wc._TABLE) + bytes(8); t = tick("translate", t)
    b = np.frombuffer(raw, dtype=np.uint8)
    n = len(raw) - 8
    inside = np.zeros(n + 2, dtype=np.bool_)
    inside[1:-1] = b[:n] > 1; t = tick("inside", t)
    edges = np.flatnonzero(inside[1:] != inside[:-1]); t = tick("edges", t)
    starts, ends = edges[0::2], edges[1::2]
    before = np.searchsorted(starts, np.flatnonzero(b[:n] == 1)); t = tick("nuls+search", t)
    per_text = np.diff(before, prepend=0, append=starts.size)
    rows = np.repeat(np.arange(per_text.size, dtype=np.int64), per_text); t = tick("rows", t)
    length = ends - starts
    short = length <= 8
    s_starts = starts[short]; t = tick("short", t)
    view = np.ndarray(shape=(n + 1,), dtype=wc._BIG_U8, buffer=raw, strides=(1,))
    g = view[s_starts]; t = tick("gather", t)
    keys = g.astype(np.uint64); t = tick("swap", t)
    keys &= wc._KEEP[length[short]]; t = tick("mask", t)
    if short.all():
        return keys, rows, [], np.zeros(0, dtype=np.int64)
    longer = ~short
    text = raw.decode("ascii")
    words = list(map(text.__getitem__, map(slice, starts[longer].tolist(), ends[longer].tolist()))); t = tick("longwords", t)
    r = keys, rows[short], words, rows[longer]; t = tick("rowsel", t)
    return r
t0 = time.perf_counter()
for bg in bigs: split(bg)
tot = time.perf_counter() - t0
print(round(tot, 3), {k: round(v, 3) for k, v in T.items()}, sum(map(len, bigs)))
