"""CLI: ``tiervault mcp [--read-only]`` serves the vault over MCP (stdio).

Thin: the server lives in :mod:`tiervault.mcp_server`. stdout belongs to the
protocol; ``main`` has already pointed logging at stderr before this runs.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from tiervault.cli.common import settings_from
from tiervault.errors import ConfigError

__all__ = ["register"]


def register(sub: Any) -> None:
    p = sub.add_parser("mcp", help="serve the vault to agents over MCP (stdio); needs "
                       "`pip install 'tiervault[mcp]'`")
    p.add_argument("--read-only", action="store_true",
                   help="expose only the read tools: search_intelligent, load_entries, "
                   "list_entries and vault_stats")
    p.set_defaults(handler=cmd_mcp)


def cmd_mcp(args: argparse.Namespace) -> int:
    from tiervault.mcp_server import serve, serve_config_error

    # Our own start/stop lines are useful in a client's server log (stderr); the
    # SDK's INFO chatter stays behind -v.
    logging.getLogger("tiervault").setLevel(logging.DEBUG if args.verbose else logging.INFO)
    try:
        settings = settings_from(args)
    except ConfigError as exc:
        # Said on stderr (the client's server log) AND to the client: a server that
        # just exits shows up in a client as "Connection closed" with no reason.
        print(f"tiervault: error: {exc}", file=sys.stderr)
        serve_config_error(str(exc))
        return 2
    serve(settings, read_only=args.read_only)
    return 0
