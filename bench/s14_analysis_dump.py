"""Issue 16, session 14 probe (bench/README.md, "the first mirror build at 1M"): One tree's row analysis of the first N rows of a tier (20,000-row chunks, one WordCodes), run twice, CPU of each
printed; the last run's arrays and vocabulary saved to NPZ (two trees' NPZ compared array by array).

    cd TREE && .venv/bin/python bench/s14_analysis_dump.py TIER.db OUT.npz N
"""
import sys, time, gc, numpy as np
from tiervault.vault.store import TierStore
from tiervault.vault.mirror_analysis import analyse_rows
from tiervault.vault.word_codes import WordCodes
from tiervault.vault.tokenizer import STOP_WORDS
import tiervault.vault.postings as P
store = TierStore(sys.argv[1], name="team")
rows = store.changes_since(-1).rows[:int(sys.argv[3])]
STOP_WORDS.get()
gc.disable()
out = {}
for rep in range(2):
    vocab = P.Postings().vocab
    words = WordCodes()
    t0 = time.process_time()
    parts = [analyse_rows(rows[s:s+20000], vocab, words) for s in range(0, len(rows), 20000)]
    print(P.__file__, "cpu %.2f" % (time.process_time() - t0), flush=True)
for i, p in enumerate(parts):
    for f in ("indptr", "tids", "packed", "doclen"):
        out[f"{i}_{f}"] = getattr(p, f)
out["vocab"] = np.array(vocab.tolist() if hasattr(vocab, "tolist") else list(vocab), dtype=object)
np.savez(sys.argv[2], **out)
