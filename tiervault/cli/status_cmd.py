"""CLI: ``tiervault status``: which configuration is in force and what it connects to.

Shows the config file and how it was found, the agent id, each tier (location,
backend, weight, read-only, entry count, problem), the embedder, and a list of
problems. Exit 0 when there is no problem, 1 when some are listed, 2 when the
configuration itself cannot be loaded (like every command).
"""

from __future__ import annotations

import argparse
from typing import Any

from tiervault.cli.common import add_json, print_json, settings_from

__all__ = ["register"]

_HOW = {"argument": "named by --config", "cwd": "found in the current folder",
        "parent": "found in a parent folder", "env": "named by $TIERVAULT_CONFIG",
        "default": "no agent.yaml found: built-in defaults"}


def register(sub: Any) -> None:
    p = sub.add_parser("status", help="show the config file in use, each tier's location and "
                       "entry count, the embedder, and any problems")
    add_json(p)
    p.set_defaults(handler=cmd_status)


def _report(settings: Any) -> dict[str, Any]:
    from tiervault.vault.backend import backend_kind
    from tiervault.vault.manager import VaultManager

    problems: list[str] = []
    tiers = []
    with VaultManager.from_settings(settings) as manager:
        stats = manager.stats()
        for cfg in settings.tiers:
            info = stats.get(cfg.name, {})
            row = {"name": cfg.name, "location": cfg.location, "backend": backend_kind(cfg),
                   "weight": cfg.weight, "readOnly": cfg.read_only,
                   "exists": bool(info.get("exists")), "entries": info.get("entries"),
                   "memories": info.get("memories"), "problem": info.get("problem")}
            if row["problem"]:
                problems.append(f"tier {cfg.name}: {row['problem']}")
            missing = _unembedded(manager, cfg.name, settings, row)
            if missing:
                problems.append(missing)
            tiers.append(row)
    emb = settings.embedding
    embedder: dict[str, Any] = {"enabled": settings.embedding_enabled,
                                "provider": emb.provider if emb else None,
                                "model": emb.model if emb else None}
    if emb is not None and not settings.embedding_enabled:
        problems.append("an embedding block is configured but vector search is off; set "
                        "`features: {embedding-enabled: true}` to use it")
    if settings.embedding_enabled and emb is not None:
        embedder["apiKey"] = "set" if emb.api_key is not None else "not set"
    return {"config": str(settings.config_path) if settings.config_path else None,
            "configSource": settings.config_source, "agentId": settings.agent_id,
            "tiers": tiers, "embedder": embedder, "problems": problems}


def _unembedded(manager: Any, tier: str, settings: Any, row: dict[str, Any]) -> str | None:
    """Count the tier's entries with a vector of the active model into ``row["vectors"]``;
    a problem line when some have none (new entries before ``tiervault embed``, or all of
    them after the model or the local variant changed: vectors are kept per model)."""
    emb = settings.embedding
    if not settings.embedding_enabled or emb is None or row["problem"] or not row["entries"]:
        return None
    if emb.provider == "local" and emb.model_path:
        return None  # the model id names the file's content: known once the model is loaded
    from types import SimpleNamespace

    from tiervault.embeddings.pipeline import model_key_for

    key = model_key_for(SimpleNamespace(name=emb.provider, model=emb.model), emb.dim)  # type: ignore[arg-type]
    counts = manager.store(tier).embedding_counts(key)
    row["vectors"] = counts.get("ok", 0)
    lacking = row["entries"] - row["vectors"]
    if lacking <= 0:
        return None
    return (f"tier {tier}: {lacking} of {row['entries']} entries have no vector for {key} "
            "(new entries, or a changed embedding model or local variant); run `tiervault embed` "
            "to embed them -- until then they rank by text only")


def cmd_status(args: argparse.Namespace) -> int:
    report = _report(settings_from(args))
    if args.json:
        print_json(report)
        return 1 if report["problems"] else 0
    from tiervault.cli.search_cmds import table

    print(f"config:   {report['config'] or '(none)'} ({_HOW[report['configSource']]})")
    print(f"agent id: {report['agentId']}")
    print()
    table(["tier", "backend", "weight", "access", "entries", "location"],
          [[t["name"], t["backend"], f"{t['weight']:g}", "read-only" if t["readOnly"] else "write",
            "-" if t["entries"] is None else (str(t["entries"]) if t["exists"] else "0 (no file yet)"),
            t["location"]] for t in report["tiers"]])
    e = report["embedder"]
    print()
    if e["enabled"]:
        print(f"embedder: {e['provider']} / {e['model']}"
              + (f" (API key {e['apiKey']})" if "apiKey" in e else ""))
    else:
        print("embedder: off (FTS-only ranking)")
    if report["problems"]:
        print("\nproblems:")
        for problem in report["problems"]:
            print(f"  - {problem}")
        return 1
    print("\nno problems")
    return 0
