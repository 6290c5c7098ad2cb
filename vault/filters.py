"""Search filters: one validated value, compiled to every form that applies it.

Filters are always applied BEFORE the result limit (in SQL ``WHERE`` or as a
row mask), so a filtered search never comes back empty while matching entries
exist further down the unfiltered ranking.

The value is built here (:meth:`Filters.build` validates user input); the forms
that apply it -- SQLite SQL, PostgreSQL SQL, the search mirror's row mask, a
predicate on one row, a predicate on one session memory -- are compiled from it
in :mod:`tiervault.vault.filter_compile`, the only place the rules are written.

Rules (an empty field means "any"):

- ``types`` / ``domains`` / ``severities`` / ``origins``: the entry's value is one of them;
- ``tags``: the entry has at least one of them;
- ``not_types`` / ``not_domains``: the entry's value is none of them;
- ``not_tags``: the entry has none of them;
- ``exclude_ids``: the entry's id is none of them;
- ``updated_after`` (inclusive) / ``updated_before`` (exclusive): bounds on the
  entry's ``updated_at`` in unix seconds (given as ISO 8601 or unix seconds);
- unless ``include_expired`` / ``include_future``: the entry is valid at ``now``.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from typing import Any, Iterable

from tiervault.errors import QueryError, ValidationError
from tiervault.vault.entry import ENTRY_TYPES, ORIGINS, SEVERITIES, format_timestamp, parse_timestamp

__all__ = ["Filters", "MAX_EXCLUDED_IDS"]

_SURROGATE = re.compile(r"[\ud800-\udfff]")
#: At most this many ids in ``exclude_ids`` (one request, one bound parameter each way).
MAX_EXCLUDED_IDS = 1_000


def _items(name: str, value: Any) -> Iterable[Any]:
    if value is None or value == "" or value == []:
        return ()
    if isinstance(value, str):
        return value.split(",")
    if isinstance(value, (list, tuple, set, frozenset)):
        return value
    raise QueryError(name, f"expected a string or a list of strings, got {type(value).__name__}")


def _as_tuple(name: str, value: Any, allowed: tuple[str, ...] | None, *,
              lower: bool = True, max_items: int | None = None) -> tuple[str, ...]:
    out: list[str] = []
    for item in _items(name, value):
        if not isinstance(item, str):
            raise QueryError(name, f"expected strings, got {item!r}")
        item = item.strip().lower() if lower else item.strip()
        if not item:
            continue
        # A lone surrogate (from JSON "\ud800") cannot be bound as UTF-8 by the SQL path.
        if len(item) > 128 or "\x00" in item or _SURROGATE.search(item):
            raise QueryError(name, f"{item[:40]!r} is not a valid {name} value")
        if allowed is not None and item not in allowed:
            raise QueryError(name, f"{item!r} is not one of {', '.join(allowed)}")
        if item not in out:
            out.append(item)
    if max_items is not None and len(out) > max_items:
        raise QueryError(name, f"{len(out)} values given; at most {max_items}")
    return tuple(out)


def _moment(name: str, value: Any) -> float | None:
    """ISO 8601 (or unix seconds) -> unix seconds; the error names ``name`` and the form."""
    try:
        return parse_timestamp(value, name)
    except ValidationError as exc:  # already names the expected form (ISO 8601 / unix seconds)
        raise QueryError(name, str(exc).removeprefix(f"{name}: ")) from None


@dataclass(frozen=True, slots=True)
class Filters:
    """Which entries a search may return (the rules are in the module docstring)."""

    types: tuple[str, ...] = ()
    domains: tuple[str, ...] = ()
    severities: tuple[str, ...] = ()
    origins: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()  # any-of
    include_expired: bool = False
    include_future: bool = False
    now: float | None = None
    not_types: tuple[str, ...] = ()
    not_domains: tuple[str, ...] = ()
    not_tags: tuple[str, ...] = ()  # none-of
    exclude_ids: tuple[str, ...] = ()
    updated_after: float | None = None  # inclusive
    updated_before: float | None = None  # exclusive

    @classmethod
    def build(
        cls,
        *,
        type: Any = None,  # noqa: A002 - mirrors the public search argument
        domain: Any = None,
        severity: Any = None,
        origin: Any = None,
        tags: Any = None,
        include_expired: bool = False,
        include_future: bool = False,
        now: float | None = None,
        not_type: Any = None,
        not_domain: Any = None,
        not_tags: Any = None,
        exclude_ids: Any = None,
        updated_after: Any = None,
        updated_before: Any = None,
    ) -> "Filters":
        """Validate user-facing filter arguments (strings, comma lists or lists; dates
        as ISO 8601 or unix seconds). Errors name the argument."""
        after = _moment("updated_after", updated_after)
        before = _moment("updated_before", updated_before)
        if after is not None and before is not None and before <= after:
            raise QueryError("updated_before", f"{format_timestamp(before)} must be later than "
                                               f"updated_after {format_timestamp(after)}")
        return cls(
            types=_as_tuple("type", type, ENTRY_TYPES),
            domains=_as_tuple("domain", domain, None),
            severities=_as_tuple("severity", severity, SEVERITIES),
            origins=_as_tuple("origin", origin, ORIGINS),
            tags=_as_tuple("tags", tags, None),
            include_expired=bool(include_expired),
            include_future=bool(include_future),
            now=now,
            not_types=_as_tuple("not_type", not_type, ENTRY_TYPES),
            not_domains=_as_tuple("not_domain", not_domain, None),
            not_tags=_as_tuple("not_tags", not_tags, None),
            exclude_ids=_as_tuple("exclude_ids", exclude_ids, None, lower=False,
                                  max_items=MAX_EXCLUDED_IDS),
            updated_after=after,
            updated_before=before,
        )

    @classmethod
    def from_wire(cls, fields: dict[str, Any]) -> "Filters":
        """A value received from another process (the remote-tier wire), validated
        as user input is: an unknown field or a bad value is a QueryError."""
        names = {"types": "type", "domains": "domain", "severities": "severity",
                 "origins": "origin", "tags": "tags", "not_types": "not_type",
                 "not_domains": "not_domain", "not_tags": "not_tags",
                 "exclude_ids": "exclude_ids", "updated_after": "updated_after",
                 "updated_before": "updated_before"}
        args: dict[str, Any] = {}
        for key, value in fields.items():
            if key in names:
                args[names[key]] = list(value) if isinstance(value, (list, tuple)) else value
            elif key in ("include_expired", "include_future"):
                args[key] = bool(value)
            elif key == "now":
                if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                          or not math.isfinite(value)):
                    raise QueryError("now", f"expected unix seconds, got {str(value)[:40]!r}")
                args["now"] = value
            else:
                raise QueryError("filters", f"unknown filter field {str(key)[:40]!r}")
        return cls.build(**args)

    def describe(self) -> dict[str, Any]:
        """The user-facing filters in force, in the argument names and forms
        :meth:`build` accepts (dates as ISO 8601 UTC); only fields that restrict.
        ``Filters.build(**f.describe())`` gives the same filters back (moment aside)."""
        out: dict[str, Any] = {}
        for key, value in (("type", self.types), ("domain", self.domains),
                           ("severity", self.severities), ("origin", self.origins),
                           ("tags", self.tags), ("not_type", self.not_types),
                           ("not_domain", self.not_domains), ("not_tags", self.not_tags),
                           ("exclude_ids", self.exclude_ids)):
            if value:
                out[key] = list(value)
        if self.updated_after is not None:
            out["updated_after"] = format_timestamp(self.updated_after)
        if self.updated_before is not None:
            out["updated_before"] = format_timestamp(self.updated_before)
        if self.include_expired:
            out["include_expired"] = True
        if self.include_future:
            out["include_future"] = True
        return out

    @property
    def restricts(self) -> bool:
        """True when some field narrows the entries beyond the validity window."""
        return bool(self.types or self.domains or self.severities or self.origins or self.tags
                    or self.not_types or self.not_domains or self.not_tags or self.exclude_ids
                    or self.updated_after is not None or self.updated_before is not None)

    @property
    def moment(self) -> float:
        """The instant validity is judged at (``now`` or the wall clock)."""
        return self.now if self.now is not None else time.time()

    @property
    def checks_validity(self) -> bool:
        return not (self.include_expired and self.include_future)
