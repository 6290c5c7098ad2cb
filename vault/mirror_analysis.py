"""Rows -> the sparse rows of a search mirror (:class:`~tiervault.vault.postings.Postings`).

Each row's five FTS columns (id, title, description, context, tags) are split
as FTS5's ``unicode61`` does, each distinct word is stemmed once
(:data:`~tiervault.vault.tokenizer.STEMMER`), and every word becomes a code
``2 * term_id + is_stop_word``. From the codes come, per (row, term), two whole
numbers in one canonical CSR block (rows in order, term ids ascending in a row):

    wtf   = sum over the term's tokens in the row of FTS_WEIGHTS[column]   (BM25)
    count = number of its tokens outside the id column, stop words out     (TF-IDF)

Both are exact integers (the weights are whole numbers and a term has at most
5 x 50,001 tokens in a row, ``entry.MAX_TEXT_CHARS``: < 2^24, so the float32
BM25 weights are the same numbers in any summation order). They travel packed
in one int64 (``wtf << 32 | count``), so the whole tier's CSC postings and their
aligned TF-IDF counts come out of one transposition (:func:`assemble`).

Speed (issue 16, first mirror build): the words become codes a chunk at a time
(:class:`~tiervault.vault.word_codes.WordCodes`: an ASCII word of up to 8 bytes is
its own packed ``uint64`` key, looked up in a NumPy hash table, with no Python
object per token); only words never seen before in the build are stemmed and given
term ids (:func:`_learn`, once per chunk). The (row, term) sums are one NumPy sort
of 64-bit keys and a ``reduceat``, not a SciPy COO conversion per matrix.
"""

from __future__ import annotations

import itertools
import sys
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from tiervault.vault.lazy_sparse import sp
from tiervault.vault.rows import MirrorRowColumns, MirrorRow
from tiervault.vault.scoring import FTS_WEIGHTS
from tiervault.vault.vocabulary import Vocabulary
from tiervault.vault.tokenizer import STEMMER, STOP_WORDS
from tiervault.vault.word_codes import FieldTokens, WordCodes

__all__ = ["Analysed", "Assembled", "analyse_rows", "assemble", "packed_pairs", "TEXT_FIELDS"]

#: FTS column order of the MirrorRow text fields.
TEXT_FIELDS = ("id", "title", "description", "context", "tags")
if any(w != int(w) or w <= 0 for w in FTS_WEIGHTS):  # the packed sums need whole weights
    raise ValueError(f"FTS_WEIGHTS {FTS_WEIGHTS} must be positive whole numbers")
_WEIGHTS = np.asarray(FTS_WEIGHTS, dtype=np.int64)
_NO_TERM = -1
_LOW = np.int64(0xFFFF_FFFF)
# a token's share of its (row, term) sum, by (column << 1 | stop word): its column's
# BM25 weight << 32, plus 1 when TF-IDF counts it (not the id column, not a stop word)
_PACKED_VALUE = np.array([(int(_WEIGHTS[c >> 1]) << 32 if (c >> 1) < _WEIGHTS.size else 0)
                          + int((c >> 1) != 0 and (c >> 1) < _WEIGHTS.size and not c & 1)
                          for c in range(16)], dtype=np.int64)
# key = row << 36 | term id << 4 | column << 1 | stop word: rows of a chunk < 2^27
_MAX_ROWS, _MAX_TERMS = 1 << 27, 1 << 32
#: rows tokenised and summed at a time within a chunk (cache-sized: see WordCodes.blocks);
#: the 1M team tier's row analysis, one process: 2.44 s CPU (20,000 rows at once) -> 2.11-2.15
#: (5,000) on 200,000 rows (issue 16, session 14)
BLOCK_ROWS = 5_000


@dataclass(slots=True)
class Analysed:
    """The rows of one chunk: canonical CSR ``indptr`` / ``tids`` with ``packed`` =
    ``wtf << 32 | count`` per entry (module docstring), and each row's token count."""

    indptr: np.ndarray  # int64, rows + 1
    tids: np.ndarray  # int32
    packed: np.ndarray  # int64
    doclen: np.ndarray  # float32

    def w(self, n_terms: int) -> sp.csr_matrix:
        """Column-weighted term frequencies (float32 CSR, rows x ``n_terms``)."""
        return sp.csr_matrix(((self.packed >> 32).astype(np.float32), self.tids, self.indptr),
                             shape=(self.indptr.size - 1, n_terms))

    def c(self, n_terms: int) -> sp.csr_matrix:
        """TF-IDF term counts (float32 CSR, explicit zeros left out)."""
        return counts_csr(self.indptr, self.tids, self.packed, n_terms)


