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
import typing

from tiervault import errors

if typing.TYPE_CHECKING:  # annotations only: the package root exports main and build_parser alone
    from collections.abc import Callable, Sequence

__all__ = ["main", "build_parser"]

# Modules that add subcommands; each has register(subparsers).
_COMMAND_MODULES = (
    "tiervault.cli.vault_cmds",
    "tiervault.cli.search_cmds",
    "tiervault.cli.embed_cmds",
    "tiervault.cli.mcp_cmd",
    "tiervault.cli.quickstart_cmd",
    "tiervault.cli.check_cmd",
    "tiervault.cli.serve_cmds",
    "tiervault.cli.ui_cmd",
    "tiervault.cli.server_tier_cmds",  # after vault_cmds: extends its `init`
    "tiervault.cli.edit_cmds",
    "tiervault.cli.status_cmd",
    "tiervault.cli.sql_cmd",
)

_CONFIG_HELP = ("agent.yaml to use (default: the first agent.yaml in the current folder or a "
                "parent, else $TIERVAULT_CONFIG, else the home default); also accepted after "
                "the subcommand")


def _accept_global_options(parser: argparse.ArgumentParser) -> None:
    """Let ``--config`` and ``-v`` also follow the subcommand (``tiervault search q --config
    x.yaml``), in every nested subcommand too. SUPPRESS keeps a value given before the
    subcommand when none is given after it."""
    for action in parser._actions:  # argparse keeps its sub-parsers only here
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                options = child._option_string_actions
                if "--config" not in options:
                    child.add_argument("--config", metavar="PATH", default=argparse.SUPPRESS,
                                       help=_CONFIG_HELP)
                if "-v" not in options and "--verbose" not in options:
                    child.add_argument("-v", "--verbose", action="store_true",
                                       default=argparse.SUPPRESS, help="log details to stderr")
                _accept_global_options(child)


def build_parser() -> argparse.ArgumentParser:
    import importlib

    parser = argparse.ArgumentParser(
        prog="tiervault", description="A tiered knowledge vault for AI agents.")
    from tiervault import __version__

    parser.add_argument("--config", metavar="PATH", help=_CONFIG_HELP)
    parser.add_argument("-v", "--verbose", action="store_true", help="log details to stderr")
    parser.add_argument("--version", action="version", version=f"tiervault {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # that command group is not part of this build
                continue
            raise
        module.register(sub)
    _accept_global_options(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from tiervault import huge_pages

    if argv is None:  # this process's own command line: `serve` / `mcp` may restart once
        huge_pages.reexec_on_huge_pages(sys.argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        stream=sys.stderr, format="tiervault: %(levelname)s: %(message)s")
    huge_pages.note_reexec()
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except errors.EntryNotFound as exc:
        print(f"tiervault: {exc}", file=sys.stderr)
        _json_error(args, exc)
        return 1
    except errors.TierVaultError as exc:
        print(f"tiervault: error: {exc}", file=sys.stderr)
        _json_error(args, exc)
        return 2
    except KeyboardInterrupt:
        print("tiervault: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


def _json_error(args: argparse.Namespace, exc: errors.TierVaultError) -> None:
    """With ``--json``, a failure is also one JSON object on stdout (what a script parses):
    ``{"error": "not_found" | "invalid" | "config" | "tier" | "error", "message", ...}``
    plus ``id`` (not found), ``field`` (invalid value), ``file``/``line`` (configuration)."""
    if not getattr(args, "json", False):
        return
    from tiervault.cli.common import print_json
    from tiervault.errors import ConfigError, TierError, ValidationError

    out: dict[str, object] = {"error": "error", "message": str(exc)}
    if isinstance(exc, errors.EntryNotFound):
        out.update(error="not_found", id=exc.entry_id)
    elif isinstance(exc, ValidationError):
        out.update(error="invalid", field=exc.field)
    elif isinstance(exc, ConfigError):
        out.update(error="config", file=exc.file, line=exc.line)
    elif isinstance(exc, TierError):
        out.update(error="tier", tier=exc.tier)
    print_json(out)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
