"""Slot columns: the per-slot attributes a search mirror keeps for filters.

A mirror (:mod:`postings`) gives each row it reflects a *slot* (its row number in
the mirror). Filters (type, severity, origin, domain, tags, validity window,
update date; :mod:`filter_compile`) are evaluated on the mirror as NumPy masks, so
every attribute they read is held as a column: one array indexed by slot. Small
closed vocabularies become int8 codes (their position in ``ENTRY_TYPES`` ...),
domains int32 codes into the mirror's growing domain list, timestamps float64
(NaN: none), tags a map from tag to the ascending slots holding it.

Why a column at a time: a first build registers up to 20,000 rows per chunk, and
a Python loop per row (and per attribute) cost more than the tokenising. Here the
rows are transposed once (``zip(*rows)``) and each column is made by one C-level
map (``np.fromiter`` over ``dict.__getitem__``), the tags by one ``split`` and a
stable sort.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from typing import Mapping, NamedTuple, Sequence

import numpy as np

from tiervault.vault.entry import ENTRY_TYPES, ORIGINS, SEVERITIES
from tiervault.vault.rows import MirrorRowColumns

__all__ = ["NUMERIC", "SlotColumns", "appended", "empty_columns", "slot_columns", "codes", "times", "tag_slots"]


class SlotColumns(NamedTuple):
    """The slot columns of a block of rows given slots ``first, first + 1, ...``."""

    rowids: np.ndarray  # int64: each row's key in the tier
    ids: tuple[str, ...]  # entry id per slot
    hashes: tuple[str, ...]  # content hash per slot
    type_code: np.ndarray  # int8: position in ENTRY_TYPES
    severity_code: np.ndarray  # int8: position in SEVERITIES
    origin_code: np.ndarray  # int8: position in ORIGINS
    domain_code: np.ndarray  # int32: position in the domain list (old + new_domains)
    new_domains: list[str]  # domains the list lacked, in order of first appearance
    valid_from: np.ndarray  # float64, NaN: none
    valid_until: np.ndarray
    updated_at: np.ndarray
    tags: dict[str, np.ndarray]  # tag -> ascending slots holding it


def slot_columns(rows: MirrorRowColumns, domains: Sequence[str], first: int) -> SlotColumns:
    """The slot columns of ``rows`` (non-empty), whose slots start at ``first``, against
    the mirror's ``domains`` so far (ValueError naming a type/severity/origin it lacks)."""
    n = len(rows)
    keys, ids, hashes, types, row_domains = rows.key, rows.id, rows.content_hash, rows.type, rows.domain
    severities, origins, tags = rows.severity, rows.origin, rows.tags
    valid_from, valid_until, updated_at = rows.valid_from, rows.valid_until, rows.updated_at
    domain_index = {d: i for i, d in enumerate(domains)}
    new_domains: list[str] = []
    for d in dict.fromkeys(row_domains):  # new domains in order of first appearance
        if d not in domain_index:
            domain_index[d] = len(domains) + len(new_domains)
            new_domains.append(d)
    return SlotColumns(
        rowids=np.fromiter(keys, dtype=np.int64, count=n),
        ids=ids,
        hashes=hashes,
        type_code=codes(types, ENTRY_TYPES, np.int8),
        severity_code=codes(severities, SEVERITIES, np.int8),
        origin_code=codes(origins, ORIGINS, np.int8),
        domain_code=np.fromiter(map(domain_index.__getitem__, row_domains), dtype=np.int32, count=n),
        new_domains=new_domains,
        valid_from=times(valid_from),
        valid_until=times(valid_until),
        updated_at=times(updated_at),
        tags=tag_slots(tags, first),
    )


#: the numeric slot columns, by the names a mirror holds them under, and their dtypes
NUMERIC = {"rowids": np.int64, "type_code": np.int8, "severity_code": np.int8, "origin_code": np.int8,
           "domain_code": np.int32, "valid_from": np.float64, "valid_until": np.float64,
           "updated_at": np.float64}


def empty_columns() -> dict[str, np.ndarray]:
    """Each :data:`NUMERIC` column without a slot (a new mirror's)."""
    return {name: np.zeros(0, dtype=dtype) for name, dtype in NUMERIC.items()}


def appended(held: Mapping[str, np.ndarray], chunks: Sequence[SlotColumns]) -> dict[str, np.ndarray]:
    """Each :data:`NUMERIC` column: ``held``'s values, then every chunk's, by one concatenation
    (a first build appended each chunk's apart, copying every column so far again: 25
    chunks of a 1M tier; issue 16, session 16)."""
    return {name: np.concatenate([held[name], *(getattr(c, name) for c in chunks)]) for name in NUMERIC}


def codes(values: Sequence[str], allowed: tuple[str, ...], dtype: type) -> np.ndarray:
    """The position of each value in ``allowed`` (ValueError naming a value it lacks)."""
    index = {v: i for i, v in enumerate(allowed)}
    try:
        return np.fromiter(map(index.__getitem__, values), dtype=dtype, count=len(values))
    except KeyError as exc:
        raise ValueError(f"{exc.args[0]!r} is not one of {', '.join(allowed)}") from None


def times(values: Sequence[float | None]) -> np.ndarray:
    """Timestamps as float64, NaN for none."""
    return np.array(values, dtype=np.float64)  # None -> nan


_TAG_SEP = "\x00"


def tag_slots(tag_texts: Sequence[str | None], first: int) -> dict[str, np.ndarray]:
    """{tag: ascending slots holding it} of rows ``first, first + 1, ...`` whose tags
    are the space-separated words of ``tag_texts``; tags in order of first appearance,
    a slot repeated as often as its row repeats the tag (as a loop per row would).

    One ``split`` over the texts joined by `` NUL `` (a tag never holds NUL; a text that
    does is split row by row), then a stable sort of the tags' codes."""
    big = f" {_TAG_SEP} ".join(t or "" for t in tag_texts)
    if big.count(_TAG_SEP) != len(tag_texts) - 1:
        out: dict[str, list[int]] = {}
        for offset, text in enumerate(tag_texts):
            for tag in (text or "").split():
                out.setdefault(tag, []).append(first + offset)
        return {t: np.asarray(s, dtype=np.int64) for t, s in out.items()}
    tokens = big.split()
    # each tag's code in order of first appearance, given as it is first met: one C-level
    # pass over the tokens (a dict of the names first, then their codes, took two: ~0.17 s
    # a 1M team tier's ~2M tags; issue 16, session 24); the separator is -1
    code_of: defaultdict[str, int] = defaultdict(itertools.count().__next__, {_TAG_SEP: -1})
    tag_codes = np.fromiter(map(code_of.__getitem__, tokens), dtype=np.int64, count=len(tokens))
    names = list(code_of)[1:]
    row = np.cumsum(tag_codes < 0)
    keep = tag_codes >= 0
    tag_codes, row = tag_codes[keep], row[keep] + first
    # the same stable order from narrower codes: NumPy sorts 16-bit keys by radix (0.066
    # -> 0.008 s a 1M team tier's chunks)
    narrow = tag_codes.astype(np.int16) if len(names) <= np.iinfo(np.int16).max else tag_codes
    order = np.argsort(narrow, kind="stable")
    bounds = np.cumsum(np.bincount(tag_codes, minlength=len(names)))
    slots = np.split(row[order], bounds[:-1])
    return dict(zip(names, slots))
