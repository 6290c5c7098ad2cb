"""The knowledge entry: one pattern, anti-pattern, rule, playbook, decision or reference.

``Entry`` is a frozen, validated value. Build it with :func:`Entry.create` (or
:meth:`Entry.from_dict` for JSON), which checks every field and names the field
and the allowed values when one is wrong. Timestamps are ``float`` unix seconds
in memory and ISO 8601 UTC on the wire.
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from dataclasses import dataclass, field, fields, replace
from datetime import datetime, timezone
from collections import deque
from itertools import repeat
from typing import Any, Iterable, Mapping, Sequence

from tiervault.errors import ValidationError

__all__ = [
    "Entry",
    "check_link",
    "ENTRY_TYPES",
    "SEVERITIES",
    "ORIGINS",
    "LINK_TYPES",
    "FEEDBACK_ACTIONS",
    "MAX_TEXT_CHARS",
    "check_text",
    "parse_timestamp",
    "format_timestamp",
    "valid_timestamp",
    "MIN_TIMESTAMP",
    "MAX_TIMESTAMP",
    "slugify",
    "FIELD_NAMES",
    "ID_PATTERN",
    "TAG_PATTERN",
    "SURROGATE_PATTERN",
    "MAX_TITLE_CHARS",
    "MAX_DOMAIN_CHARS",
    "MAX_TAGS",
    "content_hashes",
    "entries_from_columns",
]

ENTRY_TYPES = ("pattern", "anti-pattern", "rule", "playbook", "decision", "reference")
SEVERITIES = ("critical", "warning", "suggestion")
ORIGINS = ("agent", "user", "pack")
LINK_TYPES = ("supports", "contradicts", "extends", "sequences")
FEEDBACK_ACTIONS = ("accepted", "modified", "dismissed", "failed")

#: Documented bounds: a captured text field holds at most this many characters.
MAX_TEXT_CHARS = 100_000
MAX_TITLE_CHARS = 300
MAX_ID_CHARS = 128
MAX_TAGS = 64
MAX_TAG_CHARS = 64
MAX_DOMAIN_CHARS = 64

_ID_RE = re.compile(r"^[a-z0-9_.-]{1,128}$")
_TAG_RE = re.compile(r"^[^\s,\x00-\x1f\ud800-\udfff]{1,64}$")
# A lone surrogate (JSON "\ud800" decodes to one) is not text: SQLite cannot store it as UTF-8.
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_CONTENT_FIELDS = ("type", "domain", "title", "description", "context", "example",
                   "counter_example", "why", "tags", "applies_to", "severity")


#: Timestamps are unix seconds whose UTC date lies in years 1..9999 (what ISO 8601 and
#: Python's datetime can write back); anything else is refused at the model.
MIN_TIMESTAMP = datetime(1, 1, 1, tzinfo=timezone.utc).timestamp()
# The last microsecond of 9999 is not a float: as one it rounds up to 10000-01-01
# (253402300800.0), which no ISO form can write back; so the bound is the float below.
MAX_TIMESTAMP = math.nextafter(
    datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone.utc).timestamp() + 1.0, 0.0)


def valid_timestamp(ts: Any) -> bool:
    """True for a finite float/int in the storable range (years 1..9999 UTC)."""
    return (isinstance(ts, (int, float)) and not isinstance(ts, bool) and math.isfinite(ts)
            and MIN_TIMESTAMP <= ts <= MAX_TIMESTAMP)


def _checked(ts: float, field_name: str, shown: Any) -> float:
    if not math.isfinite(ts):
        raise ValidationError(field_name, f"expected a finite timestamp, got {str(shown)[:60]!r}")
    # Microsecond resolution, the resolution of the ISO form: a timestamp written out
    # and read back is then the same float (export -> import reports it unchanged).
    # Rounded before the range check: rounding may carry a value over the bound.
    ts = round(float(ts), 6)
    if not MIN_TIMESTAMP <= ts <= MAX_TIMESTAMP:
        raise ValidationError(field_name, f"{str(shown)[:60]!r} is outside years 1-9999 (UTC); "
                              "use ISO 8601 (2026-01-31T12:00:00Z) or unix seconds")
    return ts


def parse_timestamp(value: Any, field_name: str) -> float | None:
    """ISO 8601 string, unix seconds (int/float/numeric string) or None -> unix seconds.

    The result is finite, within years 1..9999 in UTC and rounded to microseconds.
    """
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ValidationError(field_name, f"expected a timestamp, got {value!r}")
    if isinstance(value, (int, float)):
        try:
            return _checked(float(value), field_name, value)
        except OverflowError:  # an int too large for a float
            raise ValidationError(field_name, "is outside years 1-9999 (UTC)") from None
    if isinstance(value, datetime):
        dt = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        try:
            return _checked(dt.timestamp(), field_name, value.isoformat())
        except (OverflowError, ValueError):
            raise ValidationError(field_name, "is outside years 1-9999 (UTC)") from None
    if isinstance(value, str):
        text = value.strip()
        try:
            number = float(text)
        except ValueError:  # not a number: an ISO 8601 date is tried below
            pass
        else:
            return _checked(number, field_name, value)
        try:
            dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise ValidationError(
                field_name,
                f"{value[:60]!r} is not a timestamp; use ISO 8601 "
                "(2026-01-31T12:00:00Z) or unix seconds",
            ) from None
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=timezone.utc)
        try:
            ts = dt.timestamp()
        except (OverflowError, ValueError):
            raise ValidationError(field_name, f"{value[:60]!r} is outside years 1-9999 (UTC)") from None
        return _checked(ts, field_name, value)
    raise ValidationError(field_name, f"expected a timestamp, got {type(value).__name__}")


def format_timestamp(ts: float | None) -> str | None:
    """Unix seconds -> ISO 8601 UTC with a ``Z`` suffix (microseconds kept when present).

    Raises ValidationError for a value the model would refuse (see :func:`valid_timestamp`).
    """
    if ts is None:
        return None
    if not valid_timestamp(ts):
        raise ValidationError("timestamp", f"{str(ts)[:40]} is not a storable timestamp")
    dt = datetime.fromtimestamp(ts, tz=timezone.utc)
    spec = "microseconds" if dt.microsecond else "seconds"
    return dt.isoformat(timespec=spec).replace("+00:00", "Z")


def slugify(title: str) -> str:
    """A readable id from a title: ``"Use JWT rotation!"`` -> ``"use-jwt-rotation"``."""
    text = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:80].strip("-")
    return slug or "entry"


def check_text(name: str, value: Any, limit: int = MAX_TEXT_CHARS) -> str:
    """``value`` if it is storable text: a string, no NUL byte, no lone surrogate, <= ``limit``."""
    if not isinstance(value, str):
        raise ValidationError(name, f"expected a string, got {type(value).__name__}")
    if "\x00" in value:
        raise ValidationError(name, "contains a NUL byte")
    if len(value) > limit:
        raise ValidationError(name, f"is {len(value)} characters; the limit is {limit}")
    if not value.isascii() and _SURROGATE.search(value):  # ASCII cannot hold one (O(1) check)
        raise ValidationError(name, "contains a lone surrogate (not valid Unicode text)")
    return value


def check_link(source_id: Any, target_id: Any, link_type: Any, note: Any) -> None:
    """A link's fields as every backend stores them: a known type, storable ids and
    note, and no link from an entry to itself."""
    if link_type not in LINK_TYPES:
        raise ValidationError("link_type", f"{link_type!r} is not one of {', '.join(LINK_TYPES)}")
    check_text("source_id", source_id, MAX_ID_CHARS)
    check_text("target_id", target_id, MAX_ID_CHARS)
    check_text("note", note)
    if source_id == target_id:
        raise ValidationError("target_id", "an entry cannot link to itself")


def _text(data: Mapping[str, Any], name: str, *, required: bool = False,
          limit: int = MAX_TEXT_CHARS) -> str:
    value = data.get(name)
    if value is None:
        if required:
            raise ValidationError(name, "is required")
        return ""
    check_text(name, value, limit)
    if required and not value.strip():
        raise ValidationError(name, "is required and must not be blank")
    return value


def _choice(data: Mapping[str, Any], name: str, allowed: tuple[str, ...], default: str) -> str:
    value = data.get(name)
    if value is None or value == "":
        return default
    if not isinstance(value, str) or value not in allowed:
        raise ValidationError(name, f"{value!r} is not one of {', '.join(allowed)}")
    return value


def _string_list(data: Mapping[str, Any], name: str, *, lower: bool) -> tuple[str, ...]:
    value = data.get(name)
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        value = [part for part in value.split(",")]
    if not isinstance(value, (list, tuple)):
        raise ValidationError(name, f"expected a list of strings, got {type(value).__name__}")
    if len(value) > MAX_TAGS:
        raise ValidationError(name, f"has {len(value)} items; the limit is {MAX_TAGS}")
    out: list[str] = []
    for item in value:
        if not isinstance(item, str):
            raise ValidationError(name, f"items must be strings, got {item!r}")
        item = item.strip()
        if lower:
            item = item.lower()
        if not item:
            continue
        if not _TAG_RE.match(item):
            raise ValidationError(
                name, f"{item[:40]!r} is not allowed: 1-{MAX_TAG_CHARS} characters, "
                "no spaces, commas or control characters")
        if item not in out:
            out.append(item)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Entry:
    """One unit of knowledge. Construct with :meth:`create` / :meth:`from_dict`."""

    id: str
    title: str
    description: str
    type: str = "pattern"
    domain: str = "general"
    context: str = ""
    example: str = ""
    counter_example: str = ""
    why: str = ""
    tags: tuple[str, ...] = ()
    applies_to: tuple[str, ...] = ()
    severity: str = "suggestion"
    origin: str = "agent"
    valid_from: float | None = None
    valid_until: float | None = None
    created_at: float | None = None
    updated_at: float | None = None
    content_hash: str = field(default="", compare=False)

    # -- construction -------------------------------------------------------
    @classmethod
    def create(cls, **fields_: Any) -> "Entry":
        """Validate keyword fields and build an entry (the id defaults to a slug of the title)."""
        return cls.from_dict(fields_)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Entry":
        """Validate a JSON-like mapping; unknown keys are an error naming them."""
        if not isinstance(data, Mapping):
            raise ValidationError("entry", f"expected an object, got {type(data).__name__}")
        unknown = set(data) - _FIELD_NAMES
        if unknown:
            raise ValidationError(
                sorted(unknown)[0],
                f"unknown field; allowed fields are {', '.join(sorted(_FIELD_NAMES))}")
        title = _text(data, "title", required=True, limit=MAX_TITLE_CHARS)
        description = _text(data, "description", required=True)
        raw_id = data.get("id")
        if raw_id is None or raw_id == "":
            entry_id = slugify(title)
        elif not isinstance(raw_id, str) or not _ID_RE.match(raw_id):
            raise ValidationError(
                "id", f"{str(raw_id)[:60]!r} is not a valid id: 1-{MAX_ID_CHARS} characters "
                "of lowercase letters, digits, '-', '_' or '.'")
        else:
            entry_id = raw_id
        domain = _text(data, "domain", limit=MAX_DOMAIN_CHARS).strip().lower() or "general"
        if any(ch.isspace() or ch == "," for ch in domain):
            raise ValidationError("domain", f"{domain!r} must be one word (no spaces or commas)")
        valid_from = parse_timestamp(data.get("valid_from"), "valid_from")
        valid_until = parse_timestamp(data.get("valid_until"), "valid_until")
        if valid_from is not None and valid_until is not None and valid_until <= valid_from:
            raise ValidationError("valid_until", "must be later than valid_from")
        values = dict(
            id=entry_id,
            title=title,
            description=description,
            type=_choice(data, "type", ENTRY_TYPES, "pattern"),
            domain=domain,
            context=_text(data, "context"),
            example=_text(data, "example"),
            counter_example=_text(data, "counter_example"),
            why=_text(data, "why"),
            tags=_string_list(data, "tags", lower=True),
            applies_to=_string_list(data, "applies_to", lower=False),
            severity=_choice(data, "severity", SEVERITIES, "suggestion"),
            origin=_choice(data, "origin", ORIGINS, "agent"),
            valid_from=valid_from,
            valid_until=valid_until,
            created_at=parse_timestamp(data.get("created_at"), "created_at"),
            updated_at=parse_timestamp(data.get("updated_at"), "updated_at"),
        )
        return cls(**values, content_hash=_content_hash(values))

    # -- derived values -----------------------------------------------------
    def compute_hash(self) -> str:
        """sha256 over the normalised content fields (not id, origin or timestamps).

        Two tiers holding the same knowledge under different ids share this hash,
        which is how the VaultManager spots cross-tier duplicates.
        """
        return _content_hash({name: getattr(self, name) for name in _CONTENT_FIELDS})

    def with_times(self, created_at: float | None, updated_at: float | None) -> "Entry":
        """A copy with store-assigned timestamps."""
        return replace(self, created_at=created_at, updated_at=updated_at)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready mapping: lists for tuples, ISO 8601 UTC for timestamps."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, tuple):
                value = list(value)
            elif f.name in _TIME_FIELDS:
                value = format_timestamp(value)
            out[f.name] = value
        return out

    @property
    def tag_text(self) -> str:
        """Tags as space-separated words, the form FTS5 indexes."""
        return " ".join(self.tags)


_FIELD_NAMES = frozenset(f.name for f in fields(Entry))

#: The rules above by public name, for validation in bulk (:mod:`entry_bulk`).
FIELD_NAMES = _FIELD_NAMES
ID_PATTERN = _ID_RE
TAG_PATTERN = _TAG_RE
SURROGATE_PATTERN = _SURROGATE


def _content_hash(values: Mapping[str, Any]) -> str:
    """sha256 of the content fields: whitespace folded, case folded, lists sorted.

    Fields are joined with NUL, which validation keeps out of every field, so
    distinct contents cannot collide by concatenation; whitespace is folded over
    the joined text in one pass (the NUL separators survive it).
    """
    parts = []
    for name in _CONTENT_FIELDS:
        value = values[name]
        if isinstance(value, tuple):
            value = "\x1e".join(sorted(v.casefold() for v in value))
        parts.append(value)
    text = " ".join(" \x00 ".join(parts).split()).casefold()
    return hashlib.sha256(text.encode()).hexdigest()


def _joined(items: tuple[str, ...]) -> str:
    return "\x1e".join(sorted(map(str.casefold, items))) if items else ""


def content_hashes(rows: Iterable[tuple[Any, ...]]) -> list[str]:
    """:func:`_content_hash` of many entries: each row holds the content fields in
    ``_CONTENT_FIELDS`` order (type, domain, title, description, context, example,
    counter_example, why, tags, applies_to, severity; tags and applies_to as tuples).
    The same text and digest, without a dict and a generator per entry."""
    sha256 = hashlib.sha256
    out = []
    for (etype, domain, title, desc, ctx, example, counter, why, tags, applies, severity) in rows:
        text = " \x00 ".join((etype, domain, title, desc, ctx, example, counter, why,
                               _joined(tags), _joined(applies), severity))
        out.append(sha256(" ".join(text.split()).casefold().encode()).hexdigest())
    return out


#: Each field's slot setter, in field order (see entries_from_columns).
_SLOT_SETTERS = tuple(getattr(Entry, f.name).__set__ for f in fields(Entry))


def entries_from_columns(*columns: Sequence[Any]) -> list[Entry]:
    """``list(map(Entry, *columns))`` for columns of values already validated, in field
    order: the same entries, built a column at a time. The frozen dataclass's
    ``__init__`` sets each of the 18 fields through ``object.__setattr__`` (~2.7 us an
    entry); here every column goes through its slot's setter in one C-level ``map``
    (~1.1 us). Nothing is skipped: ``Entry`` has no ``__post_init__`` and its
    ``__init__`` only assigns (tests/test_entry_bulk.py compares both)."""
    if len(columns) != len(_SLOT_SETTERS) or len({len(c) for c in columns}) > 1:
        raise ValueError(f"expected {len(_SLOT_SETTERS)} columns of one length")
    out = list(map(object.__new__, repeat(Entry, len(columns[0]))))
    for setter, column in zip(_SLOT_SETTERS, columns):
        deque(map(setter, out, column), 0)
    return out


_TIME_FIELDS = frozenset({"valid_from", "valid_until", "created_at", "updated_at"})


def entries_from_dicts(items: Iterable[Mapping[str, Any]]) -> list[Entry]:
    """Validate many mappings; the first bad one raises naming its position."""
    out = []
    for i, item in enumerate(items):
        try:
            out.append(Entry.from_dict(item))
        except ValidationError as exc:
            raise ValidationError(f"entries[{i}].{exc.field}", str(exc).split(": ", 1)[1]) from exc
    return out
