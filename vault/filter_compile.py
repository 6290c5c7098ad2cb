"""The one place the rules of :class:`~tiervault.vault.filters.Filters` are written,
compiled to each form that applies them:

- :func:`to_sqlite` -- an SQLite ``WHERE`` fragment and its parameters;
- :func:`to_postgres` -- the same in PostgreSQL (psycopg ``%s`` parameters);
- :func:`mirror_mask` -- a boolean mask over the search mirror's column arrays
  (:class:`~tiervault.vault.postings.Postings`);
- :func:`matches` -- a predicate on one row (a :class:`~tiervault.vault.rows.LightRow`
  or anything with the same attributes); :func:`row_test` -- the same predicate with
  the filters bound, for many rows;
- :func:`memory_matches` -- a predicate on one session memory.

User values are ALWAYS bound parameters (or compared as Python values), never spliced
into SQL: only column names and placeholders are written into the text. A test
(tests/test_filter_compile.py) checks on random entries that the SQLite file, a
PostgreSQL tier, the mirror and the predicate select the same entries.

Missing values: an entry without ``updated_at`` fails any date bound (SQL ``NULL``
comparisons, NaN in the mirror); a missing ``valid_from`` / ``valid_until`` never
excludes. Session memories have no type, domain, severity, origin or validity: a
filter on any of those keeps no memory; ``not_type`` / ``not_domain`` keep every
memory; tags are their topics and their date is ``created_at`` (memories are
never updated).
"""

from __future__ import annotations

import json
import math
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from tiervault.vault.entry import ENTRY_TYPES, ORIGINS, SEVERITIES
from tiervault.vault.filters import Filters

__all__ = ["to_sqlite", "to_postgres", "mirror_mask", "matches", "row_test", "memory_matches",
           "memories_possible", "MirrorColumns"]


class MirrorColumns(Protocol):
    """What :func:`mirror_mask` reads of a search mirror (one slot per stored row)."""

    alive: np.ndarray
    type_code: np.ndarray
    severity_code: np.ndarray
    origin_code: np.ndarray
    domain_code: np.ndarray
    domains: list[str]
    tags: dict[str, list[int]]
    valid_from: np.ndarray
    valid_until: np.ndarray
    updated_at: np.ndarray

    def slot(self, entry_id: str) -> int | None: ...


_IN_COLUMNS = (("type", "types"), ("domain", "domains"), ("severity", "severities"),
               ("origin", "origins"))
_NOT_IN_COLUMNS = (("type", "not_types"), ("domain", "not_domains"))


# -- SQL ------------------------------------------------------------------------------------
def to_sqlite(filters: Filters, alias: str = "e") -> tuple[str, list[Any]]:
    """Filters -> (``" AND ..."`` SQL fragment, parameters) in SQLite's dialect."""
    parts: list[str] = []
    params: list[Any] = []
    for column, name in _IN_COLUMNS:
        values = getattr(filters, name)
        if values:
            parts.append(f"{alias}.{column} IN ({', '.join('?' * len(values))})")
            params.extend(values)
    for column, name in _NOT_IN_COLUMNS:
        values = getattr(filters, name)
        if values:
            parts.append(f"{alias}.{column} NOT IN ({', '.join('?' * len(values))})")
            params.extend(values)
    padded = f"' ' || COALESCE({alias}.tags, '') || ' '"
    if filters.tags:
        parts.append("(" + " OR ".join(f"instr({padded}, ' ' || ? || ' ') > 0"
                                       for _ in filters.tags) + ")")
        params.extend(filters.tags)
    if filters.not_tags:
        parts.append("NOT (" + " OR ".join(f"instr({padded}, ' ' || ? || ' ') > 0"
                                           for _ in filters.not_tags) + ")")
        params.extend(filters.not_tags)
    if filters.exclude_ids:
        # One JSON parameter however many ids (SQLite caps the number of parameters).
        parts.append(f"{alias}.id NOT IN (SELECT value FROM json_each(?))")
        params.append(json.dumps(list(filters.exclude_ids)))
    _dates(filters, alias, "?", parts, params)
    return "".join(" AND " + p for p in parts), params


