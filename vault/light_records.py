"""The light rows of a mirror's base, kept beside it: a scan's rows without SQL.

A scan needs each candidate's :class:`~tiervault.vault.rows.LightRow` (scoring fields,
title, snippet, tags, length). Read from SQL that was ~3 statements a scan of ~38
scattered rows, 0.5 ms of a 3.1 ms warm 100K scan and more after a cold pause (issue
16, session 20). The mirror already holds most fields per slot (type, domain, severity
and origin codes, validity, ``updated_at``, id, content hash: :mod:`slot_columns`);
what it lacked is kept here for every base slot, written at build time from the same
rows, in the same snapshot:

- ``blob``: each row's ``title NUL snippet NUL tags NUL`` in UTF-8, one row after the
  other (the snippet: the description's first :data:`SNIPPET_CHARS` characters);
- ``index``: int64, three per slot and one more: the record's first byte,
  ``created_at`` (its float64 bits) and ``chars`` (:data:`ASK`: this row's light row
  comes from SQL), then the first byte of the next record -- the four numbers a row
  needs are neighbours (one read per row, a ``pread`` of 32 bytes in a large file).

Exact: the values are SQL's (``SELECT_LIGHT``). A row whose texts hold NUL (SQLite's
``length`` and ``substr`` stop there, Python's do not), whose ``created_at`` is not a
number, or whose timestamps ``SANE_TIMES`` refuses is marked :data:`ASK`: its light row
is read from SQL, which gives it or leaves it out as before. Delta slots (rows written
after the build) are read from SQL too. Verified as every cache block (:mod:`checked_array`):
a damaged byte raises ``CacheDamaged`` before it is used.
"""

from __future__ import annotations

from itertools import chain, repeat
from operator import contains, itemgetter
from typing import Any, Callable, Sequence

import struct

import numpy as np

from tiervault.vault.checked_array import CacheDamaged, CheckedArray
from tiervault.vault.hash_table import DIGEST, HashTable
from tiervault.vault.entry import ENTRY_TYPES, MAX_TIMESTAMP, MIN_TIMESTAMP, ORIGINS, SEVERITIES
from tiervault.vault.rows import LightRow, MirrorRowColumns

__all__ = ["ASK", "SNIPPET_CHARS", "LightRecords", "RecordsBuilder", "mirror_light_rows"]

#: The snippet's length the records hold (``light_rows``' default ``snippet_chars``).
SNIPPET_CHARS = 120
#: ``chars`` of a row the records do not answer: its light row is read from SQL.
ASK = -1
_SEP = "\x00"
_SNIPPET = itemgetter(slice(0, SNIPPET_CHARS))


def _lengths(texts: Sequence[str], n: int) -> np.ndarray:
    return np.fromiter(map(len, texts), dtype=np.int64, count=n)


def _byte_lengths(texts: Sequence[str], n: int) -> np.ndarray:
    """UTF-8 byte length of each text (its character count when ASCII: O(1) each)."""
    out = _lengths(texts, n)
    ascii_ = np.fromiter(map(str.isascii, texts), dtype=np.bool_, count=n)
    if not ascii_.all():
        for i in np.flatnonzero(~ascii_).tolist():
            out[i] = len(texts[i].encode("utf-8"))
    return out


def _sane(values: np.ndarray, nullable: bool) -> np.ndarray:
    """``SANE_TIMES``' test of one column (NaN: NULL)."""
    with np.errstate(invalid="ignore"):
        inside = (values >= MIN_TIMESTAMP) & (values <= MAX_TIMESTAMP)
    return inside | np.isnan(values) if nullable else inside


def _times(values: Sequence[Any], n: int) -> tuple[np.ndarray, np.ndarray]:
    """float64 of each value (NaN for None) and where a value is not a number."""
    odd = np.zeros(n, dtype=np.bool_)
    try:
        return np.array(values, dtype=np.float64), odd
    except (TypeError, ValueError):
        out = np.full(n, np.nan)
        for i, v in enumerate(values):
            if v is None:
                continue
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                out[i] = float(v)
            else:
                odd[i] = True
        return out, odd


