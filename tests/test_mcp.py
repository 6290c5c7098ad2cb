"""`tiervault mcp` driven by the MCP SDK's own stdio client, the server in a real subprocess.

Pins the tool list and parameter names, runs scan -> load_entries -> record_feedback
end to end, checks read-only mode, tool errors, and that stdout carries only
JSON-RPC (a raw pipe session with a bogus line in it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import anyio

from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

PACK = Path(__file__).resolve().parents[1] / "vault" / "packs" / "starter.jsonl"

TOOLS = {
    "search_intelligent": ["query", "mode", "limit", "domain", "type", "severity", "tags", "tiers",
                           "include_memories", "modulate", "not_domain", "not_type", "not_tags",
                           "exclude_ids", "updated_after", "updated_before"],
    "load_entries": ["ids"],
    "list_entries": ["domain", "type", "severity", "tags", "tiers", "since", "sort", "limit",
                     "offset", "not_domain", "not_type", "not_tags", "exclude_ids",
                     "updated_before"],
    "vault_stats": [],
    "query_vault": ["sql"],
    "capture_knowledge": ["entries", "tier"],
    "update_entry": ["id", "title", "description", "type", "severity", "domain", "context",
                     "example", "counter_example", "why", "tags", "add_tags", "remove_tags",
                     "applies_to", "valid_from", "valid_until", "tier"],
    "delete_entry": ["id", "tier"],
    "record_feedback": ["query", "entry_id", "action"],
    "link_entries": ["source_id", "target_id", "link_type", "note"],
    "capture_memory": ["summary", "context", "topics", "project"],
}
READ_ONLY = {"search_intelligent", "load_entries", "list_entries", "vault_stats", "query_vault"}
SCAN_KEYS = {"id", "title", "score", "type", "domain", "severity", "tags", "snippet",
             "tokenEstimate", "tier"}
BREAKDOWN_KEYS = {"semantic", "vector", "severity", "temporalDecay", "tagOverlap", "domainMatch",
                  "graphProximity", "total"}


def clean_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERVAULT_")}
    env["HOME"] = str(home)
    return env


@pytest.fixture(scope="module")
def vault(tmp_path_factory) -> Path:
    """A project with three tiers; the starter pack in the team tier."""
    root = tmp_path_factory.mktemp("mcp")
    (root / "home").mkdir()
    (root / "agent.yaml").write_text("tiers:\n  agent: .tiervault/agent.db\n"
                                     "  project: .tiervault/project.db\n  team: .tiervault/team.db\n")
    r = subprocess.run([sys.executable, "-m", "tiervault", "import", str(PACK), "--tier", "team"],
                       cwd=root, env=clean_env(root / "home"), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return root


def session(root: Path, *extra: str, errlog: Path | None = None):
    """Run ``body(session)`` against a fresh `tiervault mcp` subprocess."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "tiervault", "mcp", *extra],
                                   cwd=str(root), env={"HOME": str(root / "home")})

    def run(body):
        async def main():
            with open(errlog or os.devnull, "w") as err:
                async with stdio_client(params, errlog=err) as (read, write):
                    async with ClientSession(read, write) as s:
                        await s.initialize()
                        return await body(s)
        return anyio.run(main)
    return run


def data(result: Any) -> dict[str, Any]:
    """A successful tool result: structured content, identical to the JSON text block."""
    assert not result.is_error, result.content[0].text
    text = json.loads(result.content[0].text)
    assert text == result.structured_content
    return result.structured_content


def error_text(result: Any) -> str:
    assert result.is_error, result.structured_content
    text = result.content[0].text
    assert "Traceback" not in text and 'File "' not in text
    return text


