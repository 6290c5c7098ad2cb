"""Terms of the PostgreSQL tier: the SQLite tier's FTS5 terms, computed in Python.

Both backends index the same ``porter unicode61`` stems (the tokenizer asks
FTS5 itself), so the BM25 of the in-memory mirror is the same function of the
same numbers whichever backend fed it. This module makes the per-row pieces
stored at write time (``terms`` tsvector lexemes, ``doclen``) and scores rows
exactly like FTS5's ``bm25()`` for the server-side path (:meth:`search_fts`,
memories), which reads candidates through the GIN index.
"""

from __future__ import annotations

from collections import Counter
from itertools import chain
from typing import Any, Sequence

import numpy as np

from tiervault.vault.scoring import bm25_term, fts5_idf
from tiervault.vault.tokenizer import STEMMER, split_each, split_words

__all__ = ["statistics_sql", "row_terms", "batch_terms", "query_stems", "bm25_rows", "tsquery_of", "tsvector_text",
           "tsvector_binary", "EMPTY_TSVECTOR_BINARY"]

#: Lexemes longer than this are left out of a tsvector (PostgreSQL's limit is 2,047 bytes).
MAX_LEXEME_BYTES = 2_000


def row_terms(fields: Sequence[str]) -> tuple[list[str], int]:
    """(distinct stems, token count) of one row's indexed fields (FTS5's doclen)."""
    words = [w for f in fields for w in split_words(f or "")]
    stems = STEMMER.stems(words)
    kept = [stems[w] for w in words if stems[w]]
    return sorted(set(kept)), len(kept)


