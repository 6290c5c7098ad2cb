"""CLI commands over the vault: init, capture, import, export, get, link."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tiervault.cli.common import add_json, manager_from, print_errors, print_json, split_list
from tiervault.cli.progress import Progress
from tiervault.errors import ValidationError

__all__ = ["register"]

_ENTRY_FLAGS = ("id", "title", "description", "type", "domain", "severity", "context",
                "example", "counter_example", "why", "origin", "valid_from", "valid_until")


def register(sub: Any) -> None:
    p = sub.add_parser("init", help="write agent.yaml with agent/project/team tiers")
    p.add_argument("--dir", default=".", help="project directory (default: .)")
    p.add_argument("--agent-id", default="default", help="this agent's id (names its tier file)")
    p.add_argument("--force", action="store_true", help="overwrite an existing agent.yaml")
    add_json(p)
    p.set_defaults(handler=cmd_init)

    p = sub.add_parser("capture", help="capture one entry (flags) or entries (--input JSON/JSONL)")
    p.add_argument("--tier", default="agent", help="tier to write to (default: agent)")
    for name in _ENTRY_FLAGS:
        p.add_argument(f"--{name.replace('_', '-')}", dest=name)
    p.add_argument("--tags", help="comma-separated tags")
    p.add_argument("--applies-to", dest="applies_to", help="comma-separated list")
    p.add_argument("--input", metavar="FILE", help="a JSON object or JSONL file, or - for stdin")
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


def cmd_capture(args: argparse.Namespace) -> int:
    from tiervault.vault.jsonl import import_lines, parse_record

    with manager_from(args) as manager:
        if args.input:
            with _open_input(args.input) as fh:
                report = import_lines(manager, args.tier, fh, strict=True)
            if args.json:
                print_json(report.as_dict())
            else:
                print(f"captured {report.written} entr{'y' if report.written == 1 else 'ies'} "
                      f"into {args.tier} ({report.unchanged} unchanged, {report.links} links)")
            return 0
        record: dict[str, Any] = {k: getattr(args, k) for k in _ENTRY_FLAGS
                                  if getattr(args, k) is not None}
        if args.tags is not None:
            record["tags"] = split_list(args.tags)
        if args.applies_to is not None:
            record["applies_to"] = split_list(args.applies_to)
        entry, _ = parse_record(record)
        stored = manager.capture(entry, args.tier)
        if args.json:
            print_json({"id": stored.id, "tier": args.tier, "entry": stored.to_dict()})
        else:
            print(f"captured {stored.id} into {args.tier}")
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
        entry, tier = manager.get(args.id)
    if args.json:
        print_json({"entry": entry.to_dict(), "tier": tier})
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
    return 0


def cmd_link(args: argparse.Namespace) -> int:
    with manager_from(args) as manager:
        link = manager.link(args.source, args.target, args.link_type, args.note, tier=args.tier)
    if args.json:
        print_json({"source": link.source_id, "target": link.target_id, "type": link.link_type,
                    "note": link.note, "tier": link.tier})
    else:
        print(f"linked {link.source_id} -[{link.link_type}]-> {link.target_id} (in {link.tier})")
    return 0