def test_tools_and_parameter_names_are_pinned(vault, tmp_path):
    log = tmp_path / "stderr.txt"

    async def body(s):
        return (await s.list_tools()).tools

    tools = {t.name: t for t in session(vault, errlog=log)(body)}
    assert set(tools) == set(TOOLS)
    for name, params in TOOLS.items():
        schema = tools[name].input_schema
        assert list(schema.get("properties", {})) == params, name
        assert tools[name].annotations.read_only_hint is (name in READ_ONLY)
        assert len(tools[name].description) > 80  # written for a model to read
    assert tools["search_intelligent"].input_schema["required"] == ["query"]
    assert tools["search_intelligent"].input_schema["properties"]["mode"]["enum"] == ["scan", "full"]
    assert tools["record_feedback"].input_schema["properties"]["action"]["enum"] == [
        "accepted", "modified", "dismissed", "failed"]
    described = tools["search_intelligent"].description
    assert "scan" in described and "full" in described and "load_entries" in described
    for name, tool in tools.items():  # no tool takes a file path
        assert not any("path" in p or "file" in p for p in tool.input_schema.get("properties", {}))
    # The client session worked, and the server's log went to stderr.
    assert "tiervault mcp: serving 11 tools over stdio" in log.read_text()


def test_scan_then_full_then_feedback_end_to_end(vault):
    query = "retry failed HTTP calls with backoff"

    async def body(s):
        scan = data(await s.call_tool("search_intelligent", {"query": query, "limit": 5}))
        ids = [row["id"] for row in scan["results"][:2]]
        loaded = data(await s.call_tool("load_entries", {"ids": ids + ["no-such-id"]}))
        as_json_string = data(await s.call_tool("load_entries", {"ids": json.dumps(ids[:1])}))
        full = data(await s.call_tool("search_intelligent",
                                      {"query": query, "mode": "full", "limit": 3,
                                       "tags": '["http"]', "severity": ["critical", "warning"]}))
        fb = data(await s.call_tool("record_feedback",
                                    {"query": query, "entry_id": ids[0], "action": "accepted"}))
        stats = data(await s.call_tool("vault_stats", {}))
        return scan, ids, loaded, as_json_string, full, fb, stats

    scan, ids, loaded, as_json_string, full, fb, stats = session(vault)(body)
    assert scan["mode"] == "scan" and scan["count"] == 5
    assert all(set(row) == SCAN_KEYS for row in scan["results"])
    assert "rel-retry-backoff-jitter" in [r["id"] for r in scan["results"]]
    assert [r["id"] for r in loaded["entries"]] == ids + ["no-such-id"]
    assert loaded["found"] == 2 and loaded["entries"][2]["found"] is False
    first = loaded["entries"][0]
    assert first["tier"] == "team" and first["entry"]["id"] == ids[0]
    assert first["entry"]["why"] and "counter_example" in first["entry"]
    assert [r["id"] for r in as_json_string["entries"]] == ids[:1]
    assert full["count"] >= 1
    for row in full["results"]:
        assert set(row) >= {"entry", "score", "breakdown", "tier"}
        assert set(row["breakdown"]) == BREAKDOWN_KEYS
        assert "http" in row["entry"]["tags"] and row["entry"]["severity"] != "suggestion"
    assert fb["action"] == "accepted"
    assert stats["feedback"]["accepted"] >= 1
    assert stats["tiers"]["team"]["entries"] == 210
    assert abs(sum(stats["weights"].values()) - 1.0) < 1e-6


def test_write_tools_capture_link_and_memory(vault):
    async def body(s):
        captured = data(await s.call_tool("capture_knowledge", {"entries": json.dumps([
            {"id": "mcp-good", "title": "Close MCP sessions", "description": "Always close them.",
             "tags": ["mcp"], "links": [{"target": "rel-timeouts-on-every-call",
                                          "type": "supports"}]},
            {"title": "No description"},
            {"id": "mcp-bad-sev", "title": "T", "description": "d", "severity": "high"},
            {"id": "mcp-good", "title": "Dup", "description": "again"},
        ])}))
        linked = data(await s.call_tool("link_entries", {
            "source_id": "mcp-good", "target_id": "sec-parameterized-queries",
            "link_type": "extends", "note": "test"}))
        memory = data(await s.call_tool("capture_memory", {
            "summary": "Deployed the canary; the rollback drill took 4 minutes",
            "topics": "deploy,canary", "project": "demo"}))
        found = data(await s.call_tool("search_intelligent", {
            "query": "what's the canary rollback drill?", "include_memories": True}))
        loaded = data(await s.call_tool("load_entries", {"ids": ["mcp-good"]}))
        return captured, linked, memory, found, loaded

    captured, linked, memory, found, loaded = session(vault)(body)
    assert captured["written"] == ["mcp-good"] and captured["tier"] == "agent"
    failed = {f["index"]: f["error"] for f in captured["failed"]}
    assert set(failed) == {1, 2, 3}
    assert "description" in failed[1] and "critical" in failed[2] and "already used" in failed[3]
    assert "1 of 4" in captured["summary"]
    assert "linkErrors" not in captured
    assert linked["tier"] == "agent" and linked["link_type"] == "extends"
    assert memory["id"].startswith("mem-") and memory["tier"] == "agent"
    assert memory["id"] in [r["id"] for r in found["results"]]
    assert loaded["entries"][0]["tier"] == "agent"
    assert loaded["entries"][0]["entry"]["origin"] == "agent"


