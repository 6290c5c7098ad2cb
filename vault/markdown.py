"""Markdown folders both ways: one ``<id>.md`` file per entry, reviewable in git.

File format (written by :func:`render`, read by :func:`parse`)::

    ---
    id: sec-parameterized-queries
    type: rule
    domain: security
    severity: critical
    tags: [sql-injection, sql]
    origin: pack
    created_at: '2024-01-08T00:00:00Z'
    links:
    - target: db-least-privilege-roles
      type: supports
      note: limits the blast radius
    ---

    # Use parameterised queries

    The description, as plain Markdown.

    ## Context
    ...
    ## Example / ## Counter-example / ## Why   (only when non-empty)

Exactness. The body is parsed by a fixed rule: the first non-blank line is
``# Title``; the description runs to the first ``## Context|Example|
Counter-example|Why`` heading line; each section runs to the next; blank lines
around a text are dropped. A value that this rule could not give back exactly
(a title with a line break, a text starting or ending with a blank line, a
carriage return, or a line that looks like one of those headings) is written
as a YAML string in the front matter instead, so export -> import -> export
always reproduces the files byte for byte.

Re-import (:func:`import_folder`) compares each file with the stored entry
(content fields, validity, origin, created_at and outgoing links; not
updated_at) and writes only what changed. An updated entry gets a fresh
``updated_at`` unless the file sets a later one. A file without ``origin``
is taken as written by a person (``origin: user``); one without ``id`` uses its
file name. Entries of the tier with no file are deleted only with ``prune``,
and never when some file could not be read.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import yaml

from tiervault.errors import TierVaultError, ValidationError
from tiervault.vault.entry import Entry
from tiervault.vault.jsonl import LinkSpec, parse_record

__all__ = ["render", "parse", "ParsedFile", "export_folder", "import_folder", "ExportReport",
           "ImportReport", "SECTIONS"]

#: Body sections after the description: (entry field, heading text).
SECTIONS = (("context", "Context"), ("example", "Example"),
            ("counter_example", "Counter-example"), ("why", "Why"))
_HEADING_RE = re.compile(r"^##[ \t]+(context|example|counter-example|why)[ \t]*$", re.IGNORECASE)
_FIELD_OF_HEADING = {h.lower(): f for f, h in SECTIONS}
_FRONT_ORDER = ("id", "title", "type", "domain", "severity", "tags", "applies_to", "origin",
                "valid_from", "valid_until", "created_at", "updated_at", "links",
                "description", "context", "example", "counter_example", "why")
_SKIP_NAMES = frozenset({"readme.md", "index.md"})
_BATCH = 1_000


class _Dumper(yaml.SafeDumper):
    """Front matter style: flow lists of scalars (``[a, b]``), block maps, no wrapping."""


def _represent_list(dumper: yaml.SafeDumper, data: list) -> yaml.Node:
    flow = all(isinstance(v, str) and "\n" not in v for v in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


# Characters YAML reads back only from an escaped (double-quoted) scalar: controls,
# the extra line breaks of YAML 1.1 (NEL, LS, PS), a BOM, lone surrogates.
_NEEDS_ESCAPE = re.compile("[^\t\n\x20-\x7e\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"
                           "|[\u2028\u2029\ufeff]")


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    # Literal blocks keep multi-line texts readable (the emitter itself falls back
    # to quoting when a block cannot hold the value); anything unusual is escaped.
    if _NEEDS_ESCAPE.search(data):
        style: str | None = '"'
    else:
        style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(list, _represent_list)
_Dumper.add_representer(str, _represent_str)


def _lines_blank(line: str) -> bool:
    return not line.strip()


def _body_safe(text: str) -> bool:
    """True when the body rule gives ``text`` back exactly (see the module docstring)."""
    if "\r" in text:
        return False
    lines = text.split("\n")
    if _lines_blank(lines[0]) or _lines_blank(lines[-1]):
        return False
    return not any(_HEADING_RE.match(line) for line in lines)


def _title_safe(title: str) -> bool:
    return title == title.strip() and "\n" not in title and "\r" not in title


def render(entry: Entry, links: Iterable[Any] = ()) -> str:
    """The Markdown file of ``entry`` with its outgoing ``links`` (Link or LinkSpec)."""
    data = entry.to_dict()
    front: dict[str, Any] = {}
    for key in ("id", "type", "domain", "severity", "tags", "applies_to", "origin",
                "valid_from", "valid_until", "created_at", "updated_at"):
        if data[key] not in (None, [], ""):
            front[key] = data[key]
    specs = sorted((_spec(l) for l in links), key=lambda s: (s.target, s.type))
    if specs:
        front["links"] = [{"target": s.target, "type": s.type, **({"note": s.note} if s.note else {})}
                          for s in specs]
    body: list[str] = []
    if _title_safe(entry.title):
        body.append(f"# {entry.title}")
    else:
        front["title"] = entry.title
    for name, heading in (("description", None), *SECTIONS):
        text = getattr(entry, name)
        if not text:
            continue
        if not _body_safe(text):
            front[name] = text
            continue
        if heading:
            body.append(f"## {heading}")
        body.append(text)
    ordered = {k: front[k] for k in _FRONT_ORDER if k in front}
    yaml_text = yaml.dump(ordered, Dumper=_Dumper, sort_keys=False, allow_unicode=True,
                          default_flow_style=False, width=1_000_000)
    return "---\n" + yaml_text + "---\n\n" + "\n\n".join(body) + ("\n" if body else "")


def _spec(link: Any) -> LinkSpec:
    if isinstance(link, LinkSpec):
        return link
    return LinkSpec(link.target_id, link.link_type, link.note or "")


@dataclass(frozen=True, slots=True)
class ParsedFile:
    """One file read: its entry and links, or the error (``file:line: message``)."""

    path: Path
    entry: Entry | None = None
    links: tuple[LinkSpec, ...] = ()
    error: str | None = None


class _FileError(Exception):
    def __init__(self, line: int | None, message: str) -> None:
        self.line = line
        super().__init__(message)


def _plain(value: Any) -> Any:
    """YAML dates/datetimes -> ISO strings, so the entry model parses them as written."""
    if isinstance(value, _dt.datetime):
        return value.isoformat()
    if isinstance(value, _dt.date):
        return value.isoformat() + "T00:00:00Z"
    return value


def _front_matter(text: str) -> tuple[dict[str, Any], dict[str, int], str, int]:
    """(mapping, {key: file line}, body, line number where the body starts)."""
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.split("\n")
    if not lines or lines[0].rstrip() != "---":
        raise _FileError(1, "expected YAML front matter starting with a '---' line "
                            "(see `tiervault export-md` for the format)")
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() == "---"), None)
    if end is None:
        raise _FileError(1, "the front matter is not closed by a '---' line")
    loader = yaml.SafeLoader("\n".join(lines[1:end]) + "\n")
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).split("\n")[0]
        context, start = getattr(exc, "context", None), getattr(exc, "context_mark", None)
        if context and start is not None:
            problem += f" ({context.removeprefix('while ')} at line {start.line + 2})"
        raise _FileError(mark.line + 2 if mark else 2, f"invalid YAML front matter: {problem}") from None
    finally:
        loader.dispose()
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise _FileError(2, "the front matter must be a mapping of keys to values")
    key_lines: dict[str, int] = {}
    if isinstance(node, yaml.MappingNode):
        for key_node, _ in node.value:
            key, line = str(key_node.value), key_node.start_mark.line + 2
            if key in key_lines:
                raise _FileError(line, f"{key} is given twice (lines {key_lines[key]} and {line})")
            key_lines[key] = line
    return ({str(k): _plain(v) for k, v in data.items()}, key_lines,
            "\n".join(lines[end + 1:]), end + 2)


def parse(text: str, path: Path | str = "entry.md") -> ParsedFile:
    """Parse one file's text; errors come back in ``ParsedFile.error``, never raised."""
    path = Path(path)
    try:
        return _parse(text, path)
    except _FileError as exc:
        where = f"{path}:{exc.line}" if exc.line else str(path)
        return ParsedFile(path, error=f"{where}: {exc}")


