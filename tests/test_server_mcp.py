"""`/mcp` of `tiervault serve` driven by the official MCP SDK's streamable-HTTP client:
scan -> load -> feedback, per-token tool sets and rights, and refusals before the SDK."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import httpx
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from serve_process import ServeProcess, create_token, error_of, run_cli

PACK = Path(__file__).resolve().parents[1] / "vault" / "packs" / "starter.jsonl"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve-mcp")
    (root / "home").mkdir()
    (root / "agent.yaml").write_text("tiers:\n  project: project.db\n  team: team.db\n")
    run_cli(root, "import", str(PACK), "--tier", "team")
    tokens = {"writer": create_token(root, "writer", "team:rw,project:r"),
              "reader": create_token(root, "reader", "agent:r,team:r"),
              "other": create_token(root, "other", "team:r")}
    with ServeProcess(root) as srv:
        srv.tokens = tokens
        srv.root = root
        yield srv


def mcp_session(server, token: str):
    def run(body):
        async def main():
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                          timeout=30) as http:
                async with streamable_http_client(f"{server.url}/mcp", http_client=http) as streams:
                    read, write = streams[0], streams[1]
                    async with ClientSession(read, write) as s:
                        await s.initialize()
                        return await body(s)
        return anyio.run(main)
    return run


def data(result):
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)


def test_scan_load_feedback_over_streamable_http(server):
    query = "retry failed HTTP calls with backoff"

    async def body(s):
        names = {t.name for t in (await s.list_tools()).tools}
        scan = data(await s.call_tool("search_intelligent", {"query": query, "limit": 5}))
        ids = [row["id"] for row in scan["results"][:2]]
        loaded = data(await s.call_tool("load_entries", {"ids": ids}))
        fb = data(await s.call_tool("record_feedback",
                                    {"query": query, "entry_id": ids[0], "action": "accepted"}))
        stats = data(await s.call_tool("vault_stats", {}))
        return names, scan, ids, loaded, fb, stats

    names, scan, ids, loaded, fb, stats = mcp_session(server, server.tokens["writer"])(body)
    assert "capture_knowledge" in names and "search_intelligent" in names
    assert scan["count"] == 5 and "rel-retry-backoff-jitter" in [r["id"] for r in scan["results"]]
    assert [e["id"] for e in loaded["entries"]] == ids and loaded["found"] == 2
    assert fb["recordedIn"] == "agent" and fb["feedback"]["accepted"] == 1
    assert stats["feedback"]["accepted"] == 1
    assert str(server.root) not in json.dumps(stats)  # no server file path reaches a client
    # The feedback is the writer agent's: another agent's counts did not move.
    r = httpx.get(f"{server.url}/api/v1/stats",
                  headers={"Authorization": f"Bearer {server.tokens['other']}"})
    assert r.json()["feedback"]["accepted"] == 0


def test_rights_shape_the_tools(server):
    async def reader(s):
        names = {t.name for t in (await s.list_tools()).tools}
        refused = await s.call_tool("capture_knowledge",
                                    {"entries": [{"title": "x", "description": "y"}], "tier": "team"})
        return names, refused

    names, refused = mcp_session(server, server.tokens["reader"])(reader)
    assert names == {"search_intelligent", "load_entries", "list_entries", "vault_stats",
                     "query_vault"}
    assert refused.is_error and "read-only" in refused.content[0].text

    async def writer(s):
        return await s.call_tool("capture_knowledge", {
            "entries": [{"id": "mcp-http-proj", "title": "t", "description": "d"}],
            "tier": "project"})

    refused = mcp_session(server, server.tokens["writer"])(writer)
    assert refused.is_error and "project" in refused.content[0].text
    r = httpx.get(f"{server.url}/api/v1/entries/mcp-http-proj",
                  headers={"Authorization": f"Bearer {server.tokens['writer']}"})
    assert r.status_code == 404


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer tv_0000000000_" + "x" * 43},
                                     {"Authorization": "Basic abc"}])
def test_mcp_refuses_without_a_valid_token(server, headers):
    r = httpx.post(f"{server.url}/mcp", headers={**headers, "Accept": "application/json"},
                   json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})
    assert r.status_code == 401
    assert error_of(r)["code"] == "unauthorized"
