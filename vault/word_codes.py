"""Words -> codes for a mirror build, split and looked up a whole chunk at a time.

Why: the first mirror build of a 1,000,000-entry vault meets ~60M tokens. Split by
``str.split`` and looked up in a ``dict`` one by one, each token cost ~130 ns of
CPU (a new ``str`` made, hashed, looked up: issue 16, bench/README.md), a third of
the build. Here an ASCII text's tokens never become Python objects:

1. The texts of one field of a chunk are joined by NUL (validation keeps NUL out of
   every text field) and mapped by one ``bytes.translate``: ASCII letters and
   digits to lower case (unicode61's token characters, as :func:`tokenizer.split_words`
   lowers them), NUL to 1, every other byte to 0. A token is a maximal run of bytes
   >= 2; its text (row) is the number of NULs before it.
2. A token of at most 8 bytes *is* its key: its bytes read as one big-endian
   ``uint64`` (an unaligned 8-byte view of the buffer, masked to the token's
   length). Exact, no hashing: token bytes are never 0, so two words have the same
   key only if they are the same word.
3. The keys are looked up in this build's :class:`KeyTable` (open addressing, every
   probe a NumPy pass over the chunk's keys); the few keys it lacks (words new to
   the build) are made distinct by one ``np.unique`` and learned.

Longer tokens, texts that are not ASCII (split by :func:`tokenizer.split_words`,
whose regular expression follows unicode61 on any letter) and texts holding a NUL go
the old way: ``str`` words looked up in :attr:`WordCodes.codes_of` (which holds every
word learned, however it was met; the table every learned word that packs). Words never seen
in the build are handed to ``learn`` (``mirror_analysis._learn``: stemmed once, new
stems numbered) as one set per chunk, exactly as before, so every code -- and the
term ids, whose order is each chunk's new stems sorted -- is the same as a build
splitting every word with :func:`tokenizer.split_words` (tested).

A token's position within its text is not kept: what is built from the tokens
(per (row, term) sums, row lengths) does not depend on their order.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from tiervault.vault.tokenizer import SEP, split_words

__all__ = ["FieldTokens", "KeyTable", "Learn", "WordCodes", "UNKNOWN", "SHORT"]

UNKNOWN = -3  # a word not coded yet (never a code: codes are >= -1)
SHORT = 8  # bytes: a token this long or shorter is its own uint64 key
# ASCII letters and digits (lower-cased) stay, NUL (the text separator) becomes 1,
# anything else 0: token bytes are >= 2 ('0' is 48), and never 0 inside a key.
_TABLE = bytes(
    1 if c == 0 else (ord(chr(c).lower()) if c < 128 and chr(c).isalnum() else 0)
    for c in range(256))
# the high L bytes of a big-endian key: a token of L bytes and what follows it masked off
_KEEP = np.array([0] + [((1 << (8 * L)) - 1) << (64 - 8 * L) for L in range(1, SHORT + 1)],
                 dtype=np.uint64)
_BIG_U8 = np.dtype(">u8")
#: ``learn(words, same) -> codes``: the codes of distinct words never seen in the build
#: (``same[i]``: ``words[i]`` is known to be its own FTS5 term, no stemming needed)
Learn = Callable[[list[str], np.ndarray], np.ndarray]


@dataclass(slots=True)
class FieldTokens:
    """One field's tokens in a chunk: each one's row (in the chunk) and code."""

    rows: np.ndarray  # int64
    codes: np.ndarray  # int64: 2 * term id + stop word, or -1 (no term)


class WordCodes:
    """word -> code for every chunk of one build: short ASCII words as packed keys in
    :attr:`table` (a :class:`KeyTable`), every learned word in the dict :attr:`codes_of`
    (the one the other words are looked up in)."""

    def __init__(self) -> None:
        self.codes_of: dict[str, int] = {}
        self.table = KeyTable()

    def chunk(self, fields: Sequence[Sequence[str | None]], learn: Learn) -> list[FieldTokens]:
        """The tokens of each field of one chunk (``fields[f][row]``: a text or None);
        ``learn(words, same)`` gives the codes of the words never seen before (``same``:
        the words known to be their own FTS5 term)."""
        return self.blocks(fields, learn, max((len(f) for f in fields), default=0) or 1)[0]

    def blocks(self, fields: Sequence[Sequence[str | None]], learn: Learn,
               block: int) -> list[list[FieldTokens]]:
        """:meth:`chunk`'s tokens by blocks of ``block`` rows: ``out[b][f]`` holds field
        ``f``'s tokens of rows ``b * block ...`` (their rows counted from the block's
        first). The words new to the build are still learned once for the whole chunk
        (the same set, so the same codes and term ids as :meth:`chunk`).

        Why blocks: a 20,000-row chunk's token arrays are ~10 MB each, past the 4 MiB L2;
        a block's stay in cache through the dozen NumPy passes made over them (issue 16,
        session 14: the row analysis ~13% less CPU with blocks of 5,000 rows)."""
        n = max((len(f) for f in fields), default=0)
        starts = list(range(0, n, block)) or [0]
        per_block = [[_split_field(texts[a:a + block]) for texts in fields] for a in starts]
        split = [s for blk in per_block for s in blk]
        width = len(fields)
        short_codes = [self.table.get(s.keys) for s in split]
        # the keys not in the table: few after the first chunks (new words, new numbers)
        misses = [np.flatnonzero(c == UNKNOWN) for c in short_codes]
        missed = _distinct(np.concatenate([s.keys[m] for s, m in zip(split, misses)]))
        get = self.codes_of.get
        unknown = itertools.repeat(UNKNOWN)
        long_codes = [np.fromiter(map(get, s.words, unknown), dtype=np.int64, count=len(s.words))
                      for s in split]
        new_long: set[str] = set()
        for s, c in zip(split, long_codes):
            miss = np.flatnonzero(c == UNKNOWN).tolist()
            if miss:
                new_long.update([s.words[i] for i in miss])
        if not missed.size and not new_long:
            return _by_block(_tokens(split, short_codes, long_codes), width)
        short_words = _words_of(missed)
        # a word met both ways in one chunk (an ASCII word in a non-ASCII text too) once
        longs = list(new_long.difference(short_words))
        words = short_words + longs
        codes = learn(words, np.concatenate([_own_term(missed), np.zeros(len(longs), dtype=np.bool_)]))
        codes_of = self.codes_of
        codes_of.update(zip(words, codes.tolist()))  # every word: the dict path finds them all
        # and every packable word in the table, however it was met first
        packable = [i for i, w in enumerate(longs) if len(w) <= SHORT and w.isascii()]
        self.table.add(np.concatenate([missed, _keys_of([longs[i] for i in packable])]),
                       np.concatenate([codes[:missed.size], codes[missed.size:][packable]]))
        for s, c, m in zip(split, short_codes, misses):
            if m.size:
                c[m] = self.table.get(s.keys[m])
        for s, c in zip(split, long_codes):
            miss = np.flatnonzero(c == UNKNOWN)
            if miss.size:
                c[miss] = np.fromiter(map(codes_of.__getitem__, [s.words[i] for i in miss.tolist()]),
                                      dtype=np.int64, count=miss.size)
        return _by_block(_tokens(split, short_codes, long_codes), width)


def _distinct(keys: np.ndarray) -> np.ndarray:
    """``np.unique(keys)`` by one sort: NumPy 2.4's ``unique`` hashes integers first, ~3x
    slower on a first chunk's ~1.1M missed keys (issue 16, session 23)."""
    keys = np.sort(keys)
    if keys.size < 2:
        return keys
    first = np.empty(keys.size, dtype=np.bool_)
    first[0] = True
    np.not_equal(keys[1:], keys[:-1], out=first[1:])
    return keys[first]


