"""Rows -> the sparse blocks of a search mirror (:class:`~tiervault.vault.postings.Postings`).

Each row's five FTS columns (id, title, description, context, tags) are split
as FTS5's ``unicode61`` does, each distinct word is stemmed once
(:data:`~tiervault.vault.tokenizer.STEMMER`), and every word becomes a code
``2 * term_id + is_stop_word``. From the codes come two CSR blocks over the
rows: the column-weighted term frequencies (BM25) and the term counts of the
non-id columns without stop words (TF-IDF).

Speed: a field is split for all rows of a chunk at once
(:func:`~tiervault.vault.tokenizer.split_many`), and the row of each word is
recovered with NumPy from the separators, so the per-word Python work is one
dict look-up.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import scipy.sparse as sp

from tiervault.vault.rows import MirrorRow
from tiervault.vault.scoring import FTS_WEIGHTS
from tiervault.vault.string_table import Vocabulary
from tiervault.vault.tokenizer import SEP, STEMMER, STOP_WORDS, split_many, split_words

__all__ = ["Analysed", "analyse_rows", "TEXT_FIELDS"]

#: FTS column order of the MirrorRow text fields.
TEXT_FIELDS = ("id", "title", "description", "context", "tags")
_WEIGHTS = np.asarray(FTS_WEIGHTS, dtype=np.float32)
_SEP_CODE = -2
_NO_TERM = -1


@dataclass(slots=True)
class Analysed:
    """The blocks of one chunk of rows: weighted tf, TF-IDF counts, token counts."""

    w: sp.csr_matrix
    c: sp.csr_matrix
    doclen: np.ndarray


def _field_words(rows: Sequence[MirrorRow], name: str) -> list[str]:
    texts = [getattr(row, name) or "" for row in rows]
    words = split_many(texts)
    if words is None:  # a text holding NUL: split one by one, separators added here
        words = []
        for i, text in enumerate(texts):
            if i:
                words.append(SEP)
            words.extend(w for w in split_words(text) if w != SEP)
    return words


def analyse_rows(rows: Sequence[MirrorRow], vocab: Vocabulary) -> Analysed:
    """The blocks of ``rows``; new stems are added to ``vocab`` (the mirror's
    vocabulary, extended in place)."""
    n = len(rows)
    per_field = [_field_words(rows, name) for name in TEXT_FIELDS]
    # One pass per token: ``first_at`` maps each distinct word to the position of its
    # first occurrence (a running token counter), and each token becomes that position;
    # the words' codes are then computed once per distinct word and gathered with NumPy.
    first_at: dict[str, int] = {}
    counter = itertools.count()
    positions = [np.fromiter(map(first_at.setdefault, words, counter), dtype=np.int64,
                             count=len(words)) for words in per_field]
    sep_at = first_at.pop(SEP, -1)
    stems = STEMMER.stems(first_at)
    stop_words = STOP_WORDS.get()
    # New term ids in sorted stem order, not set order: the ids (T's columns) are then a
    # function of the rows, the same in every process (the latent SVD of vault/latent.py
    # depends on the column order to the last float32 bit).
    wanted = sorted({s for s in stems.values() if s})
    known = vocab.ids(wanted)  # one batched look-up per chunk
    new_ids = iter(vocab.add_many([s for s, t in zip(wanted, known) if t is None]))
    tid_of = dict(zip(wanted, [t if t is not None else next(new_ids) for t in known]))
    tid_of[""] = -1
    n_terms = len(vocab)
    # code = 2 * term id + is_stop_word (low bit: counts for BM25, not for TF-IDF);
    # a word without a term: _NO_TERM; the text separator: _SEP_CODE.
    seen = list(first_at)
    tids = np.fromiter(map(tid_of.__getitem__, map(stems.__getitem__, seen)), dtype=np.int64,
                       count=len(seen))
    stop = np.fromiter(map(stop_words.__contains__, seen), dtype=np.int64, count=len(seen))
    code_at = np.empty(next(counter), dtype=np.int64)
    code_at[np.fromiter(first_at.values(), dtype=np.int64, count=len(seen))] = np.where(
        tids >= 0, 2 * tids + stop, _NO_TERM)
    if sep_at >= 0:
        code_at[sep_at] = _SEP_CODE
    codes_parts, doc_parts, col_parts = [], [], []
    for col, pos in enumerate(positions):
        codes = code_at[pos]
        doc = np.cumsum(codes == _SEP_CODE)  # the row of a word: separators before it
        keep = codes >= 0
        codes_parts.append(codes[keep])
        doc_parts.append(doc[keep])
        col_parts.append(np.full(int(keep.sum()), col, dtype=np.int64))
    codes = np.concatenate(codes_parts)
    doc = np.concatenate(doc_parts)
    col = np.concatenate(col_parts)
    tid = codes >> 1
    shape = (n, n_terms)
    w = sp.csr_matrix((_WEIGHTS[col], (doc, tid)), shape=shape, dtype=np.float32)
    counted = ((col != 0) & ((codes & 1) == 0)).astype(np.float32)
    c = sp.csr_matrix((counted, (doc, tid)), shape=shape, dtype=np.float32)
    c.eliminate_zeros()
    doclen = np.bincount(doc, minlength=n).astype(np.float32)
    return Analysed(w, c, doclen)
