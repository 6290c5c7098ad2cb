"""Browsing a tier, the dialect-neutral half: what the curator pages read through the contract.

The contract's browse operations (docs/backend.md, "Browsing") are
``light_page`` (a page of light rows in an order, filtered, with the total),
``facet_counts`` (entries per type / severity / domain / tag), ``title_rows``
(every entry's key, id, title and hash, paged by key) and ``links_of_type``.
Each SQL backend writes its own statements (SQLite: :mod:`sqlite_browse`,
PostgreSQL: ``postgres/browse``); this module holds what they share: the
argument checks (the same refusals on every backend), the ``ORDER BY`` of each
order, and the facet counts over a search mirror.

Orders are index-backed in both SQL backends, so a page costs the same at 100K
entries as at 100 (apart from OFFSET, which walks the skipped rows):
``newest`` walks the primary key (``rowid``; an upsert keeps it) backwards,
``updated`` the ``entries_gen`` index (every write stamps the rows it changed
with its generation).

Facet counts (and ``vocabulary()`` once the mirror is in memory) come from the
tier's in-memory mirror
(:class:`~tiervault.vault.postings.Postings`): one boolean mask
(:func:`~tiervault.vault.filter_compile.mirror_mask`) and a ``bincount`` per
field, one over the flattened tag occurrences -- no table scan.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from tiervault.errors import ValidationError
from tiervault.vault.entry import ENTRY_TYPES, LINK_TYPES, SEVERITIES
from tiervault.vault.filters import Filters
from tiervault.vault.rows import PAGE_ORDERS, FacetCounts

__all__ = ["ORDER_SQL", "MAX_PAGE_ROWS", "MAX_TITLE_ROWS", "check_page", "check_limit",
           "check_link_type", "mirror_facets", "ranked", "facet_vocabulary"]

#: ``ORDER BY`` of each page order over an ``entries`` table aliased ``e``: both SQL
#: backends have the integer ``rowid`` key and the ``gen`` column (indexed).
ORDER_SQL = {"newest": "e.rowid DESC", "updated": "e.gen DESC, e.rowid DESC"}
#: Most rows one ``light_page`` call returns (a browse page shows 25).
MAX_PAGE_ROWS = 1_000
#: Most rows one ``title_rows`` call returns (a sweep of 100K entries is 10 calls).
MAX_TITLE_ROWS = 10_000


def check_limit(name: str, value: Any, high: int, low: int = 0) -> int:
    """``value`` as an int in [low, high], else ValidationError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValidationError(name, f"{value!r} must be an integer from {low} to {high}")
    return value


def check_page(order: str, offset: Any, limit: Any, snippet_chars: Any) -> None:
    """The arguments of ``light_page``, refused alike by every backend."""
    if order not in PAGE_ORDERS:
        raise ValidationError("order", f"{order!r} is not one of {', '.join(PAGE_ORDERS)}")
    check_limit("offset", offset, 2**62)
    check_limit("limit", limit, MAX_PAGE_ROWS)
    check_limit("snippet_chars", snippet_chars, 100_000)


def check_link_type(link_type: Any) -> str:
    if link_type not in LINK_TYPES:
        raise ValidationError("link_type", f"{str(link_type)[:40]!r} is not one of "
                                           f"{', '.join(LINK_TYPES)}")
    return link_type


def ranked(counts: dict[str, int]) -> dict[str, int]:
    """Non-zero counts, most frequent first, ties by value (the FacetCounts order)."""
    return dict(sorted(((k, int(v)) for k, v in counts.items() if v), key=lambda kv: (-kv[1], kv[0])))


#: mirror -> (its tags dict, its length, tag names, tag number and slot per occurrence)
_OCCURRENCES: "weakref.WeakKeyDictionary[Any, tuple]" = weakref.WeakKeyDictionary()


def _tag_occurrences(p: Any) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Mirror ``p``'s tag lists flattened: (names, tag number per occurrence, slot per
    occurrence). Kept per mirror until it grows or is rebuilt (a rebuild replaces its
    ``tags`` dict; appends only add slots), so a count is one ``bincount``, not a
    Python loop over every tag."""
    hit = _OCCURRENCES.get(p)
    if hit is not None and hit[0] is p.tags and hit[1] == len(p.ids):
        return hit[2], hit[3], hit[4]
    tags, size = p.tags, len(p.ids)
    names = list(tags)
    lengths = np.fromiter((len(tags[t]) for t in names), dtype=np.int64, count=len(names))
    slots = (np.concatenate([np.asarray(tags[t], dtype=np.int64) for t in names]) if names
             else np.zeros(0, dtype=np.int64))
    which = np.repeat(np.arange(len(names), dtype=np.int64), lengths)
    _OCCURRENCES[p] = (tags, size, names, which, slots)
    return names, which, slots


def mirror_facets(p: Any, filters: Filters | None) -> FacetCounts:
    """FacetCounts of the live entries of mirror ``p`` passing ``filters`` (None: all)."""
    mask = p.alive if filters is None else p.mask(filters)
    types = np.bincount(p.type_code[mask], minlength=len(ENTRY_TYPES))
    sev = np.bincount(p.severity_code[mask], minlength=len(SEVERITIES))
    dom = np.bincount(p.domain_code[mask], minlength=len(p.domains)) if p.domains else []
    names, which, slots = _tag_occurrences(p)
    per_tag = np.bincount(which[mask[slots]], minlength=len(names))
    tags = dict(zip(names, per_tag.tolist()))
    return FacetCounts(int(np.count_nonzero(mask)), dict(zip(ENTRY_TYPES, map(int, types))),
                       dict(zip(SEVERITIES, map(int, sev))),
                       ranked({p.domains[i]: int(n) for i, n in enumerate(dom)}), ranked(tags))


def facet_vocabulary(f: FacetCounts) -> dict[str, dict[str, int]]:
    """The contract's ``vocabulary()`` from facet counts of every entry (the same
    answer as its GROUP BY form, without the table scan): values held, most frequent first."""
    return {"domains": f.by_domain, "types": ranked(f.by_type), "severities": ranked(f.by_severity),
            "tags": f.by_tag}