def _by_block(flat: list[FieldTokens], width: int) -> list[list[FieldTokens]]:
    return [flat[i:i + width] for i in range(0, len(flat), width)]


def _tokens(split: list["_Split"], short_codes: list[np.ndarray],
            long_codes: list[np.ndarray]) -> list[FieldTokens]:
    return [FieldTokens(np.concatenate([s.key_rows, s.word_rows]), np.concatenate([k, c]))
            for s, k, c in zip(split, short_codes, long_codes)]


def _own_term(keys: np.ndarray) -> np.ndarray:
    """Which packed words FTS5's ``porter unicode61`` gives back unchanged, by
    :func:`tokenizer.unchanged_by_fts5`'s rule: a lower-case ASCII alphanumeric word
    (every packed word is one) shorter than 3 bytes or ending in a digit."""
    b = keys.astype(_BIG_U8).view(np.uint8).reshape(-1, SHORT)
    length = np.count_nonzero(b, axis=1)
    last = b[np.arange(b.shape[0]), np.maximum(length - 1, 0)]
    return (length < 3) | ((last >= ord("0")) & (last <= ord("9")))


class KeyTable:
    """uint64 key (never 0) -> int64 code: open addressing, linear probing, every
    operation a NumPy pass over a whole array of keys (a probe round per collision
    depth, not a Python step per key)."""

    _MUL = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: the top bits of key * 2^64/phi
    # a slot's key and code side by side: a look-up reads one 16-byte item, one cache miss
    # where two arrays cost two (a 1M tier's table is tens of MB, past every cache)
    _SLOT = np.dtype([("key", np.uint64), ("code", np.int64)])

    def __init__(self, bits: int = 16) -> None:
        self.bits = bits
        self.slots = np.zeros(1 << bits, dtype=self._SLOT)
        self.keys = self.slots["key"]  # views into ``slots``: 0, an empty slot
        self.codes = self.slots["code"]
        self.codes.fill(UNKNOWN)
        # the same bytes as 16-byte numbers: NumPy's take copies these ~4x faster than the
        # structured items (a gather of bytes; the values are never used as numbers)
        self._pairs = self.slots.view(np.complex128)
        self.size = 0

    def _slot(self, keys: np.ndarray) -> np.ndarray:
        return ((keys * self._MUL) >> np.uint64(64 - self.bits)).astype(np.intp)

    def get(self, keys: np.ndarray) -> np.ndarray:
        """The code of each key, UNKNOWN where absent."""
        slot = self._slot(keys)
        mask = (1 << self.bits) - 1
        # the first probe of every key at once (most keys are found there: load <= 1/2)
        first = self._pairs.take(slot).view(self._SLOT)
        seen = first["key"]
        hit = seen == keys
        out = np.where(hit, first["code"], UNKNOWN)
        todo = np.flatnonzero(~hit & (seen != 0))  # another key there: probe the next slot
        slot = (slot[todo] + 1) & mask
        while todo.size:
            probe = self._pairs.take(slot).view(self._SLOT)  # (take of the strided key view
            seen = probe["key"]  # would copy the whole table first: it wants a contiguous one)
            hit = seen == keys[todo]
            out[todo[hit]] = probe["code"][hit]
            go_on = ~hit & (seen != 0)  # another key there: probe the next slot
            todo, slot = todo[go_on], (slot[go_on] + 1) & mask
        return out

    def add(self, keys: np.ndarray, codes: np.ndarray) -> None:
        """Insert distinct keys not in the table yet."""
        if (self.size + keys.size) * 2 > (1 << self.bits):  # load factor <= 1/2
            old = self.keys != 0
            old_keys, old_codes = self.keys[old], self.codes[old]
            bits = self.bits
            while (self.size + keys.size) * 2 > (1 << bits):
                bits += 1
            self.__init__(bits)
            self._place(old_keys, old_codes)
        self._place(keys, codes)

    def _place(self, keys: np.ndarray, codes: np.ndarray) -> None:
        mask = (1 << self.bits) - 1
        slot = self._slot(keys)
        while keys.size:
            free = self._pairs.take(slot).view(self._SLOT)["key"] == 0
            # of several keys probing one free slot, the first takes it
            cand = np.flatnonzero(free)
            _, first = np.unique(slot[cand], return_index=True)
            won = cand[first]
            self.keys[slot[won]] = keys[won]
            self.codes[slot[won]] = codes[won]
            self.size += won.size
            lost = np.ones(keys.size, dtype=np.bool_)
            lost[won] = False
            keys, codes, slot = keys[lost], codes[lost], (slot[lost] + 1) & mask