def tsvector_text(stems: Sequence[str]) -> str:
    """A tsvector literal of distinct ``stems`` (quoted; cast with ``::tsvector``, no parsing).

    Stems are letters and digits only (``split_words``), so quoting needs no escapes.
    """
    kept = [t for t in stems if len(t) <= MAX_LEXEME_BYTES // 4 or len(t.encode()) <= MAX_LEXEME_BYTES]
    return "'" + "' '".join(kept) + "'" if kept else ""


#: ``tsvector_binary([])``: a count of 0 lexemes.
EMPTY_TSVECTOR_BINARY = b"\0\0\0\0"


def tsvector_binary(stems: Sequence[str]) -> bytes:
    """PostgreSQL's binary form of a tsvector of distinct ``stems`` (what ``tsvectorrecv`` reads).

    Layout: a big-endian uint32 count, then per lexeme its UTF-8 bytes, a NUL and a
    uint16 count of positions (0: we store none) -- so consecutive lexemes are
    joined by three NUL bytes. The lexemes go in tsvector order (bytes compared with
    ``memcmp``, a prefix first: Python's ``sorted`` on ``str``, since UTF-8 keeps
    code point order), so the server stores them as ``tsvectorin`` would from the
    literal, with no text to parse and nothing to sort. Stems hold no NUL (letters
    and digits only); those over :data:`MAX_LEXEME_BYTES` are left out, as in
    :func:`tsvector_text`.
    """
    kept = sorted(t for t in stems if len(t) <= MAX_LEXEME_BYTES // 4 or len(t.encode()) <= MAX_LEXEME_BYTES)
    if not kept:
        return EMPTY_TSVECTOR_BINARY
    return len(kept).to_bytes(4, "big") + ("\0\0\0".join(kept) + "\0\0\0").encode()


def batch_terms(rows: Sequence[Sequence[str]], binary: bool = False) -> list[tuple[Any, int]]:
    """(tsvector, token count) per row; the words of all rows are stemmed at once.

    The tsvector is the literal (:func:`tsvector_text`, ``str``) or, with ``binary``,
    its binary form (:func:`tsvector_binary`, ``bytes``: for a binary COPY).

    A row's fields are split as one text joined by newlines (a separator for
    unicode61 and for :func:`split_words` alike), all rows in one pass
    (:func:`~tiervault.vault.tokenizer.split_each`). Words map to stems through
    the stemmer cache's own ``__getitem__``, so a row's distinct stems are
    ``set(map(stem, words))`` minus '' (a word FTS5 finds no token in) with no
    Python code run per word; the token count is len(words) minus the words whose
    stem is '' (rare: counted only when there are some). Only a row whose text is
    longer than ``MAX_LEXEME_BYTES // 4`` characters can hold a stem that long (a
    stem is never longer than its word), so only such rows are checked for one.
    """
    try:
        texts = list(map("\n".join, rows))
    except TypeError:  # a None field: as an empty one
        texts = ["\n".join([f or "" for f in fields]) for fields in rows]
    words_of = split_each(texts)
    stem_of = STEMMER.lookup(chain.from_iterable(words_of))
    limit = MAX_LEXEME_BYTES // 4
    out = []
    for words, text in zip(words_of, texts):
        stems = set(map(stem_of, words))
        count = len(words)
        if "" in stems:
            stems.discard("")
            count -= sum(1 for w in words if not stem_of(w))
        if not stems:
            out.append((EMPTY_TSVECTOR_BINARY if binary else "", count))
        elif len(text) > limit and max(map(len, stems)) > limit:
            out.append((tsvector_binary(stems) if binary else tsvector_text(sorted(stems)), count))
        elif binary:  # every stem is short enough: no per-stem length check
            kept = sorted(stems)
            out.append((len(kept).to_bytes(4, "big") + ("\0\0\0".join(kept) + "\0\0\0").encode(), count))
        else:
            out.append(("'" + "' '".join(stems) + "'", count))
    return out


def query_stems(terms: Sequence[str]) -> list[str]:
    """Query words -> distinct stems, in order (as the manager builds them)."""
    stem_of = STEMMER.stems(terms)
    return list(dict.fromkeys(stem_of[t] for t in terms if stem_of[t]))


def tsquery_of(stems: Sequence[str]) -> str:
    """A tsquery matching any of ``stems`` as whole lexemes (quoted, never syntax)."""
    return " | ".join("'" + s.replace("\\", "\\\\").replace("'", "''") + "'" for s in stems)


def bm25_rows(rows: Sequence[Sequence[str]], weights: Sequence[float], stems: Sequence[str],
              n_rows: int, df: Sequence[int], avglen: float) -> np.ndarray:
    """FTS5 ``bm25()`` of each row (its indexed fields in ``weights`` order) for ``stems``."""
    scores = np.zeros(len(rows), dtype=np.float64)
    if not rows or not stems:
        return scores
    idf = fts5_idf(n_rows, np.asarray(df, dtype=np.float64))
    index = {s: i for i, s in enumerate(stems)}
    wtf = np.zeros((len(rows), len(stems)), dtype=np.float64)
    doclen = np.zeros(len(rows), dtype=np.float64)
    for r, fields in enumerate(rows):
        for weight, text in zip(weights, fields):
            words = split_words(text or "")
            stem_of = STEMMER.stems(words)
            counts = Counter(stem_of[w] for w in words if stem_of[w])
            doclen[r] += sum(counts.values())
            for stem, count in counts.items():
                i = index.get(stem)
                if i is not None:
                    wtf[r, i] += weight * count
    for i in range(len(stems)):
        scores += np.where(wtf[:, i] > 0, bm25_term(wtf[:, i], doclen, avglen, float(idf[i])), 0.0)
    return scores


def statistics_sql(table: str) -> str:
    """One statement: (rows, total doclen, [document frequency of each stem]) of ``table``.

    Its parameter is the list of stems; each frequency is read through the GIN
    index on ``terms`` (a lexeme as a tsquery: ``quote_literal`` makes it one term).
    """
    return (f"SELECT (SELECT count(*) FROM {table}), (SELECT coalesce(sum(doclen), 0) FROM {table}), "
            f"ARRAY(SELECT (SELECT count(*) FROM {table} WHERE terms @@ quote_literal(s.stem)::tsquery) "
            "FROM unnest(%s::text[]) WITH ORDINALITY AS s(stem, n) ORDER BY s.n)")
