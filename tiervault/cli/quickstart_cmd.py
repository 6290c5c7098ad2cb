"""CLI: ``quickstart`` (a local vault with the starter pack, then a demo search) and
Markdown folder import/export (``export-md`` / ``import-md``)."""

from __future__ import annotations

import argparse
import sys
import textwrap
from importlib.resources import files
from pathlib import Path
from typing import Any

from tiervault.cli.common import add_json, manager_from, print_errors, print_json
from tiervault.cli.progress import Progress
from tiervault.errors import ConfigError

__all__ = ["register", "QUICKSTART_CONFIG", "SAMPLE_QUERY", "starter_pack_lines"]

#: The sample question quickstart asks the fresh vault.
SAMPLE_QUERY = "retry failed HTTP calls with backoff and timeouts"

#: agent.yaml written by quickstart: every tier under ./.tiervault/ (relative paths
#: resolve against this file's directory, so nothing is written to $HOME).
QUICKSTART_CONFIG = """\
# tiervault configuration, written by `tiervault quickstart`.
# Precedence: built-in defaults < this file < TIERVAULT_* environment < CLI flags.
agent_id: {agent_id}

# One SQLite file per tier, relative to this file's directory.
tiers:
  agent: .tiervault/agent.db       # this agent's own knowledge (highest priority)
  project: .tiervault/project.db   # shared by the agents of this project
  team: .tiervault/team.db         # shared by the team; the starter pack lives here

tier_weights:
  agent: 1.0
  project: 0.8
  team: 0.6

# Vector search is off until an `embedding:` block exists AND this flag is true.
features:
  embedding-enabled: false
"""


def register(sub: Any) -> None:
    p = sub.add_parser("quickstart", help="create ./agent.yaml and a local vault with the "
                       "starter pack, then run a sample scan-then-full search")
    p.add_argument("--dir", default=".", help="project directory (default: .)")
    p.add_argument("--agent-id", default="default", help="agent id written to a new agent.yaml")
    p.add_argument("--query", default=SAMPLE_QUERY, help="the sample query to run")
    p.add_argument("--tier", help="tier to import the starter pack into (default: team when "
                   "its file is inside the project folder, else project; a tier shared "
                   "outside the project is used only when named here)")
    add_json(p)
    p.set_defaults(handler=cmd_quickstart)

    p = sub.add_parser("export-md", help="write a tier as one Markdown file per entry")
    p.add_argument("dir", help="target folder (created if missing)")
    p.add_argument("--tier", required=True, help="tier to export (agent, project, team, ...)")
    p.add_argument("--prune", action="store_true",
                   help="delete *.md files in DIR that name no entry of the tier")
    add_json(p)
    p.set_defaults(handler=cmd_export_md)

    p = sub.add_parser("import-md", help="bring a tier in line with a Markdown folder "
                       "(adds and updates; deletes only with --prune)")
    p.add_argument("dir", help="folder of .md files (searched recursively)")
    p.add_argument("--tier", required=True, help="tier to write to")
    p.add_argument("--prune", action="store_true",
                   help="delete entries of the tier that have no file in DIR (one transaction; "
                   "refused while any file could not be read or was skipped)")
    p.add_argument("--force", action="store_true",
                   help="with --prune: prune even when DIR holds no entry file at all")
    add_json(p)
    p.set_defaults(handler=cmd_import_md)


# -- markdown ----------------------------------------------------------------------------------
def cmd_export_md(args: argparse.Namespace) -> int:
    from tiervault.vault.markdown_folder import export_folder

    with manager_from(args) as manager:
        total = manager.store(args.tier).count()
        with Progress("export-md", total=total, unit="entries") as progress:
            report = export_folder(manager, args.tier, args.dir, prune=args.prune,
                                   on_progress=progress.update_to)
    print_errors(report.conflicts)
    if args.json:
        print_json(report.as_dict())
    else:
        print(f"exported {args.tier} to {args.dir}: {report.written} written, "
              f"{report.unchanged} unchanged" + (f", {report.pruned} stale files deleted"
                                                 if args.prune else "")
              + (f", {len(report.conflicts)} not written" if report.conflicts else ""))
        if report.stale and not args.prune:
            print(f"tiervault: {len(report.stale)} file(s) in {args.dir} name no entry of "
                  f"{args.tier} (e.g. {report.stale[0]}); --prune deletes them", file=sys.stderr)
    return 2 if report.conflicts else 0


def cmd_import_md(args: argparse.Namespace) -> int:
    from tiervault.vault.markdown_folder import import_folder

    root = Path(args.dir).expanduser()
    with manager_from(args) as manager:
        with Progress("import-md", total=None, unit="files") as progress:
            report = import_folder(manager, args.tier, root, prune=args.prune, force=args.force,
                                   on_progress=progress.update_to)
    print_errors(report.errors)
    if args.json:
        print_json(report.as_dict())
    else:
        print(f"imported {args.dir} into {args.tier}: {len(report.added)} added, "
              f"{len(report.updated)} updated, {report.unchanged} unchanged, "
              f"{len(report.pruned)} pruned, {len(report.errors)} problem(s)")
    if report.prune_skipped:
        print(f"tiervault: --prune was not run: {report.prune_skipped}", file=sys.stderr)
    return 2 if report.errors or report.prune_skipped else 0


# -- quickstart -------------------------------------------------------------------------------
def starter_pack_lines() -> list[str]:
    """The bundled starter pack (JSONL lines), read as package data."""
    resource = files("tiervault.vault").joinpath("packs/starter.jsonl")
    return resource.read_text(encoding="utf-8").splitlines()


