"""Security: tier isolation, read-only sources, secrets never printed, private files.

- Tier isolation: two agents share a HOME and a project. Alice can neither read
  nor write Bob's agent tier through any CLI command or MCP tool: tiers are
  chosen by configured *name*, and the only file paths any command takes are
  data files (the argument list is pinned below); no MCP tool takes a path.
- Read-only: a configured source and ``mcp --read-only`` refuse every write.
- Secrets: an API key planted in the environment (OPENAI_API_KEY) and in
  agent.yaml (apiKey) never appears in any stdout/stderr of CLI commands run
  with ``-v`` (including failing ones: a provider that rejects the key and
  echoes it, a malformed agent.yaml), in exported files, in tier files or
  caches, in ``repr()`` of the objects holding it, or in MCP replies.
- Files holding knowledge are created owner-only (0600) and the directories
  tiervault creates are 0700, whatever the umask.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import secrets
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tiervault.brain import Brain
from tiervault.cli import build_parser
from tiervault.errors import TierVaultError
from tiervault.vault.entry import Entry
from tiervault.vault.manager import Tier, VaultManager

PACK = Path(__file__).resolve().parents[1] / "vault" / "packs" / "starter.jsonl"


def run(args: list[str], cwd: Path, home: Path, env: dict[str, str] | None = None,
        stdin: str | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith("TIERVAULT_") and k not in ("OPENAI_API_KEY", "VOYAGE_API_KEY")}
    return subprocess.run([sys.executable, "-m", "tiervault", *args], cwd=cwd, input=stdin,
                          env={**base, "HOME": str(home), **(env or {})}, capture_output=True,
                          text=True, timeout=120, preexec_fn=lambda: os.umask(0o022))


def digest(paths: list[Path]) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths if p.is_file()}


# -- tier isolation ------------------------------------------------------------------------
#: Every CLI argument that takes a file or directory path. None of them is a tier:
#: tiers come only from agent.yaml / TIERVAULT_* (config). A new path argument must be
#: reviewed for isolation and added here.
PATH_ARGUMENTS = {("", "--config"), ("init", "--dir"), ("quickstart", "--dir"),
                  ("capture", "--input"), ("import", "file"), ("export", "--output"),
                  ("export-md", "dir"), ("import-md", "dir"),
                  # the server's own state (tokens, agents' tiers) and its TLS files: chosen
                  # by the operator like --config, never by a client
                  ("serve", "--state-dir"), ("serve", "--ssl-certfile"), ("serve", "--ssl-keyfile")}
NON_PATH_ARGUMENTS = {"id", "ids", "query", "source", "target", "action", "title", "description",
                      "type", "domain", "severity", "context", "example", "counter_example", "why",
                      "origin", "valid_from", "valid_until", "tags", "applies_to", "note",
                      "link_type", "tier", "agent_id", "mode", "limit", "entry_type", "memories",
                      "explain", "json", "force", "strict", "rebuild", "read_only", "prune",
                      "verbose", "help", "add_tags", "remove_tags", "since", "sort", "offset",
                      "version", "repair", "port", "open", "host", "rate", "burst", "max_body",
                      "max_query", "max_ids", "body_timeout", "schema", "batch", "team_url",
                      "team_schema", "statement", "modulate", "max_rows", "timeout",
                      "not_domain", "not_type", "not_tags", "exclude_ids", "updated_after",
                      "updated_before"}


def test_the_only_path_arguments_are_data_files():
    parser = build_parser()
    found = set()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    commands = [("", parser), *sub.choices.items()]
    for name, p in commands:
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                continue
            label = max(action.option_strings, key=len) if action.option_strings else action.dest
            if name and label == "--config":  # the global option, also accepted after COMMAND
                assert action.dest == "config" and action.default is argparse.SUPPRESS
                continue
            if action.dest in NON_PATH_ARGUMENTS and (name, label) not in PATH_ARGUMENTS:
                continue
            found.add((name, label))
    assert found == PATH_ARGUMENTS, "new CLI arguments: review them for tier isolation"


@pytest.fixture
def two_agents(tmp_path) -> dict[str, Any]:
    """Alice and Bob: one HOME, one project, each with an agent tier of their own."""
    home = tmp_path / "home"
    proj = tmp_path / "proj"
    home.mkdir()
    for agent in ("alice", "bob"):
        r = run(["init", "--dir", str(tmp_path / agent), "--agent-id", agent], tmp_path, home)
        assert r.returncode == 0, r.stderr
    proj.mkdir()
    for agent in ("alice", "bob"):
        (proj / f"{agent}.yaml").write_text(
            f"agent_id: {agent}\ntiers:\n  project: {proj / 'project.db'}\n")
    r = run(["--config", "bob.yaml", "capture", "--id", "bob-secret", "--title", "Bob private note",
             "--description", "the launch code is bobsecretword"], proj, home)
    assert r.returncode == 0, r.stderr
    r = run(["--config", "alice.yaml", "capture", "--id", "alice-note", "--title", "Alice note",
             "--description", "alice knows things"], proj, home)
    assert r.returncode == 0, r.stderr
    bob_db = home / ".tiervault" / "agents" / "bob.db"
    assert bob_db.exists()
    return {"home": home, "proj": proj, "bob_db": bob_db}


def test_an_agent_cannot_reach_another_agents_tier_through_the_cli(two_agents):
    home, proj, bob_db = two_agents["home"], two_agents["proj"], two_agents["bob_db"]
    bob_files = sorted(bob_db.parent.glob("bob.db*"))
    before = digest(bob_files)
    bobs = sorted(p.name for p in bob_db.parent.glob("bob*"))

    def alice(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        r = run(["--config", "alice.yaml", *args], proj, home, stdin=stdin)
        assert "Traceback" not in r.stderr, r.stderr
        assert "bobsecretword" not in r.stdout + r.stderr
        return r

    r = alice("search", "launch code bobsecretword", "--json")
    assert r.returncode == 0 and "bob-secret" not in r.stdout
    assert alice("get", "bob-secret").returncode == 1
    assert alice("load", "bob-secret").returncode == 1
    assert alice("feedback", "bob-secret", "accepted", "-q", "launch code").returncode == 1
    assert alice("link", "alice-note", "bob-secret", "--type", "supports").returncode == 1
    # Every spelling of Bob's tier with one command, and every command with one spelling
    # (all of them resolve --tier through the same configured-name lookup).
    capture = ["capture", "--title", "X", "--description", "planted by alice", "--tier"]
    attempts = [[*capture, tier] for tier in ("bob", "../agents/bob", "agents/bob.db", f"file:{bob_db}")]
    attempts += [[*args, "--tier", str(bob_db)] for args in (
        capture[:-1], ["export"], ["search", "launch"], ["import", "-"],
        ["link", "alice-note", "bob-secret", "--type", "supports"], ["export-md", str(proj / "md")])]
    for args in attempts:
            r = alice(*args, stdin='{"title": "planted", "description": "x"}\n')
            if args[0] == "link":  # the target is checked first: Bob's entry is not found
                assert r.returncode == 1 and "bob-secret" in r.stderr, r.stderr
                continue
            assert r.returncode == 2 and "configured" in r.stderr, (args, r.stderr)
    # A tier file handed to an argument that takes a data file is read as data, never as a tier.
    r = alice("import", str(bob_db), "--tier", "agent")
    assert r.returncode == 2 and "bob-secret" not in r.stdout
    r = alice("search", "launch code bobsecretword", "--json")
    assert "bob-secret" not in r.stdout and "planted" not in r.stdout
    assert digest(bob_files) == before
    assert sorted(p.name for p in bob_db.parent.glob("bob*")) == bobs  # nothing new of Bob's


def test_no_mcp_tool_takes_a_path_or_reaches_another_tier(tmp_path):
    import anyio
    from tiervault.mcp_server import build_server

    bob = tmp_path / "bob.db"
    with VaultManager.at({"agent": str(bob)}) as m:
        m.capture(Entry.from_dict({"id": "bob-secret", "title": "Bob private",
                                   "description": "bobsecretword"}), "agent")
    before = digest([bob])
    manager = VaultManager([Tier("agent", str(tmp_path / "alice.db"), 1.0)])
    server = build_server(Brain(manager))

    async def session() -> None:
        tools = await server.list_tools()
        assert len(tools) == 11  # the loop below checks every tool, so there must be some
        for tool in tools:
            for name, schema in tool.input_schema.get("properties", {}).items():
                assert not any(w in name.lower() for w in ("path", "file", "dir", "db", "url")), name
        attempts = [
            ("capture_knowledge", {"entries": [{"title": "x", "description": "y"}], "tier": str(bob)}),
            ("capture_knowledge", {"entries": [{"title": "x", "description": "y"}], "tier": "../bob"}),
            ("search_intelligent", {"query": "bobsecretword", "tiers": [str(bob)]}),
            ("load_entries", {"ids": ["bob-secret", str(bob)]}),
            ("record_feedback", {"query": "q", "entry_id": "bob-secret", "action": "accepted"}),
            ("link_entries", {"source_id": "bob-secret", "target_id": str(bob), "link_type": "supports"}),
            ("capture_memory", {"summary": "s", "project": str(bob)}),
        ]
        for name, args in attempts:
            try:
                result = await server.call_tool(name, args)
                text = json.dumps(result.structured_content)
            except Exception as exc:  # noqa: BLE001 - a tool error is a fine answer here
                text = str(exc)
            assert "bobsecretword" not in text and '"found": true' not in text, (name, text)
        found = await server.call_tool("search_intelligent", {"query": "bobsecretword bob private"})
        assert found.structured_content["count"] == 0

    anyio.run(session)
    manager.close()
    assert digest([bob]) == before and not list(tmp_path.glob("bob.db-*"))


# -- read-only -----------------------------------------------------------------------------
def test_read_only_source_and_read_only_mcp_refuse_every_write(tmp_path):
    import anyio
    from tiervault.mcp_server import WRITE_TOOLS, build_server

    home = tmp_path / "home"
    home.mkdir()
    vendor = tmp_path / "vendor.db"
    r = run(["import", str(PACK), "--tier", "agent"], tmp_path, home,
            env={"TIERVAULT_AGENT_TIER": str(vendor)})
    assert r.returncode == 0, r.stderr
    (tmp_path / "agent.yaml").write_text(
        f"tiers:\n  agent: {tmp_path / 'agent.db'}\nsources:\n  - name: vendor\n    path: {vendor}\n")
    some_id, other_id = (json.loads(line)["id"] for line in PACK.read_text().splitlines()[:2])
    md = tmp_path / "md"
    md.mkdir()
    (md / "note.md").write_text("---\nid: md-note\n---\n# A markdown note\n\nSome text.\n")
    before = digest([vendor])
    for args in (["capture", "--tier", "vendor", "--title", "X", "--description", "Y"],
                 ["import", "-", "--tier", "vendor"],
                 ["link", some_id, other_id, "--type", "supports", "--tier", "vendor"],
                 ["import-md", str(md), "--tier", "vendor"]):
        r = run(args, tmp_path, home, stdin='{"title": "T", "description": "D"}\n')
        assert r.returncode == 2 and "read-only" in r.stderr and "Traceback" not in r.stderr, (
            args, r.stdout, r.stderr)
    assert digest([vendor]) == before  # a reader may add an empty -wal/-shm, nothing more
    assert all(p.stat().st_size == 0 for p in tmp_path.glob("vendor.db-wal"))

    settings_tiers = [Tier("agent", str(tmp_path / "agent.db"), 1.0),
                      Tier("vendor", str(vendor), 0.5, read_only=True)]
    manager = VaultManager(settings_tiers)

    async def session(read_only: bool) -> None:
        server = build_server(Brain(manager), read_only=read_only)
        names = {t.name for t in await server.list_tools()}
        calls = {
            "capture_knowledge": {"entries": [{"title": "x", "description": "y"}],
                                  "tier": "agent" if read_only else "vendor"},
            "record_feedback": {"query": "q", "entry_id": some_id, "action": "accepted"},
            "link_entries": {"source_id": some_id, "target_id": other_id, "link_type": "supports"},
            "capture_memory": {"summary": "s"},
            "update_entry": {"id": some_id, "severity": "critical",
                             "tier": "agent" if read_only else "vendor"},
            "delete_entry": {"id": some_id, "tier": "agent" if read_only else "vendor"},
        }
        assert set(calls) == set(WRITE_TOOLS)
        if read_only:
            assert names.isdisjoint(WRITE_TOOLS)
        for name, args in calls.items():
            if not read_only and name not in ("capture_knowledge", "update_entry",
                                              "delete_entry"):
                continue  # with writes enabled, only the write aimed at the source must fail
            with pytest.raises(Exception, match="read-only|unknown tool"):
                await server.call_tool(name, args)

    before_all = digest([vendor, tmp_path / "agent.db"])
    anyio.run(session, True)
    anyio.run(session, False)
    manager.close()
    assert digest([vendor, tmp_path / "agent.db"]) == before_all


# -- secrets -------------------------------------------------------------------------------
def test_api_keys_never_appear_in_any_output(tmp_path, embeddings_server):
    env_key = "sk-env-" + secrets.token_hex(16)
    yaml_key = "sk-yaml-" + secrets.token_hex(16)
    needles = [env_key, yaml_key, env_key[7:23], yaml_key[8:24]]  # whole keys and fragments
    home = tmp_path / "home"
    home.mkdir()
    embeddings_server.state.keys = frozenset({"sk-the-only-accepted-key"})  # 401s echo the key

    def config(name: str, key_line: str, provider_url: str = embeddings_server.openai_url) -> Path:
        path = tmp_path / name
        path.write_text(f"agent_id: spy\ntiers:\n  agent: {tmp_path / 'agent.db'}\n"
                        f"  project: {tmp_path / 'project.db'}\n"
                        f"embedding:\n  provider: openai\n  baseUrl: {provider_url}\n"
                        f"  timeout: 2\n{key_line}features:\n  embedding-enabled: true\n")
        return path

    configs = [config("yaml-key.yaml", f"  apiKey: {yaml_key}\n"),
               config("env-key.yaml", ""),
               config("pool.yaml", f"  apiKey: [{yaml_key}, {yaml_key}x]\n")]
    broken = tmp_path / "broken.yaml"
    broken.write_text(f"embedding:\n  provider: openai\n  apiKey: {yaml_key} [unclosed\n  : :\n")
    broken_key_type = tmp_path / "broken2.yaml"
    broken_key_type.write_text(f"embedding:\n  provider: openai\n  apiKey: [{yaml_key}, 42]\n")
    broken_key_map = tmp_path / "broken3.yaml"
    broken_key_map.write_text(f"embedding:\n  provider: openai\n  apiKey:\n    {yaml_key}: 1\n")
    outputs: list[str] = []
    env = {"OPENAI_API_KEY": env_key}
    export = tmp_path / "export.jsonl"
    for n, cfg in enumerate(configs):
        for args in (["capture", "--title", "Key test", "--description", "rotate jwt keys"],
                     ["import", str(PACK), "--tier", "project"],
                     ["search", "rotate keys", "--json", "--explain"],
                     ["search", "rotate keys", "--mode", "full"],
                     ["stats"], ["stats", "--json"], ["embed"], ["embed", "--json"],
                     ["export", "--tier", "project", "-o", str(export)], ["get", "key-test"],
                     ["feedback", "key-test", "accepted", "-q", "rotate"]):
            if n and args[0] not in ("capture", "search", "embed"):
                continue  # the other key sources: only the commands that call the provider
            r = run(["-v", "--config", str(cfg), *args], tmp_path, home, env=env)
            outputs += [r.stdout, r.stderr]
            assert "Traceback" not in r.stderr, r.stderr
        outputs.append(export.read_text())
    for cfg in (broken, broken_key_type, broken_key_map):
        r = run(["-v", "--config", str(cfg), "stats"], tmp_path, home, env=env)
        assert r.returncode == 2 and str(cfg) in r.stderr
        outputs += [r.stdout, r.stderr]
    assert embeddings_server.requests, "the provider was never called: the test proves nothing"
    assert any(req.bearer in (yaml_key, env_key) for req in embeddings_server.requests)

    # In-process: repr of everything holding a key, every error, and the MCP replies.
    from tiervault.config import load_settings
    from tiervault.embeddings.runtime import attach_embeddings

    settings = load_settings(configs[0], env={**env, "HOME": str(home)})
    manager = VaultManager.from_settings(settings)
    runtime = attach_embeddings(manager, settings)
    assert runtime is not None
    outputs += [repr(settings), str(settings), repr(settings.embedding), repr(runtime),
                repr(runtime.embedder), repr(getattr(runtime.embedder, "transport", None)),
                repr(manager)]
    try:
        runtime.embed_query("anything")
    except TierVaultError as exc:
        outputs += [str(exc), repr(exc), str(exc.__cause__), repr(exc.__cause__)]
    import anyio
    from tiervault.mcp_server import build_server

    server = build_server(Brain(manager, settings, vectors=runtime))

    async def session() -> None:
        for name, args in (("vault_stats", {}), ("search_intelligent", {"query": "rotate keys", "mode": "full"}),
                           ("capture_knowledge", {"entries": [{"title": "MCP key", "description": "x"}]})):
            try:
                result = await server.call_tool(name, args)
                outputs.append(json.dumps(result.structured_content))
            except Exception as exc:  # noqa: BLE001 - its text is checked like any output
                outputs.append(str(exc))

    anyio.run(session)
    runtime.close()
    manager.close()
    # Every file under the test directory too: tiers, WAL, caches, exports, vector indexes.
    for path in tmp_path.rglob("*"):
        if path.is_file() and path.suffix != ".yaml":
            outputs.append(path.read_bytes().decode("utf-8", "replace"))
    text = "\n".join(outputs)
    for needle in needles:
        assert needle not in text, f"an API key (fragment {needle[:10]}...) leaked"


# -- file permissions ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def created_files(tmp_path_factory) -> dict[str, str]:
    """Run a full session (umask 022) and return {file or dir created by tiervault: mode}."""
    tmp_path = tmp_path_factory.mktemp("perms")
    home = tmp_path / "home"
    home.mkdir()
    proj = tmp_path / "proj"
    r = run(["init", "--dir", str(proj), "--agent-id", "bot"], tmp_path, home)
    assert r.returncode == 0, r.stderr
    config = proj / "agent.yaml"
    config.write_text(config.read_text().replace("embedding-enabled: false", "embedding-enabled: true")
                      + "embedding:\n  provider: hash\n  dim: 64\n")
    steps = [["capture", "--title", "Private", "--description", "agent knowledge"],
             ["import", str(PACK), "--tier", "team"],
             ["capture", "--tier", "project", "--title", "Proj", "--description", "project knowledge"],
             ["embed"], ["search", "retry backoff"], ["feedback", "private", "accepted", "-q", "x"]]
    for args in steps:
        r = run(args, proj, home)
        assert r.returncode == 0, (args, r.stderr)
    created = [p for root in (home / ".tiervault", proj / ".tiervault") for p in [root, *root.rglob("*")]]
    assert sum(p.suffix == ".db" for p in created) == 3 and any(p.suffix == ".mirror" for p in created)
    return {str(p.relative_to(tmp_path)): oct(stat.S_IMODE(p.stat().st_mode)) for p in created}


def test_knowledge_files_and_directories_are_owner_only(created_files):
    """Tier files (and their -wal/-shm), search caches and every directory tiervault
    created are 0600 / 0700, whatever the umask (the session runs with 022)."""
    loose = {p: m for p, m in created_files.items() if int(m, 8) & 0o077 and not p.endswith(".npy")}
    assert loose == {}, f"readable by group/others: {loose}"


def test_vector_index_files_are_owner_only(created_files):
    vectors = {p: m for p, m in created_files.items() if p.endswith(".npy")}
    assert vectors and all(not int(m, 8) & 0o077 for m in vectors.values()), vectors


def test_quickstart_directories_are_owner_only(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    r = run(["quickstart", "--dir", str(tmp_path / "proj"), "--agent-id", "bot"], tmp_path, home)
    assert r.returncode == 0, r.stderr
    made = [p for root in (home / ".tiervault", tmp_path / "proj" / ".tiervault") if root.exists()
            for p in [root, *root.rglob("*")]]
    loose = {str(p): oct(stat.S_IMODE(p.stat().st_mode)) for p in made
             if stat.S_IMODE(p.stat().st_mode) & 0o077 and not p.name.endswith(".npy")}
    assert made and loose == {}, loose