def _parse(text: str, path: Path) -> ParsedFile:
    front, key_lines, body, body_line = _front_matter(text)
    record = dict(front)
    lines = body.split("\n")
    i = 0
    while i < len(lines) and _lines_blank(lines[i]):
        i += 1
    if "title" not in record:
        if i >= len(lines) or not lines[i].startswith("# "):
            raise _FileError(body_line + i, "expected a '# Title' line after the front matter "
                                            "(or a 'title:' key in it)")
        record["title"] = lines[i][2:].strip()
        i += 1
    current, buf, seen = "description", [], set()

    def flush() -> None:
        while buf and _lines_blank(buf[0]):
            buf.pop(0)
        while buf and _lines_blank(buf[-1]):
            buf.pop()
        if buf:
            if current in record:
                raise _FileError(key_lines.get(current), f"{current} is given both in the front "
                                                         "matter and in the body; keep one")
            record[current] = "\n".join(buf)

    for n, line in enumerate(lines[i:], start=body_line + i):
        match = _HEADING_RE.match(line)
        if match:
            flush()
            current, buf = _FIELD_OF_HEADING[match.group(1).lower()], []
            if current in seen:
                raise _FileError(n, f"a second '{line.strip()}' section; merge them into one")
            seen.add(current)
        else:
            buf.append(line)
    flush()
    if record.get("id") in (None, ""):
        record["id"] = path.stem
    record.setdefault("origin", "user")
    try:
        entry, links = parse_record(record)
    except ValidationError as exc:
        base = re.split(r"[.\[]", exc.field, maxsplit=1)[0]
        raise _FileError(key_lines.get(base), str(exc)) from None
    return ParsedFile(path, entry, links)


