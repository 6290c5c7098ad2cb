"""Helpers shared by the CLI command modules."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

__all__ = ["add_json", "settings_from", "manager_from", "print_json", "split_list", "print_errors"]


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable output on stdout")


def settings_from(args: argparse.Namespace, **overrides: Any) -> Any:
    """Settings from --config, else agent.yaml in the current folder or a parent, else
    $TIERVAULT_CONFIG, else defaults; plus CLI overrides. When the file in force is not
    ./agent.yaml, one line on stderr says which one is used (once per process)."""
    from tiervault.config import load_settings

    settings = load_settings(getattr(args, "config", None),
                             overrides={k: v for k, v in overrides.items() if v is not None})
    _say_which_config(settings)
    return settings


_told: list[str] = []


def _say_which_config(settings: Any) -> None:
    source = settings.config_source
    if source in ("argument", "cwd") or _told:
        return
    if source == "default":
        agent = settings.tier("agent")
        line = (f"no agent.yaml in this folder or its parents; using the home default vault "
                f"({agent.location if agent else '~/.tiervault'}). `tiervault init` writes one here")
    else:
        how = "found in a parent folder" if source == "parent" else "from $TIERVAULT_CONFIG"
        line = f"using {settings.config_path} ({how})"
    _told.append(line)
    print(f"tiervault: {line}", file=sys.stderr)


def manager_from(args: argparse.Namespace) -> Any:
    """The tiers of the settings; with embeddings enabled, embed-on-write is attached
    (``manager.embeddings`` is then the runtime; see tiervault.embeddings.runtime)."""
    from tiervault.vault.manager import VaultManager

    settings = settings_from(args)
    manager = VaultManager.from_settings(settings)
    if settings.embedding_enabled:
        from tiervault.embeddings.runtime import attach_embeddings

        attach_embeddings(manager, settings)
    return manager


def print_json(value: Any) -> None:
    json.dump(value, sys.stdout, ensure_ascii=False, indent=None, separators=(",", ":"))
    sys.stdout.write("\n")


def split_list(value: str | None) -> list[str] | None:
    """``"a,b"`` -> ``["a", "b"]``; None stays None."""
    if value is None:
        return None
    return [v.strip() for v in value.split(",") if v.strip()]


def print_errors(errors: list[str], *, prefix: str = "", noun: str = "problems", shown: int = 50) -> None:
    """The first ``shown`` errors on stderr, one per line, then how many more there were."""
    for error in errors[:shown]:
        print(f"tiervault: {prefix}{error}", file=sys.stderr)
    if len(errors) > shown:
        print(f"tiervault: ... and {len(errors) - shown} more {noun}", file=sys.stderr)
