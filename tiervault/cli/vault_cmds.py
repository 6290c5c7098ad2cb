"""CLI commands over the vault: init, capture, import, export, get, link."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tiervault.cli.common import (
    add_json,
    manager_from,
    print_errors,
    print_json,
    split_list,
)
from tiervault.cli.progress import Progress
from tiervault.errors import EntryNotFound, ValidationError
from tiervault.vault.entry import ENTRY_TYPES, ORIGINS, SEVERITIES

__all__ = ["register", "ENTRY_HELP", "print_links", "print_memory"]

_ENTRY_FLAGS = ("id", "title", "description", "type", "domain", "severity", "context",
                "example", "counter_example", "why", "origin", "valid_from", "valid_until")

#: Each entry flag's help (shared by capture and update).
ENTRY_HELP = {
    "id": "entry id: lowercase letters, digits, '-', '_', '.' (default: a slug of the title)",
    "title": "one line stating the lesson (required for a new entry)",
    "description": "what to do and how (required for a new entry)",
    "type": f"one of {', '.join(ENTRY_TYPES)} (default: pattern)",
    "domain": "one word, e.g. security, python, databases (default: general)",
    "severity": f"one of {', '.join(SEVERITIES)} (default: suggestion)",
    "context": "when it applies",
    "example": "an example of doing it right",
    "counter_example": "an example of doing it wrong",
    "why": "the reason behind it",
    "origin": f"one of {', '.join(ORIGINS)} (default: agent)",
    "valid_from": "ISO 8601 date/time from which it applies (e.g. 2026-01-31)",
    "valid_until": "ISO 8601 date/time after which it no longer applies",
    "tags": "comma-separated tags, e.g. http,retry",
    "applies_to": "comma-separated things it applies to, e.g. python,postgres",
}

_CAPTURE_EPILOG = """\
Capturing an id that already exists in the tier REPLACES that entry: fields not given
go back to their defaults, and the output says `replaced` with the fields that changed.
To change only some fields, use `tiervault update ID --FIELD VALUE ...`.
--input takes a JSON object, a JSON array of objects, or JSONL (one object per line);
it cannot be combined with the field flags."""


def register(sub: Any) -> None:
    p = sub.add_parser("init", help="write agent.yaml with agent/project/team tiers")
    p.add_argument("--dir", default=".", help="project directory (default: .)")
    p.add_argument("--agent-id", default="default", help="this agent's id (names its tier file)")
    p.add_argument("--force", action="store_true", help="overwrite an existing agent.yaml")
    p.add_argument("--example", action="store_true", help="print an agent.yaml documenting "
                   "every key (nothing is written)")
    add_json(p)
    p.set_defaults(handler=cmd_init)

    p = sub.add_parser("capture", help="capture one entry (flags) or entries (--input JSON/JSONL)",
                       description="Capture one entry from flags, or many from --input.",
                       epilog=_CAPTURE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tier", default="agent", help="tier to write to (default: agent)")
    for name in _ENTRY_FLAGS:
        p.add_argument(f"--{name.replace('_', '-')}", dest=name, help=ENTRY_HELP[name])
    p.add_argument("--tags", help=ENTRY_HELP["tags"])
    p.add_argument("--applies-to", dest="applies_to", help=ENTRY_HELP["applies_to"])
    p.add_argument("--input", metavar="FILE", help="a JSON object, a JSON array of objects or a "
                   "JSONL file, or - for stdin (not with the field flags)")
    add_json(p)
    p.set_defaults(handler=cmd_capture)

    p = sub.add_parser("import", help="bulk-import a JSONL file into a tier")
    p.add_argument("file", help="JSONL file (- for stdin)")
    p.add_argument("--tier", default="agent")
    p.add_argument("--strict", action="store_true", help="import nothing if any line is bad")
    add_json(p)
    p.set_defaults(handler=cmd_import)

    p = sub.add_parser("export", help="export a tier as JSONL on stdout (or --output)")
    p.add_argument("--tier", default="agent")
    p.add_argument("--output", "-o", metavar="FILE")
    add_json(p)
    p.set_defaults(handler=cmd_export)

    p = sub.add_parser("get", help="show one entry by id")
    p.add_argument("id")
    add_json(p)
    p.set_defaults(handler=cmd_get)

    p = sub.add_parser("link", help="link two entries")
    p.add_argument("source")
    p.add_argument("target")
    p.add_argument("--type", required=True, dest="link_type",
                   help="supports | contradicts | extends | sequences")
    p.add_argument("--note", default="")
    p.add_argument("--tier", default=None, help="tier to store the link in (default: the source's)")
    add_json(p)
    p.set_defaults(handler=cmd_link)


def cmd_init(args: argparse.Namespace) -> int:
    from tiervault.config import write_default_config

    if args.example:
        from importlib.resources import files

        print(files("tiervault.config").joinpath("agent.yaml.example").read_text("utf-8"), end="")
        return 0
    directory = Path(args.dir).expanduser().resolve()
    directory.mkdir(parents=True, exist_ok=True)
    path = write_default_config(directory, args.agent_id, force=args.force)
    if args.json:
        print_json({"config": str(path)})
    else:
        print(f"wrote {path}")
    return 0


def _open_input(name: str) -> Any:
    if name == "-":
        return sys.stdin
    try:
        return open(name, encoding="utf-8")
    except OSError as exc:
        raise ValidationError("input", f"cannot read {name}: {exc.strerror}") from exc


def _input_lines(fh: Any) -> list[str]:
    """Input as JSONL lines: a JSON array of objects becomes one line per object."""
    text = fh.read()
    if text.lstrip().startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValidationError("input", f"starts like a JSON array but does not parse: "
                                  f"{exc.msg} (line {exc.lineno}, column {exc.colno})") from None
        if not isinstance(items, list):
            raise ValidationError("input", "expected a JSON array of entry objects")
        return [json.dumps(item, ensure_ascii=False) for item in items]
    return text.splitlines()


def _status(previous: Any, stored: Any) -> tuple[str, list[str]]:
    """("created" | "replaced" | "unchanged", changed fields) of a capture over ``previous``."""
    from tiervault.vault.patch import changed_fields

    if previous is None:
        return "created", []
    changed = list(changed_fields(previous, stored))
    return ("replaced" if changed else "unchanged"), changed


def cmd_capture(args: argparse.Namespace) -> int:
    from tiervault.vault.jsonl import import_lines, parse_lines, parse_record

    record: dict[str, Any] = {k: getattr(args, k) for k in _ENTRY_FLAGS
                              if getattr(args, k) is not None}
    if args.tags is not None:
        record["tags"] = split_list(args.tags)
    if args.applies_to is not None:
        record["applies_to"] = split_list(args.applies_to)
    if args.input and record:
        raise ValidationError("--input", f"cannot be combined with field flags (given: "
                         f"{', '.join('--' + k.replace('_', '-') for k in record)}); put the "
                         "fields in the input, or drop --input")
    if not args.input and not record:
        raise ValidationError("capture", "nothing to capture: give --title and --description (see "
                         "`tiervault capture --help`), or --input FILE")
    with manager_from(args) as manager:
        store = manager.store(args.tier)
        if args.input:
            with _open_input(args.input) as fh:
                lines = _input_lines(fh)
            ids = [p.entry.id for p in parse_lines(lines) if p.entry is not None]
            before = store.get_many(ids)
            report = import_lines(manager, args.tier, lines, strict=True)
            after = store.get_many(ids)
            statuses = {i: _status(before.get(i), after[i]) for i in dict.fromkeys(ids)
                        if i in after}
            if args.json:
                print_json({**report.as_dict(), "tier": args.tier, "entries": [
                    {"id": i, "status": st, "changed": ch} for i, (st, ch) in statuses.items()]})
                return 0
            print(f"captured {report.written} entr{'y' if report.written == 1 else 'ies'} "
                  f"into {args.tier} ({report.unchanged} unchanged, {report.links} links)")
            for i, (st, ch) in statuses.items():
                print(f"  {st} {i}" + (f" (changed: {', '.join(ch)})" if ch else ""))
            return 0
        entry, _ = parse_record(record)
        previous = store.get(entry.id)
        stored = manager.capture(entry, args.tier)
        status, changed = _status(previous, stored)
        if args.json:
            print_json({"id": stored.id, "tier": args.tier, "status": status,
                        "changed": changed, "entry": stored.to_dict()})
        elif status == "created":
            print(f"captured {stored.id} into {args.tier}")
        elif status == "replaced":
            print(f"replaced {stored.id} in {args.tier} (changed: {', '.join(changed)}); "
                  "fields not given were reset to defaults, `tiervault update` changes only "
                  "the fields given")
        else:
            print(f"unchanged {stored.id} in {args.tier} (same content already stored)")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from tiervault.vault.jsonl import import_lines

    with manager_from(args) as manager, _open_input(args.file) as fh:
        with Progress("import", unit="entries") as progress:
            report = import_lines(manager, args.tier, fh, strict=args.strict,
                                  on_progress=progress.update_to)
    print_errors(report.errors, prefix=f"{args.file}: ", noun="bad lines")
    summary = (f"imported {report.written} into {args.tier}: {report.unchanged} unchanged, "
               f"{report.links} links, {len(report.errors)} skipped")
    if args.json:
        print_json(report.as_dict())
    else:
        print(summary)
    if report.errors:
        print(f"tiervault: {len(report.errors)} bad line(s) were skipped (use --strict to import "
              "nothing when any line is bad)", file=sys.stderr)
        return 2
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from contextlib import nullcontext

    from tiervault.vault.atomic_file import atomic_write
    from tiervault.vault.jsonl import entry_line

    with manager_from(args) as manager:
        store = manager.store(args.tier)
        # -o FILE is replaced only once the whole export is written (the previous
        # backup survives any failure); stdout streams as before.
        target = atomic_write(args.output) if args.output else nullcontext(sys.stdout)
        n = 0
        with target as out:
            for entry in store.iter_entries():
                links = [l for l in store.links_touching([entry.id]) if l.source_id == entry.id]
                out.write(entry_line(entry, links) + "\n")
                n += 1
    print(f"exported {n} entries from {args.tier}", file=sys.stderr)
    return 0


def cmd_get(args: argparse.Namespace) -> int:
    with manager_from(args) as manager:
        try:
            entry, tier = manager.get(args.id)
        except EntryNotFound as exc:
            memories = manager.get_memories([args.id])
            if args.id in memories:
                memory, tier = memories[args.id]
                if args.json:
                    print_json({"memory": memory.to_dict(), "tier": tier})
                else:
                    print_memory(memory.to_dict(), tier)
                return 0
            raise  # with --json, main prints the JSON error object
        links = manager.links_of([entry.id])[entry.id]
    if args.json:
        print_json({"entry": entry.to_dict(), "tier": tier, "links": links})
        return 0
    data = entry.to_dict()
    print(f"{entry.id}  [{tier}]  {entry.type} · {entry.domain} · {entry.severity}")
    print(entry.title)
    print()
    for key in ("description", "context", "example", "counter_example", "why"):
        if data[key]:
            print(f"{key}: {data[key]}")
    if entry.tags:
        print(f"tags: {', '.join(entry.tags)}")
    for key in ("valid_from", "valid_until", "created_at", "updated_at"):
        if data[key]:
            print(f"{key}: {data[key]}")
    print_links(links)
    return 0


def print_links(links: list[dict[str, Any]], indent: str = "") -> None:
    """One line per link: ``-> supports other-id (in team): note`` (``<-`` for incoming)."""
    if links:
        print(f"{indent}links:")
    for link in links:
        arrow = "->" if link["direction"] == "out" else "<-"
        note = f": {link['note']}" if link["note"] else ""
        print(f"{indent}  {arrow} {link['type']} {link['id']} (in {link['tier']}){note}")


def print_memory(memory: dict[str, Any], tier: str) -> None:
    print(f"{memory['id']}  [{tier}]  memory · {memory.get('project') or '-'} · "
          f"{memory['created_at']}")
    print(memory["summary"])
    if memory.get("context"):
        print(f"context: {memory['context']}")
    if memory.get("topics"):
        print(f"topics: {', '.join(memory['topics'])}")


def cmd_link(args: argparse.Namespace) -> int:
    with manager_from(args) as manager:
        link = manager.link(args.source, args.target, args.link_type, args.note, tier=args.tier)
    if args.json:
        print_json({"source": link.source_id, "target": link.target_id, "type": link.link_type,
                    "note": link.note, "tier": link.tier})
    else:
        print(f"linked {link.source_id} -[{link.link_type}]-> {link.target_id} (in {link.tier})")
    return 0

