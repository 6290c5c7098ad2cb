"""Validating many entries at once: :func:`validate_many` = ``Entry.from_dict`` of each.

Why: a JSONL import spent ~20 us per line in ``Entry.from_dict`` (a dozen Python
calls per field, a float() that fails on every ISO timestamp, a dict and two
generators per content hash) -- as much as SQLite's writes. Here each rule is
applied to a whole column of a batch with C-level operations:

- texts: one type test over the column (``set(map(type, ...))``), NUL and lone
  surrogates searched in the joined column, the longest length, ``str.strip`` for
  the required ones;
- choices, domains and tag items: each *distinct* value is checked once (with the
  single-entry rules themselves), then mapped;
- ids: one regular expression over the ids joined by newlines;
- ISO 8601 timestamps of the form ``YYYY-MM-DDTHH:MM:SS[.ffffff]Z`` (what export
  writes): parsed by NumPy as microseconds ``us``; the value is ``us / 10**6``, the
  same double ``datetime.timestamp()`` gives (both are the correctly rounded
  quotient; ``|us| < 2**53`` is required so the integer converts exactly), already a
  multiple of 1e-6 as ``round(ts, 6)`` would make it; any other form goes through
  :func:`~tiervault.vault.entry.parse_timestamp` one value at a time;
- content hashes: :func:`~tiervault.vault.entry.content_hashes`;
- the entries: :func:`~tiervault.vault.entry.entries_from_columns` (a column at a time).

The fast path only ever *accepts*: the first value it is not sure of (any rule
failing, a type it does not expect) sends the whole batch through
``Entry.from_dict`` one record at a time, which then names the field of every bad
record as before. So the entries, their hashes and every error message are those
of ``Entry.from_dict`` (a test compares both on random and hostile records).
"""

from __future__ import annotations

import re
from hashlib import sha256
from itertools import chain, repeat
from operator import methodcaller
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from tiervault.errors import ValidationError
from tiervault.vault.entry import (ENTRY_TYPES, FIELD_NAMES, ID_PATTERN, MAX_DOMAIN_CHARS,
                                   MAX_TAGS, MAX_TEXT_CHARS, MAX_TITLE_CHARS,
                                   ORIGINS, SEVERITIES, SURROGATE_PATTERN, TAG_PATTERN, Entry,
                                   content_hashes, entries_from_columns, parse_timestamp)

__all__ = ["validate_many"]

_IDS = re.compile(r"(?:[a-z0-9_.-]{1,128}\n)*")
# What export writes; year 0000 (refused by datetime, not by NumPy) is left to the slow path.
_ISO = re.compile(r"(?!0000)\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])"
                  r"T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d{6})?Z")
#: A column of such values, each ended by a newline (one match for the whole column).
_ISO_COLUMN = re.compile(rf"(?:{_ISO.pattern}\n)*")
_EXACT = 2 ** 53
_TEXTS = (("context", MAX_TEXT_CHARS), ("example", MAX_TEXT_CHARS),
          ("counter_example", MAX_TEXT_CHARS), ("why", MAX_TEXT_CHARS))


_hexdigest = methodcaller("hexdigest")


class _NotSure(Exception):
    """The fast path met a value it does not vouch for: validate record by record."""


def validate_many(records: Sequence[Mapping[str, Any]]) -> list[Entry | Exception]:
    """``Entry.from_dict(r)`` of each record, or what it raises: a ValidationError, or a
    RecursionError for a value nested too deeply to even be shown in a message."""
    if records:
        try:
            return list(_fast(records))
        except (_NotSure, TypeError, ValueError, OverflowError):
            # Not vouched for, or an odd value the column rules did not expect: not an
            # error in itself -- Entry.from_dict below decides, and names the bad field.
            pass
    return [_one(r) for r in records]


def _one(record: Mapping[str, Any]) -> Entry | Exception:
    try:
        return Entry.from_dict(record)
    except (ValidationError, RecursionError) as exc:
        return exc


def _column(records: Sequence[Mapping[str, Any]], name: str) -> list[Any]:
    return [r.get(name) for r in records]


