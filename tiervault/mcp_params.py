"""The MCP tools' parameters: typed, described and bounded for the JSON schema a model reads.

Every parameter is ``Annotated[type, Field(description=...)]`` so its meaning
sits on the parameter in the schema (not only in the tool description); closed
vocabularies are ``Literal`` enums; integers are strict (``"5"`` and ``true``
are refused, as the CLI refuses them) with their bounds as minimum/maximum.

:func:`normalize_arguments` runs before the SDK validates a call: an argument
the tool does not take is an error naming the ones it does, and list arguments
are accepted as a JSON array, a JSON-array string or a comma-separated string.
"""

from __future__ import annotations

import difflib
import json
from typing import Annotated, Any, Literal

from pydantic import Field

from tiervault.errors import ValidationError
from tiervault.vault.entry import ENTRY_TYPES, FEEDBACK_ACTIONS, LINK_TYPES, SEVERITIES

__all__ = [
    "EntryType", "Severity", "Mode", "Action", "LinkType", "Limit", "ListLimit", "Offset",
    "Query", "Ids", "Tags", "Domains", "Types", "Severities", "Flag",
    "NotDomains", "NotTypes", "NotTags", "ExcludeIds", "UpdatedAfter", "UpdatedBefore",
    "LIST_PARAMS", "USAGE", "MAX_IDS", "MAX_CAPTURE", "MAX_LIST",
    "normalize_arguments", "strings", "records",
]

MAX_IDS = 100
MAX_CAPTURE = 500
MAX_LIST = 200

EntryType = Literal["pattern", "anti-pattern", "rule", "playbook", "decision", "reference"]
Severity = Literal["critical", "warning", "suggestion"]
Mode = Literal["scan", "full"]
Action = Literal["accepted", "modified", "dismissed", "failed"]
LinkType = Literal["supports", "contradicts", "extends", "sequences"]
assert EntryType.__args__ == ENTRY_TYPES and Severity.__args__ == SEVERITIES  # type: ignore[attr-defined]
assert Action.__args__ == FEEDBACK_ACTIONS and LinkType.__args__ == LINK_TYPES  # type: ignore[attr-defined]

Query = Annotated[str, Field(
    description='Natural-language question or keywords; "#tag" words also match tags. '
                "Empty (\"\") with at least one filter lists the newest matching entries.")]
Limit = Annotated[int | None, Field(
    strict=True, ge=1, le=1000,
    description="Maximum number of rows, a hard ceiling (default 10 for scan, 20 for full).")]
ListLimit = Annotated[int, Field(strict=True, ge=1, le=MAX_LIST,
                                 description=f"Rows per page (1-{MAX_LIST}).")]
Offset = Annotated[int, Field(strict=True, ge=0,
                              description="Rows to skip, for the next page (0 = first page).")]
Domains = Annotated[str | list[str] | None, Field(
    description='Only entries of this domain (e.g. "security"), or any of a list. '
                "vault_stats lists the domains in use.")]
Types = Annotated[EntryType | list[EntryType] | None, Field(
    description="Only entries of this type, or any of a list.")]
Severities = Annotated[Severity | list[Severity] | None, Field(
    description="Only entries of this severity, or any of a list.")]
Tags = Annotated[list[str] | None, Field(
    description='Only entries with any of these tags, e.g. ["http", "retry"] '
                "(a comma-separated string also works). vault_stats lists the most used tags.")]
NotDomains = Annotated[str | list[str] | None, Field(
    description='Leave out entries of this domain, or of any of a list, e.g. ["legacy"].')]
NotTypes = Annotated[EntryType | list[EntryType] | None, Field(
    description='Leave out entries of this type, or of any of a list, e.g. "anti-pattern".')]
NotTags = Annotated[list[str] | None, Field(
    description='Leave out entries having any of these tags, e.g. ["deprecated"].')]
ExcludeIds = Annotated[list[str] | None, Field(
    max_length=1000, description="Leave out these entry ids (e.g. ones already read).")]
UpdatedAfter = Annotated[str | None, Field(
    max_length=64, description='Only entries updated at or after this moment, ISO 8601: '
                               '"2026-01-31" or "2026-01-31T12:00:00Z".')]
