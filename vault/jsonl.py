"""JSONL import and export: one entry per line, the entry model's fields.

An exported line is ``Entry.to_dict()`` plus ``"links"`` (the entry's outgoing
links in that tier), so export -> import -> export reproduces the file exactly.
Reading reports every bad line by number; nothing is written for a bad line.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field, fields
from itertools import islice, repeat
from operator import attrgetter
from typing import IO, Any, Iterable, Iterator, NamedTuple, Sequence, Union

from tiervault.errors import TierVaultError, ValidationError
from tiervault.vault.entry import LINK_TYPES, Entry
from tiervault.vault.entry_bulk import validate_many
from tiervault.vault.gc_pause import gc_paused
from tiervault.vault.rows import CommittedBatch

__all__ = ["ParsedLine", "LinkSpec", "parse_lines", "parse_record", "entry_line", "ImportReport",
           "capture_linked"]


@dataclass(frozen=True, slots=True)
class LinkSpec:
    """An outgoing link carried by an imported record."""

    target: str
    type: str
    note: str = ""


@dataclass(frozen=True, slots=True)
class ParsedLine:
    """One input line: an entry with its links, or the error that line has."""

    line: int
    entry: Entry | None
    links: tuple[LinkSpec, ...] = ()
    error: str | None = None


@dataclass(slots=True)
class ImportReport:
    """What an import did: counts plus the bad lines (``line: message``)."""

    read: int = 0
    written: int = 0
    unchanged: int = 0
    links: int = 0
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"read": self.read, "written": self.written, "unchanged": self.unchanged,
                "links": self.links, "errors": self.errors}


def _links(value: Any) -> tuple[LinkSpec, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ValidationError("links", "expected a list of {target, type, note} objects")
    out = []
    for i, item in enumerate(value):
        if not isinstance(item, dict) or not isinstance(item.get("target"), str):
            raise ValidationError(f"links[{i}]", "expected an object with a string 'target'")
        link_type = item.get("type", "supports")
        if link_type not in LINK_TYPES:
            raise ValidationError(f"links[{i}].type",
                                  f"{link_type!r} is not one of {', '.join(LINK_TYPES)}")
        note = item.get("note", "") or ""
        if not isinstance(note, str):
            raise ValidationError(f"links[{i}].note", "expected a string")
        out.append(LinkSpec(item["target"], link_type, note))
    return tuple(out)


def _split(record: Any) -> tuple[dict[str, Any], tuple[LinkSpec, ...]]:
    """A decoded line -> (its entry fields, its links), popped from ``record`` in place;
    raises ValidationError naming the field."""
    if not isinstance(record, dict):
        raise ValidationError("entry", f"expected a JSON object, got {type(record).__name__}")
    links = _links(record.pop("links", None))
    record.pop("content_hash", None)  # derived, recomputed on the way in
    return record, links


def parse_record(record: Any) -> tuple[Entry, tuple[LinkSpec, ...]]:
    """A decoded JSON object -> (entry, links); raises ValidationError naming the field."""
    fields, links = _split(dict(record) if isinstance(record, dict) else record)
    return Entry.from_dict(fields), links


def _not_utf8(exc: UnicodeDecodeError) -> ValidationError:
    """What input that is not UTF-8 (a binary file) raises, from where it is read.

    (A text file decodes in chunks, so the error cannot name the exact line.) The reads
    convert it themselves rather than through a generator wrapped around the input
    (one more Python frame resumed a line).
    """
    error = ValidationError("input", f"is not UTF-8 text ({exc.reason}); import expects "
                            "UTF-8 JSONL")
    error.__cause__ = exc
    return error


_TOO_DEEP = "nested too deeply to be an entry"


def _load(text: str) -> Any:
    """json.loads, with nesting too deep for the parser as a JSONDecodeError-like error."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError(_TOO_DEEP) from None


def _bad(number: int, exc: BaseException) -> ParsedLine:
    """Line ``number`` failed with ``exc``: the one place that words a bad line's error
    (not JSON, nested too deeply, or the ValidationError naming the field)."""
    if isinstance(exc, json.JSONDecodeError):
        message = f"invalid JSON: {exc.msg} (column {exc.colno})"
    elif isinstance(exc, RecursionError):
        message = _TOO_DEEP
    else:
        message = str(exc)
    return ParsedLine(number, None, error=message)


