"""CLI commands that edit and browse: update (a patch), delete, list, memory add|list."""

from __future__ import annotations

import argparse
from typing import Any

from tiervault.cli.common import add_json, manager_from, print_json, split_list
from tiervault.cli.search_cmds import add_exclusion_flags
from tiervault.cli.vault_cmds import ENTRY_HELP
from tiervault.errors import QueryError, ValidationError

__all__ = ["register"]

_PATCH_FLAGS = ("title", "description", "type", "domain", "severity", "context", "example",
                "counter_example", "why", "origin", "valid_from", "valid_until")
_LIST_FLAGS = ("tags", "add_tags", "remove_tags", "applies_to")


def _page_size(text: str) -> int:
    """argparse type: an integer 1..1000 (the CLI refuses what MCP refuses)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not 1 <= value <= 1000:
        raise argparse.ArgumentTypeError(f"{value} is not between 1 and 1000")
    return value


def _offset(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative")
    return value


def register(sub: Any) -> None:
    p = sub.add_parser("update", help="change some fields of an entry (the others are kept)",
                       description="Change only the fields given; an unknown id is an error "
                       "(exit 1). Use \"\" to clear an optional text or date field.")
    p.add_argument("id", help="the entry's id")
    p.add_argument("--tier", help="tier holding the entry (default: the highest-priority "
                   "tier holding it)")
    for name in _PATCH_FLAGS:
        p.add_argument(f"--{name.replace('_', '-')}", dest=name, help=ENTRY_HELP[name])
    p.add_argument("--tags", help="replace all tags (comma-separated; \"\" removes them all)")
    p.add_argument("--add-tags", dest="add_tags", help="comma-separated tags to add")
    p.add_argument("--remove-tags", dest="remove_tags", help="comma-separated tags to remove")
    p.add_argument("--applies-to", dest="applies_to", help="replace applies_to (comma-separated)")
    add_json(p)
    p.set_defaults(handler=cmd_update)

    p = sub.add_parser("delete", help="delete an entry (and the links stored with it)")
    p.add_argument("id", help="the entry's id")
    p.add_argument("--tier", help="tier to delete from (default: the highest-priority tier "
                   "holding it; copies in other tiers stay)")
    add_json(p)
    p.set_defaults(handler=cmd_delete)

    p = sub.add_parser("list", help="browse entries by filter, newest first, a page at a time")
    p.add_argument("--tier", help="comma-separated tiers (default: all)")
    p.add_argument("--domain", help="only these domains (comma-separated)")
    p.add_argument("--type", dest="entry_type", help="only these types (comma-separated)")
    p.add_argument("--severity", help="only these severities (comma-separated)")
    p.add_argument("--tags", help="only entries with any of these tags (comma-separated)")
    p.add_argument("--since", metavar="DATE", help="only entries updated at or after DATE "
                   "(ISO 8601, e.g. 2026-01-31; the same as --updated-after)")
    add_exclusion_flags(p)
    p.add_argument("--sort", choices=("updated", "created"), default="updated",
                   help="newest first by last update (default) or by creation")
    p.add_argument("--limit", type=_page_size, default=20, help="rows per page, 1-1000 "
                   "(default 20)")
    p.add_argument("--offset", type=_offset, default=0, help="rows to skip (next page)")
    add_json(p)
    p.set_defaults(handler=cmd_list)

    p = sub.add_parser("memory", help="session memories: add one, list them")
    msub = p.add_subparsers(dest="memory_command", metavar="ACTION", required=True)
    m = msub.add_parser("add", help="save a session memory in the agent tier")
    m.add_argument("summary", help="one or two sentences on what happened")
    m.add_argument("--context", default="", help="longer details")
    m.add_argument("--topics", help="comma-separated keywords for finding it again")
    m.add_argument("--project", default="", help="the project it happened in")
    add_json(m)
    m.set_defaults(handler=cmd_memory_add)
    m = msub.add_parser("list", help="list memories, newest first")
    m.add_argument("--project", help="only this project's memories")
    m.add_argument("--limit", type=_page_size, default=20, help="rows, 1-1000 (default 20)")
    m.add_argument("--offset", type=_offset, default=0, help="rows to skip")
    add_json(m)
    m.set_defaults(handler=cmd_memory_list)


def cmd_update(args: argparse.Namespace) -> int:
    patch: dict[str, Any] = {k: getattr(args, k) for k in _PATCH_FLAGS
                             if getattr(args, k) is not None}
    for name in _LIST_FLAGS:
        value = getattr(args, name)
        if value is not None:
            patch[name] = split_list(value)
    if not patch:
        raise ValidationError("update", "name at least one field to change, e.g. "
                              "--severity critical or --add-tags http (see `tiervault update "
                              "--help`)")
    with manager_from(args) as manager:
        result = manager.update(args.id, patch, tier=args.tier)
    if args.json:
        print_json(result.as_dict())
    elif result.changed:
        print(f"updated {result.entry.id} in {result.tier} (changed: {', '.join(result.changed)})")
    else:
        print(f"unchanged {result.entry.id} in {result.tier} (the values given were already "
              "stored)")
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    from tiervault.vault.edits import delete_entry

    with manager_from(args) as manager:
        done = delete_entry(manager, args.id, args.tier or None)
    if args.json:
        print_json(done.as_dict())
    else:
        print(f"deleted {done.id} from {done.tier}"
              + (f" (a copy remains in {', '.join(done.still_in)})" if done.still_in else ""))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from tiervault.vault.listing import list_page

    from tiervault.cli.search_cmds import exclusion_args, named_by_flag

    with manager_from(args) as manager:
        try:
            page = list_page(manager, domain=args.domain, type=args.entry_type,
                             severity=args.severity, tags=split_list(args.tags),
                             tiers=split_list(args.tier), since=args.since, sort=args.sort,
                             limit=args.limit, offset=args.offset, **exclusion_args(args))
        except QueryError as exc:
            raise named_by_flag(exc) from None
    if args.json:
        print_json(page)
        return 0
    from tiervault.cli.search_cmds import table

    key = "updated_at" if args.sort == "updated" else "created_at"
    table(["id", "tier", "type", "severity", "domain", args.sort, "title"],
          [[r["id"], r["tier"], r["type"], r["severity"], r["domain"], (r[key] or "")[:10],
            r["title"]] for r in page["results"]])
    shown = f"{args.offset + 1}-{args.offset + page['count']}" if page["count"] else "none"
    more = (f"; next page: --offset {page['nextOffset']}" if "nextOffset" in page else "")
    print(f"\n{shown} of {page['total']}{more}")
    return 0


def cmd_memory_add(args: argparse.Namespace) -> int:
    with manager_from(args) as manager:
        memory_id = manager.store("agent").add_memory(
            args.summary, context=args.context, topics=split_list(args.topics) or [],
            project=args.project)
    if args.json:
        print_json({"id": memory_id, "tier": "agent"})
    else:
        print(f"saved memory {memory_id} in agent")
    return 0


def cmd_memory_list(args: argparse.Namespace) -> int:
    with manager_from(args) as manager:
        memories = manager.store("agent").list_memories(limit=args.limit, offset=args.offset,
                                                        project=args.project)
    rows = [m.to_dict() for m in memories]
    if args.json:
        print_json({"count": len(rows), "offset": args.offset, "results": rows})
        return 0
    from tiervault.cli.search_cmds import table

    table(["id", "created", "project", "summary"],
          [[r["id"], (r["created_at"] or "")[:16], r["project"] or "-", r["summary"]]
           for r in rows])
    return 0