class RecordsBuilder:
    """The records of a build's chunks, one chunk at a time (:meth:`add`), then :meth:`finish`."""

    def __init__(self) -> None:
        self._blobs: list[bytes] = []
        self._starts: list[np.ndarray] = []
        self._sizes: list[np.ndarray] = []
        self._created: list[np.ndarray] = []
        self._chars: list[np.ndarray] = []
        self._size = 0

    def add(self, cols: MirrorRowColumns, created_at: Sequence[Any], rest_chars: Sequence[Any]) -> None:
        """One chunk: its mirror columns, each row's ``created_at`` and the SQL length of its
        text fields the mirror does not read (example, counter example, why)."""
        n = len(cols)
        if not n:
            return
        titles, descriptions, tags = cols.title, cols.description, cols.tags
        snippets = list(map(_SNIPPET, descriptions))
        text = _SEP.join(chain.from_iterable(zip(titles, snippets, tags))) + _SEP
        ask = np.zeros(n, dtype=np.bool_)
        if text.count(_SEP) != 3 * n:  # NUL inside a title, snippet or tags: those rows from SQL
            bad = [i for i in range(n) if _SEP in titles[i] or _SEP in snippets[i] or _SEP in tags[i]]
            ask[bad] = True
            clean = [("", "", "") if ask[i] else (titles[i], snippets[i], tags[i]) for i in range(n)]
            titles, snippets, tags = (list(c) for c in zip(*clean))
            text = _SEP.join(chain.from_iterable(clean)) + _SEP
        for texts in (descriptions, cols.context):  # NUL past the snippet: SQL's length differs
            if "".join(texts).find(_SEP) >= 0:
                ask[[i for i, t in enumerate(texts) if _SEP in t]] = True
        created, odd = _times(created_at, n)
        ask |= odd
        rest, rest_odd = _times(rest_chars, n)
        ask |= rest_odd | np.isnan(rest)
        title_n, description_n = _lengths(titles, n), _lengths(descriptions, n)
        chars = title_n + description_n + _lengths(cols.context, n) + np.nan_to_num(rest).astype(np.int64)
        chars[ask] = ASK
        blob = text.encode("utf-8")
        if text.isascii():  # characters are bytes (the usual case: no per-text encoding)
            sizes = title_n + np.minimum(description_n, SNIPPET_CHARS) + _lengths(tags, n) + 3
        else:
            sizes = _byte_lengths(titles, n) + _byte_lengths(snippets, n) + _byte_lengths(tags, n) + 3
        starts = np.empty(n, dtype=np.int64)
        starts[0] = self._size
        np.cumsum(sizes[:-1], out=starts[1:])
        starts[1:] += self._size
        self._size += len(blob)
        self._blobs.append(blob)
        self._starts.append(starts)
        self._sizes.append(sizes.astype(np.int32))
        self._created.append(created)
        self._chars.append(chars)

    def finish(self, m: Any) -> "LightRecords":
        """The records of every chunk added, the base slots of mirror ``m`` (built from the
        same chunks: its codes, validity and ``updated_at`` columns are copied in)."""
        n = sum(s.size for s in self._starts)
        index = np.zeros(n, dtype=INDEX_DTYPE)
        if n:
            index["start"] = np.concatenate(self._starts)
            index["size"] = np.concatenate(self._sizes)
            index["chars"] = np.concatenate(self._chars)
            index["created_at"] = np.concatenate(self._created)
            for name, column in (("updated_at", "updated_at"), ("valid_from", "valid_from"),
                                 ("valid_until", "valid_until"), ("domain", "domain_code"),
                                 ("type", "type_code"), ("severity", "severity_code"), ("origin", "origin_code")):
                index[name] = getattr(m, column)[:n]
            # rows SANE_TIMES leaves out in SQL: asked there (it leaves them out again)
            insane = ~(_sane(index["created_at"], False) & _sane(index["updated_at"], False)
                       & _sane(index["valid_from"], True) & _sane(index["valid_until"], True))
            index["chars"][insane] = ASK
        blob = np.frombuffer(b"".join(self._blobs), dtype=np.uint8)
        self._blobs, self._starts, self._sizes, self._created, self._chars = [], [], [], [], []
        return LightRecords(CheckedArray(index.view(np.uint8)), CheckedArray(blob), read=False)


#: One slot's fixed-width record in ``index`` (little-endian, no padding but the last byte):
#: where its texts lie in ``blob``, ``chars`` (:data:`ASK`: from SQL), the four timestamps
#: (NaN: NULL) and the codes of type, severity, origin (the entry model's tuples) and domain
#: (the mirror's domain list): all a light row holds but its id, texts and content hash.
INDEX_DTYPE = np.dtype([("start", "<i8"), ("size", "<i4"), ("chars", "<i4"), ("created_at", "<f8"),
                        ("updated_at", "<f8"), ("valid_from", "<f8"), ("valid_until", "<f8"),
                        ("domain", "<i4"), ("type", "i1"), ("severity", "i1"), ("origin", "i1"),
                        ("pad", "i1")])
_RECORD = struct.Struct("<qiiddddibbbx")
_WIDTH = _RECORD.size
assert _WIDTH == INDEX_DTYPE.itemsize


