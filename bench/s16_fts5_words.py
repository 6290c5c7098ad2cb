"""Issue 16, session 16 probe: a tier's row analysis (every chunk), counting the words
stemmed by FTS5 (``STEMMER._fts5`` wrapped): words, CPU per call and the total.

    python bench/s16_fts5_words.py TIER_DB
"""
import sys, time, gc
from tiervault.vault.store import TierStore
from tiervault.vault.mirror_analysis import analyse_rows
from tiervault.vault.word_codes import WordCodes
from tiervault.vault.tokenizer import STOP_WORDS, STEMMER
import tiervault.vault.postings as P
import tiervault.vault.tokenizer as tok
store = TierStore(sys.argv[1], name="team")
STOP_WORDS.get()
gc.disable()
vocab = P.Postings().vocab
words = WordCodes()
calls = []
real = STEMMER._fts5
def spy(missing):
    t = time.process_time(); out = real(missing); calls.append((len(missing), time.process_time() - t, sum(map(len, missing)) / max(1, len(missing)))); return out
STEMMER._fts5 = spy
with store.rows_in_chunks(20000) as (gen, chunks, _records):
    for ch in chunks:
        analyse_rows(ch, vocab, words)
print(len(vocab), STEMMER.fts5_words, len(STEMMER._cache), len(words.codes_of))
print([(n, round(t, 3), round(l, 1)) for n, t, l in calls][:30])
print(sum(t for _, t, _ in calls))
