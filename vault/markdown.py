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

A minimal note -- ``# Title`` and text, no front matter -- is an entry too: its
id comes from the file name (:func:`id_from_file_name`), its origin is ``user``.

File names. An entry is written as ``<id>.md`` (:func:`file_name`), except where
that name is one the importer leaves alone (``readme.md``, ``index.md``, hidden
``.x.md``): those ids are written as ``entry=<id>.md`` ('=' is never part of an
id), so every id a capture accepts round-trips through a folder.

Bounds. A file is at most :data:`MAX_FILE_BYTES`; its front matter may expand to
at most :data:`MAX_YAML_NODES` YAML nodes (aliases counted each time they are
used: an alias bomb is refused in microseconds) and :data:`MAX_YAML_DEPTH`
levels; every value quoted in an error is cut to a few dozen characters.

Folders both ways live in :mod:`tiervault.vault.markdown_folder`.
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable

import yaml

from tiervault.errors import ValidationError
from tiervault.vault.entry import Entry, slugify
from tiervault.vault.jsonl import LinkSpec, parse_record

_ID_RE = re.compile(r"^[a-z0-9_.-]{1,128}$")

__all__ = ["render", "parse", "ParsedFile", "SECTIONS", "file_name", "id_from_file_name",
           "IGNORED_NAMES", "MAX_FILE_BYTES", "MAX_YAML_NODES", "MAX_YAML_DEPTH"]

#: Body sections after the description: (entry field, heading text).
SECTIONS = (("context", "Context"), ("example", "Example"),
            ("counter_example", "Counter-example"), ("why", "Why"))
_HEADING_RE = re.compile(r"^##[ \t]+(context|example|counter-example|why)[ \t]*$", re.IGNORECASE)
_FIELD_OF_HEADING = {h.lower(): f for f, h in SECTIONS}
_FRONT_ORDER = ("id", "title", "type", "domain", "severity", "tags", "applies_to", "origin",
                "valid_from", "valid_until", "created_at", "updated_at", "links",
                "description", "context", "example", "counter_example", "why")
#: Files the importer leaves alone: a folder's own documentation.
IGNORED_NAMES = frozenset({"readme.md", "index.md"})
#: Prefix of the file name of an id whose plain name the importer would leave alone.
_ESCAPE_PREFIX = "entry="
MAX_FILE_BYTES = 4_000_000
MAX_YAML_NODES = 20_000
MAX_YAML_DEPTH = 64


def file_name(entry_id: str) -> str:
    """The file an entry is exported to; never a name :func:`id_from_file_name`'s
    importer skips (README/index/hidden)."""
    plain = f"{entry_id}.md"
    if plain.lower() in IGNORED_NAMES or entry_id.startswith("."):
        return f"{_ESCAPE_PREFIX}{plain}"
    return plain


def id_from_file_name(name: str) -> str:
    """The id of a file without an ``id:`` key: ``entry=readme.md`` -> ``readme``,
    ``Deploy Guide.md`` -> ``deploy-guide`` (a valid id is kept as is)."""
    stem = name[:-3] if name.lower().endswith(".md") else name
    stem = stem.removeprefix(_ESCAPE_PREFIX)
    if _ID_RE.match(stem):
        return stem
    return slugify(stem)


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
    #: The file starts with front matter (``---``): written by tiervault or in its format.
    #: A file without it is a person's note and is never overwritten by an export.
    front_matter: bool = False


class _FileError(Exception):
    def __init__(self, line: int | None, message: str) -> None:
        self.line = line
        super().__init__(_bounded(message, 400))


def _bounded(text: str, limit: int = 60) -> str:
    """``text`` cut to ``limit`` characters: errors never print an expanded value."""
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


def _check_size(node: yaml.Node) -> None:
    """Refuse front matter expanding past MAX_YAML_NODES nodes or MAX_YAML_DEPTH levels.

    Aliases point at shared nodes, so a walk counting every use sees the expanded
    size: a "billion laughs" file is refused after MAX_YAML_NODES steps.
    """
    count = 0
    stack: list[tuple[yaml.Node, int]] = [(node, 1)]
    while stack:
        current, depth = stack.pop()
        count += 1
        if count > MAX_YAML_NODES:
            raise _FileError(2, f"the front matter expands to more than {MAX_YAML_NODES} "
                                "values (YAML aliases?); an entry needs far fewer")
        if depth > MAX_YAML_DEPTH:
            raise _FileError(current.start_mark.line + 2,
                             f"the front matter nests deeper than {MAX_YAML_DEPTH} levels")
        if isinstance(current, yaml.SequenceNode):
            stack.extend((child, depth + 1) for child in current.value)
        elif isinstance(current, yaml.MappingNode):
            for key, value in current.value:
                stack.append((key, depth + 1))
                stack.append((value, depth + 1))


