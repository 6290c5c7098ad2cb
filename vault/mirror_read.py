"""A first mirror build's read of an SQLite tier: rows a chunk at a time, the long
texts joined by SQLite a block of rows at a time.

Why: the build splits each FTS text field of a block of rows as one string, the
texts joined by NUL (:mod:`word_codes`). Read row by row, each title, description
and context became a Python ``str`` first (~160 ns a value, the longest values of a
row), was gathered into a list per field and joined again in Python: ~0.35-0.45 s
of a 493,612-row tier's CPU (issue 16, session 16, ``bench/README.md``). Here one
``group_concat`` per block gives each of the three fields' joined string; the other
columns (the slot columns' and the short id and tags) still come row by row as a
:class:`~tiervault.vault.rows.MirrorRow`, with ``""`` in place of the three texts.

Exactness: the joined string is what the build would have made from the row's texts,
or it is not used. SQLite documents no order for ``group_concat``; the block's ids are
concatenated by the same statement, and the block is taken only when they equal the
rows' ids joined in order (ids are unique in a tier) and every joined field holds
exactly one NUL between two rows (validation keeps NUL out of texts; a text holding
one would make the split ambiguous). Otherwise the block's three texts are read row
by row (a list of texts, as the rows' own fields were), in the same snapshot.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from itertools import repeat
from typing import Iterator

from tiervault.vault.rows import MirrorRow
from tiervault.vault.tokenizer import SEP  # the texts' separator (NUL)

__all__ = ["JOINED_FIELDS", "MirrorChunk", "read_chunks"]

#: the MirrorRow text fields a chunk carries joined (``""`` in its rows)
JOINED_FIELDS = ("title", "description", "context")

_ROWS = ("SELECT rowid, id, content_hash, type, domain, severity, origin, valid_from, "
         "valid_until, updated_at, '', '', '', tags FROM entries ORDER BY rowid")
# coalesce: a NULL text is "" to the build (as a row's None) and is not skipped
_JOINED = ("SELECT group_concat(id, char(0)), group_concat(coalesce(title, ''), char(0)), "
           "group_concat(coalesce(description, ''), char(0)), group_concat(coalesce(context, ''), char(0)) "
           "FROM (SELECT id, title, description, context FROM entries "
           "WHERE rowid BETWEEN ? AND ? ORDER BY rowid)")
_EACH = "SELECT title, description, context FROM entries WHERE rowid BETWEEN ? AND ? ORDER BY rowid"


@dataclass(frozen=True, slots=True)
class MirrorChunk:
    """Rows of a first build: ``rows`` (their :data:`JOINED_FIELDS` are ``""``) and,
    for each block of ``block`` rows, the three fields' texts: ``texts[b][f]`` the
    block's texts of ``JOINED_FIELDS[f]`` joined by NUL (a ``str``), or a list of them
    (a block whose joined strings could not be used)."""

    rows: list[MirrorRow]
    block: int
    texts: list[tuple[str | list[str | None], ...]]


def read_chunks(conn: sqlite3.Connection, size: int, block: int) -> Iterator[MirrorChunk]:
    """Every row of ``entries`` in rowid order, ``size`` rows a chunk, on ``conn``
    (whose read transaction the caller holds: one snapshot)."""
    cur = conn.execute(_ROWS)
    while True:
        rows = list(map(tuple.__new__, repeat(MirrorRow), cur.fetchmany(size)))
        if not rows:
            return
        texts = []
        for a in range(0, len(rows), block):
            part = rows[a:a + block]
            lo, hi = part[0].key, part[-1].key
            ids, *joined = conn.execute(_JOINED, (lo, hi)).fetchone()
            n = len(part) - 1
            if ids == SEP.join([r.id for r in part]) and all(j.count(SEP) == n for j in joined):
                texts.append(tuple(joined))
            else:  # not the rows' order, or a text holding NUL: the texts one by one
                each = conn.execute(_EACH, (lo, hi)).fetchall()
                texts.append(tuple(list(f) for f in zip(*each)))
        yield MirrorChunk(rows, block, texts)