def test_read_only_mode_does_not_list_write_tools(vault):
    async def body(s):
        names = {t.name for t in (await s.list_tools()).tools}
        refused = await s.call_tool("capture_knowledge",
                                    {"entries": [{"title": "x", "description": "y"}]})
        works = await s.call_tool("search_intelligent", {"query": "sql injection"})
        return names, refused, works

    names, refused, works = session(vault, "--read-only")(body)
    assert names == READ_ONLY
    refusal = error_text(refused)
    assert "capture_knowledge" in refusal and "read-only" in refusal and "load_entries" in refusal
    assert data(works)["count"] >= 1


def test_bad_calls_come_back_as_actionable_tool_errors(vault):
    async def body(s):
        calls = [
            ("record_feedback", {"query": "q", "entry_id": "no-such-id", "action": "accepted"}),
            ("record_feedback", {"query": "q", "entry_id": "sec-parameterized-queries",
                                 "action": "loved"}),
            ("search_intelligent", {"query": "x", "severity": "high"}),
            ("search_intelligent", {"query": "x", "limit": 0}),
            ("search_intelligent", {"mode": "scan"}),
            ("load_entries", {"ids": []}),
            ("link_entries", {"source_id": "sec-parameterized-queries", "target_id": "nope",
                              "link_type": "supports"}),
            ("capture_knowledge", {"entries": [], "tier": "agent"}),
            ("capture_knowledge", {"entries": [{"title": "a", "description": "b"}],
                                   "tier": "galaxy"}),
            ("search_intelligent", {"query": "x", "tiers": ["nowhere"]}),
        ]
        return [error_text(await s.call_tool(name, args)) for name, args in calls]

    errors = session(vault)(body)
    assert "no-such-id" in errors[0] and "search" in errors[0]
    assert "accepted" in errors[1] and "dismissed" in errors[1]
    assert "severity" in errors[2] and "critical" in errors[2] and "Example" in errors[2]
    assert "limit" in errors[3]
    assert "query" in errors[4] and "required" in errors[4] and "Example" in errors[4]
    assert "ids" in errors[5]
    assert "nope" in errors[6]
    assert "entries" in errors[7] and "empty" in errors[7]
    assert "galaxy" in errors[8] and "agent" in errors[8]
    assert "nowhere" in errors[9]