def _ensure_config(args: argparse.Namespace) -> tuple[Path, bool]:
    """(config path, written now). An existing ./agent.yaml (or --config) is used as is."""
    if args.config:
        return Path(args.config), False
    directory = Path(args.dir).expanduser()
    target = directory / "agent.yaml"
    if target.exists():
        return target, False
    from tiervault.config.fields import Origin, slug

    agent_id = slug(Origin("argument", directory), "agent_id", args.agent_id)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with target.open("x", encoding="utf-8") as fh:
            fh.write(QUICKSTART_CONFIG.format(agent_id=agent_id))
    except FileExistsError:
        return target, False
    except OSError as exc:
        raise ConfigError(f"cannot write the file: {exc.strerror}", file=str(target)) from exc
    return target, True


def _create_tier_files(settings: Any) -> list[str]:
    """Create every missing built-in tier file (schema only); returns the names created."""
    from tiervault.vault.backend import open_tier

    created = []
    for tier in settings.tiers:
        if tier.read_only or tier.path is None:  # a URL tier: its server holds it
            continue
        backend = open_tier(tier)
        try:
            if backend.create():
                created.append(tier.name)
        finally:
            backend.close()
    return created


def cmd_quickstart(args: argparse.Namespace) -> int:
    from tiervault.brain import Brain
    from tiervault.config import load_settings
    from tiervault.vault.jsonl import import_lines

    config_path, wrote = _ensure_config(args)
    settings = load_settings(config_path)
    tier, why = _pack_tier(settings, config_path, args.tier)
    created = _create_tier_files(settings)
    with Brain.open(settings) as brain:
        report = import_lines(brain.manager, tier, starter_pack_lines(), strict=True)
        scan = brain.search_intelligent(args.query, mode="scan", limit=5)
        top = [row["id"] for row in scan[:2]]
        full = brain.load_entries(top)
    if args.json:
        print_json({"config": str(config_path), "configWritten": wrote, "tiersCreated": created,
                    "starterPack": {"tier": tier, "written": report.written,
                                    "unchanged": report.unchanged, "links": report.links,
                                    "note": why},
                    "query": args.query, "scan": scan, "full": full})
        return 0
    _print_quickstart(args, config_path, wrote, created, report, scan, full, tier, why)
    return 0


def _inside(path: Any, folder: Path) -> bool:
    """True when ``path`` (an SQLite file; None for a tier at a URL) is inside ``folder``."""
    if path is None:
        return False
    try:
        Path(path).resolve().relative_to(folder.resolve())
        return True
    except ValueError:
        return False


def _pack_tier(settings: Any, config_path: Path, asked: str | None) -> tuple[str, str]:
    """(tier for the starter pack, a note on why when it is not the team tier).

    The pack never goes silently into a tier shared outside this project (such as
    the ``~/.tiervault/team.db`` that ``tiervault init`` configures): the team tier
    is used when its file is inside the project folder, else the project tier
    (and the output says so); a shared tier only when named with ``--tier``.
    """
    writable = [t.name for t in settings.tiers if not t.read_only]
    if asked is not None:
        if asked not in writable:
            raise ConfigError(f"--tier {asked!r} is not a writable tier here; writable tiers: "
                              f"{', '.join(writable)}", file=str(config_path))
        return asked, ""
    folder = config_path.parent
    team, project = settings.tier("team"), settings.tier("project")
    if team is not None and _inside(team.path, folder):
        return "team", ""
    if project is not None and _inside(project.path, folder):
        shared = f" ({team.location} is shared outside this project)" if team else ""
        return "project", (f"imported into the project tier instead of the team tier{shared}; "
                           "pass --tier team to import it there")
    if team is None and project is None:
        raise ConfigError("has no team or project tier for the starter pack; add `tiers: {team: "
                          ".tiervault/team.db}`, pass --tier agent, or run quickstart in "
                          "another --dir", file=str(config_path))
    raise ConfigError("no team or project tier of this agent.yaml lives inside the project "
                      "folder, so the starter pack (210 entries) would land in a shared tier; name one with "
                      f"--tier ({', '.join(writable)}) or run quickstart in an empty --dir",
                      file=str(config_path))


def _print_quickstart(args: argparse.Namespace, config_path: Path, wrote: bool,
                      created: list[str], report: Any, scan: list[dict[str, Any]],
                      full: list[dict[str, Any]], tier: str, why: str) -> None:
    print(f"{'wrote' if wrote else 'using existing'} {config_path}")
    if created:
        print(f"created tiers: {', '.join(created)}")
    if why:
        print(f"starter pack: {why}")
    if report.written:
        print(f"starter pack: {report.written} entries imported into the {tier} tier")
    else:
        print(f"starter pack: already present ({report.unchanged} entries), nothing imported")
    print()
    print(f"pass 1 - scan: tiervault search {args.query!r}")
    print(f"  {'score':>6}  {'tier':<7} {'severity':<10} {'~tok':>5}  id")
    for row in scan:
        print(f"  {row['score']:6.3f}  {row['tier']:<7} {row['severity']:<10} "
              f"{row['tokenEstimate']:>5}  {row['id']}")
        print(f"          {row['title']}")
    print()
    print(f"pass 2 - full: tiervault load {' '.join(r['id'] for r in full)}")
    for row in full:
        if not row.get("found"):
            print(f"  {row['id']}: {row.get('error')}")
            continue
        entry = row["entry"]
        print(f"  [{row['tier']}] {entry['title']}")
        for key in ("description", "why"):
            if entry.get(key):
                print(textwrap.fill(f"{key}: {entry[key]}", width=96, initial_indent="    ",
                                    subsequent_indent="      "))
        print()
    print("next: `tiervault search \"your question\"`, `tiervault mcp` to serve agents over MCP")