@dataclass(slots=True)
class _Split:
    keys: np.ndarray  # uint64: the short tokens' keys
    key_rows: np.ndarray  # int64: their rows
    words: list[str]  # every other token, as a str
    word_rows: np.ndarray  # int64: their rows


def _words_of(keys: np.ndarray) -> list[str]:
    """The words of packed keys (big-endian bytes; trailing zero bytes are not part
    of a word, and ``S8`` drops them)."""
    return keys.astype(_BIG_U8).view("S8").astype(f"U{SHORT}").tolist()


def _keys_of(words: list[str]) -> np.ndarray:
    """The packed keys of ASCII words of at most SHORT bytes (the inverse of _words_of)."""
    return np.array([int.from_bytes(w.encode("ascii").ljust(SHORT, b"\0"), "big") for w in words],
                    dtype=np.uint64)


def _split_field(texts: Sequence[str | None]) -> _Split:
    """One field's texts -> short tokens' keys and other tokens' words, with rows."""
    if None in texts:  # (a C scan; most chunks have no NULL column)
        texts = [t or "" for t in texts]
    plain = _joined(texts)
    odd: list[int] = []
    if plain is None:  # a text is not ASCII or holds NUL: those are split one by one
        odd = [i for i, t in enumerate(texts) if not t.isascii() or SEP in t]
        oddset = set(odd)
        rows_of = np.array([i for i in range(len(texts)) if i not in oddset], dtype=np.int64)
        plain = SEP.join([texts[i] for i in rows_of.tolist()])
    else:
        rows_of = None
    keys, key_rows, words, word_rows = _split_ascii(plain)
    if rows_of is not None:
        key_rows, word_rows = rows_of[key_rows], rows_of[word_rows]
    if odd:
        extra = [split_words(texts[i]) for i in odd]
        words = words + [w for ws in extra for w in ws]
        word_rows = np.concatenate([word_rows, np.repeat(np.array(odd, dtype=np.int64),
                                                         [len(ws) for ws in extra])])
    return _Split(keys, key_rows, words, word_rows)


