"""Partial edits of an entry: a patch changes only the fields it names.

``apply_patch(entry, patch)`` returns the edited entry (validated exactly as a
capture is) and the names of the fields whose value changed. ``changed_fields``
compares two versions of an entry the same way, which is how a capture over an
existing id reports what it replaced.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from tiervault.errors import ValidationError
from tiervault.vault.entry import Entry

__all__ = ["PATCH_FIELDS", "TAG_EDITS", "UpdateResult", "apply_patch", "changed_fields"]

#: Fields a patch may set (``None`` or "" clears an optional one).
PATCH_FIELDS = ("title", "description", "type", "domain", "severity", "context", "example",
                "counter_example", "why", "tags", "applies_to", "origin", "valid_from",
                "valid_until")
#: Relative edits of the tag list, applied after ``tags`` (if both are given).
TAG_EDITS = ("add_tags", "remove_tags")
#: Fields that are bookkeeping, not content: never reported as changed.
_BOOKKEEPING = ("id", "created_at", "updated_at", "content_hash")


@dataclass(frozen=True, slots=True)
class UpdateResult:
    """What an update did: the entry as stored, its tier, and the fields that changed
    (empty: the patch matched the stored values and nothing was written)."""

    entry: Entry
    tier: str
    changed: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.entry.id, "tier": self.tier, "changed": list(self.changed),
                "entry": self.entry.to_dict()}


def _tag_list(name: str, value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [t.strip().lower() for t in value.split(",") if t.strip()]
    if isinstance(value, (list, tuple)) and all(isinstance(t, str) for t in value):
        return [t.strip().lower() for t in value if t.strip()]
    raise ValidationError(name, 'expected a list of tags, e.g. ["http", "retry"]')


def apply_patch(entry: Entry, patch: Mapping[str, Any]) -> tuple[Entry, tuple[str, ...]]:
    """``entry`` with the fields of ``patch`` replaced; (new entry, changed field names).

    ``created_at`` is kept; ``updated_at`` is left unset so the store stamps the
    time of the write. Unknown keys are an error naming the allowed ones.
    """
    if not isinstance(patch, Mapping):
        raise ValidationError("patch", f"expected an object of fields, got {type(patch).__name__}")
    allowed = (*PATCH_FIELDS, *TAG_EDITS)
    unknown = sorted(k for k in patch if k not in allowed)
    if unknown:
        raise ValidationError(unknown[0], f"cannot be patched; patchable fields: "
                              f"{', '.join(allowed)}")
    if not patch:
        raise ValidationError("patch", f"is empty; give at least one of {', '.join(allowed)}")
    data = entry.to_dict()
    for key in _BOOKKEEPING:
        data.pop(key, None)
    data["id"] = entry.id
    data["created_at"] = entry.created_at
    for key in PATCH_FIELDS:
        if key in patch:
            data[key] = patch[key]
    if "add_tags" in patch or "remove_tags" in patch:
        tags = _tag_list("tags", data.get("tags"))
        drop = set(_tag_list("remove_tags", patch.get("remove_tags")))
        tags = [t for t in tags if t not in drop]
        tags += [t for t in _tag_list("add_tags", patch.get("add_tags")) if t not in tags]
        data["tags"] = tags
    edited = Entry.from_dict(data)
    return edited, changed_fields(entry, edited)


def changed_fields(old: Entry | None, new: Entry) -> tuple[str, ...]:
    """Names of the content, validity and origin fields that differ (all set ones when
    ``old`` is None)."""
    before = old.to_dict() if old is not None else {}
    after = new.to_dict()
    return tuple(k for k in after if k not in _BOOKKEEPING and before.get(k) != after[k]
                 and (old is not None or after[k] not in (None, "", [])))