def _texts(values: list[Any], limit: int, *, required: bool) -> list[str]:
    """The column as ``_text`` makes it (None -> ''), or _NotSure."""
    if None in values:
        if required:
            raise _NotSure
        values = ["" if v is None else v for v in values]
    if set(map(type, values)) != {str}:
        raise _NotSure
    joined = "".join(values)
    if "\x00" in joined or max(map(len, values)) > limit:
        raise _NotSure
    if not joined.isascii() and SURROGATE_PATTERN.search(joined):
        raise _NotSure
    if required and not all(map(str.strip, values)):
        raise _NotSure
    return values


def _mapped(values: list[Any], normalise: Callable[[Any], Any]) -> list[Any]:
    """``normalise`` applied to each distinct value once (any error: _NotSure)."""
    try:
        table = {v: normalise(v) for v in set(values)}
    except ValidationError:
        raise _NotSure from None
    return list(map(table.__getitem__, values))


def _choice(allowed: tuple[str, ...], default: str) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if value is None or value == "":
            return default
        if type(value) is not str or value not in allowed:
            raise _NotSure
        return value
    return check


def _domain(value: Any) -> str:
    if value is None:
        return "general"
    if type(value) is not str or "\x00" in value or len(value) > MAX_DOMAIN_CHARS:
        raise _NotSure
    if not value.isascii() and SURROGATE_PATTERN.search(value):
        raise _NotSure
    domain = value.strip().lower() or "general"
    if any(ch.isspace() or ch == "," for ch in domain):
        raise _NotSure
    return domain


def _item(lower: bool) -> Callable[[Any], str]:
    """One tag / applies_to item as ``_string_list`` keeps it ('' = skipped)."""
    def check(item: Any) -> str:
        if type(item) is not str:
            raise _NotSure
        item = item.strip()
        if lower:
            item = item.lower()
        if item and not TAG_PATTERN.match(item):
            raise _NotSure
        return item
    return check


def _lists(values: list[Any], lower: bool) -> list[tuple[str, ...]]:
    """The column as ``_string_list`` makes it: lists of strings only (else _NotSure)."""
    types = set(map(type, values))
    if not types <= {list, type(None)} or max(map(len, filter(None, values)), default=0) > MAX_TAGS:
        raise _NotSure
    if type(None) in types:
        values = [v or [] for v in values]
    items = set(chain.from_iterable(values))
    check = _item(lower)
    table = {i: check(i) for i in items}
    if all(k == v for k, v in table.items()) and "" not in table:
        # Every item is kept as it is: each list as a tuple, unless it repeats an item.
        lists = list(map(tuple, values))
        if list(map(len, map(set, lists))) == list(map(len, lists)):
            return lists
    out: list[tuple[str, ...]] = []
    for v in values:
        if not v:
            out.append(())
            continue
        kept = dict.fromkeys(map(table.__getitem__, v))  # dedup, first occurrence first
        kept.pop("", None)
        out.append(tuple(kept))
    return out


def _times(values: list[Any], name: str) -> list[float | None]:
    """The column as ``parse_timestamp`` makes it: when every present value has the
    export form, the whole column in one regular expression and one NumPy call;
    otherwise value by value (:func:`_times_each`)."""
    present = [v for v in values if v is not None]
    if not present:
        return [None] * len(values)
    joined = "\n".join(present) + "\n" if set(map(type, present)) == {str} else ""
    if not _ISO_COLUMN.fullmatch(joined) or not joined:
        return _times_each(values, name)
    # Each value ends in "Z\n": drop the last two characters, split on the others.
    seconds = _seconds(joined[:-2].split("Z\n"))
    if len(present) == len(values):
        return seconds
    it = iter(seconds)
    return [None if v is None else next(it) for v in values]


def _seconds(iso: list[str]) -> list[float]:
    """Unix seconds of ISO 8601 UTC values without their "Z" (module docstring: the
    same doubles as ``round(datetime.timestamp(), 6)``)."""
    us = np.array(iso, dtype="datetime64[us]").astype(np.int64)
    if np.abs(us).max() >= _EXACT:
        raise _NotSure
    return (us / 1e6).tolist()


def _times_each(values: list[Any], name: str) -> list[float | None]:
    """:func:`_times` value by value: ISO values together, anything else through
    ``parse_timestamp``."""
    out: list[float | None] = [None] * len(values)
    iso_at: list[int] = []
    iso: list[str] = []
    for i, v in enumerate(values):
        if v is None or v == "":
            continue
        if type(v) is str and _ISO.fullmatch(v):
            iso_at.append(i)
            iso.append(v[:-1])
        else:
            try:
                out[i] = parse_timestamp(v, name)
            except ValidationError:
                raise _NotSure from None
    if iso:
        for i, ts in zip(iso_at, _seconds(iso)):
            out[i] = ts
    return out