#: What decoding or validating one line may raise: every one becomes that line's error.
_LINE_ERRORS = (ValueError, RecursionError)  # JSONDecodeError and ValidationError are ValueErrors


def _record_line(number: int, record: Any) -> ParsedLine:
    try:
        entry, links = parse_record(record)
    except _LINE_ERRORS as exc:
        return _bad(number, exc)
    return ParsedLine(number, entry, links)


def _line(number: int, text: str) -> ParsedLine:
    try:
        record = _load(text)
    except ValueError as exc:
        return _bad(number, exc)
    return _record_line(number, record)


#: Lines decoded, then validated together (vault/entry_bulk.py), per group. Small enough
#: that a group's decoded records (~1.2 KB a line) stay in a core's L2 cache between the
#: dozen column passes of the validation: on a 512 KiB-L2 machine (AMD EPYC, session 22)
#: 500-line groups parse in 12-16 % less CPU than 2,000-line ones (bench/README.md, "Issue
#: 16, session 22"; the instructions a line barely change: the gain is the cache's).
_GROUP = 500


class _Good(NamedTuple):
    """A group of lines that are all good entries (the usual group), as columns: no
    ParsedLine per line (:func:`parse_lines` makes them; :func:`import_lines` does not)."""

    numbers: list[int]
    entries: list[Entry]
    links: list[tuple[LinkSpec, ...]]


#: What :func:`_groups` yields: a group's ParsedLines in order, or a group of good lines.
_Parsed = Union[list[ParsedLine], _Good]


def _groups(numbered: Iterable[tuple[int, str]]) -> Iterator[_Parsed]:
    """``_line`` of each ``(number, text)``, blank lines skipped, a group of lines at a
    time; the entries of a group are validated at once (same entries, same messages as
    one by one)."""
    it = iter(numbered)
    while True:
        group: list[tuple[int, str]] = []
        failure: ValidationError | None = None
        try:  # input that stops decoding: the lines before it are still parsed, then it raises
            group.extend(islice(it, _GROUP))  # (extend keeps what it took before the error)
        except UnicodeDecodeError as exc:
            failure = _not_utf8(exc)
        except ValidationError as exc:
            failure = exc
        with gc_paused():
            parsed = _group(group)
        yield parsed
        if failure is not None:
            raise failure
        if len(group) < _GROUP:
            return


class _Blank(Exception):
    """A blank line: skipped."""


#: The decoder ``json.loads`` uses (default settings); its C scanner decodes one value.
_SCAN = json.JSONDecoder().scan_once
#: What may follow the value on a line ``json.loads`` accepts, as a file yields lines.
_LINE_ENDS = ("", "\n", "\r\n")


def _object(text: str) -> Any:
    """``_load(text)``, raising _Blank for a blank line. A line that starts with ``{``
    and ends with the value (or a line break) is decoded by the scanner ``json.loads``
    calls, without the three Python calls and two whitespace matches around it
    (~1.2 us of ~2.7 a line); anything else, or any doubt, goes through ``_load``,
    which words every error as before."""
    if text[:1] == "{":
        try:
            record, end = _SCAN(text, 0)
        except (StopIteration, ValueError, RecursionError):
            pass  # not valid JSON (or too deep): _load raises what json.loads raises
        else:
            if text[end:] in _LINE_ENDS:
                return record
    if not text.strip():
        raise _Blank
    return _load(text)


def _group(group: list[tuple[int, str]]) -> _Parsed:
    """The parsed lines of one group, in order (``_line`` of each, validated together);
    when every line is a good entry, their columns (:class:`_Good`)."""
    out: list[ParsedLine | None] = []
    pending: list[tuple[int, dict[str, Any], tuple[LinkSpec, ...]]] = []
    for number, text in group:
        try:  # the decoded record is this line's own fresh dict: split in place
            record, links = _split(_object(text))
        except _LINE_ERRORS as exc:
            out.append(_bad(number, exc))
            continue
        except _Blank:
            continue
        out.append(None)
        pending.append((number, record, links))
    results = validate_many([r for _, r, _ in pending])
    if len(out) == len(pending) and all(map(Entry.__instancecheck__, results)):
        # Every line good (the usual group): its columns, no object per line.
        return _Good([n for n, _, _ in pending], results, [l for _, _, l in pending])
    checked = iter(zip(pending, results))
    parsed = []
    for item in out:
        if item is None:
            (number, _, links), result = next(checked)
            item = (ParsedLine(number, result, links) if isinstance(result, Entry)
                    else _bad(number, result))
        parsed.append(item)
    return parsed


