"""CLI for tiers on a server: ``tiervault migrate`` and ``tiervault init --team-url``.

``migrate --from TIER_OR_PATH --to URL_OR_PATH [--tier team]`` copies a whole
tier between backends (SQLite file <-> PostgreSQL), resumably, then verifies
counts and content hashes on both sides (exit 0 only when they agree).

``init --team-url postgresql://...`` extends ``init`` (defined in vault_cmds):
the team tier of the written agent.yaml points at the server.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from tiervault.cli.common import add_json, print_json

__all__ = ["register"]

_SERVER_SCHEMES = ("postgresql://", "postgres://")


def register(sub: Any) -> None:
    p = sub.add_parser("migrate", help="copy a tier to another backend (SQLite file <-> "
                       "PostgreSQL), resumably, and verify both sides")
    p.add_argument("--from", dest="source", required=True, metavar="TIER_OR_PATH",
                   help="a configured tier name, an SQLite file, or a postgresql:// URL")
    p.add_argument("--to", dest="target", required=True, metavar="URL_OR_PATH",
                   help="a postgresql:// URL (${VAR} allowed for the password), an SQLite file, "
                        "or a configured tier name")
    p.add_argument("--tier", default="team", help="tier name used in messages (default: team)")
    p.add_argument("--schema", default=None,
                   help="schema of a postgresql:// side (default: tiervault, or the config's)")
    p.add_argument("--batch", type=int, default=2_000, help="entries per transaction (default 2000)")
    add_json(p)
    p.set_defaults(handler=cmd_migrate)

    init = getattr(sub, "choices", {}).get("init")
    if init is not None:  # extend `tiervault init` without touching its module
        init.add_argument("--team-url", metavar="URL",
                          help="put the team tier on a PostgreSQL server "
                               "(postgresql://user@host/db; the password as ${VAR} or in ~/.pgpass)")
        init.add_argument("--team-schema", metavar="NAME", help="schema of the team tier (default tiervault)")
        original = init.get_default("handler")
        init.set_defaults(handler=lambda args: cmd_init_team(args, original))


def _open_side(spec: str, tier: str, schema: str | None, args: argparse.Namespace, *,
               create: bool) -> Any:
    """A TierBackend for a URL, a configured tier name or an SQLite path."""
    if spec.startswith(_SERVER_SCHEMES):
        from tiervault.vault.postgres import PgTierStore

        return PgTierStore(spec, name=tier, schema=schema)
    path = Path(spec).expanduser()
    if "/" not in spec and not path.suffix and not path.exists():
        from tiervault.cli.common import settings_from
        from tiervault.vault.backend import open_tier

        for config in settings_from(args).tiers:
            if config.name == spec:
                return open_tier(config)
        from tiervault.errors import ConfigError

        raise ConfigError(f"{spec!r} is neither a configured tier nor an existing file; give a "
                          "tier name, a path to an SQLite tier file or a postgresql:// URL",
                          key="--from/--to")
    if not create and not path.exists():
        from tiervault.errors import TierUnavailable

        raise TierUnavailable(tier, str(path), "does not exist; nothing to migrate from")
    from tiervault.config.settings import TierConfig
    from tiervault.vault.backend import open_tier

    return open_tier(TierConfig(tier, path, 1.0, False))


def cmd_migrate(args: argparse.Namespace) -> int:
    from tiervault.vault.migrate import migrate_tier

    if args.batch < 1:
        from tiervault.errors import ValidationError

        raise ValidationError("--batch", f"{args.batch} must be at least 1")
    src = _open_side(args.source, args.tier, args.schema, args, create=False)
    try:
        dst = _open_side(args.target, args.tier, args.schema, args, create=True)
        try:
            print(f"tiervault: migrating tier {args.tier!r} from {src.location} to {dst.location}",
                  file=sys.stderr)
            report = migrate_tier(src, dst, batch=args.batch,
                                  progress=lambda msg: print(f"tiervault: {msg}", file=sys.stderr))
        finally:
            dst.close()
    finally:
        src.close()
    if args.json:
        print_json({"ok": report.ok, "copied": dict(report.copied),
                    "counts": {k: list(v) for k, v in report.counts.items()},
                    "content_sha256": list(report.digests), "vector_indexes_built": report.indexes})
    else:
        for line in report.lines():
            print(line)
    return 0 if report.ok else 1


def cmd_init_team(args: argparse.Namespace, original: Any) -> int:
    """``init`` as usual, then the team tier of the new agent.yaml set to the server URL."""
    url = getattr(args, "team_url", None)
    if url:
        from tiervault.vault.postgres.url import parse_address

        parse_address(url, args.team_schema, env={k: "x" for k in re.findall(r"\$\{(\w+)\}", url)})
    code = original(args)
    if code != 0 or not url:
        return code
    path = Path(args.dir).expanduser().resolve() / "agent.yaml"
    text = path.read_text(encoding="utf-8")
    block = (f"  team:                                      # shared by the whole team, on a server\n"
             f"    url: {url}\n    schema: {args.team_schema or 'tiervault'}")
    text, n = re.subn(r"(?m)^  team: .*$", lambda _m: block, text, count=1)
    if n == 0:
        text = text.replace("tiers:\n", f"tiers:\n{block}\n", 1)
    path.write_text(text, encoding="utf-8")
    from urllib.parse import urlsplit

    if urlsplit(url.replace("${", "").replace("}", "")).password and "${" not in url:
        print("tiervault: warning: the team URL holds a password in clear; prefer "
              "postgresql://user:${TIERVAULT_TEAM_PASSWORD}@host/db or ~/.pgpass", file=sys.stderr)
    return 0
