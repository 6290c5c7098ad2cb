"""vault/porter.py gives FTS5's own porter term for every [a-z0-9] word, and the
stemmer uses it for a query's few new words only (no FTS5 round trip).

The reference is an ordinary FTS5 ``porter unicode61`` table holding each word as a
document, read back through ``fts5vocab`` (independent of the stemmer's own table).
"""

from __future__ import annotations

import random
import sqlite3

from tiervault.vault.porter import porter_stem
from tiervault.vault.tokenizer import PYTHON_WORDS, Stemmer

# words reaching each rule, its condition failing, and the C code's edges (a word equal
# to a suffix, a one-letter stem, y as a vowel, doubled consonants, digits)
EDGES = ["caresses", "ponies", "ties", "caress", "cats", "ss", "ies", "sses", "ses", "feed",
         "agreed", "eed", "plastered", "bled", "ed", "aed", "eing", "motoring", "sing",
         "conflated", "troubled", "sized", "hopping", "tanned", "falling", "hissing",
         "fizzed", "failing", "filing", "happy", "sky", "yyy", "syzygy", "relational",
         "conditional", "rational", "valenci", "hesitanci", "digitizer", "conformabli",
         "radicalli", "differentli", "vileli", "analogousli", "vietnamization",
         "predication", "operator", "feudalism", "decisiveness", "hopefulness",
         "callousness", "formaliti", "sensitiviti", "sensibiliti", "triplicate",
         "formative", "formalize", "electriciti", "electrical", "hopeful", "goodness",
         "revival", "allowance", "inference", "airliner", "gyroscopic", "adjustable",
         "defensible", "irritant", "replacement", "adjustment", "dependent", "adoption",
         "homologou", "communism", "activate", "angulariti", "homologous", "effective",
         "bowdlerize", "probate", "rate", "cease", "controll", "roll", "ement", "ment",
         "yelled", "bayed", "played", "toyed", "abc123", "version2s", "ying", "dying",
         "logi", "analogi", "bli", "ousli", "ion", "tion", "sion", "ou", "oyer", "boxed",
         "snowed", "traying", "hoped", "hoping", "fished", "zed", "zzz", "lll"]


def _fts5_terms(words: list[str]) -> list[str]:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE d USING fts5(t, tokenize='porter unicode61')")
    conn.executemany("INSERT INTO d(rowid, t) VALUES (?, ?)", enumerate(words, start=1))
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(d, instance)")
    first = dict(conn.execute("SELECT doc, term FROM v WHERE offset = 0"))
    return [first.get(i, "") for i in range(1, len(words) + 1)]


def _random_words(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    suffixes = ["s", "es", "ies", "sses", "ed", "eed", "ing", "y", "ational", "tional",
                "enci", "anci", "izer", "logi", "bli", "alli", "entli", "eli", "ousli",
                "ization", "ation", "ator", "alism", "iveness", "fulness", "ousness",
                "aliti", "iviti", "biliti", "icate", "ative", "alize", "iciti", "ical",
                "ful", "ness", "al", "ance", "ence", "er", "ic", "able", "ible", "ant",
                "ement", "ment", "ent", "ion", "ou", "ism", "ate", "iti", "ous", "ive",
                "ize", "e", "ll", "ying", "lled", "tted", "ating", "bling", "izing"]
    out = set()
    while len(out) < n:
        w = "".join(rng.choice("aeiouy") if rng.random() < 0.4 else rng.choice("bcdfghlmnprstvwxz")
                    for _ in range(rng.randint(1, 9)))
        out.add(w + rng.choice(suffixes) if rng.random() < 0.6 else w)
    return sorted(out)


def test_porter_equals_fts5_on_edges_and_random_words():
    words = EDGES + _random_words(20_000, 12)
    want = _fts5_terms(words)
    got = [porter_stem(w) for w in words]
    differ = [(w, a, b) for w, a, b in zip(words, want, got) if a != b]
    assert not differ, differ[:20]
    assert sum(a != w for w, a in zip(words, want)) > 8_000  # most words are changed


def test_porter_passes_short_and_long_words_through():
    words = ["ab", "is", "x" * 64 + "ing", "y" * 65, "a" * 63 + "ing"]
    assert [porter_stem(w) for w in words] == _fts5_terms(words)
    assert porter_stem("x" * 64 + "ing") == "x" * 64 + "ing"


def test_few_new_plain_words_skip_fts5_others_go_to_it():
    stemmer = Stemmer()
    few = ["tokenizing", "relational", "happily"]
    assert stemmer.stems(few) == dict(zip(few, _fts5_terms(few)))
    assert stemmer.fts5_words == 0  # stemmed in Python
    # not [a-z0-9] (diacritics, ligatures, digits FTS5 folds): FTS5 decides
    odd = ["naïve", "ﬁles", "straße", "Ⅻ"]
    assert stemmer.stems(odd) == dict(zip(odd, _fts5_terms(odd)))
    assert stemmer.fts5_words == len(odd)
    # a bulk fill (a mirror build) stays with FTS5
    bulk = [w + "ings" for w in _random_words(PYTHON_WORDS + 1, 3)]
    assert stemmer.stems(bulk) == dict(zip(bulk, _fts5_terms(bulk)))
    assert stemmer.fts5_words == len(odd) + len(bulk)
    assert stemmer.fts5_stems(few) == _fts5_terms(few)