#: ParsedLine's slot setters, in field order (see _parsed_lines).
_PARSED_SETTERS = tuple(getattr(ParsedLine, f.name).__set__ for f in fields(ParsedLine))


def _parsed_lines(numbers: list[int], entries: list[Entry],
                  links: list[tuple[LinkSpec, ...]]) -> list[ParsedLine]:
    """``list(map(ParsedLine, numbers, entries, links))`` built a field at a time: the frozen
    dataclass's ``__init__`` sets each field through ``object.__setattr__`` (~0.5 us a
    line); each slot's setter over a column in one C-level ``map`` is ~4x cheaper
    (``entry.entries_from_columns`` does the same for entries)."""
    out = list(map(object.__new__, repeat(ParsedLine, len(numbers))))
    for setter, column in zip(_PARSED_SETTERS, (numbers, entries, links, repeat(None))):
        deque(map(setter, out, column), 0)
    return out


def parse_lines(stream: Iterable[str]) -> Iterator[ParsedLine]:
    """Parse JSONL (blank lines skipped), deciding line by line.

    The input is taken as one JSON document (an object, or an array of objects,
    possibly spread over several lines) only when the first non-blank line is not
    valid JSON on its own *and* the whole input parses as one document; otherwise
    every line stands alone and a bad line costs only itself.
    """
    for group in _parsed(stream):
        if type(group) is _Good:
            yield from _parsed_lines(*group)
        else:
            yield from group


def _parsed(stream: Iterable[str]) -> Iterator[_Parsed]:
    """:func:`parse_lines` a group of lines at a time (:func:`_groups`)."""
    lines = iter(stream)
    number = 0
    while True:
        try:
            text = next(lines)
        except StopIteration:
            return
        except UnicodeDecodeError as exc:
            raise _not_utf8(exc) from exc
        number += 1
        if not text.strip():
            continue
        first = _line(number, text)
        if first.error is None or not text.lstrip().startswith(("{", "[")):
            yield [first]
            yield from _groups(enumerate(lines, start=number + 1))
            return
        try:  # one document over several lines? (read into memory once)
            rest = [text, *lines]
        except UnicodeDecodeError as exc:
            raise _not_utf8(exc) from exc
        try:
            document = _load("".join(rest))
        except ValueError:
            yield [first]
            yield from _groups(enumerate(rest[1:], start=number + 1))
            return
        items = document if isinstance(document, list) else [document]
        yield [_record_line(number + i if isinstance(document, list) else number, record)
               for i, record in enumerate(items)]
        return


def entry_line(entry: Entry, links: Iterable[Any] = ()) -> str:
    """The export form of one entry (stable key order, UTF-8 kept)."""
    record = entry.to_dict()
    record["links"] = [{"target": l.target_id, "type": l.link_type, "note": l.note}
                       for l in sorted(links, key=lambda l: (l.target_id, l.link_type))]
    return json.dumps(record, ensure_ascii=False)


def write_lines(out: IO[str], lines: Iterable[str]) -> int:
    n = 0
    for line in lines:
        out.write(line + "\n")
        n += 1
    return n