def _joined(texts: list[str]) -> str | None:
    """The texts joined by NUL when all are ASCII and none holds NUL, else None."""
    big = SEP.join(texts)
    if big.isascii() and big.count(SEP) == max(len(texts) - 1, 0):
        return big
    return None


def _split_ascii(big: str) -> tuple[np.ndarray, np.ndarray, list[str], np.ndarray]:
    """Tokens of NUL-joined ASCII texts: (short keys, their rows, long words, their rows)."""
    raw = big.encode("ascii").translate(_TABLE) + bytes(SHORT)  # room for the last 8-byte read
    b = np.frombuffer(raw, dtype=np.uint8)
    n = len(raw) - SHORT
    inside = np.zeros(n + 2, dtype=np.bool_)
    inside[1:-1] = b[:n] > 1
    edges = np.flatnonzero(inside[1:] != inside[:-1])
    starts, ends = edges[0::2], edges[1::2]
    # each token's text: the tokens before each NUL counted by one search per text (a
    # search per token into the NULs, as before, cost ~4x more), then repeated
    before = np.searchsorted(starts, np.flatnonzero(b[:n] == 1))
    per_text = np.diff(before, prepend=0, append=starts.size)
    rows = np.repeat(np.arange(per_text.size, dtype=np.int64), per_text)
    length = ends - starts
    short = length <= SHORT
    s_starts = starts[short]
    view = np.ndarray(shape=(n + 1,), dtype=_BIG_U8, buffer=raw, strides=(1,))
    keys = view[s_starts].astype(np.uint64) & _KEEP[length[short]]
    if short.all():
        return keys, rows, [], np.zeros(0, dtype=np.int64)
    longer = ~short
    text = raw.decode("ascii")
    words = list(map(text.__getitem__, map(slice, starts[longer].tolist(), ends[longer].tolist())))
    return keys, rows[short], words, rows[longer]
