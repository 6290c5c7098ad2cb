"""CLI: ``tiervault sql "SELECT ..."`` and ``tiervault sql --schema``: read-only SQL over
every tier, with ``keyword(...)`` and ``vec_search(...)`` calls
(:mod:`tiervault.brain.sql_surface`)."""

from __future__ import annotations

import argparse
from typing import Any

from tiervault.cli.common import add_json, print_json, settings_from, split_list
from tiervault.errors import ValidationError

__all__ = ["register"]


def register(sub: Any) -> None:
    p = sub.add_parser("sql", help="run one read-only SELECT over every tier (tables entries, "
                       "links, feedback; calls keyword('text'), vec_search('text', 'tokens', k))")
    p.add_argument("statement", nargs="?", help="one SELECT statement (quote it for the shell)")
    p.add_argument("--schema", action="store_true", help="describe the tables and calls instead")
    p.add_argument("--tier", help="comma-separated tiers to expose (default: all)")
    p.add_argument("--max-rows", type=int, default=1_000, help="row limit (default 1000)")
    p.add_argument("--timeout", type=float, default=5.0, help="time limit in seconds (default 5)")
    add_json(p)
    p.set_defaults(handler=cmd_sql)


def cmd_sql(args: argparse.Namespace) -> int:
    from tiervault.brain import Brain
    from tiervault.brain.sql_surface import SqlSurface

    if not args.schema and not args.statement:
        raise ValidationError("statement", "give a SELECT statement, or --schema to see what "
                              "there is to select from")
    if not 1 <= args.max_rows <= 100_000:
        raise ValidationError("max-rows", f"{args.max_rows} must be from 1 to 100000")
    if not 0 < args.timeout <= 600:
        raise ValidationError("timeout", f"{args.timeout} must be more than 0 and at most 600 s")
    with Brain.open(settings_from(args)) as brain:
        surface = SqlSurface(brain, tiers=split_list(args.tier), row_limit=args.max_rows,
                             time_limit=args.timeout)
        try:
            if args.schema:
                report = surface.schema()
                if args.json:
                    print_json(report)
                else:
                    _print_schema(report)
                return 0
            result = surface.run(args.statement)
        finally:
            surface.close()
    if args.json:
        print_json(result.as_dict())
        return 0
    print("\t".join(result.columns))
    for row in result.rows:
        print("\t".join("" if v is None else str(v) for v in row))
    if result.truncated:
        print(f"(stopped at {args.max_rows} rows; add a LIMIT or raise --max-rows)")
    return 0


def _print_schema(report: dict[str, Any]) -> None:
    for name, table in report["tables"].items():
        print(f"{name} ({table['rows']} rows)")
        for col, doc in table["columns"].items():
            print(f"  {col:<14} {doc}")
    print("calls (usable wherever a table is):")
    for doc in report["calls"].values():
        print(f"  {doc}")
