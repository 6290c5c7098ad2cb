"""CLI commands over the Brain: search, load, feedback, stats.

``--json`` prints exactly the Brain's row shapes (a JSON array of rows for
search and load, one object for feedback and stats); without it a compact
table. Exit codes follow :mod:`tiervault.cli`: 0 ok, 1 when an id is not found
(``load`` prints what it found first), 2 for usage and validation errors.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from typing import Any, Sequence

from tiervault.cli.common import add_json, print_json, settings_from, split_list

__all__ = ["register"]


def register(sub: Any) -> None:
    p = sub.add_parser("search", help="search every tier, ranked by the Brain")
    p.add_argument("query", help="natural-language query; #tag words count as query tags")
    p.add_argument("--mode", choices=("scan", "full"), default="scan",
                   help="scan: light rows (default); full: complete entries with score breakdown")
    p.add_argument("--limit", type=int, default=None, help="rows to return (default 10 scan / 20 full)")
    p.add_argument("--domain", help="only entries of this domain (also the domain-match signal)")
    p.add_argument("--type", dest="entry_type", help="only entries of this type (comma list)")
    p.add_argument("--severity", help="only entries of this severity (comma list)")
    p.add_argument("--tags", help="comma-separated tags: entries with any of them; feeds tag overlap")
    p.add_argument("--tier", help="comma-separated tiers to search (default: all)")
    p.add_argument("--memories", action="store_true", help="also search session memories")
    p.add_argument("--explain", action="store_true", help="add how each score was made")
    add_json(p)
    p.set_defaults(handler=cmd_search)

    p = sub.add_parser("load", help="load complete entries by id (the second pass after a scan)")
    p.add_argument("ids", nargs="+", metavar="ID")
    add_json(p)
    p.set_defaults(handler=cmd_load)

    p = sub.add_parser("feedback", help="record feedback on a search result (agent tier)")
    p.add_argument("id", help="entry id")
    p.add_argument("action", help="accepted | modified | dismissed | failed")
    p.add_argument("--query", "-q", required=True, help="the query the entry was found for")
    add_json(p)
    p.set_defaults(handler=cmd_feedback)

    p = sub.add_parser("stats", help="entries per tier, weights in force, feedback counts")
    add_json(p)
    p.set_defaults(handler=cmd_stats)


def _brain(args: argparse.Namespace) -> Any:
    from tiervault.brain import Brain

    return Brain.open(settings_from(args))


def cmd_search(args: argparse.Namespace) -> int:
    with _brain(args) as brain:
        rows = brain.search_intelligent(
            args.query, mode=args.mode, limit=args.limit, domain=args.domain,
            type=args.entry_type, severity=args.severity, tags=split_list(args.tags),
            tiers=split_list(args.tier), include_memories=args.memories, explain=args.explain)
    if args.json:
        print_json(rows)
    elif not rows:
        print("no results", file=sys.stderr)
    elif args.mode == "scan":
        _table(["score", "id", "tier", "type", "severity", "tokens", "title"],
               [[f"{r['score']:.3f}", r["id"], r["tier"], r["type"], r["severity"],
                 str(r["tokenEstimate"]), r["title"]] for r in rows])
    else:
        for r in rows:
            _print_full(r)
    return 0


def cmd_load(args: argparse.Namespace) -> int:
    with _brain(args) as brain:
        rows = brain.load_entries(args.ids)
    missing = [r for r in rows if not r["found"]]
    if args.json:
        print_json(rows)
    else:
        for r in rows:
            if r["found"]:
                _print_entry(r["entry"], r["tier"])
    for r in missing:
        print(f"tiervault: {r['error']}", file=sys.stderr)
    return 1 if missing else 0


def cmd_feedback(args: argparse.Namespace) -> int:
    with _brain(args) as brain:
        out = brain.feedback(args.query, args.id, args.action)
    if args.json:
        print_json(out)
    else:
        counts = ", ".join(f"{k} {v}" for k, v in out["feedback"].items())
        print(f"recorded {out['action']} for {out['entryId']} (feedback: {counts})")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    with _brain(args) as brain:
        out = brain.stats()
    if args.json:
        print_json(out)
        return 0
    rows = []
    for name, t in out["tiers"].items():
        if t.get("available"):
            rows.append([name, str(t["entries"]), str(t["links"]), str(t["memories"]),
                         f"{t['weight']:g}", t["path"]])
        else:
            rows.append([name, "-", "-", "-", f"{t['weight']:g}", f"{t['path']} ({t.get('problem')})"])
    _table(["tier", "entries", "links", "memories", "weight", "path"], rows)
    state = "adapted by feedback" if out["adapted"] else "base"
    print(f"\nweights ({out['weightSet']}, {state}):")
    _table(["signal", "weight"], [[k, f"{v:.4f}"] for k, v in out["weights"].items()])
    print("\nfeedback: " + ", ".join(f"{k} {v}" for k, v in out["feedback"].items()))
    return 0


# -- human output ------------------------------------------------------------------------
def _table(headers: Sequence[str], rows: list[list[str]]) -> None:
    """A compact left-aligned table; the last column is cut to the terminal width."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(headers)]
    term = shutil.get_terminal_size((120, 20)).columns
    fixed = sum(w + 2 for w in widths[:-1])
    widths[-1] = max(10, min(widths[-1], term - fixed))
    for row in [list(headers), *rows]:
        cells = [c.ljust(w)[:w] if i < len(row) - 1 else c[:w] for i, (c, w) in enumerate(zip(row, widths))]
        print("  ".join(cells).rstrip())


def _print_entry(entry: dict[str, Any], tier: str) -> None:
    print(f"{entry['id']}  [{tier}]  {entry.get('type', '')} / {entry.get('severity', '')} "
          f"/ {entry.get('domain', '')}")
    print(f"  {entry.get('title') or entry.get('summary', '')}")
    for key in ("description", "context", "example", "counter_example", "why"):
        if entry.get(key):
            print(f"  {key}: {entry[key]}")
    if entry.get("tags"):
        print(f"  tags: {', '.join(entry['tags'])}")
    print()


def _print_full(row: dict[str, Any]) -> None:
    b = row["breakdown"]
    parts = " ".join(f"{k}={v:.2f}" for k, v in b.items() if k != "total")
    print(f"{row['score']:.3f}  {parts}")
    _print_entry(row["entry"], row["tier"])