def _ids(values: list[Any]) -> list[str]:
    if set(map(type, values)) != {str} or not _IDS.fullmatch("\n".join(values) + "\n"):
        raise _NotSure  # a missing id (slug of the title) or a bad one: record by record
    return values


#: Whitespace ``str.split`` folds in ASCII text, but for the space.
_ODD_SPACES = "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f"
_SEP = " \x00 "


def _hashes(*columns: list[Any]) -> list[str]:
    """``content_hashes`` of the columns (content fields in ``_CONTENT_FIELDS`` order,
    tags / applies_to as tuples), for ASCII text already folded, in a few C-level calls.

    ``content_hashes`` folds each entry's text ``T = " \\x00 ".join(fields)`` as
    ``" ".join(T.split()).casefold()``. When no field has a space at either end, two
    spaces in a row or any other whitespace (and none is a list item: tags and
    applies_to items hold no whitespace, by validation), the fold of ``T`` is ``f1``
    then, per further field, ``" \\x00"`` plus ``" " + f`` if ``f`` is not empty; a
    list's ``"\\x1e"``-joined casefolded sorted items fold to the same items joined by
    one space; and ``casefold`` is ``lower`` on ASCII. So the batch is one string of
    those pieces with ``"\\x01"`` after each entry, checked once for the conditions
    above (an empty field cannot make two spaces here, so two spaces mean a field
    that needs folding), lower-cased once and split. Anything else: ``content_hashes``.
    """
    n = len(columns[0])
    etypes, *rest = columns
    *plain, tags, applies, severities = rest
    lists = [list(map(" ".join, map(sorted, tags)))]  # tags are lower-case already (_lists)
    if any(applies):
        lists.append([" ".join(sorted(map(str.lower, a))) for a in applies])
    else:
        lists.append([""] * n)
    text = "".join(chain.from_iterable(zip(
        etypes, *map(_pieces, (*plain, *lists, severities)), repeat("\x01", n))))
    if (not text.isascii() or "  " in text or text.count("\x01") != n
            or any(c in text for c in _ODD_SPACES)):
        return content_hashes(zip(*columns))
    parts = text.lower().split("\x01")
    parts.pop()  # after the last entry's mark
    return list(map(_hexdigest, map(sha256, map(str.encode, parts))))


def _pieces(column: list[str]) -> Iterable[str]:
    """Each field as it follows the previous one in a folded text: ``" \\x00 " + f``,
    or ``" \\x00"`` for an empty one."""
    if not any(column):
        return repeat(" \x00", len(column))
    if all(column):
        return map(_SEP.__add__, column)
    return [_SEP + f if f else " \x00" for f in column]


def _fast(records: Sequence[Mapping[str, Any]]) -> list[Entry]:
    for r in records:
        if type(r) is not dict or not FIELD_NAMES.issuperset(r):
            raise _NotSure
    col = lambda name: _column(records, name)  # noqa: E731
    titles = _texts(col("title"), MAX_TITLE_CHARS, required=True)
    descriptions = _texts(col("description"), MAX_TEXT_CHARS, required=True)
    ids = _ids(col("id"))
    domains = _mapped(col("domain"), _domain)
    context, example, counter, why = (_texts(col(n), limit, required=False) for n, limit in _TEXTS)
    types = _mapped(col("type"), _choice(ENTRY_TYPES, "pattern"))
    severities = _mapped(col("severity"), _choice(SEVERITIES, "suggestion"))
    origins = _mapped(col("origin"), _choice(ORIGINS, "agent"))
    tags = _lists(col("tags"), lower=True)
    applies = _lists(col("applies_to"), lower=False)
    valid_from, valid_until, created, updated = (
        _times(col(n), n) for n in ("valid_from", "valid_until", "created_at", "updated_at"))
    for vf, vu in zip(valid_from, valid_until):
        if vf is not None and vu is not None and vu <= vf:
            raise _NotSure
    hashes = _hashes(types, domains, titles, descriptions, context, example, counter, why, tags,
                     applies, severities)
    return entries_from_columns(ids, titles, descriptions, types, domains, context, example,
                                counter, why, tags, applies, severities, origins, valid_from,
                                valid_until, created, updated, hashes)
