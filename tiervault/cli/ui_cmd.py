"""CLI: ``tiervault ui`` serves the curator web page on 127.0.0.1 (needs the ``server`` extra).

Thin: the pages live in :mod:`tiervault.web`, the local server in
:mod:`tiervault.web.local`. The sign-in URL (with this run's token) is the one
line printed on stdout; stop with Ctrl-C.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tiervault.cli.common import settings_from
from tiervault.errors import ConfigError

__all__ = ["register"]


def register(sub: Any) -> None:
    p = sub.add_parser("ui", help="browse, explain, correct and delete entries in a web page on "
                       "127.0.0.1; needs `pip install 'tiervault[server]'`")
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    p.add_argument("--open", action="store_true", help="open the page in the default browser")
    p.set_defaults(handler=cmd_ui)


def cmd_ui(args: argparse.Namespace) -> int:
    if not 0 <= args.port <= 65535:
        raise ConfigError(f"--port {args.port} is not a port number (0-65535)", key="port")
    try:
        import jinja2  # noqa: F401
        import uvicorn  # noqa: F401
    except ModuleNotFoundError as exc:
        raise ConfigError(f"`tiervault ui` needs {exc.name}: pip install 'tiervault[server]'",
                          key="ui") from None
    from tiervault.web.local import serve_ui

    def announce(address: str) -> None:
        print(f"tiervault ui: open {address}", flush=True)
        print("tiervault ui: serving on 127.0.0.1 only; Ctrl-C stops it", file=sys.stderr, flush=True)

    try:
        serve_ui(settings_from(args), port=args.port, announce=announce, open_browser=args.open)
    except OSError as exc:
        raise ConfigError(f"cannot listen on 127.0.0.1:{args.port}: {exc.strerror or exc}",
                          key="port") from None
    return 0
