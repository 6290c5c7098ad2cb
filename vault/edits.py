"""The write operations every adapter shares: a batch capture and a delete.

The CLI, the MCP tools and the HTTP API each used to carry their own copy of
"check each record, write the good ones, report the bad ones" and of "delete,
then say which tiers still hold a copy". They differ only in how they present
the answer (a 400 page, a JSON reply, a line of text), so the work lives here
and each adapter renders the named result.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Sequence

from tiervault.errors import EntryNotFound, ValidationError
from tiervault.vault.entry import Entry
from tiervault.vault.jsonl import LinkSpec, capture_linked, parse_record
from tiervault.vault.patch import changed_fields

__all__ = ["BatchCapture", "Deletion", "capture_batch", "delete_entry", "parse_batch", "write_parsed"]


@dataclass(slots=True)
class BatchCapture:
    """What a batch capture did: ids written (in input order), ids that replaced a
    stored entry with the fields that changed, items refused with the reason, and
    links that could not be stored (their entries were written)."""

    tier: str
    written: list[str] = field(default_factory=list)
    replaced: list[dict[str, Any]] = field(default_factory=list)
    failed: list[dict[str, Any]] = field(default_factory=list)
    link_errors: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tier": self.tier, "written": self.written,
                               "replaced": self.replaced, "failed": self.failed}
        if self.link_errors:
            out["linkErrors"] = self.link_errors
        return out


@dataclass(frozen=True, slots=True)
class Deletion:
    """A delete that happened: the tier it was deleted from and the tiers that still
    hold an entry with the same id (a delete never reaches past its tier)."""

    id: str
    tier: str
    still_in: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "tier": self.tier, "deleted": True, "stillIn": list(self.still_in)}


def parse_batch(records: Sequence[Any], origin: str = "agent"
                ) -> tuple[list[tuple[int, Entry, tuple[LinkSpec, ...]]], list[dict[str, Any]]]:
    """Check each record (an object or its JSON text): ``(good, failed)`` where good is
    ``(index, entry, links)`` and failed is ``{"index", "id", "error"}``. A record
    without an origin gets ``origin``; an id used twice in one batch fails the second."""
    good: list[tuple[int, Entry, tuple[LinkSpec, ...]]] = []
    failed: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for i, record in enumerate(records):
        rid = record.get("id") if isinstance(record, dict) else None
        try:
            if isinstance(record, str):
                record = json.loads(record)
            if not isinstance(record, dict):
                raise ValidationError("entries", f"item {i} is not an object; send entry objects")
            entry, links = parse_record({"origin": origin, **record})
        except (ValidationError, json.JSONDecodeError, TypeError) as exc:
            failed.append({"index": i, "id": rid, "error": str(exc)})
            continue
        if entry.id in seen:
            failed.append({"index": i, "id": entry.id, "error": f"id {entry.id!r} is already "
                           f"used by entries[{seen[entry.id]}] in this call; give it another id"})
            continue
        seen[entry.id] = i
        good.append((i, entry, tuple(links)))
    return good, failed


def capture_batch(manager: Any, records: Sequence[Any], tier: str,
                  origin: str = "agent") -> BatchCapture:
    """Write every valid record of ``records`` to ``tier`` through the manager (so write
    hooks such as embed-on-write run), then their links. Invalid records are reported,
    never fatal to the others."""
    good, failed = parse_batch(records, origin)
    return write_parsed(manager, good, failed, tier)


def write_parsed(manager: Any, good: Sequence[tuple[int, Entry, tuple[LinkSpec, ...]]],
                 failed: list[dict[str, Any]], tier: str) -> BatchCapture:
    """The write half of :func:`capture_batch`, for a caller that looked at
    :func:`parse_batch`'s answer first (the HTTP API refuses an all-bad batch)."""
    report = BatchCapture(tier, failed=failed)
    if not good:
        return report
    before = manager.store(tier).get_many([e.id for _, e, _ in good])
    report.link_errors = capture_linked(manager, good, tier)
    report.written = [e.id for _, e, _ in good]
    report.replaced = [{"id": e.id, "changed": list(changed_fields(before[e.id], e))}
                       for _, e, _ in good if e.id in before]
    return report


def delete_entry(manager: Any, entry_id: str, tier: str | None = None) -> Deletion:
    """Delete ``entry_id`` from ``tier`` (default: the highest-priority tier holding
    it). Unknown id there: EntryNotFound."""
    name = tier if tier is not None else manager.locate(entry_id)
    if name is None or not manager.delete(entry_id, name):
        raise EntryNotFound(entry_id)
    still = tuple(t.name for t in manager.ordered()
                  if t.store is not None and t.store.get(entry_id) is not None)
    return Deletion(entry_id, name, still)
