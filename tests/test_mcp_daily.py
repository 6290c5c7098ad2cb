"""MCP tools a model can use well (issue 11), through the SDK's stdio client against a real
`tiervault mcp` subprocess: described, bounded and enumerated parameters, strict integers,
unknown arguments refused, list forms, update/delete/list tools, links and memories in
load_entries, the vocabulary in vault_stats, and a bad config reported to the client."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def session(root: Path, *extra: str):
    params = StdioServerParameters(command=sys.executable, args=["-m", "tiervault", *extra, "mcp"],
                                   cwd=str(root), env={"HOME": str(root / "home")})

    def run(body):
        async def main():
            with open(os.devnull, "w") as err:
                async with stdio_client(params, errlog=err) as (read, write):
                    async with ClientSession(read, write) as s:
                        init = await s.initialize()
                        return await body(s, init)
        return anyio.run(main)
    return run


def data(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content[0].text
    return result.structured_content


def error(result: Any) -> str:
    assert result.is_error, result.structured_content
    return result.content[0].text


@pytest.fixture
def vault(tmp_path) -> Path:
    (tmp_path / "home").mkdir()
    (tmp_path / "agent.yaml").write_text("tiers:\n  agent: a.db\n  team: t.db\n")
    return tmp_path


def test_every_parameter_is_described_bounded_and_enumerated(vault):
    async def body(s, init):
        return (await s.list_tools()).tools

    tools = {t.name: t for t in session(vault)(body)}
    for tool in tools.values():
        assert "\n    " not in tool.description and "Args:" not in tool.description, tool.name
        for name, prop in tool.input_schema.get("properties", {}).items():
            assert len(prop.get("description", "")) > 8, (tool.name, name)
    search = tools["search_intelligent"].input_schema["properties"]
    limit = next(b for b in search["limit"]["anyOf"] if b.get("type") == "integer")
    assert (limit["minimum"], limit["maximum"]) == (1, 1000)
    enums = json.dumps(search["type"]) + json.dumps(search["severity"])
    for word in ("anti-pattern", "playbook", "critical", "suggestion"):
        assert word in enums
    assert search["tiers"]["anyOf"][0]["items"]["enum"] == ["agent", "team"]
    listing = tools["list_entries"].input_schema["properties"]
    assert (listing["limit"]["minimum"], listing["limit"]["maximum"]) == (1, 200)
    assert listing["sort"]["enum"] == ["updated", "created"]
    update = tools["update_entry"].input_schema["properties"]
    assert update["severity"]["anyOf"][0]["enum"] == ["critical", "warning", "suggestion"]
    assert tools["link_entries"].input_schema["properties"]["link_type"]["enum"] == [
        "supports", "contradicts", "extends", "sequences"]
    assert tools["delete_entry"].annotations.destructive_hint is True
    assert "REPLACED" in tools["capture_knowledge"].description
    assert "update_entry" in tools["capture_knowledge"].description


def test_strict_integers_unknown_arguments_and_list_forms(vault):
    entries = [{"id": f"h{i}", "title": f"HTTP retry rule {i}", "description": "retry with backoff",
                "tags": ["http", f"t{i}"], "severity": ("critical", "warning")[i % 2]}
               for i in range(4)]

    async def body(s, init):
        data(await s.call_tool("capture_knowledge", {"entries": entries}))
        bad = [error(await s.call_tool("search_intelligent", {"query": "retry", "limit": v}))
               for v in ("5", True, 0, 1001)]
        typo = error(await s.call_tool("search_intelligent", {"query": "retry", "tag": "t1"}))
        forms = [data(await s.call_tool("search_intelligent", {"query": "retry", "tags": v}))
                 for v in (["t1", "t2"], '["t1", "t2"]', "t1, t2")]
        severity = data(await s.call_tool("search_intelligent",
                                          {"query": "retry", "severity": "critical,warning"}))
        ids = data(await s.call_tool("load_entries", {"ids": "h0,h1"}))
        return bad, typo, forms, severity, ids

    bad, typo, forms, severity, ids = session(vault)(body)
    for text in bad:
        assert "limit" in text and "Example" in text
    assert "integer" in bad[0] and "not a string" in bad[0]
    assert "integer" in bad[1]
    assert "'tag'" in typo and "did you mean 'tags'" in typo and "include_memories" in typo
    assert [sorted(r["id"] for r in f["results"]) for f in forms] == [["h1", "h2"]] * 3
    assert severity["count"] == 4
    assert [e["id"] for e in ids["entries"]] == ["h0", "h1"]


def test_update_delete_list_links_memories_and_stats(vault):
    async def body(s, init):
        first = data(await s.call_tool("capture_knowledge", {"entries": [
            {"id": "pool", "title": "Reuse HTTP connection pools", "description": "One client.",
             "severity": "critical", "tags": ["http", "perf"], "domain": "performance"},
            {"id": "timeouts", "title": "Timeouts everywhere", "description": "Always.",
             "domain": "reliability", "tags": ["http"],
             "links": [{"target": "pool", "type": "supports", "note": "pools need timeouts"}]}]}))
        again = data(await s.call_tool("capture_knowledge", {"entries": [
            {"id": "pool", "title": "Reuse HTTP connection pools", "description": "One client."}]}))
        patched = data(await s.call_tool("update_entry", {
            "id": "pool", "severity": "warning", "add_tags": "http,db", "remove_tags": ["x"]}))
        noop = data(await s.call_tool("update_entry", {"id": "pool", "severity": "warning"}))
        missing = error(await s.call_tool("update_entry", {"id": "ghost", "severity": "warning"}))
        loaded = data(await s.call_tool("load_entries", {"ids": ["pool", "timeouts"]}))
        memory = data(await s.call_tool("capture_memory", {"summary": "Pool exhaustion at 9am",
                                                           "topics": "incident,pool"}))
        found = data(await s.call_tool("search_intelligent", {
            "query": "pool exhaustion", "include_memories": True}))
        mem_loaded = data(await s.call_tool("load_entries", {"ids": [memory["id"]]}))
        page = data(await s.call_tool("list_entries", {"tags": ["http"], "limit": 1}))
        page2 = data(await s.call_tool("list_entries", {"tags": ["http"], "limit": 1,
                                                        "offset": page["nextOffset"]}))
        by_filter = data(await s.call_tool("search_intelligent",
                                           {"query": "", "domain": "reliability"}))
        stats = data(await s.call_tool("vault_stats", {}))
        deleted = data(await s.call_tool("delete_entry", {"id": "timeouts"}))
        gone = error(await s.call_tool("delete_entry", {"id": "timeouts"}))
        after = data(await s.call_tool("load_entries", {"ids": ["pool"]}))
        return (first, again, patched, noop, missing, loaded, memory, found, mem_loaded, page,
                page2, by_filter, stats, deleted, gone, after)

    (first, again, patched, noop, missing, loaded, memory, found, mem_loaded, page, page2,
     by_filter, stats, deleted, gone, after) = session(vault)(body)
    assert first["replaced"] == []
    assert again["replaced"] == [{"id": "pool", "changed": ["domain", "tags", "severity"]}]
    assert "replaced" in again["summary"]
    assert patched["changed"] == ["tags", "severity"] and patched["tier"] == "agent"
    assert patched["entry"]["tags"] == ["http", "db"] and patched["entry"]["severity"] == "warning"
    assert noop["changed"] == []
    assert "ghost" in missing
    pool, timeouts = loaded["entries"]
    assert pool["links"] == [{"direction": "in", "type": "supports", "id": "timeouts",
                              "note": "pools need timeouts", "tier": "agent"}]
    assert timeouts["links"][0]["direction"] == "out" and timeouts["links"][0]["id"] == "pool"
    assert memory["id"] in [r["id"] for r in found["results"]]
    assert mem_loaded["entries"][0]["found"] is True
    assert mem_loaded["entries"][0]["entry"]["summary"] == "Pool exhaustion at 9am"
    assert page["total"] == 2 and page["count"] == 1 and page["results"][0]["id"] == "pool"
    assert page2["results"][0]["id"] == "timeouts" and "nextOffset" not in page2
    assert [r["id"] for r in by_filter["results"]] == ["timeouts"]
    vocab = stats["vocabulary"]
    assert vocab["tags"]["http"] == 2 and set(vocab["domains"]) == {"general", "reliability"}
    assert "pattern" in vocab["types"]
    assert str(vault) not in json.dumps(stats)  # no file system paths over MCP
    assert deleted == {"id": "timeouts", "tier": "agent", "deleted": True, "stillIn": []}
    assert "timeouts" in gone
    assert after["entries"][0]["links"] == []  # the link went with its source


def test_read_only_server_has_no_edit_tools(vault):
    async def body(s, init):
        names = {t.name for t in (await s.list_tools()).tools}
        refused = error(await s.call_tool("delete_entry", {"id": "x"}))
        return names, refused

    names, refused = session(vault, "--config", str(vault / "agent.yaml"))(body)
    assert {"update_entry", "delete_entry", "list_entries"} <= names

    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "tiervault", "mcp", "--read-only"],
                                   cwd=str(vault), env={"HOME": str(vault / "home")})

    async def main():
        with open(os.devnull, "w") as err:
            async with stdio_client(params, errlog=err) as (read, write):
                async with ClientSession(read, write) as s:
                    await s.initialize()
                    names = {t.name for t in (await s.list_tools()).tools}
                    return names, error(await s.call_tool("delete_entry", {"id": "x"}))
    names, refused = anyio.run(main)
    assert names == {"search_intelligent", "load_entries", "list_entries", "vault_stats",
                     "query_vault"}
    assert "read-only" in refused


def test_a_bad_config_is_reported_to_the_client(tmp_path):
    (tmp_path / "home").mkdir()
    (tmp_path / "bad.yaml").write_text("tiers:\n  agent: [oops\n")

    async def body(s, init):
        stats = error(await s.call_tool("vault_stats", {}))
        search = error(await s.call_tool("search_intelligent", {"query": "x"}))
        return init.instructions, stats, search

    instructions, stats, search = session(tmp_path, "--config", str(tmp_path / "bad.yaml"))(body)
    for text in (instructions, stats, search):
        assert "bad.yaml" in text and "malformed YAML" in text and "cannot open" in text


def test_limit_is_a_ceiling_and_a_widened_answer_says_so(vault):
    batch = [{"id": f"r{i}", "title": f"Retry rule number {i}", "description": "retry with care"}
             for i in range(25)]

    async def body(s, init):
        data(await s.call_tool("capture_knowledge", {"entries": batch}))
        default = data(await s.call_tool("search_intelligent", {"query": "retry"}))
        capped = [data(await s.call_tool("search_intelligent", args)) for args in (
            {"query": "retry", "limit": 2, "mode": "full"}, {"query": "retry", "limit": 5})]
        return default, capped

    default, capped = session(vault)(body)
    assert default["widened"] is True and default["count"] == 25
    assert [c["count"] for c in capped] == [2, 5]
    assert all("widened" not in c for c in capped)
