"""CLI: ``tiervault check [--repair] [--tier T]``: verify tiers, rebuild what is derived.

Exit 0 when every tier is healthy (or was repaired), 1 when problems remain, 2 for
usage errors. See :mod:`tiervault.vault.tier_check` for what is checked.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tiervault.cli.common import add_json, manager_from, print_json

__all__ = ["register"]


def register(sub: Any) -> None:
    p = sub.add_parser("check", help="verify each tier (integrity, FTS, damaged rows, vectors, "
                       "caches); --repair rebuilds what is derived")
    p.add_argument("--tier", action="append", help="check only this tier (repeatable)")
    p.add_argument("--repair", action="store_true",
                   help="rebuild FTS indexes and caches, fix unreadable timestamps, drop bad "
                   "vectors; entries' content is never changed")
    add_json(p)
    p.set_defaults(handler=cmd_check)


def cmd_check(args: argparse.Namespace) -> int:
    from tiervault.vault.tier_check import check_tier

    results = []
    with manager_from(args) as manager:
        unavailable = {name: problem for name, problem in manager.problems.items()
                       if args.tier is None or name in args.tier}
        for tier in manager.ordered(args.tier):
            results.append(check_tier(tier.store, repair=args.repair))
    healthy = all(r.ok for r in results) and not unavailable
    if args.json:
        print_json({"ok": healthy, "tiers": [r.as_dict() for r in results],
                    "unavailable": unavailable})
    else:
        for name, problem in unavailable.items():
            print(f"{name}: UNAVAILABLE: {problem}")
        for r in results:
            print(f"{r.tier}: {'ok' if not r.problems else 'problems'}")
            for problem in r.problems:
                print(f"  - {problem}")
            for done in r.repaired:
                print(f"  repaired: {done}")
            for left in r.remaining:
                print(f"  still: {left}")
        if not healthy and not args.repair:
            print("tiervault: problems found; `tiervault check --repair` rebuilds what is "
                  "derived", file=sys.stderr)
    return 0 if healthy else 1