UpdatedBefore = Annotated[str | None, Field(
    max_length=64, description='Only entries updated before this moment, ISO 8601 '
                               '(e.g. "2026-03-01").')]
Ids = Annotated[list[str], Field(
    description=f"Entry or memory ids from search results (1-{MAX_IDS}).")]
Flag = Annotated[bool, Field(strict=True)]

#: Per tool: the arguments that take a list (string forms are turned into lists).
LIST_PARAMS: dict[str, tuple[str, ...]] = {
    "search_intelligent": ("domain", "type", "severity", "tags", "tiers", "not_domain",
                           "not_type", "not_tags", "exclude_ids"),
    "list_entries": ("domain", "type", "severity", "tags", "tiers", "not_domain", "not_type",
                     "not_tags", "exclude_ids"),
    "load_entries": ("ids",),
    "capture_memory": ("topics",),
    "update_entry": ("tags", "add_tags", "remove_tags", "applies_to"),
}

#: How to call each tool correctly, appended to its error messages.
USAGE = {
    "search_intelligent": 'search_intelligent(query="retry policy for HTTP calls", mode="scan", '
                          'limit=10, domain="reliability", tags=["http"])',
    "load_entries": 'load_entries(ids=["id-from-a-scan-row", "another-id"])',
    "list_entries": 'list_entries(domain="security", severity="critical", limit=20, offset=0)',
    "vault_stats": "vault_stats()",
    "query_vault": 'query_vault(sql="SELECT e.id, e.title FROM vec_search(\'retry http\', '
                   '\'diverse decay:30\', 20) v JOIN entries e USING (tier, id) '
                   'ORDER BY v.rank LIMIT 5")',
    "capture_knowledge": 'capture_knowledge(entries=[{"title": "...", "description": "...", '
                         '"type": "pattern", "severity": "warning", "tags": ["x"]}], tier="agent")',
    "update_entry": 'update_entry(id="an-id", severity="critical", add_tags=["http"])',
    "delete_entry": 'delete_entry(id="an-id")',
    "record_feedback": 'record_feedback(query="the query you searched", entry_id="an-id", '
                       'action="accepted")',
    "link_entries": 'link_entries(source_id="an-id", target_id="other-id", '
                    'link_type="supports", note="why they relate")',
    "capture_memory": 'capture_memory(summary="what happened", context="details", '
                      'topics=["deploy"], project="my-project")',
}


def strings(value: Any, name: str) -> list[str] | None:
    """A list of strings from a list, a JSON array string or a comma-separated string."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValidationError(name, f"looks like a JSON array but does not parse "
                                            f"({exc.msg}); pass a list of strings") from None
        else:
            return [part.strip() for part in text.split(",") if part.strip()]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ValidationError(name, 'expected a list of strings, e.g. ["a", "b"]')
    return [v.strip() for v in value if v.strip()]


def records(value: Any) -> list[Any]:
    """``entries`` as a list: a list, one object, or the same as a JSON string."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValidationError("entries", f"is a string that is not JSON ({exc.msg}); pass a "
                                             "list of entry objects") from None
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        raise ValidationError("entries", "expected a list of entry objects")
    if not value:
        raise ValidationError("entries", "is empty; pass at least one entry object")
    if len(value) > MAX_CAPTURE:
        raise ValidationError("entries", f"has {len(value)} items; send at most {MAX_CAPTURE} "
                                         "per call")
    return value


def normalize_arguments(tool: str, arguments: dict[str, Any] | None,
                        allowed: tuple[str, ...]) -> dict[str, Any]:
    """``arguments`` checked against the tool's parameter names, list arguments as lists.

    Raises ValidationError naming an unknown argument, the closest allowed name
    and every allowed name (a misspelt filter must not run an unfiltered search).
    """
    arguments = dict(arguments or {})
    unknown = [k for k in arguments if k not in allowed]
    if unknown:
        close = difflib.get_close_matches(unknown[0], allowed, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValidationError("arguments", f"{unknown[0]!r} is not an argument of {tool}{hint}; "
                              f"allowed arguments: {', '.join(allowed) or 'none'}")
    for name in LIST_PARAMS.get(tool, ()):
        value = arguments.get(name)
        if isinstance(value, str):
            arguments[name] = strings(value, name) or None
    return arguments
