"""``tiervault embed``: embed pending, failed and edited entries (backfill).

Progress goes to stderr; stdout carries the summary, or with ``--json`` exactly
``{"embedded": n, "skipped": n, "failed": n, "pending": n}`` summed over the
tiers. Safe to interrupt and rerun: every batch is committed on its own.
Exit 0 when nothing failed, 1 when some entries failed to embed (they stay in
state ``error`` for the next run), 2 when embeddings are off or misconfigured.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tiervault.cli.common import add_json, print_json, settings_from
from tiervault.cli.progress import Progress
from tiervault.errors import ConfigError

__all__ = ["register"]


def register(sub: Any) -> None:
    p = sub.add_parser("embed", help="embed pending, failed and edited entries (vector backfill)")
    p.add_argument("--tier", help="only this tier (default: every writable tier)")
    p.add_argument("--rebuild", action="store_true", help="re-embed every entry, changed or not")
    add_json(p)
    p.set_defaults(handler=cmd_embed)


def cmd_embed(args: argparse.Namespace) -> int:
    from tiervault.embeddings.runtime import attach_embeddings
    from tiervault.vault.manager import VaultManager

    settings = settings_from(args)
    if not settings.embedding_enabled:
        raise ConfigError(
            "embeddings are off: add to agent.yaml an `embedding:` block and the feature flag, "
            "e.g.\n  embedding:\n    provider: local        # or openai, voyage, ollama, http, "
            "hash\n  features:\n    embedding-enabled: true", key="embedding")
    totals = {"embedded": 0, "skipped": 0, "failed": 0, "pending": 0}
    with VaultManager.from_settings(settings) as manager:
        runtime = attach_embeddings(manager, settings, strict=True)
        assert runtime is not None
        try:
            if args.tier:
                names = [manager.store(args.tier).name]  # clear error when unknown/unavailable
            else:
                names = [t.name for t in manager.ordered() if not t.read_only]
            for name in names:
                with Progress(f"embed {name}", unit="entries") as progress:
                    counts = runtime.backfill(name, rebuild=args.rebuild,
                                              on_progress=lambda done, total, p=progress: p.update_to(done))
                for key in totals:
                    totals[key] += counts[key]
                if not args.json:
                    print(f"{name}: embedded {counts['embedded']}, skipped {counts['skipped']}, "
                          f"failed {counts['failed']}, pending {counts['pending']}")
            if runtime.pipeline.last_error and totals["failed"]:
                print(f"tiervault: {totals['failed']} entries failed to embed "
                      f"({runtime.pipeline.last_error}); run `tiervault embed` again later",
                      file=sys.stderr)
        finally:
            runtime.close()
    if args.json:
        print_json(totals)
    return 1 if totals["failed"] else 0
