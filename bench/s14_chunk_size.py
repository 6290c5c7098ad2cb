"""Issue 16, session 14 probe (bench/README.md, "the first mirror build at 1M"): Row analysis of 200,000 team rows in chunks of 20,000 / 10,000 / 5,000 / 2,500 rows (CPU; term ids differ by chunk).

    .venv/bin/python bench/s14_chunk_size.py TIER.db
"""
import sys, time, gc
from tiervault.vault.store import TierStore
from tiervault.vault.mirror_analysis import analyse_rows
from tiervault.vault.vocabulary import Vocabulary
from tiervault.vault.word_codes import WordCodes
from tiervault.vault.tokenizer import STOP_WORDS, STEMMER
import tiervault.vault.postings as P
store = TierStore(sys.argv[1], name="team")
rows = store.changes_since(-1).rows[:200000]
STOP_WORDS.get()
gc.disable()
# warm the stemmer cache so learning costs the same in each variant
for size in (20000, 10000, 5000, 2500, 20000, 5000):
    vocab = P.Postings().vocab
    words = WordCodes()
    t0 = time.process_time()
    for s in range(0, len(rows), size):
        analyse_rows(rows[s:s+size], vocab, words)
    print(size, "cpu %.2f" % (time.process_time() - t0), flush=True)
