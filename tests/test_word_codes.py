"""Words -> codes a chunk at a time (vault/word_codes.py) against splitting every text
with tokenizer.split_words and a dict: the same (row, code) tokens per field, each new
word learned once, and the packed-key table itself."""

from __future__ import annotations

from collections import Counter

import numpy as np

from tiervault.vault.tokenizer import unchanged_by_fts5, split_words
from tiervault.vault.word_codes import SHORT, UNKNOWN, KeyTable, WordCodes

WORDS = ("the", "of", "a", "I", "x9", "retry", "Retries", "abcdefgh", "abcdefghi", "ABCDEFGH1",
         "12345678", "123456789", "internationalization", "n42", "2024", "zz", "naïve", "Größe",
         "déjà", "ΑΒΓ", "東京", "a_b", "don't", "it's", "q" * 70, "e2e", "v1", "ab1s")
SEPS = (" ", "  ", ", ", "-", "\n", "/", ". ", "\t", "__", "!?")


def _texts(n: int, rng: np.random.Generator, ascii_only: bool) -> list[str | None]:
    pool = [w for w in WORDS if w.isascii()] if ascii_only else list(WORDS)
    out: list[str | None] = []
    for i in range(n):
        if i % 17 == 3:
            out.append(None)
            continue
        k = int(rng.integers(0, 12))
        out.append("".join(str(w) + str(rng.choice(SEPS)) for w in rng.choice(pool, k)))
    return out


class Learner:
    """A learn() that numbers words in order of arrival and records every call."""

    def __init__(self) -> None:
        self.code: dict[str, int] = {}
        self.calls: list[tuple[list[str], list[bool]]] = []

    def __call__(self, words: list[str], same: np.ndarray) -> np.ndarray:
        self.calls.append((list(words), same.tolist()))
        for w in words:
            assert w not in self.code, f"{w!r} learned twice"
            self.code[w] = -1 if w == "zz" else 2 * len(self.code) + (w == "the")
        return np.array([self.code[w] for w in words], dtype=np.int64)


def _reference(fields: list[list[str | None]], code: dict[str, int]) -> list[Counter]:
    return [Counter((row, code[w]) for row, t in enumerate(texts) for w in split_words(t or ""))
            for texts in fields]


def test_chunks_give_the_tokens_of_split_words_and_learn_each_word_once():
    rng = np.random.default_rng(7)
    codes, learner = WordCodes(), Learner()
    for chunk in range(6):
        ascii_only = chunk % 2 == 0  # all-ASCII chunks take the packed path alone
        fields = [_texts(40, rng, ascii_only) for _ in range(5)]
        if chunk == 3:
            fields[2][5] = "retry\x00backoff the cache"  # a NUL inside a text
            fields[1] = [None] * 40
        got = codes.chunk(fields, learner)
        want = _reference(fields, learner.code)
        for g, w in zip(got, want):
            assert g.rows.dtype == np.int64 and g.codes.dtype == np.int64
            assert Counter(zip(g.rows.tolist(), g.codes.tolist())) == w
            assert not np.any(g.codes == UNKNOWN)
    learned = [w for words, _ in learner.calls for w in words]
    assert len(learned) == len(set(learned))
    assert set(learned) == {w for w in learner.code}
    for words, same in learner.calls:
        for w, s in zip(words, same):
            if s:  # "its own FTS5 term" is only ever claimed where it is true
                assert unchanged_by_fts5(w), w
            elif w.isascii() and len(w.encode()) <= SHORT:
                assert not unchanged_by_fts5(w), w  # and claimed for every packed word it holds for


def test_packed_and_dict_words_meet_in_one_build():
    """A word first met in a non-ASCII text (dict path) and then in an ASCII one
    (packed path) -- and the other way round -- is learned once."""
    codes, learner = WordCodes(), Learner()
    first = codes.chunk([["naïve retry"], ["plain words"]], learner)
    second = codes.chunk([["retry naïve"], ["wörds plain"]], learner)
    assert sorted(first[0].codes.tolist()) == sorted(second[0].codes.tolist())
    assert Counter(w for words, _ in learner.calls for w in words) == Counter(
        {"naïve": 1, "retry": 1, "plain": 1, "words": 1, "wörds": 1})


def test_key_table_grows_and_probes():
    rng = np.random.default_rng(3)
    table = KeyTable(bits=4)  # 16 slots: collisions and several rehashes
    keys = np.unique(rng.integers(1, 2**63, 5000, dtype=np.int64).astype(np.uint64))
    codes = rng.integers(0, 10**9, keys.size, dtype=np.int64)
    for lo in range(0, keys.size, 700):
        table.add(keys[lo:lo + 700], codes[lo:lo + 700])
        assert np.array_equal(table.get(keys[:lo + 700]), codes[:lo + 700])
    assert table.size == keys.size and (1 << table.bits) >= 2 * keys.size
    absent = np.setdiff1d(rng.integers(1, 2**63, 1000, dtype=np.int64).astype(np.uint64), keys)
    assert np.all(table.get(absent) == UNKNOWN)
    # keys that all probe the same slot
    same_slot = KeyTable(bits=6)
    k = np.array([1, 2, 3, 4, 5], dtype=np.uint64) << np.uint64(58)
    same_slot.add(k, np.arange(5, dtype=np.int64))
    assert same_slot.get(k[::-1]).tolist() == [4, 3, 2, 1, 0]