def _plain(value: Any) -> Any:
    """YAML dates/datetimes -> ISO strings, so the entry model parses them as written."""
    if isinstance(value, _dt.datetime):
        return value.isoformat()
    if isinstance(value, _dt.date):
        return value.isoformat() + "T00:00:00Z"
    return value


def _front_matter(text: str) -> tuple[dict[str, Any], dict[str, int], str, int]:
    """(mapping, {key: file line}, body, line number where the body starts).

    A file that does not start with ``---`` has no front matter: an empty mapping
    and the whole text as the body (a minimal note).
    """
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.split("\n")
    if lines[0].rstrip() != "---":
        return {}, {}, text, 1
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() == "---"), None)
    if end is None:
        raise _FileError(1, "the front matter is not closed by a '---' line")
    node = None
    try:
        # The reader itself refuses NUL/ESC and other non-printable characters (ReaderError):
        # built inside the try, so that is this file's error, not the import's.
        loader = yaml.SafeLoader("\n".join(lines[1:end]) + "\n")
        try:
            node = loader.get_single_node()
            if node is not None:
                _check_size(node)
            data = loader.construct_document(node) if node is not None else {}
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).split("\n")[0]
        context, start = getattr(exc, "context", None), getattr(exc, "context_mark", None)
        if context and start is not None:
            problem += f" ({context.removeprefix('while ')} at line {start.line + 2})"
        raise _FileError(mark.line + 2 if mark else 2,
                         f"invalid YAML front matter: {_bounded(problem, 200)}") from None
    except RecursionError:
        raise _FileError(2, f"the front matter nests deeper than {MAX_YAML_DEPTH} levels") from None
    except (ValueError, TypeError, OverflowError) as exc:  # e.g. PyYAML's date 2024-13-45
        raise _FileError(2, f"invalid value in the front matter: {_bounded(str(exc), 120)}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise _FileError(2, "the front matter must be a mapping of keys to values")
    key_lines: dict[str, int] = {}
    if isinstance(node, yaml.MappingNode):
        for key_node, _ in node.value:
            key, line = _bounded(str(key_node.value)), key_node.start_mark.line + 2
            if key in key_lines:
                raise _FileError(line, f"{key} is given twice (lines {key_lines[key]} and {line})")
            key_lines[key] = line
    return ({str(k): _plain(v) for k, v in data.items()}, key_lines,
            "\n".join(lines[end + 1:]), end + 2)


def parse(text: str, path: Path | str = "entry.md") -> ParsedFile:
    """Parse one file's text; errors come back in ``ParsedFile.error``, never raised."""
    path = Path(path)
    front = text.removeprefix("\ufeff").split("\n", 1)[0].rstrip() == "---"
    try:
        parsed = _parse(text, path)
    except _FileError as exc:
        where = f"{path}:{exc.line}" if exc.line else str(path)
        return ParsedFile(path, error=f"{where}: {exc}", front_matter=front)
    except RecursionError:
        return ParsedFile(path, error=f"{path}: nested too deeply to be an entry",
                          front_matter=front)
    return replace(parsed, front_matter=front)


def _parse(text: str, path: Path) -> ParsedFile:
    front, key_lines, body, body_line = _front_matter(text)
    record = dict(front)
    lines = body.split("\n")
    i = 0
    while i < len(lines) and _lines_blank(lines[i]):
        i += 1
    if "title" not in record:
        if i >= len(lines) or not lines[i].startswith("# "):
            raise _FileError(body_line + i, "expected a '# Title' line (after the front matter, "
                                            "if any) or a 'title:' key in the front matter")
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
        record["id"] = id_from_file_name(path.name)
    record.setdefault("origin", "user")
    try:
        entry, links = parse_record(record)
    except ValidationError as exc:
        base = re.split(r"[.\[]", exc.field, maxsplit=1)[0]
        raise _FileError(key_lines.get(base), _bounded(str(exc), 300)) from None
    return ParsedFile(path, entry, links)
