"""Term proximity: the query's content words next to each other in an entry (issue 10).

BM25 scores every query term on its own, so an entry that says "connection pool"
scores like one that names "connection" in one paragraph and "pool" in another.
The classic remedy is the ordered-window feature of Metzler & Croft's sequential
dependence model; here it is one bounded signal mixed into the lexical leg:

    terms   = the query's words without function words (tiervault.vault.function_words),
              stemmed as FTS5 stems them
    pairs   = consecutive terms (a, b) with a != b          (a list: a repeat counts twice)
    prox(d) = |{(a, b) in pairs : b follows a within `window` positions
                                  inside one FTS5 field of d}| / |pairs|        in [0, 1]
    lex_q  <- (lex_q + mu * prox) / max over the query's candidates (entries and memories)

with ``mu`` = ``BrainConfig.proximity_weight`` (0.3) and ``window`` =
``BrainConfig.proximity_window`` (8), chosen on SciFact ODD query ids + the agent set's
TUNE half (eval/README.md). Fields are the FTS5 columns (id, title, description,
context, tags), split and stemmed exactly as the index is (``split_words`` + FTS5's own
stemmer), and a window never spans two fields. A query with fewer than two content
words has no pairs: nothing is read and the lexical signal is unchanged. An entry with
no lexical match cannot hold a pair (both words are query terms), so only lexical
matches are read, and of them only the ``max(limit, min_fetch)`` best by BM25 (an
entry deeper than the answer's length cannot be lifted into it by a bonus of at most
``mu``; this bounds the cost: reading and splitting a 250-word entry is ~0.1 ms).
Memories have no fields here: their proximity is 0.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import numpy as np

from tiervault.vault.function_words import FUNCTION_WORDS
from tiervault.vault.query import query_terms
from tiervault.vault.rows import FieldTexts
from tiervault.vault.tokenizer import STEMMER, split_words

__all__ = ["FIELDS", "query_pairs", "entry_proximity", "proximities", "stem_prefix"]

#: The entry fields FTS5 indexes (vault/schema.py), in index order.
FIELDS = ("id", "title", "description", "context", "tags")


def query_pairs(query: str) -> list[tuple[str, str]]:
    """Consecutive content-word stems of ``query`` (function words dropped), a != b;
    none for a query of function words only."""
    words = [w for w in query_terms(query) if w not in FUNCTION_WORDS]
    stem_of = STEMMER.stems(words)
    seq = [stem_of[w] for w in words if stem_of[w]]
    return [(a, b) for a, b in zip(seq, seq[1:]) if a != b]


def _field_text(value: Any) -> str:
    if type(value) is str:  # the common case first (FieldTexts' columns)
        return value
    if isinstance(value, (list, tuple)):
        return " ".join(str(v) for v in value)
    return str(value or "")


def stem_prefix(stem: str) -> str:
    """What every ASCII word stemming to ``stem`` starts with: Porter rewrites only a
    word's ending and may change a stem's last letter ("fly" -> "fli"), so all of the
    stem but its last letter (at least one letter). Checked over the 42,711 distinct
    words of SciFact and both packs: every ASCII word holds (tests/test_proximity.py
    checks the packs); non-ASCII text (diacritics are folded) is always stemmed."""
    return stem[:max(1, len(stem) - 1)]


def _follows(pa: Iterable[int], pb: Sequence[int], window: int) -> bool:
    return any(0 < y - x <= window for x in pa for y in pb)


def entry_proximity(entry: Any, pairs: Sequence[tuple[str, str]], window: int,
                    prefixes: dict[str, str] | None = None) -> float:
    """Share of ``pairs`` whose second stem follows the first within ``window``
    positions inside one field of ``entry``; 0 without pairs.

    Cheap first: an ASCII entry holding neither pair's two :func:`stem_prefix` as
    substrings anywhere holds no pair (55 % of the 8,505 entries read in 300 bench hybrid
    scans, session 12: one test of the joined fields, lowered once); a field is split
    only if it holds both words' prefixes (a necessary condition), and only its words
    that start with a wanted prefix are stemmed (stemming every word of a long entry
    costs ~3x more)."""
    if not pairs:
        return 0.0
    pre = prefixes if prefixes is not None else _prefixes(pairs)
    raw = [_field_text(v) for v in (entry if type(entry) is FieldTexts
                                    else (getattr(entry, f, "") for f in FIELDS))]
    whole = "\n".join(raw)
    if whole.isascii():  # ASCII: lowering the joined text is lowering each field (per letter)
        whole = whole.lower()
        if not any(pre[a] in whole and pre[b] in whole for a, b in pairs):
            return 0.0  # no field can hold a pair if the whole entry holds no pair's two prefixes
    texts = [t.lower() for t in raw]  # only the ~4 % of entries that may hold a pair
    left = list(range(len(pairs)))
    hit = 0
    for text in texts:
        if not left:
            break
        plain = text.isascii()
        live = [k for k in left
                if not plain or (pre[pairs[k][0]] in text and pre[pairs[k][1]] in text)]
        if not live:
            continue
        wanted = {st for k in live for st in pairs[k]}
        starts = tuple({pre[st] for st in wanted})
        words = split_words(text)
        cand = {w for w in words if w.startswith(starts) or (not plain and not w.isascii())}
        keep = {w: st for w, st in STEMMER.stems(cand).items() if st in wanted}
        pos: dict[str, list[int]] = {}
        for i, w in enumerate(words):
            st = keep.get(w)
            if st is not None:
                pos.setdefault(st, []).append(i)
        for k in live:
            a, b = pairs[k]
            if a in pos and b in pos and _follows(pos[a], pos[b], window):
                hit += 1
                left.remove(k)
    return hit / len(pairs)


def proximities(entries: Sequence[Any | None], pairs: Sequence[tuple[str, str]],
                window: int) -> np.ndarray:
    """:func:`entry_proximity` of each entry (None: not found -> 0)."""
    pre = _prefixes(pairs)
    return np.array([0.0 if e is None else entry_proximity(e, pairs, window, pre) for e in entries],
                    dtype=np.float64)


def _prefixes(pairs: Sequence[tuple[str, str]]) -> dict[str, str]:
    """:func:`stem_prefix` of every stem of ``pairs`` (once per query, not per entry)."""
    return {st: stem_prefix(st) for pair in pairs for st in pair}