# -- folders --------------------------------------------------------------------------------
@dataclass(slots=True)
class ExportReport:
    """What an export did: files written, files already identical, stale/pruned files."""

    written: int = 0
    unchanged: int = 0
    stale: list[str] = field(default_factory=list)
    pruned: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"written": self.written, "unchanged": self.unchanged, "stale": self.stale,
                "pruned": self.pruned}


@dataclass(slots=True)
class ImportReport:
    """What an import did, by entry; ``errors`` name the file (and line)."""

    files: int = 0
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: int = 0
    pruned: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    prune_skipped: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"files": self.files, "added": len(self.added), "updated": len(self.updated),
                "unchanged": self.unchanged, "pruned": len(self.pruned),
                "addedIds": self.added, "updatedIds": self.updated, "prunedIds": self.pruned,
                "errors": self.errors, "pruneSkipped": self.prune_skipped}


def _chunks(items: Sequence[Any], size: int = _BATCH) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def _outgoing(store: Any, ids: Sequence[str]) -> dict[str, list[Any]]:
    wanted = set(ids)
    out: dict[str, list[Any]] = {i: [] for i in ids}
    for link in store.links_touching(list(ids)):
        if link.source_id in wanted:
            out[link.source_id].append(link)
    return out


def _write_if_changed(path: Path, text: str) -> bool:
    """Write atomically unless the file already holds ``text``; True when written."""
    try:
        if path.read_text(encoding="utf-8") == text:
            return False
    except (FileNotFoundError, UnicodeDecodeError):
        pass
    fd, tmp = tempfile.mkstemp(prefix=".tv-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return True


def export_folder(manager: Any, tier: str, directory: str | Path, *, prune: bool = False,
                  on_progress: Callable[[int], None] | None = None) -> ExportReport:
    """Write every entry of ``tier`` as ``<id>.md`` in ``directory`` (only files that differ).

    A file already present anywhere under ``directory`` for that id (``sub/<id>.md``:
    a team may sort files into folders) is updated in place. ``*.md`` files naming
    no entry of the tier are reported as ``stale`` and deleted only with ``prune``.
    """
    store = manager.store(tier)
    target = Path(directory).expanduser()
    try:
        target.mkdir(parents=True, exist_ok=True)
        existing: dict[str, Path] = {}
        for path in markdown_files(target):
            existing.setdefault(path.stem, path)
    except OSError as exc:
        raise ValidationError("directory", f"cannot use {target}: {exc.strerror}") from exc
    report = ExportReport()
    ids: set[str] = set()
    batch: list[Entry] = []

    def flush() -> None:
        links = _outgoing(store, [e.id for e in batch])
        for entry in batch:
            path = existing.get(entry.id, target / f"{entry.id}.md")
            if _write_if_changed(path, render(entry, links[entry.id])):
                report.written += 1
            else:
                report.unchanged += 1
        batch.clear()
        if on_progress:
            on_progress(len(ids))

    try:
        for entry in store.iter_entries():
            ids.add(entry.id)
            batch.append(entry)
            if len(batch) >= _BATCH:
                flush()
        if batch:
            flush()
        for path in markdown_files(target):
            if path.stem not in ids:
                report.stale.append(str(path.relative_to(target)))
                if prune:
                    path.unlink()
                    report.pruned += 1
    except OSError as exc:
        raise ValidationError("directory", f"cannot write to {target}: {exc.strerror}") from exc
    return report


def markdown_files(directory: Path) -> list[Path]:
    """``*.md`` under ``directory`` (recursively; hidden folders and README/index skipped)."""
    out = []
    for path in directory.rglob("*.md"):
        rel = path.relative_to(directory)
        if any(part.startswith(".") for part in rel.parts) or path.name.lower() in _SKIP_NAMES:
            continue
        if path.is_file():
            out.append(path)
    return sorted(out)


def read_folder(directory: str | Path,
                on_progress: Callable[[int], None] | None = None) -> list[ParsedFile]:
    """Parse every entry file under ``directory``. Files sharing an id are all errors:
    which one is meant cannot be guessed."""
    root = Path(directory).expanduser()
    if not root.is_dir():
        raise ValidationError("directory", f"{root} is not a directory")
    parsed: list[ParsedFile] = []
    for n, path in enumerate(markdown_files(root), start=1):
        shown = path.relative_to(root)
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            parsed.append(ParsedFile(shown, error=f"{shown}: not UTF-8 text (byte {exc.start})"))
        except OSError as exc:
            parsed.append(ParsedFile(shown, error=f"{shown}: cannot read: {exc.strerror}"))
        else:
            parsed.append(parse(text, shown))
        if on_progress and n % 100 == 0:
            on_progress(n)
    holders: dict[str, list[Path]] = {}
    for item in parsed:
        if item.entry is not None:
            holders.setdefault(item.entry.id, []).append(item.path)
    for i, item in enumerate(parsed):
        if item.entry is not None and len(holders[item.entry.id]) > 1:
            others = ", ".join(str(p) for p in holders[item.entry.id] if p != item.path)
            parsed[i] = ParsedFile(item.path, error=f"{item.path}: id {item.entry.id!r} is also "
                                                    f"used by {others}; ids must be unique")
    if on_progress:
        on_progress(len(parsed))
    return parsed


def _compare_key(entry: Entry, links: Iterable[Any], stored: Entry | None = None) -> tuple:
    data = entry.to_dict()
    data.pop("updated_at")
    data.pop("content_hash")
    if data["created_at"] is None and stored is not None:
        data["created_at"] = stored.to_dict()["created_at"]  # absent in the file: keep stored
    specs = sorted((s.target, s.type, s.note) for s in map(_spec, links))
    return tuple(sorted((k, str(v)) for k, v in data.items())), tuple(specs)


def import_folder(manager: Any, tier: str, directory: str | Path, *, prune: bool = False,
                  on_progress: Callable[[int], None] | None = None) -> ImportReport:
    """Bring ``tier`` in line with the folder: add new entries, update changed ones (and
    their outgoing links), leave the rest; with ``prune`` delete entries that have no file.

    Bad files are reported in ``errors`` (file and line) and skipped; the good ones
    are still imported. Prune is skipped when any file was bad (its entry might be
    the one that looks orphaned).
    """
    store = manager.store(tier)
    parsed = read_folder(directory, on_progress)
    report = ImportReport(files=len(parsed))
    report.errors = [p.error for p in parsed if p.error]
    good = [p for p in parsed if p.entry is not None]
    to_write: list[Entry] = []
    link_plan: list[tuple[str, tuple[LinkSpec, ...], list[Any]]] = []
    for chunk in _chunks(good):
        ids = [p.entry.id for p in chunk]  # type: ignore[union-attr]
        stored = store.get_many(ids)
        stored_links = _outgoing(store, ids)
        for p in chunk:
            entry = p.entry
            assert entry is not None
            old = stored.get(entry.id)
            old_links = stored_links.get(entry.id, [])
            if old is None:
                to_write.append(entry)
                report.added.append(entry.id)
                link_plan.append((entry.id, p.links, []))
                continue
            new_key, old_key = _compare_key(entry, p.links, old), _compare_key(old, old_links)
            if new_key == old_key:
                report.unchanged += 1
                continue
            report.updated.append(entry.id)
            if new_key[0] != old_key[0]:
                later = (entry.updated_at is not None and old.updated_at is not None
                         and entry.updated_at > old.updated_at)
                to_write.append(entry if later else replace(entry, updated_at=None))
            if new_key[1] != old_key[1]:
                link_plan.append((entry.id, p.links, old_links))
    if to_write:
        manager.capture_many(to_write, tier)  # through the manager: write hooks (embeddings) run
    for source, links, old_links in link_plan:
        wanted = {(s.target, s.type): s for s in links}
        for old in old_links:
            if (old.target_id, old.link_type) not in wanted:
                store.unlink(source, old.target_id, old.link_type)
        have = {(l.target_id, l.link_type): l.note for l in old_links}
        for key, spec in wanted.items():
            if have.get(key) == spec.note:
                continue
            try:
                manager.link(source, spec.target, spec.type, spec.note, tier=tier)
            except (TierVaultError, LookupError) as exc:
                report.errors.append(f"{source}: link to {spec.target!r} ({spec.type}) not "
                                     f"stored: {exc}")
    if prune:
        if report.errors and any(p.error for p in parsed):
            report.prune_skipped = True
        else:
            keep = {p.entry.id for p in good}  # type: ignore[union-attr]
            orphans = [e.id for e in store.iter_entries() if e.id not in keep]
            for eid in orphans:
                store.delete(eid)
            report.pruned = orphans
    return report