def test_stdout_carries_only_json_rpc(vault):
    """A raw pipe session: every stdout line is a JSON-RPC message, logs go to stderr."""
    messages = [
        "garbage before the handshake",
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        "this line is not JSON-RPC",
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
         "params": {"name": "search_intelligent", "arguments": {"query": "sql injection"}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
         "params": {"name": "load_entries", "arguments": {"ids": 42}}},
    ]
    proc = subprocess.Popen([sys.executable, "-m", "tiervault", "mcp"], cwd=vault,
                            env=clean_env(vault / "home"), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        replies: dict[int, dict] = {}
        lines: list[str] = []
        for message in messages:
            proc.stdin.write((message if isinstance(message, str) else json.dumps(message)) + "\n")
            proc.stdin.flush()
            wanted = message.get("id") if isinstance(message, dict) else None
            while wanted is not None and wanted not in replies:
                line = proc.stdout.readline()
                assert line, proc.stderr.read()
                lines.append(line)
                reply = json.loads(line)
                if "id" in reply:
                    replies[reply["id"]] = reply
        rest, err = proc.communicate(timeout=60)  # closes stdin: the server must exit
    finally:
        if proc.poll() is None:
            proc.kill()
    lines += rest.splitlines()
    assert proc.returncode == 0, err
    for line in lines:
        assert json.loads(line)["jsonrpc"] == "2.0", line
    assert replies[1]["result"]["serverInfo"]["name"] == "tiervault"
    assert len(replies[2]["result"]["tools"]) == 11
    assert replies[3]["result"]["isError"] is False
    assert replies[4]["result"]["isError"] is True
    assert "tiervault mcp: serving" in err and "Traceback" not in err


def test_config_errors_go_to_stderr_before_the_protocol_starts(tmp_path):
    (tmp_path / "agent.yaml").write_text("tiers:\n  agent: [oops\n")
    r = subprocess.run([sys.executable, "-m", "tiervault", "mcp"], cwd=tmp_path,
                       env=clean_env(tmp_path), input="", capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    assert "agent.yaml" in r.stderr and "Traceback" not in r.stderr


def test_embeddings_enabled_capture_is_embedded_and_ranking_is_hybrid(tmp_path):
    """With the offline hash provider on, the server ranks with vectors and embeds captures."""
    (tmp_path / "home").mkdir()
    (tmp_path / "agent.yaml").write_text(
        "tiers:\n  agent: a.db\n  team: t.db\nembedding: {provider: hash, dim: 64}\n"
        "features:\n  embedding-enabled: true\n")
    log = tmp_path / "stderr.txt"

    async def body(s):
        captured = data(await s.call_tool("capture_knowledge", {"entries": [
            {"id": "wal", "title": "Use WAL mode for SQLite readers",
             "description": "Readers never block the writer in WAL mode."}]}))
        found = data(await s.call_tool("search_intelligent",
                                       {"query": "sqlite wal readers", "mode": "full"}))
        stats = data(await s.call_tool("vault_stats", {}))
        return captured, found, stats

    captured, found, stats = session(tmp_path, errlog=log)(body)
    assert captured["written"] == ["wal"]
    assert stats["weightSet"] == "hybrid"
    top = found["results"][0]
    assert top["entry"]["id"] == "wal" and top["breakdown"]["vector"] > 0
    assert "vectors: hash:hash-v1-64" in log.read_text()


def test_missing_sdk_is_a_clear_install_hint(vault):
    code = ("import sys; sys.modules['mcp'] = None\n"
            "from tiervault.cli import main; sys.exit(main(['mcp']))")
    r = subprocess.run([sys.executable, "-c", code], cwd=vault, env=clean_env(vault / "home"),
                       input="", capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    assert "pip install 'tiervault[mcp]'" in r.stderr and "Traceback" not in r.stderr


def test_query_vault_and_modulate_over_mcp(vault):
    async def body(s):
        rows = data(await s.call_tool("query_vault", {
            "sql": "SELECT domain, count(*) AS n FROM entries WHERE severity = 'critical' "
                   "GROUP BY domain ORDER BY n DESC, domain LIMIT 3"}))
        joined = data(await s.call_tool("query_vault", {
            "sql": "SELECT e.id, k.rank FROM keyword('sql injection', 5) k "
                   "JOIN entries e USING (tier, id) ORDER BY k.rank"}))
        refused = await s.call_tool("query_vault", {"sql": "DELETE FROM entries"})
        decayed = data(await s.call_tool("search_intelligent", {
            "query": "retry http calls", "limit": 3, "modulate": "decay:30 pool:50"}))
        bad = await s.call_tool("search_intelligent", {"query": "x", "modulate": "similar:x"})
        return rows, joined, refused, decayed, bad

    rows, joined, refused, decayed, bad = session(vault)(body)
    assert rows["columns"] == ["domain", "n"] and 1 <= len(rows["rows"]) <= 3
    assert rows["rows"] == sorted(rows["rows"], key=lambda r: (-r[1], r[0]))
    assert [r[1] for r in joined["rows"]] == list(range(1, len(joined["rows"]) + 1))
    assert joined["rows"][0][0] == "sec-parameterized-queries"
    assert "not authorized" in error_text(refused)
    assert decayed["count"] == 3
    assert "unknown token 'similar:x'" in error_text(bad)
