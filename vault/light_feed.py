"""A first mirror build's rows with what the light-row records need (:mod:`light_records`).

The build reads every row of an SQLite tier once, in one snapshot, a chunk at a time
(the :class:`~tiervault.vault.rows.MirrorRow` fields: ``TierStore.rows_in_chunks`` is this feed).
The records need two values more per row, read by the same statement so that they
describe the same rows at the same generation: ``created_at`` and the summed SQL
``length`` of the three text fields the mirror does not index (example, counter
example, why; SQL's own count, exact whatever they hold).

Records cost a build ~0.7-1.1 us a row (this statement's two values ~0.3, the records'
texts and checks the rest: 100K bench team tier, 49,191 rows, issue 16 session 20), which
the 1M bench tiers' first build (210K-490K rows a tier, 14.89 s of its 15 s budget in
session 19) cannot afford: a tier of more than :data:`RECORDS_MAX_ROWS` rows (its
largest rowid: one index probe) is read without them, its light rows from SQL.
"""

from __future__ import annotations

import logging
import os
from contextlib import contextmanager
from functools import partial
from typing import Any, Iterator

from tiervault.vault.light_records import RecordsBuilder
from tiervault.vault.rows import MirrorRow, MirrorRowColumns
from tiervault.vault.sqlite_sql import MIRROR_COLUMNS, READ_GEN

__all__ = ["RECORDS_MAX_ROWS", "records_max_rows", "rows_with_records"]

log = logging.getLogger(__name__)

#: Tiers up to this many rows (largest rowid) get light records at a build (module docstring);
#: ``TIERVAULT_LIGHT_RECORDS_MAX_ROWS`` overrides it (e.g. to time a 1M build with them).
RECORDS_MAX_ROWS = 150_000
_ENV = "TIERVAULT_LIGHT_RECORDS_MAX_ROWS"


def records_max_rows() -> int:
    """:data:`RECORDS_MAX_ROWS`, or ``TIERVAULT_LIGHT_RECORDS_MAX_ROWS`` if set (a value
    that is not a whole number: one warning naming it, then the default)."""
    raw = os.environ.get(_ENV, "").strip()
    if not raw:
        return RECORDS_MAX_ROWS
    try:
        return int(raw)
    except ValueError:
        log.warning("%s=%r is not a whole number; light records for tiers of up to %d rows",
                    _ENV, raw, RECORDS_MAX_ROWS)
        return RECORDS_MAX_ROWS

_N = len(MirrorRow._fields)
_EXTRA = ", created_at, length(example) + length(counter_example) + length(why)"


@contextmanager
def rows_with_records(store: Any, size: int
                      ) -> Iterator[tuple[int, Iterator[MirrorRowColumns], RecordsBuilder | None]]:
    """Every row of ``store`` (an SQLite tier: ``snapshot``), ``size`` at a time by column,
    their generation, and the records builder each chunk is added to as it is read
    (:meth:`RecordsBuilder.finish` once every chunk was read; None: a tier too large)."""
    with store.snapshot() as conn:
        if conn is None:
            yield 0, iter(()), None
            return
        gen = conn.execute(READ_GEN).fetchone()[0]
        top = conn.execute("SELECT max(rowid) FROM entries").fetchone()[0] or 0
        if top > records_max_rows():
            cur = conn.execute(f"SELECT {MIRROR_COLUMNS} FROM entries ORDER BY rowid")
            yield gen, map(MirrorRowColumns.of, iter(partial(cur.fetchmany, size), [])), None
            return
        records = RecordsBuilder()
        cur = conn.execute(f"SELECT {MIRROR_COLUMNS}{_EXTRA} FROM entries ORDER BY rowid")
        yield gen, (_chunk(rows, records) for rows in iter(partial(cur.fetchmany, size), [])), records


def _chunk(rows: list[tuple], records: RecordsBuilder) -> MirrorRowColumns:
    columns = list(zip(*rows))
    chunk = MirrorRowColumns(*columns[:_N])
    records.add(chunk, columns[_N], columns[_N + 1])
    return chunk