def import_lines(manager: Any, tier: str, stream: Iterable[str], *, strict: bool = False,
                 batch_size: int = 5_000, on_progress: Any = None) -> ImportReport:
    """Import JSONL into ``tier`` of a VaultManager; links are added after all entries.

    ``strict``: the whole input is validated first and nothing is written if any
    line is bad. Otherwise good lines are written and bad ones reported.
    """
    manager.store(tier)  # fail early, before reading input, when the tier is unusable
    report = ImportReport()
    # Links of the line that wins: a repeated id keeps the last line's entry AND links
    # (never a union of both lines' links).
    pending_links: dict[str, tuple[LinkSpec, ...]] = {}
    first_line: dict[str, int] = {}
    groups: Iterable[_Parsed]
    if strict:
        parsed = list(parse_lines(stream))
        bad = [f"line {p.line}: {p.error}" for p in parsed if p.error]
        seen: dict[str, int] = {}
        for p in parsed:
            if p.entry is not None:
                if p.entry.id in seen:
                    bad.append(_duplicate(p, seen[p.entry.id]))
                seen.setdefault(p.entry.id, p.line)
        if bad:
            report.read = len(parsed)
            report.errors = bad
            raise ValidationError(
                "input", f"{len(bad)} bad line(s), nothing imported; first: {report.errors[0]}")
        groups = [parsed]
    else:
        groups = _parsed(stream)
    # (entries handed to the store so far, lines read then), oldest first: the store reads
    # ahead of its commits (a PostgreSQL bulk load prepares the next batches meanwhile),
    # so progress reports the lines read up to the last committed entry. Holds only the
    # entries read but not yet committed (a few batches).
    handed: deque[tuple[int, int]] = deque()
    counts = {"handed": 0, "committed": 0}

    def good(group: _Good) -> bool:
        """A group of good lines accounted for at once (ids, links, progress) when none of
        its ids is repeated (within it or before it); False: account line by line."""
        ids = list(map(_ID, group.entries))
        if len(set(ids)) != len(ids) or not first_line.keys().isdisjoint(ids):
            return False  # a repeated id: its message in line order, below
        n, read, done = len(ids), report.read, counts["handed"]
        first_line.update(zip(ids, group.numbers))
        pending_links.update(zip(ids, group.links))
        report.read += n
        counts["handed"] += n
        if on_progress:
            handed.extend(zip(range(done + 1, done + n + 1), range(read + 1, read + n + 1)))
        return True

    def entries() -> Iterator[Entry]:
        for group in groups:
            if type(group) is _Good:
                if good(group):
                    yield from group.entries
                    continue
                group = _parsed_lines(*group)
            for item in group:
                report.read += 1
                if item.error:
                    report.errors.append(f"line {item.line}: {item.error}")
                    continue
                assert item.entry is not None
                eid = item.entry.id
                if eid in first_line:
                    report.errors.append(_duplicate(item, first_line[eid]))
                first_line.setdefault(eid, item.line)
                pending_links[eid] = item.links
                counts["handed"] += 1
                if on_progress:
                    handed.append((counts["handed"], report.read))
                yield item.entry

    def committed(batch: CommittedBatch) -> None:
        report.written += batch.written
        report.unchanged += len(batch.entries) - batch.written
        if not on_progress:
            return
        counts["committed"] += len(batch.entries)
        read = 0
        while handed and handed[0][0] <= counts["committed"]:
            read = handed.popleft()[1]
        # Everything read is committed: the lines read so far (bad lines after it included).
        on_progress(read if handed else report.read)

    # One call for the whole input: the tier's store sees the whole load (its bulk path).
    # The collector is paused for the load (not only for each group's parse): the rows,
    # entries and batches it builds form no cycles, and the young collections their
    # allocations set off walked them again and again (and, in a process holding many
    # objects, the older generations too): 2-3% of the import's CPU at 100,000 lines
    # (bench/README.md, "Issue 16, session 14: the JSONL import").
    with gc_paused():
        manager.capture_many(entries(), tier, batch_size=batch_size, on_batch=committed)
    for source, links in pending_links.items():
        for link in links:
            try:
                manager.link(source, link.target, link.type, link.note, tier=tier)
                report.links += 1
            except (ValidationError, LookupError) as exc:
                report.errors.append(f"link {source} -> {link.target}: {exc}")
    return report


_ID = attrgetter("id")


def _duplicate(item: ParsedLine, first: int) -> str:
    assert item.entry is not None
    return (f"line {item.line}: id {item.entry.id!r} was already on line {first}; "
            "the last line wins (its fields and links)")


def capture_linked(manager: Any, items: Sequence[tuple[int, Entry, Sequence[LinkSpec]]],
                   tier: str) -> list[dict[str, Any]]:
    """Capture ``(index, entry, links)`` items through the manager (so write hooks run),
    then store their links; a link that fails is reported, never fatal:
    ``[{"index", "id", "target", "error"}]``."""
    manager.capture_many([entry for _, entry, _ in items], tier)
    errors: list[dict[str, Any]] = []
    for i, entry, links in items:
        for spec in links:
            try:
                manager.link(entry.id, spec.target, spec.type, spec.note, tier=tier)
            except TierVaultError as exc:
                errors.append({"index": i, "id": entry.id, "target": spec.target,
                               "error": str(exc)})
    return errors
