"""The ``tiervault`` command line: a thin argparse layer over the library.

Each command group lives in its own module exposing ``register(subparsers)``;
every handler takes the parsed args and returns an exit code. Errors are
TierVaultError subclasses turned into one clear line on stderr (never a
traceback): exit 1 for "not found", 2 for usage, validation and config errors.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Callable, Sequence

from tiervault.errors import EntryNotFound, TierVaultError

__all__ = ["main", "build_parser"]

# Modules that add subcommands; each has register(subparsers).
_COMMAND_MODULES = (
    "tiervault.cli.vault_cmds",
    "tiervault.cli.search_cmds",
    "tiervault.cli.embed_cmds",
    "tiervault.cli.mcp_cmd",
    "tiervault.cli.quickstart_cmd",
    "tiervault.cli.serve_cmds",
    "tiervault.cli.ui_cmd",
    "tiervault.cli.server_tier_cmds",  # after vault_cmds: extends its `init`
)


def build_parser() -> argparse.ArgumentParser:
    import importlib

    parser = argparse.ArgumentParser(
        prog="tiervault", description="A tiered knowledge vault for AI agents.")
    parser.add_argument("--config", metavar="PATH",
                        help="agent.yaml to use (default: $TIERVAULT_CONFIG, else ./agent.yaml)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log details to stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # that command group is not part of this build
                continue
            raise
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        stream=sys.stderr, format="tiervault: %(levelname)s: %(message)s")
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except EntryNotFound as exc:
        print(f"tiervault: {exc}", file=sys.stderr)
        return 1
    except TierVaultError as exc:
        print(f"tiervault: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tiervault: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
