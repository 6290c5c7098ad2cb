"""Editing an entry from a web form: the CLI's validation, every error next to its field.

The form's values go through :meth:`Entry.from_dict` — exactly what ``tiervault
capture`` does — so the page accepts nothing the CLI would refuse. ``from_dict``
stops at the first bad field; to show every problem at once each field is
also checked on its own (with placeholder title and description), then the
whole entry once more for rules spanning fields (``valid_until`` after
``valid_from``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from tiervault.errors import ValidationError
from tiervault.vault.entry import Entry, format_timestamp

__all__ = ["EDITABLE_FIELDS", "LONG_FIELDS", "EditResult", "form_values", "apply_form"]

#: Fields a curator edits, in form order. ``id`` and ``origin`` are kept; ``created_at`` too.
EDITABLE_FIELDS = ("title", "description", "type", "domain", "severity", "tags", "applies_to",
                   "context", "example", "counter_example", "why", "valid_from", "valid_until")
LONG_FIELDS = ("description", "context", "example", "counter_example", "why")
_LIST_FIELDS = ("tags", "applies_to")
_PLACEHOLDER = {"title": "x", "description": "x"}


@dataclass(slots=True)
class EditResult:
    """The validated entry, or the errors by field name (and the values to show again)."""

    values: dict[str, str]
    entry: Entry | None = None
    errors: dict[str, str] = field(default_factory=dict)


def form_values(entry: Entry) -> dict[str, str]:
    """An entry as the strings its edit form shows."""
    out: dict[str, str] = {}
    for name in EDITABLE_FIELDS:
        value = getattr(entry, name)
        if name in _LIST_FIELDS:
            out[name] = ", ".join(value)
        elif name in ("valid_from", "valid_until"):
            out[name] = format_timestamp(value) or ""
        else:
            out[name] = value
    return out


def _message(exc: ValidationError) -> str:
    text = str(exc)
    prefix = f"{exc.field}: "
    return text[len(prefix):] if text.startswith(prefix) else text


def apply_form(original: Entry, form: Mapping[str, Any]) -> EditResult:
    """Validate the form's fields over ``original``; the id, origin and creation time stay."""
    values = {name: str(form.get(name, "")) for name in EDITABLE_FIELDS}
    result = EditResult(values)
    for name, value in values.items():
        probe = dict(_PLACEHOLDER)
        probe[name] = value
        try:
            Entry.from_dict(probe)
        except ValidationError as exc:
            result.errors[exc.field if exc.field in EDITABLE_FIELDS else name] = _message(exc)
    if result.errors:
        return result
    data: dict[str, Any] = dict(values)
    data.update(id=original.id, origin=original.origin, created_at=original.created_at)
    try:
        result.entry = Entry.from_dict(data)
    except ValidationError as exc:
        result.errors[exc.field if exc.field in EDITABLE_FIELDS else "title"] = _message(exc)
    return result