class LightRecords:
    """The base's light-row records (module docstring): ``index`` (a fixed-width record a
    slot, :data:`INDEX_DTYPE`, as bytes) and ``blob``, each verified block by block on first
    read; ``read``: both read with ``pread`` a row at a time (a large cache file: no page
    of it mapped into the process)."""

    __slots__ = ("index", "blob", "n", "read", "_index_view", "_blob_view")

    def __init__(self, index: CheckedArray, blob: CheckedArray, *, read: bool) -> None:
        if len(index) % _WIDTH:
            raise ValueError(f"light-row index of {len(index)} bytes: not {_WIDTH} a row")
        self.index, self.blob, self.read = index, blob, read
        self.n = len(index) // _WIDTH
        self._index_view = memoryview(index.a)  # read only after check_ranges
        self._blob_view = memoryview(blob.a)

    def arrays(self) -> dict[str, np.ndarray]:
        """The arrays a cache file holds (every block checked first)."""
        return {"light_index": self.index.all(), "light_blob": self.blob.all()}

    def _records(self, slots: list[int]) -> list[tuple]:
        """Each slot's record (:data:`_RECORD`'s fields)."""
        if self.read:
            get = self.index.get
            return [_RECORD.unpack(get(s * _WIDTH, s * _WIDTH + _WIDTH)) for s in slots]
        starts = [s * _WIDTH for s in slots]
        if not self.index.trusted:
            self.index.check_ranges(starts, [s + _WIDTH for s in starts])
        view = self._index_view
        return [_RECORD.unpack_from(view, s) for s in starts]

    def _texts(self, starts: list[int], ends: list[int]) -> list[list[str]]:
        """Each record's [title, snippet, tags, ""]."""
        if self.read:
            get = self.blob.get
            return [str(memoryview(get(a, b)), "utf-8").split(_SEP) for a, b in zip(starts, ends)]
        if not self.blob.trusted:
            self.blob.check_ranges(starts, ends)
        view = self._blob_view
        return [str(view[a:b], "utf-8").split(_SEP) for a, b in zip(starts, ends)]

    def light_rows(self, m: Any, ids: Sequence[str], slots: Sequence[int | None]
                   ) -> tuple[dict[str, LightRow], list[str]]:
        """The light rows of ``ids`` at their live ``slots`` in mirror ``m`` (None: the
        tier does not hold it, no row) and the ids whose rows must come from SQL (delta
        slots, rows marked :data:`ASK`). A record that does not fit its blob or the
        model raises ``CacheDamaged``."""
        ask: list[str] = []
        mine: list[str] = []
        at: list[int] = []
        n = self.n
        for eid, slot in zip(ids, slots):
            if slot is not None:
                if slot < n:
                    mine.append(eid)
                    at.append(slot)
                else:
                    ask.append(eid)
        if not mine:
            return {}, ask
        try:
            records = self._records(at)
            size = len(self.blob)
            eids: list[str] = []
            kept: list[tuple] = []
            kept_at: list[int] = []
            starts: list[int] = []
            ends: list[int] = []
            for eid, slot, r in zip(mine, at, records):
                if r[2] == ASK:
                    ask.append(eid)
                    continue
                a = r[0]
                b = a + r[1]
                if a < 0 or b > size or r[1] < 3:
                    raise CacheDamaged("light-row records point outside their blob")
                eids.append(eid)
                kept.append(r)
                kept_at.append(slot)
                starts.append(a)
                ends.append(b)
            if not eids:
                return {}, ask
            names, out = m.domains, {}
            for eid, (_, _, chars, created, updated, vf, vu, dom, ty, sev, org), (title, snippet, tags, end), h \
                    in zip(eids, kept, self._texts(starts, ends), _hashes(m, kept_at)):
                if end or dom < 0 or ty < 0 or sev < 0 or org < 0:
                    raise CacheDamaged(f"the light-row record of {eid!r} is damaged")
                out[eid] = tuple.__new__(LightRow, (
                    eid, ENTRY_TYPES[ty], names[dom], SEVERITIES[sev], title, snippet, tags, created,
                    updated, None if vf != vf else vf, None if vu != vu else vu, h, chars, ORIGINS[org]))
        except (IndexError, ValueError) as exc:  # UnicodeDecodeError, unpacking, a code out of range
            if isinstance(exc, CacheDamaged):
                raise
            raise CacheDamaged(f"a light-row record is damaged ({type(exc).__name__}: {exc})") from exc
        return out, ask


def _hashes(m: Any, slots: list[int]) -> list[str]:
    """The content hashes of base ``slots``: a few raw digests hexed by slice (the
    table's gathers cost more for a handful), else the table's own ``take``."""
    table = m.hashes.base
    if not isinstance(table, HashTable) or len(slots) > 64:
        return m.hashes.take(slots)
    raw = table.raw
    if raw.trusted or raw.blocks_checked == raw.blocks:  # mapped and checked, or built here
        view = memoryview(raw.a)
        return [view[s * DIGEST:s * DIGEST + DIGEST].hex() for s in slots]
    return [raw.get(s * DIGEST, s * DIGEST + DIGEST).tobytes().hex() for s in slots]


def mirror_light_rows(m: Any, ids: Sequence[str], sql: Callable[[list[str]], dict[str, LightRow]]
                      ) -> dict[str, LightRow] | None:
    """The light rows of ``ids`` (default snippet) from mirror ``m``'s records where they
    hold the row (``m`` as caught up by the caller: in a search, its read scope's
    generation, the one the search ranked), the rest through ``sql`` (one call); None
    when ``m`` keeps no records (another backend's feed, a tier too large for them) or
    one of their blocks is damaged (``m`` is then rebuilt at its next catch-up)."""
    records = m.records
    if records is None:
        return None
    try:
        rows, ask = records.light_rows(m, ids, m.slots_of(ids))
    except CacheDamaged as exc:
        m.mark_damaged(exc)
        return None
    if ask:
        rows.update(sql(ask))
    return rows