def to_postgres(filters: Filters, alias: str = "e") -> tuple[str, list[Any]]:
    """Filters -> (``" AND ..."`` SQL fragment, parameters) in PostgreSQL's dialect."""
    parts: list[str] = []
    params: list[Any] = []
    for column, name in _IN_COLUMNS:
        values = getattr(filters, name)
        if values:
            parts.append(f"{alias}.{column} = ANY(%s)")
            params.append(list(values))
    for column, name in _NOT_IN_COLUMNS:
        values = getattr(filters, name)
        if values:
            parts.append(f"{alias}.{column} <> ALL(%s)")
            params.append(list(values))
    words = f"string_to_array(COALESCE({alias}.tags, ''), ' ')"
    if filters.tags:
        parts.append(f"{words} && %s::text[]")
        params.append(list(filters.tags))
    if filters.not_tags:
        parts.append(f"NOT ({words} && %s::text[])")
        params.append(list(filters.not_tags))
    if filters.exclude_ids:
        parts.append(f"{alias}.id <> ALL(%s::text[])")
        params.append(list(filters.exclude_ids))
    _dates(filters, alias, "%s", parts, params)
    return "".join(" AND " + p for p in parts), params


def _dates(filters: Filters, alias: str, mark: str, parts: list[str], params: list[Any]) -> None:
    """Date bounds and the validity window (the same text in both dialects)."""
    if filters.updated_after is not None:
        parts.append(f"{alias}.updated_at >= {mark}")
        params.append(filters.updated_after)
    if filters.updated_before is not None:
        parts.append(f"{alias}.updated_at < {mark}")
        params.append(filters.updated_before)
    now = filters.moment
    if not filters.include_expired:
        parts.append(f"({alias}.valid_until IS NULL OR {alias}.valid_until > {mark})")
        params.append(now)
    if not filters.include_future:
        parts.append(f"({alias}.valid_from IS NULL OR {alias}.valid_from <= {mark})")
        params.append(now)


# -- the search mirror --------------------------------------------------------------------
#: Up to this many codes a member test is one compare of the codes a code (a SIMD pass
#: each); more: a gather from a table of the vocabulary.
_COMPARES = 4


def _member(codes: np.ndarray, values: Sequence[str], vocabulary: Sequence[str]) -> np.ndarray:
    """``codes[i]`` names one of ``values``, never ``np.isin`` (which sorts; 18% of a 1M
    scan). A filter names one or two values: a compare of the codes with each code (49,191
    int8 codes: ~2 us a compare, where a gather from a table of the vocabulary indexed by
    the int8 codes took ~100 us, issue 16 session 20); more values: ``take`` from that
    table. The mirror's codes are validated to lie in ``range(len(vocabulary))`` when it is
    built or loaded."""
    index = {v: i for i, v in enumerate(vocabulary)}
    wanted = sorted({index[v] for v in values if v in index})
    if len(wanted) <= _COMPARES:
        if not wanted:
            return np.zeros(codes.shape, dtype=bool)
        out = codes == wanted[0]
        for code in wanted[1:]:
            out |= codes == code
        return out
    table = np.zeros(len(vocabulary), dtype=bool)
    table[wanted] = True
    return table.take(codes)


def mirror_mask(filters: Filters, m: MirrorColumns, at: np.ndarray | None = None) -> np.ndarray:
    """Boolean mask of the mirror's live slots passing ``filters``; with ``at`` (sorted,
    distinct slots) the same mask at those slots only, aligned with them, so a query that
    needs it at its matching slots reads those and not every column whole (issue 16)."""
    def col(a: np.ndarray) -> np.ndarray:
        return a if at is None else a[at]

    mask = m.alive.copy() if at is None else m.alive[at]
    for codes, values, vocabulary in ((m.type_code, filters.types, ENTRY_TYPES),
                                      (m.severity_code, filters.severities, SEVERITIES),
                                      (m.origin_code, filters.origins, ORIGINS),
                                      (m.domain_code, filters.domains, m.domains)):
        if values:
            mask &= _member(col(codes), values, vocabulary)
    for codes, values, vocabulary in ((m.type_code, filters.not_types, ENTRY_TYPES),
                                      (m.domain_code, filters.not_domains, m.domains)):
        if values:
            mask &= ~_member(col(codes), values, vocabulary)
    if filters.tags:
        tagged = np.zeros(mask.size, dtype=bool)
        for tag in filters.tags:
            _put(tagged, at, m.tags.get(tag, []), True)
        mask &= tagged
    for tag in filters.not_tags:
        _put(mask, at, m.tags.get(tag, []), False)
    for entry_id in filters.exclude_ids:
        slot = m.slot(entry_id)
        if slot is not None:
            _put(mask, at, [slot], False)
    now = filters.moment
    with np.errstate(invalid="ignore"):  # NaN = no value: fails a date bound, passes validity
        if filters.updated_after is not None:
            mask &= col(m.updated_at) >= filters.updated_after
        if filters.updated_before is not None:
            mask &= col(m.updated_at) < filters.updated_before
        if not filters.include_expired:
            mask &= ~(col(m.valid_until) <= now)
        if not filters.include_future:
            mask &= ~(col(m.valid_from) > now)
    return mask