@dataclass(slots=True)
class Assembled:
    """A whole base: the postings (CSC, a column per term) with each entry's TF-IDF
    count aligned, and the TF-IDF counts by row (CSR) the model is fitted on."""

    w: sp.csc_matrix  # float32, canonical
    w_counts: np.ndarray  # unsigned, aligned with w's entries (0: none)
    c: sp.csr_matrix  # float32, canonical, no explicit zeros


def counts_csr(indptr: np.ndarray, tids: np.ndarray, packed: np.ndarray, n_terms: int) -> sp.csr_matrix:
    """The count half of packed CSR entries as a float32 CSR matrix without zeros."""
    count = packed & _LOW
    kept = np.flatnonzero(count)
    # a row's kept entries start at the first kept entry at or after its first entry
    ptr = np.searchsorted(kept, indptr)
    return sp.csr_matrix((count[kept].astype(np.float32), tids[kept], ptr),
                         shape=(indptr.size - 1, n_terms))


def _counts_of_parts(parts: Sequence[Analysed], n: int, n_terms: int) -> sp.csr_matrix:
    """:func:`counts_csr` of the blocks of a whole base, block by block (each block's
    arrays still in cache, not three passes over the base's 10M+ entries)."""
    data, tids, ptrs, kept_before = [], [], [np.zeros(1, dtype=np.int64)], 0
    for p in parts:
        count = p.packed & _LOW
        kept = np.flatnonzero(count)
        data.append(count[kept].astype(np.float32))
        tids.append(p.tids[kept])
        ptrs.append(np.searchsorted(kept, p.indptr[1:]) + kept_before)
        kept_before += kept.size
    if not parts:
        return counts_csr(np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int32),
                          np.zeros(0, dtype=np.int64), n_terms)
    return sp.csr_matrix((np.concatenate(data), np.concatenate(tids), np.concatenate(ptrs)),
                         shape=(n, n_terms))


def _learn(words: list[str], same: np.ndarray, vocab: Vocabulary) -> np.ndarray:
    """Codes of distinct words not seen before (``same[i]``: ``words[i]`` is its own
    FTS5 term; the others are stemmed once); stems new to ``vocab`` get the next term
    ids in sorted stem order (the ids, T's columns, are then a function of the rows,
    the same in every process: the latent SVD of vault/latent.py depends on the
    column order to the last float32 bit)."""
    stems = list(words)
    other = np.flatnonzero(~same).tolist()
    if other:
        stem_of = STEMMER.lookup([words[i] for i in other])
        for i in other:
            stems[i] = stem_of(words[i])
    wanted = sorted(set(stems).difference(("",)))
    known = vocab.ids(wanted)  # one batched look-up
    new_ids = iter(vocab.add_many([s for s, t in zip(wanted, known) if t is None]))
    tid_of = dict(zip(wanted, [t if t is not None else next(new_ids) for t in known]))
    n = len(words)
    tid = np.fromiter(map(tid_of.get, stems, itertools.repeat(-1)), dtype=np.int64, count=n)
    stop = np.fromiter(map(STOP_WORDS.get().__contains__, words), dtype=np.bool_, count=n)
    return np.where(tid >= 0, 2 * tid + stop, _NO_TERM)


def analyse_rows(rows: Sequence[MirrorRow] | MirrorRowColumns, vocab: Vocabulary,
                 words: WordCodes | None = None) -> Analysed:
    """The CSR block of ``rows`` (a build's chunks come by column; :class:`MirrorRow` s are
    taken by column first, :meth:`MirrorRowColumns.of`); new stems are added
    to ``vocab`` (the mirror's vocabulary, extended in place). ``words``: word -> code,
    shared by the chunks of one build (it must have been filled against this ``vocab`` only)."""
    n = len(rows)
    if n >= _MAX_ROWS:
        raise ValueError(f"{n} rows in one chunk: at most {_MAX_ROWS - 1}")
    words = WordCodes() if words is None else words
    cols = rows if isinstance(rows, MirrorRowColumns) else MirrorRowColumns.of(rows)
    fields = [getattr(cols, name) for name in TEXT_FIELDS]
    blocks = words.blocks(fields, lambda new, same: _learn(new, same, vocab), BLOCK_ROWS)
    n_terms = len(vocab)
    if n_terms > _MAX_TERMS:
        raise ValueError(f"{n_terms} terms: at most {_MAX_TERMS}")
    # Each block of rows is summed apart (its arrays still in cache): the keys are
    # row-major, so the blocks' sorted keys, one after another, are the chunk's.
    parts = [_sums(tokens, min(BLOCK_ROWS, n - i * BLOCK_ROWS)) for i, tokens in enumerate(blocks)]
    if len(parts) == 1:
        return parts[0]
    ptrs, offset = [np.zeros(1, dtype=np.int64)], 0
    for part in parts:
        ptrs.append(part.indptr[1:] + offset)
        offset += int(part.indptr[-1])
    return Analysed(np.concatenate(ptrs), np.concatenate([p.tids for p in parts]),
                    np.concatenate([p.packed for p in parts]), np.concatenate([p.doclen for p in parts]))


