"""Entry rows as the stores keep them: the column order and the row <-> Entry conversions.

Dialect-neutral: shared by every SQL backend (SQLite, PostgreSQL). A row in
:data:`ENTRY_COLUMNS` order becomes an :class:`Entry` through :func:`row_to_entry`.

Rows were validated on the way in, but a file written by an older version may
hold a timestamp the entry model now refuses (non-finite, outside years 1-9999).
Such a row cannot be written out (ISO 8601, JSON), so reads skip it with one
warning per row, and SQL-side reads leave it out with :data:`SANE_TIMES`;
``tiervault check --repair`` fixes it.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Callable, Iterable, Sequence

from tiervault.errors import ValidationError
from tiervault.vault.entry import MAX_TIMESTAMP, MIN_TIMESTAMP, Entry, valid_timestamp
from tiervault.vault.rows import CommittedBatch

__all__ = ["write_in_batches", "ENTRY_COLUMNS", "SELECT_ENTRY", "unchanged", "row_to_entry", "rows_to_entries",
           "entry_params", "insert_row", "SANE_TIMES"]

log = logging.getLogger(__name__)

ENTRY_COLUMNS = ("id", "type", "domain", "title", "description", "context", "example",
                 "counter_example", "why", "tags", "applies_to", "severity", "origin",
                 "valid_from", "valid_until", "created_at", "updated_at", "content_hash")
#: The columns of an entry row, prefixed for a table aliased ``e``.
SELECT_ENTRY = ", ".join(f"e.{c}" for c in ENTRY_COLUMNS)


def unchanged(entry: Entry, stored: Sequence[Any]) -> bool:
    """True when writing ``entry`` over the stored row would change nothing."""
    chash, origin, vfrom, vuntil, created, updated = stored
    return (chash == entry.content_hash and origin == entry.origin and vfrom == entry.valid_from
            and vuntil == entry.valid_until
            and (entry.created_at is None or entry.created_at == created)
            and (entry.updated_at is None or entry.updated_at == updated))


def row_to_entry(row: Sequence[Any]) -> Entry:
    """A row in ENTRY_COLUMNS order -> Entry (validated on the way in; only the
    timestamps are re-checked, as a file written by older code may hold one that
    cannot be written out: ValidationError then)."""
    (eid, etype, domain, title, desc, ctx, example, counter, why, tags, applies,
     severity, origin, vfrom, vuntil, created, updated, chash) = row
    for name, ts in (("valid_from", vfrom), ("valid_until", vuntil), ("created_at", created),
                     ("updated_at", updated)):
        if ts is not None and not valid_timestamp(ts):
            raise ValidationError(name, f"entry {eid!r} holds {str(ts)[:40]}, not a timestamp "
                                  "of years 1-9999 (fix it with `tiervault check --repair`)")
    return Entry(id=eid, type=etype, domain=domain, title=title, description=desc, context=ctx,
                 example=example, counter_example=counter, why=why,
                 tags=tuple(tags.split()) if tags else (), applies_to=tuple(json.loads(applies)),
                 severity=severity, origin=origin, valid_from=vfrom, valid_until=vuntil,
                 created_at=created, updated_at=updated, content_hash=chash)


def rows_to_entries(rows: Iterable[Sequence[Any]], tier: str) -> list[Entry]:
    """Entries of ``rows``; a row that cannot be one (see :func:`row_to_entry`) is
    reported once on the log and skipped, so one bad row never takes a read down."""
    out = []
    for row in rows:
        try:
            out.append(row_to_entry(row))
        except ValidationError as exc:
            if (tier, row[0]) not in _REPORTED:
                _REPORTED.add((tier, row[0]))
                log.warning("tier %r: skipped a damaged entry: %s", tier, exc)
    return out


_REPORTED: set[tuple[str, str]] = set()


def entry_params(entry: Entry, gen: int, now: float) -> dict[str, Any]:
    return {
        "id": entry.id, "type": entry.type, "domain": entry.domain, "title": entry.title,
        "description": entry.description, "context": entry.context, "example": entry.example,
        "counter_example": entry.counter_example, "why": entry.why, "tags": entry.tag_text,
        "applies_to": json.dumps(list(entry.applies_to)), "severity": entry.severity,
        "origin": entry.origin, "valid_from": entry.valid_from, "valid_until": entry.valid_until,
        "created_at": entry.created_at if entry.created_at is not None else now,
        "updated_at": entry.updated_at if entry.updated_at is not None else now,
        "content_hash": entry.content_hash or entry.compute_hash(), "gen": gen,
        "given_created_at": entry.created_at, "given_updated_at": entry.updated_at,
    }


#: What :func:`insert_row` binds for a missing ``valid_from`` / ``valid_until``: SQLite
#: stores a NaN bound as a double as NULL (``sqlite3VdbeMemSetDouble``), the same row as a
#: bound None, but the driver binds a float directly while every None goes through its
#: adapter look-up (``microprotocols_adapt``, an AttributeError raised and cleared per
#: value): 1.44 against 0.84 us a row of two such columns (bench/README.md, "Issue 16,
#: session 14: the JSONL import").
NULL_REAL = float("nan")


def insert_row(entry: Entry, gen: int, now: float) -> tuple[Any, ...]:
    """:func:`entry_params` of a new row as a tuple in ENTRY_COLUMNS order, then ``gen``
    (the positional INSERT of a bulk write; no dict per row); a missing validity bound
    is :data:`NULL_REAL` (stored as NULL)."""
    e = entry
    vf, vu = e.valid_from, e.valid_until
    return (e.id, e.type, e.domain, e.title, e.description, e.context, e.example,
            e.counter_example, e.why, e.tag_text,
            json.dumps(list(e.applies_to)) if e.applies_to else "[]", e.severity, e.origin,
            NULL_REAL if vf is None else vf, NULL_REAL if vu is None else vu,
            e.created_at if e.created_at is not None else now,
            e.updated_at if e.updated_at is not None else now,
            e.content_hash or e.compute_hash(), gen)


# A row whose timestamps the model would refuse (written by older code) is left out of
# search answers, as rows_to_entries leaves it out of reads. NaN is stored as NULL.
SANE_TIMES = " AND ".join(
    f"({c} IS NULL OR {c} BETWEEN {MIN_TIMESTAMP!r} AND {MAX_TIMESTAMP!r})" if nullable
    else f"(e.{c.split('.')[-1]} BETWEEN {MIN_TIMESTAMP!r} AND {MAX_TIMESTAMP!r})"
    for c, nullable in (("e.valid_from", True), ("e.valid_until", True),
                        ("created_at", False), ("updated_at", False)))


def write_in_batches(entries: Iterable[Entry], batch_size: int,
                     write: Callable[[list[Entry]], int],
                     on_batch: Callable[[CommittedBatch], None] | None = None) -> int:
    """Feed ``entries`` to ``write`` in lists of ``batch_size`` (each one transaction in
    the backend); sums what ``write`` returns, calling ``on_batch`` after each commit."""
    total = 0
    batch: list[Entry] = []
    for entry in entries:
        batch.append(entry)
        if len(batch) >= batch_size:
            written = write(batch)
            total += written
            if on_batch:
                on_batch(CommittedBatch(batch, written, total))
            batch = []
    if batch:
        written = write(batch)
        total += written
        if on_batch:
            on_batch(CommittedBatch(batch, written, total))
    return total