def _put(mask: np.ndarray, at: np.ndarray | None, slots: Any, value: bool) -> None:
    """``mask[slots] = value``, where ``mask`` is aligned with ``at`` when given (slots
    outside ``at`` are not in the mask)."""
    if at is None:
        mask[slots] = value
        return
    s = np.asarray(slots, dtype=at.dtype)
    pos = np.searchsorted(at, s)
    inside = pos < at.size
    inside[inside] = at[pos[inside]] == s[inside]
    mask[pos[inside]] = value


# -- predicates ---------------------------------------------------------------------------
def _given(value: float | None) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def _dated(filters: Filters, stamp: float | None) -> bool:
    if filters.updated_after is None and filters.updated_before is None:
        return True
    if not _given(stamp):
        return False
    if filters.updated_after is not None and stamp < filters.updated_after:  # type: ignore[operator]
        return False
    return filters.updated_before is None or stamp < filters.updated_before  # type: ignore[operator]


def matches(filters: Filters, row: Any) -> bool:
    """True when one entry row passes ``filters``. ``row`` has the attributes ``id``,
    ``type``, ``domain``, ``severity``, ``origin``, ``tags`` (space-separated text),
    ``updated_at``, ``valid_from`` and ``valid_until`` (a LightRow has them); a missing or
    NaN bound never excludes. For many rows, bind the filters once with :func:`row_test`."""
    return row_test(filters)(row)


def _passes(row: Any) -> bool:
    return True


def row_test(filters: Filters) -> Callable[[Any], bool]:
    """The predicate :func:`matches` applies, with ``filters`` bound once: validity judged
    at ``filters.moment`` read once, and only the tests of the fields given run at each
    row. Filters that narrow nothing beyond the validity window (every search without
    filters) read the two validity bounds alone; a missing or NaN bound never excludes
    (``None`` is tested, a NaN compares false). Why bound: a hybrid scan tests ~32 rows
    (its vector hits and graph neighbours joining the pool), ~52 us a scan with the
    filters read at every row, ~6 here when unfiltered (issue 16, session 24)."""
    now, expired, future = filters.moment, not filters.include_expired, not filters.include_future
    if not filters.restricts:
        if not (expired or future):
            return _passes

        def valid(row: Any) -> bool:
            until, since = row.valid_until, row.valid_from
            return not ((expired and until is not None and until <= now)
                        or (future and since is not None and since > now))
        return valid
    given = [(column, values) for column, name in _IN_COLUMNS if (values := getattr(filters, name))]
    refused = [(column, values) for column, name in _NOT_IN_COLUMNS if (values := getattr(filters, name))]
    wanted_tags, not_tags, exclude = filters.tags, filters.not_tags, filters.exclude_ids
    dated = filters.updated_after is not None or filters.updated_before is not None

    def passes(row: Any) -> bool:
        for column, values in given:
            if getattr(row, column) not in values:
                return False
        for column, values in refused:
            if getattr(row, column) in values:
                return False
        if wanted_tags or not_tags:
            tags = set((row.tags or "").split())
            if (wanted_tags and not tags.intersection(wanted_tags)) or tags.intersection(not_tags):
                return False
        if (exclude and row.id in exclude) or (dated and not _dated(filters, row.updated_at)):
            return False
        until, since = row.valid_until, row.valid_from
        return not ((expired and until is not None and until <= now)
                    or (future and since is not None and since > now))
    return passes


def memories_possible(filters: Filters) -> bool:
    """False when ``filters`` asks for an entry field memories do not have."""
    return not (filters.types or filters.domains or filters.severities or filters.origins)


def memory_matches(filters: Filters, memory: Any) -> bool:
    """True when one session memory (``id``, ``topics`` text, ``created_at``) passes
    ``filters`` (rules for memories: module docstring)."""
    if not memories_possible(filters) or memory.id in filters.exclude_ids:
        return False
    topics = set((memory.topics or "").split())
    if filters.tags and not topics.intersection(filters.tags):
        return False
    if topics.intersection(filters.not_tags):
        return False
    return _dated(filters, memory.created_at)