def _sums(tokens: Sequence[FieldTokens], n: int) -> Analysed:
    """The CSR block of ``n`` rows from their fields' tokens (rows counted from 0)."""
    fields = []
    for field in tokens:
        codes, doc = field.codes, field.rows
        if codes.size and int(codes.min()) < 0:  # a word without a term (rare): left out
            keep = codes >= 0
            codes, doc = codes[keep], doc[keep]
        fields.append((codes, doc))
    # row, term id (code >> 1), column, stop-word bit (code & 1), written in place into
    # one array (no temporary per operation, no concatenation of the fields' keys)
    key = np.empty(sum(c.size for c, _ in fields), dtype=np.int64)
    at = 0
    doclen = np.zeros(n, dtype=np.int64)
    for col, (codes, doc) in enumerate(fields):
        part = key[at:at + codes.size]
        at += codes.size
        np.right_shift(codes, 1, out=part)
        part <<= 4
        part |= doc << 36
        part |= (codes & 1) | (col << 1)
        doclen += np.bincount(doc, minlength=n)
    doclen = doclen.astype(np.float32)
    key.sort()
    pair = key >> 4
    if key.size:
        start = np.flatnonzero(np.concatenate(([True], pair[1:] != pair[:-1])))
        # one sum of packed (weight << 32 | counted) per (row, term): the low 4 bits of
        # the key (column, stop word) name the token's packed value
        packed = np.add.reduceat(_PACKED_VALUE[key & 15], start)
        pair = pair[start]
    else:
        packed = pair = np.zeros(0, dtype=np.int64)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(pair >> 32, minlength=n), out=indptr[1:])
    return Analysed(indptr, (pair & _LOW).astype(np.int32), packed, doclen)


def assemble(parts: Sequence[Analysed], n_terms: int) -> Assembled:
    """The blocks of a whole base, in order: one CSR, one transposition (which carries
    the packed counts into the postings' order), then the halves unpacked."""
    from tiervault.vault.tfidf_rows import count_dtype

    n = sum(p.indptr.size - 1 for p in parts)
    ptrs, offset = [np.zeros(1, dtype=np.int64)], 0
    for p in parts:
        ptrs.append(p.indptr[1:] + offset)
        offset += int(p.indptr[-1])
    indptr = np.concatenate(ptrs)
    tids = np.concatenate([p.tids for p in parts]) if parts else np.zeros(0, dtype=np.int32)
    packed = packed_pairs(parts, offset)
    c = _counts_of_parts(parts, n, n_terms)
    by_row = sp.csr_matrix((packed, tids, indptr), shape=(n, n_terms))
    del packed, tids
    by_col = by_row.tocsc()  # canonical: rows ascending in each column
    del by_row
    # the halves read in place as words of half the packed width (no temporary of 10M+
    # wide values each): both halves are non-negative and fit, so the same whole numbers
    # as ``>> 32`` / ``& _LOW`` of the int64 packing
    half = np.uint16 if by_col.data.dtype == np.uint32 else np.uint32
    halves = by_col.data.view(half).reshape(-1, 2)
    low, high = (0, 1) if sys.byteorder == "little" else (1, 0)
    count = halves[:, low]
    top = float(count.max()) if count.size else 0.0
    w = sp.csc_matrix((halves[:, high].astype(np.float32), by_col.indices, by_col.indptr),
                      shape=(n, n_terms))
    w.has_sorted_indices = True
    return Assembled(w, count.astype(count_dtype(top)), c)


_WIDE = ~np.int64(0x0000_FFFF_0000_FFFF)  # the bits of a packed pair past 16 bits a half


def packed_pairs(parts: Sequence[Analysed], total: int) -> np.ndarray:
    """The parts' packed pairs, in order, as ``uint32`` ``wtf << 16 | count`` when every
    half fits in 16 bits (the usual case: a row's weighted term frequency and count of
    one term under 65,536), else the ``int64`` ``wtf << 32 | count`` as they are: the
    transposition then moves 4 bytes an entry, not 8, and the base's 30M+ entries need
    half the fresh memory (1M team tier: ~240 MB less; issue 16, session 16)."""
    if not parts:
        return np.zeros(0, dtype=np.int64)
    if any(bool(np.bitwise_and(p.packed, _WIDE).any()) for p in parts):
        return np.concatenate([p.packed for p in parts])
    out = np.empty(total, dtype=np.uint32)
    at = 0
    for p in parts:
        x = p.packed
        out[at:at + x.size] = (x >> 16) | (x & 0xFFFF)  # wtf << 16 | count: both < 2^16
        at += x.size
    return out
