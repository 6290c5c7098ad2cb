"""FTS5's own tokenizer, usable from Python: words -> ``porter unicode61`` terms.

The in-memory mirror must index exactly the terms FTS5 indexes, or its scores
would drift from ``bm25()``. Splitting text into words is done here with a
regular expression that matches unicode61's rule (letters and digits are token
characters, everything else separates); each *distinct* word is then stemmed by
FTS5 itself (an in-memory ``porter unicode61`` table read through
``fts5vocab``), and cached. Words are Zipf-distributed, so after warm-up almost
every lookup is a dict hit. A query's few new words of ``[a-z0-9]`` are stemmed in
Python instead (:mod:`porter`: FTS5's rules, checked against it word for word):
the FTS5 round trip was ~0.1 ms a query, and most bench queries hold a new word.

A word FTS5 would split further (rare characters that Python deems
alphanumeric and unicode61 does not) maps to its first FTS5 token only.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from typing import Callable, Iterable

from tiervault.vault.porter import PORTER_MAX, PORTER_MIN, porter_stem

__all__ = ["Stemmer", "split_words", "split_many", "split_each", "SEP", "STEMMER", "STOP_WORDS",
           "unchanged_by_fts5", "unchanged_many"]

_WORD = re.compile(r"[^\W_]+")
# ASCII fast path: every non-alphanumeric ASCII character becomes a space, so
# str.split() yields exactly what the regular expression would (5-10x faster).
_ASCII_SEPARATORS = str.maketrans({chr(c): " " for c in range(128) if not chr(c).isalnum()})


def split_words(text: str) -> list[str]:
    """Lowercased words of ``text`` as unicode61 separates them."""
    if text.isascii():
        return text.lower().translate(_ASCII_SEPARATORS).split()
    return _WORD.findall(text.lower())


# split_many: texts joined by " NUL " (NUL: validation keeps it out of every text field);
# the NUL survives splitting as a token of its own and marks where a text ends.
SEP = "\x00"
_JOIN = f" {SEP} "
# ASCII: lower-casing and separators as one bytes.translate over a 256-byte table
# (str.translate looks every character up in a dict: ~4x slower on a 1M-row build).
_ASCII_BYTES = bytes(
    c if c == 0 else (ord(chr(c).lower()) if c < 128 and chr(c).isalnum() else 32)
    for c in range(256))
_WORD_OR_SEP = re.compile(r"[^\W_]+|\x00")


def split_many(texts: list[str]) -> list[str] | None:
    """``split_words`` of every text at once: their words in order, with the token
    :data:`SEP` between consecutive texts (``len(texts) - 1`` of them).

    One join / translate / ``split`` over the joined texts instead of a call per
    text (the first mirror build splits 5 fields of every row). None when a text
    holds the separator itself (NUL): the caller then splits one by one.
    """
    big = _JOIN.join(texts)
    if big.count(SEP) != max(len(texts) - 1, 0):
        return None
    if big.isascii():
        return big.encode("ascii").translate(_ASCII_BYTES).decode("ascii").split()
    return _WORD_OR_SEP.findall(big.lower())


def split_each(texts: list[str]) -> list[list[str]]:
    """``[split_words(t) for t in texts]``, with one lower-case / separator pass over all.

    ASCII texts are joined by NUL (validation keeps it out of every text field),
    mapped by one ``bytes.translate`` over a 256-byte table (NUL kept, letters
    lowered, every other character a space), cut back at the NULs and split:
    no Python code per text (a bulk load's batch: 4.5-5 -> ~3.4 us a row at 1M,
    bench/README.md). Otherwise (a NUL or a non-ASCII character somewhere) each
    text is split on its own, as before.
    """
    if not texts:
        return []
    big = SEP.join(texts)
    if big.isascii() and big.count(SEP) == max(len(texts) - 1, 0):
        return list(map(str.split, big.encode("ascii").translate(_ASCII_BYTES).decode("ascii").split(SEP)))
    return [split_words(t) for t in texts]


_ASCII_LOWER_ALNUM = re.compile(r"[a-z0-9]+")
#: At most this many new words are stemmed in Python (:mod:`porter`), more by FTS5: a
#: query's one or two new words cost ~0.1 ms as one FTS5 round trip (a table fill, a
#: vocabulary read, a wipe) and a few us each here; a mirror build's many are cheaper
#: in FTS5 (~2.3 us a word) than in Python.
PYTHON_WORDS = 16
#: words a document of :meth:`Stemmer._fts5` (those unicode61 keeps as one token each)
FTS5_BATCH = 1_000


def unchanged_by_fts5(word: str) -> bool:
    """True when FTS5's ``porter unicode61`` makes ``word`` itself, by its source code.

    unicode61 keeps a word of ASCII lower-case letters and digits as one token, as
    is; porter then passes it through when it is shorter than 3 or longer than 64
    bytes, and otherwise changes only words whose last character is a letter (every
    rule of steps 1-5 removes or rewrites a suffix ending in one: -s, -ed, -ing, -y,
    -ational ... -ize, -e, -ll). So an ASCII lower-case alphanumeric word that is
    short, long, or ends in a digit is its own term (a test compares with FTS5).
    """
    if not word.isascii() or not _ASCII_LOWER_ALNUM.fullmatch(word):
        return False
    return len(word) < PORTER_MIN or len(word) > PORTER_MAX or word[-1].isdigit()


def unchanged_many(words: Iterable[str]) -> list[str]:
    """The words of ``words`` for which :func:`unchanged_by_fts5` holds, in order (one
    comprehension of str methods instead of a call and a regular expression per word:
    a first build meets ~1 new word per row, 1M at 1M rows). For an ASCII word,
    ``[a-z0-9]+`` is ``isalnum()`` with no upper-case letter (``lower()`` keeps it)."""
    return [w for w in words
            if (len(w) < PORTER_MIN or len(w) > PORTER_MAX or w[-1].isdigit())
            and w.isascii() and w.isalnum() and w.lower() == w]


class Stemmer:
    """Maps words to FTS5 ``porter unicode61`` terms, caching every answer."""

    def __init__(self) -> None:
        self._cache: dict[str, str] = {}
        self._lock = threading.Lock()
        self.fts5_words = 0  # words stemmed by the FTS5 table so far (the rest: cache, Python)
        self._conn = sqlite3.connect(":memory:", check_same_thread=False)
        # Contentless: FTS5 keeps no copy of the words, and the batch is wiped with one
        # 'delete-all' instead of a DELETE that re-tokenizes every row (half the cost
        # of a fill: 4.4 -> 2.3 us a word on bench corpus words, the same stems).
        self._conn.execute("CREATE VIRTUAL TABLE w USING fts5(word, tokenize='porter unicode61', "
                           "content='')")
        self._conn.execute("CREATE VIRTUAL TABLE wv USING fts5vocab(w, instance)")

    def stems(self, words: Iterable[str]) -> dict[str, str]:
        """{word: term} for every word ('' when FTS5 finds no token in it)."""
        words = set(words)
        cache = self._cache
        missing = [w for w in words if w not in cache]
        if missing:
            self._fill(missing)
        return {w: cache[w] for w in words}

    def lookup(self, words: Iterable[str]) -> Callable[[str], str]:
        """A word -> term function valid for every word of ``words`` (stemmed first when
        new): the cache's own ``__getitem__``, so mapping it over many words runs no
        Python code per word (:meth:`stems` builds a dict of the answers instead)."""
        cache = self._cache
        missing = set(words).difference(cache)  # one C loop over the distinct words
        if missing:
            self._fill(list(missing))
        return cache.__getitem__

    def stem(self, word: str) -> str:
        return self.stems([word])[word]

    def _fill(self, missing: list[str]) -> None:
        # Words FTS5 gives back unchanged need no SQL (a first mirror build meets one
        # new number per row in ids like "name-0000042"; see :func:`unchanged_by_fts5`).
        same = unchanged_many(missing)
        with self._lock:
            if same:
                self._cache.update(zip(same, same))
                missing = [w for w in missing if w not in self._cache]
                if not missing:
                    return
            if len(missing) <= PYTHON_WORDS:
                # a query's few new words: FTS5's porter in Python when unicode61 keeps
                # the word whole and as is ([a-z0-9]; vault/porter.py, tested against FTS5)
                plain = [w for w in missing if w.isascii() and w.isalnum() and w.lower() == w]
                if plain:
                    self._cache.update(zip(plain, map(porter_stem, plain)))
                    if len(plain) == len(missing):
                        return
                    missing = [w for w in missing if w not in self._cache]
            self._cache.update(zip(missing, self._fts5(missing)))

    def fts5_stems(self, words: list[str]) -> list[str]:
        """Each word's term from FTS5 itself (no cache, no Python stemming): the
        reference :mod:`porter` is checked against."""
        with self._lock:
            return self._fts5(words)

    def _fts5(self, missing: list[str]) -> list[str]:
        """FTS5's term of each of ``missing`` ('' when it finds no token); the lock held.

        A word of ASCII lower-case letters and digits is exactly one unicode61 token (the
        word itself), so such words go in as documents of ``FTS5_BATCH`` words each, a
        word's term found by its document and offset; any other word is a document of
        its own (it may make no token, or several). Why: a row per word cost ~3.6 us a
        word, most of it the row's insert; batched ~1.6-1.9 us, the same terms (1M bench
        team tier: 236,092 words stemmed in its first build; issue 16, session 23)."""
        self.fts5_words += len(missing)
        plain = [i for i, w in enumerate(missing) if w.isascii() and w.isalnum() and w.lower() == w]
        if len(plain) < len(missing):
            taken = set(plain)
            other = [i for i in range(len(missing)) if i not in taken]
        else:
            other = []
        docs = (len(plain) + FTS5_BATCH - 1) // FTS5_BATCH  # rowids 1..docs: the batches
        rows = [(d + 1, " ".join([missing[i] for i in plain[d * FTS5_BATCH:(d + 1) * FTS5_BATCH]]))
                for d in range(docs)]
        rows += [(docs + 1 + j, missing[i]) for j, i in enumerate(other)]
        out = [""] * len(missing)
        conn = self._conn
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO w(rowid, word) VALUES (?, ?)", rows)
        # a batch's offsets are its words' positions; a word of its own: offset 0 is its
        # first token (later ones are the rare FTS5 splits)
        for doc, offset, term in conn.execute("SELECT doc, offset, term FROM wv"):
            if doc <= docs:
                out[plain[(doc - 1) * FTS5_BATCH + offset]] = term
            elif offset == 0:
                out[other[doc - docs - 1]] = term
        conn.execute("INSERT INTO w(w) VALUES ('delete-all')")
        conn.execute("COMMIT")
        return out

    def __len__(self) -> int:
        return len(self._cache)


#: Process-wide stemmer: stems are a pure function of the word, so tiers share it.
STEMMER = Stemmer()


class _StopWords:
    """scikit-learn's English stop words, loaded once.

    Importing scikit-learn costs ~0.6 s, so a process that only searches gets
    the list from the mirror cache (:meth:`prime`) and never imports it.
    """

    def __init__(self) -> None:
        self._words: frozenset[str] | None = None

    def get(self) -> frozenset[str]:
        if self._words is None:
            from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

            self._words = frozenset(ENGLISH_STOP_WORDS)
        return self._words

    def prime(self, words: Iterable[str]) -> None:
        words = frozenset(words)
        if self._words is None and words:
            self._words = words


#: Stop words removed by the TF-IDF signal (never by FTS5 or BM25).
STOP_WORDS = _StopWords()
