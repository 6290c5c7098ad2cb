"""Entry rows read back from a tier: checked on the way out, a damaged one skipped.

Rows were validated on the way in, but a file written by an older version may
hold a timestamp the entry model now refuses (non-finite, outside years 1-9999).
Such a row cannot be written out (ISO 8601, JSON), so reads skip it with one
warning per row, and SQL-side reads leave it out with :data:`SANE_TIMES`;
``tiervault check --repair`` fixes it.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Iterable, Sequence

from tiervault.errors import ValidationError
from tiervault.vault.entry import MAX_TIMESTAMP, MIN_TIMESTAMP, Entry, valid_timestamp

__all__ = ["row_to_entry", "rows_to_entries", "SANE_TIMES"]

log = logging.getLogger(__name__)


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

# A row whose timestamps the model would refuse (written by older code) is left out of
# search answers, as rows_to_entries leaves it out of reads. NaN is stored as NULL.
SANE_TIMES = " AND ".join(
    f"({c} IS NULL OR {c} BETWEEN {MIN_TIMESTAMP!r} AND {MAX_TIMESTAMP!r})" if nullable
    else f"(e.{c.split('.')[-1]} BETWEEN {MIN_TIMESTAMP!r} AND {MAX_TIMESTAMP!r})"
    for c, nullable in (("e.valid_from", True), ("e.valid_until", True),
                        ("created_at", False), ("updated_at", False)))
