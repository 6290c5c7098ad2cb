"""The remote-tier wire format: the storage contract's values as JSON, both ways.

A remote tier (:mod:`tiervault.vault.remote`) calls a :class:`TierBackend`
method on the team server by POSTing its keyword arguments to
``/api/v1/tiers/<tier>/<method>``; the server (:mod:`tiervault.server.tier_api`)
answers ``{"result": ...}``. Both ends encode with :func:`encode` and decode
with :func:`decode`, so a value crosses the network unchanged: floats keep all
their digits (Python's JSON writes the shortest exact repr), arrays go as
base64 of their raw bytes, and the named rows of :mod:`tiervault.vault.rows`
keep their type. Tagged objects are ``{"$t": kind, ...}``; plain mappings are
``{"$t": "map", "v": {...}}`` so user data can never pose as a tag.

``trusted=False`` (the server reading a client) rebuilds entries through
:meth:`Entry.from_dict`, i.e. with full validation, and refuses unknown tags.
"""

from __future__ import annotations

import base64
import dataclasses
from typing import Any

import numpy as np

from tiervault.errors import ValidationError
from tiervault.vault import rows
from tiervault.vault.entry import Entry
from tiervault.vault.filters import Filters

__all__ = ["encode", "decode", "READ_METHODS", "WRITE_METHODS", "METHODS"]

#: Contract methods a remote tier forwards, by the right they need on the server.
READ_METHODS = frozenset({
    "exists", "uid", "generation", "integrity_problems", "stats",
    "get", "get_many", "light_rows", "list_entries", "entries_after", "ids_by_hash", "count",
    "changes_since", "term_stats", "lexical_top_k", "lexical_scores", "lexical_count",
    "text_similarity", "latent_scores", "latent_text_scores", "links_touching", "link_count", "search_memories", "memory_count",
    "feedback_counts", "feedback_for", "feedback_events", "feedback_events_for",
    "weight_history", "vectors_for", "vector_input_hashes",
    "vector_changes_since", "vector_search", "embedding_backlog", "embedding_counts",
    "embedding_status", "count_matching", "vocabulary", "get_memories", "list_memories",
    "light_page", "facet_counts", "title_rows", "links_of_type",
})
WRITE_METHODS = frozenset({
    "capture", "capture_many", "delete", "delete_many", "link", "unlink", "add_memory",
    "add_feedback", "add_weight_record", "put_vectors", "mark_embedding",
})
METHODS = READ_METHODS | WRITE_METHODS

_ROWS: dict[str, type] = {name: getattr(rows, name) for name in rows.__all__
                          if isinstance(getattr(rows, name), type)
                          and (hasattr(getattr(rows, name), "_fields")
                               or dataclasses.is_dataclass(getattr(rows, name)))}


def encode(value: Any) -> Any:
    """A JSON-ready form of ``value`` (contract rows, entries, filters, arrays, containers)."""
    if value is None or isinstance(value, (bool, str, int, float)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        arr = np.ascontiguousarray(value)
        return {"$t": "nd", "dtype": arr.dtype.str, "shape": list(arr.shape),
                "b64": base64.b64encode(arr.tobytes()).decode("ascii")}
    if isinstance(value, Entry):
        return {"$t": "entry", "v": {f.name: encode(getattr(value, f.name))
                                     for f in dataclasses.fields(value)}}
    if isinstance(value, Filters):
        return {"$t": "filters", "v": {f.name: encode(getattr(value, f.name))
                                       for f in dataclasses.fields(value)}}
    kind = type(value).__name__
    if _ROWS.get(kind) is type(value):
        if hasattr(value, "_fields"):
            items = {name: encode(getattr(value, name)) for name in value._fields}
        else:
            items = {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {"$t": kind, "v": items}
    if isinstance(value, dict):
        return {"$t": "map", "v": {str(k): encode(v) for k, v in value.items()}}
    if isinstance(value, tuple):  # rows hold tuples (TermStats.df): keep the type
        return {"$t": "tuple", "items": [encode(v) for v in value]}
    if isinstance(value, (list, set, frozenset)):
        return [encode(v) for v in value]
    raise TypeError(f"cannot send a {kind} to a remote tier")


def decode(value: Any, *, trusted: bool = True) -> Any:
    """The inverse of :func:`encode`; ``trusted=False`` validates entries and refuses unknown tags."""
    if isinstance(value, list):
        return [decode(v, trusted=trusted) for v in value]
    if not isinstance(value, dict):
        return value
    kind = value.get("$t")
    body = value.get("v")
    if kind == "tuple" and isinstance(value.get("items"), list):
        return tuple(decode(v, trusted=trusted) for v in value["items"])
    if kind == "map" and isinstance(body, dict):
        return {k: decode(v, trusted=trusted) for k, v in body.items()}
    if kind == "nd":
        try:
            raw = base64.b64decode(value["b64"], validate=True)
            arr = np.frombuffer(raw, dtype=np.dtype(value["dtype"]))
            return arr.reshape(value["shape"]).copy()
        except (KeyError, TypeError, ValueError) as exc:
            raise ValidationError("arguments", f"malformed array ({type(exc).__name__})") from None
    if not isinstance(body, dict):
        raise ValidationError("arguments", f"malformed value of kind {str(kind)[:40]!r}")
    items = {k: decode(v, trusted=trusted) for k, v in body.items()}
    if kind == "entry":
        return _entry(items, trusted)
    if kind == "filters":
        if trusted:
            try:
                return Filters(**{k: tuple(v) if isinstance(v, list) else v for k, v in items.items()})
            except TypeError as exc:
                raise ValidationError("filters", f"unknown filter field ({exc})") from None
        return Filters.from_wire(items)  # a client's filters are user input: validated
    cls = _ROWS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ValidationError("arguments", f"unknown value kind {str(kind)[:40]!r}")
    try:
        return cls(**items)
    except TypeError as exc:
        raise ValidationError("arguments", f"malformed {kind} ({exc})") from None


def _entry(items: dict[str, Any], trusted: bool) -> Entry:
    if not trusted:  # full validation: the client is not trusted
        return Entry.from_dict(items)
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in items.items()}
    return Entry(**fields)
