"""Issue 16, session 16 probe: ``mirror_analysis._sums`` (a block's (row, term) sums) of
the base checkout against this one's, on the same tokens (the first 200,000 rows of a
tier, 5,000-row blocks), alternating in one process; the outputs compared bit for bit.

    python bench/s16_sums_ab.py TIER_DB  (the base: /work/wt/s16-base)
"""
import sys, time, gc, importlib.util, numpy as np
from tiervault.vault.store import TierStore
from tiervault.vault.word_codes import WordCodes
from tiervault.vault.tokenizer import STOP_WORDS
import tiervault.vault.mirror_analysis as ma
import tiervault.vault.postings as P
import types
src = open("/work/wt/s16-base/vault/mirror_analysis.py").read().replace("from tiervault.vault.string_table import Vocabulary", "from tiervault.vault.vocabulary import Vocabulary")
old = types.ModuleType("old_ma"); exec(compile(src, "old_ma", "exec"), old.__dict__)
store = TierStore(sys.argv[1], name="team"); STOP_WORDS.get(); gc.disable()
vocab = P.Postings().vocab; words = WordCodes(); toks = []
with store.rows_in_chunks(20000) as (gen, chunks):
    for i, ch in enumerate(chunks):
        fields = [list(getattr(ch, name)) for name in ma.TEXT_FIELDS]
        for b, t in enumerate(words.blocks(fields, lambda new, same: ma._learn(new, same, vocab), 5000)):
            toks.append((t, min(5000, len(ch) - b * 5000)))
        if i == 9: break
for rep in range(3):
    for name, f in (("old", old._sums), ("new", ma._sums)):
        t = time.process_time()
        outs = [f(tk, n) for tk, n in toks]
        print(name, round(time.process_time() - t, 3), end="  ")
    print()
a = [old._sums(tk, n) for tk, n in toks[:5]]; b = [ma._sums(tk, n) for tk, n in toks[:5]]
print(all(x.indptr.tobytes() == y.indptr.tobytes() and x.tids.tobytes() == y.tids.tobytes() and x.packed.tobytes() == y.packed.tobytes() and x.doclen.tobytes() == y.doclen.tobytes() for x, y in zip(a, b)))
