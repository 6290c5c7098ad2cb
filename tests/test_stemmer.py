"""The stemmer's cache answers what FTS5 itself indexes, batch after batch.

The reference is independent of the stemmer's own table: an ordinary FTS5
``porter unicode61`` table holding each word as a document, read back through
``fts5vocab``.
"""

from __future__ import annotations

import sqlite3

from tiervault.vault.tokenizer import Stemmer

WORDS = ["running", "runs", "ran", "caresses", "ponies", "relational", "conditional", "happily",
         "naïve", "straße", "ünïcödé", "x", "42", "abc123", "jwt", "tokens", "rotated", "ﬁle",
         "Ⅻ", "²", "generalizations", "oscillators", "hopping", "agreed"]


def _fts5_terms(words: list[str]) -> dict[str, str]:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE d USING fts5(t, tokenize='porter unicode61')")
    conn.executemany("INSERT INTO d(rowid, t) VALUES (?, ?)", enumerate(words, start=1))
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(d, instance)")
    first = dict(conn.execute("SELECT doc, term FROM v WHERE offset = 0"))
    return {w: first.get(i, "") for i, w in enumerate(words, start=1)}


def test_stems_match_fts5_across_successive_fills():
    stemmer = Stemmer()
    # Filled in three batches: a later batch must not see an earlier batch's documents
    # (the table is emptied between fills; doc ids restart at 1 each time).
    got = {}
    for part in (WORDS[:8], WORDS[8:16], WORDS[16:]):
        got.update(stemmer.stems(part))
    assert got == _fts5_terms(WORDS)
    assert got["running"] == "run" and got["naïve"] == "naiv"
    assert len(stemmer) == len(WORDS)
    assert stemmer.stems(["runs", "jumped"]) == {"runs": "run", "jumped": "jump"}


def test_many_plain_words_batched_with_odd_ones_stem_as_one_word_a_document(monkeypatch):
    """Plain words ([a-z0-9]+) reach FTS5 as documents of many words each, any other word
    as one of its own: the terms are those of one document per word (the reference),
    across batch boundaries and with words that make no token or several."""
    import random

    import tiervault.vault.tokenizer as tokenizer

    monkeypatch.setattr(tokenizer, "FTS5_BATCH", 7)  # many batches, a partial last one
    rng = random.Random(23)
    letters = "abcdefghijklmnopqrstuvwxyz"
    plain = {"".join(rng.choice(letters) for _ in range(rng.randint(3, 12))) + rng.choice(["", "ing", "ed", "ies"])
             for _ in range(300)}
    plain |= {"a" * 64, "b" * 70, "walking", "relational"}
    odd = ["naïve", "straße", "Running", "ﬁle", "a-b", "x y", "...", "Ⅻ", "ünïcödé", "co-operated"]
    words = sorted(plain) + odd
    rng.shuffle(words)
    stemmer = Stemmer()
    got = stemmer.fts5_stems(words)
    want = _fts5_terms(words)
    assert got == [want[w] for w in words]
    assert got[words.index("walking")] == "walk" and got[words.index("...")] == ""
    assert got[words.index("a-b")] == "a"  # several tokens: the first one's term
