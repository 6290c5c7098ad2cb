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
    """Settings from --config / $TIERVAULT_CONFIG / ./agent.yaml, plus CLI overrides."""
    from tiervault.config import load_settings

    return load_settings(args.config, overrides={k: v for k, v in overrides.items() if v is not None})


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
