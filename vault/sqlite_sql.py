"""SQL of the entries table shared by the SQLite backend modules.

Column lists, the upsert statement, the FTS maintenance statements, the row ->
Entry conversion and the Filters -> WHERE compiler of the SQLite dialect.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Iterable, Sequence

from tiervault.errors import ValidationError
from tiervault.vault.entry import MAX_TIMESTAMP, MIN_TIMESTAMP, Entry, valid_timestamp
from tiervault.vault.filters import Filters

__all__ = ["ENTRY_COLUMNS", "SELECT_ENTRY", "UPSERT_ENTRY", "FTS_DELETE", "FTS_INSERT",
           "unchanged", "row_to_entry", "rows_to_entries", "entry_params", "filter_sql",
           "SANE_TIMES"]

log = logging.getLogger(__name__)

ENTRY_COLUMNS = ("id", "type", "domain", "title", "description", "context", "example",
                 "counter_example", "why", "tags", "applies_to", "severity", "origin",
                 "valid_from", "valid_until", "created_at", "updated_at", "content_hash")
SELECT_ENTRY = ", ".join(f"e.{c}" for c in ENTRY_COLUMNS)
_UPDATABLE = [c for c in ENTRY_COLUMNS if c not in ("id", "created_at")]
UPSERT_ENTRY = (
    f"INSERT INTO entries ({', '.join(ENTRY_COLUMNS)}, gen) "
    f"VALUES ({', '.join(':' + c for c in ENTRY_COLUMNS)}, :gen) "
    "ON CONFLICT(id) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in _UPDATABLE)
    + ", created_at = COALESCE(:given_created_at, entries.created_at), gen = excluded.gen"
)
FTS_DELETE = (
    "INSERT INTO entries_fts(entries_fts, rowid, id, title, description, context, tags) "
    "SELECT 'delete', rowid, id, title, description, context, tags FROM entries "
    "WHERE id IN (SELECT value FROM json_each(?))")
FTS_INSERT = (
    "INSERT INTO entries_fts(rowid, id, title, description, context, tags) "
    "SELECT rowid, id, title, description, context, tags FROM entries WHERE gen = ?")


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

# A row whose timestamps the model would refuse (written by older code) is left out of
# search answers, as rows_to_entries leaves it out of reads. NaN is stored as NULL.
SANE_TIMES = " AND ".join(
    f"({c} IS NULL OR {c} BETWEEN {MIN_TIMESTAMP!r} AND {MAX_TIMESTAMP!r})" if nullable
    else f"(e.{c.split('.')[-1]} BETWEEN {MIN_TIMESTAMP!r} AND {MAX_TIMESTAMP!r})"
    for c, nullable in (("e.valid_from", True), ("e.valid_until", True),
                        ("created_at", False), ("updated_at", False)))


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


def filter_sql(filters: Filters, alias: str = "e") -> tuple[str, list[Any]]:
    """Filters -> (" AND ..." SQL fragment, parameters). Values are always parameters."""
    parts: list[str] = []
    params: list[Any] = []
    for column, values in (("type", filters.types), ("domain", filters.domains),
                           ("severity", filters.severities), ("origin", filters.origins)):
        if values:
            parts.append(f"{alias}.{column} IN ({', '.join('?' * len(values))})")
            params.extend(values)
    if filters.tags:
        parts.append("(" + " OR ".join(
            f"instr(' ' || {alias}.tags || ' ', ' ' || ? || ' ') > 0" for _ in filters.tags) + ")")
        params.extend(filters.tags)
    now = filters.moment
    if not filters.include_expired:
        parts.append(f"({alias}.valid_until IS NULL OR {alias}.valid_until > ?)")
        params.append(now)
    if not filters.include_future:
        parts.append(f"({alias}.valid_from IS NULL OR {alias}.valid_from <= ?)")
        params.append(now)
    return "".join(" AND " + p for p in parts), params
