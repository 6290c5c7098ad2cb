"""Exclusions and date ranges in every interface: the Python API, the CLI, MCP (stdio and
the served /mcp), the JSON API, a remote tier and the web search form -- each on real
files and real processes. Filters echoed back equal what was given (normalised), and
sending the echo again gives the same filters and rows. Bad values are errors naming
the argument (the flag on the command line)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from starlette.testclient import TestClient

from serve_process import ServeProcess, create_token, error_of
from tiervault.brain import Brain
from tiervault.config import load_settings
from tiervault.server.principal import Principal
from tiervault.vault.entry import Entry
from tiervault.vault.manager import VaultManager
from tiervault.web import LocalAccess, create_web_app

DAY = 86_400.0
JAN_2026 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
ENTRIES = [  # (id, domain, type, tags, updated_at)
    ("r-old", "net", "pattern", ["http"], JAN_2026 - 356 * DAY),
    ("r-new", "net", "anti-pattern", ["http", "deprecated"], JAN_2026 + 59 * DAY),
    ("r-db", "db", "rule", ["sql"], JAN_2026 + 31 * DAY),
    ("r-ui", "ui", "pattern", [], JAN_2026 + 14 * DAY),
]
ALL = {e[0] for e in ENTRIES}


def _entries() -> list[Entry]:
    return [Entry.create(id=i, domain=d, type=t, tags=tags, title=f"Retry policy {i}",
                         description=f"Retry the call with backoff ({d}).",
                         created_at=u - DAY, updated_at=u) for i, d, t, tags, u in ENTRIES]


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """A served team tier and a local agent tier (empty), both real files."""
    root = tmp_path_factory.mktemp("excl")
    (root / "home").mkdir()
    (root / "agent.yaml").write_text("agent_id: me\ntiers:\n  team: team.db\n")
    with VaultManager.at({"team": str(root / "team.db")}) as m:
        m.capture_many(_entries(), "team")
    return root


@pytest.fixture(scope="module")
def server(root):
    token = create_token(root, "reader", "team:r")
    with ServeProcess(root) as srv:
        srv.token = token
        yield srv


def _ids(rows) -> set[str]:
    return {r.get("id") or r["entry"]["id"] for r in rows}


# -- Python API -----------------------------------------------------------------------------
def test_python_api_excludes_and_echoes_what_it_applied(root):
    with Brain.open(load_settings(root / "agent.yaml", env={"HOME": str(root / "home")})) as b:
        rows = b.search_intelligent("retry backoff", not_domain="DB", not_type=["anti-pattern"],
                                    updated_after="2025-06-01T01:00:00+01:00")
        assert _ids(rows) == {"r-ui"}
        assert rows.filters == {"not_type": ["anti-pattern"], "not_domain": ["db"],
                                "updated_after": "2025-06-01T00:00:00Z"}
        again = b.search_intelligent("retry backoff", **rows.filters)
        assert again.filters == rows.filters and again == rows
        assert _ids(b.search_intelligent("retry", not_tags="deprecated", exclude_ids="r-old",
                                         limit=10)) == {"r-db", "r-ui"}
        listed = b.search_intelligent("", updated_before="2026-01-10")  # filters alone
        assert _ids(listed) == {"r-old"} and listed.filters == {"updated_before": "2026-01-10T00:00:00Z"}


# -- CLI ------------------------------------------------------------------------------------
def cli(root: Path, *args: str, code: int = 0) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERVAULT_")}
    env["HOME"] = str(root / "home")
    proc = subprocess.run([sys.executable, "-m", "tiervault", *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == code, (args, proc.stdout, proc.stderr)
    return proc


def test_cli_flags_filter_and_bad_values_name_the_flag(root):
    rows = json.loads(cli(root, "search", "retry", "--not-domain", "db", "--not-type",
                          "anti-pattern", "--json").stdout)
    assert _ids(rows) == {"r-old", "r-ui"}
    rows = json.loads(cli(root, "search", "retry", "--updated-after", "2026-01-01",
                          "--updated-before", "2026-02-15", "--not-tags", "deprecated",
                          "--exclude-ids", "r-old,ghost", "--json").stdout)
    assert _ids(rows) == {"r-db", "r-ui"}
    bad = cli(root, "search", "retry", "--updated-after", "yesterday", "--json", code=2)
    assert "--updated-after" in bad.stderr and "ISO 8601" in bad.stderr
    assert "Traceback" not in bad.stderr and json.loads(bad.stdout)["field"] == "--updated-after"
    bad = cli(root, "search", "retry", "--not-type", "essay", code=2)
    assert "--not-type" in bad.stderr and "anti-pattern" in bad.stderr
    bad = cli(root, "search", "retry", "--updated-after", "2026-03-01", "--updated-before",
              "2026-01-01", code=2)
    assert "--updated-before" in bad.stderr and "later than" in bad.stderr


# -- MCP over stdio ---------------------------------------------------------------------------
def mcp_calls(root: Path, *calls: tuple[str, dict]) -> list:
    """Each (tool, arguments) called in order on a real ``tiervault mcp`` over stdio."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "tiervault", "mcp"],
                                   cwd=str(root), env={"HOME": str(root / "home")})

    async def main():
        async with stdio_client(params, errlog=open(os.devnull, "w")) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                return [await s.call_tool(tool, arguments) for tool, arguments in calls]

    return anyio.run(main)


def test_mcp_stdio_takes_exclusions_and_refuses_a_bad_date(root):
    ok, bad = mcp_calls(
        root,
        ("search_intelligent", {"query": "retry", "not_domain": ["net"],
                                "updated_after": "2026-01-01"}),
        ("search_intelligent", {"query": "retry", "updated_before": "next week"}))
    assert not ok.is_error, ok.content[0].text
    out = ok.structured_content
    assert _ids(out["results"]) == {"r-db", "r-ui"}
    assert out["filters"] == {"not_domain": ["net"], "updated_after": "2026-01-01T00:00:00Z"}
    assert bad.is_error and "updated_before" in bad.content[0].text
    assert "ISO 8601" in bad.content[0].text


# -- served: JSON API, /mcp, remote tier ------------------------------------------------------
def test_json_api_filters_and_echo_round_trip(server):
    with server.client(server.token) as c:
        asked = {"query": "retry", "not_tags": ["deprecated"], "not_type": "rule",
                 "updated_before": "2026-02-01T00:00:00.5Z"}
        r = c.post("/api/v1/search", json=asked)
        assert r.status_code == 200, r.text
        body = r.json()
        assert _ids(body["results"]) == {"r-old", "r-ui"}
        assert body["filters"] == {"not_type": ["rule"], "not_tags": ["deprecated"],
                                   "updated_before": "2026-02-01T00:00:00.500000Z"}
        again = c.post("/api/v1/search", json={"query": "retry", **body["filters"]}).json()
        assert again["filters"] == body["filters"] and again["results"] == body["results"]
        bad = c.post("/api/v1/search", json={"query": "retry", "updated_after": "soon"})
        assert bad.status_code == 400 and error_of(bad)["field"] == "updated_after"
        bad = c.post("/api/v1/search", json={"query": "retry", "exclude_ids": "r-old"})
        assert bad.status_code == 200  # one string is one id
        assert "r-old" not in _ids(bad.json()["results"])


def test_served_mcp_takes_exclusions(server):
    async def main():
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {server.token}"},
                                     timeout=30) as http:
            async with streamable_http_client(f"{server.url}/mcp", http_client=http) as streams:
                async with ClientSession(streams[0], streams[1]) as s:
                    await s.initialize()
                    return await s.call_tool("search_intelligent", {
                        "query": "retry", "exclude_ids": ["r-ui", "r-db"], "not_tags": "sql"})

    result = anyio.run(main)
    assert not result.is_error, result.content[0].text
    assert _ids(result.structured_content["results"]) == {"r-old", "r-new"}


def test_a_remote_tier_honours_exclusions_and_dates(server, tmp_path):
    cfg = tmp_path / "agent.yaml"
    cfg.write_text(f"agent_id: me\ntiers:\n  agent: {tmp_path / 'agent.db'}\n"
                   f"  team:\n    url: {server.url}\n    token: ${{TEAM_TOKEN}}\n")
    with Brain.open(load_settings(cfg, env={"HOME": str(tmp_path), "TEAM_TOKEN": server.token})) as b:
        assert b.manager.problems == {}
        rows = b.search_intelligent("retry backoff", not_domain="ui", updated_after="2026-01-01",
                                    not_type="anti-pattern")
        assert _ids(rows) == {"r-db"} and {r["tier"] for r in rows} == {"team"}
        hits = b.manager.search("retry", filters=_f(exclude_ids=["r-old", "r-new"]))
        assert set(hits.ids) == {"r-db", "r-ui"}
        listed = b.search_intelligent("", not_tags=["http"])
        assert _ids(listed) == {"r-db", "r-ui"}


def _f(**kwargs):
    from tiervault.vault.filters import Filters

    return Filters.build(**kwargs)


# -- web search form --------------------------------------------------------------------------
def test_web_search_form_applies_and_keeps_exclusions(root):
    with Brain.open(load_settings(root / "agent.yaml", env={"HOME": str(root / "home")})) as b:
        access = LocalAccess(Principal("me", {"team": "r"}), "t0k")
        client = TestClient(create_web_app(lambda p: b, access), base_url="http://127.0.0.1")
        client.cookies.set("tiervault_token", "t0k")
        page = client.get("/", params={"q": "retry", "not_domain": "net", "updated_after": "2026-01-01"})
        assert page.status_code == 200
        assert "Retry policy r-db" in page.text and "Retry policy r-ui" in page.text
        assert "Retry policy r-old" not in page.text and "Retry policy r-new" not in page.text
        assert 'name="not_domain" value="net"' in page.text  # the form keeps what was asked
        assert "not_domain=net" in page.text and "updated_after=2026-01-01" in page.text  # links carry it
        bad = client.get("/", params={"q": "retry", "updated_before": "31/01/2026"})
        assert bad.status_code == 400 and "updated_before" in bad.text and "ISO 8601" in bad.text


# -- listing (browse, no ranking): the same filters in every interface -----------------------
def test_list_page_takes_exclusions_and_dates_and_echoes_them(root):
    from tiervault.vault.listing import list_page

    with VaultManager.at({"team": str(root / "team.db")}) as m:
        page = list_page(m, not_domain="db", not_tags=["deprecated"], exclude_ids="r-ui")
        assert {r["id"] for r in page["results"]} == {"r-old"} and page["total"] == 1
        assert page["filters"] == {"not_domain": ["db"], "not_tags": ["deprecated"],
                                   "exclude_ids": ["r-ui"]}
        again = list_page(m, **page["filters"])
        assert again["results"] == page["results"] and again["filters"] == page["filters"]
        dated = list_page(m, since="2026-01-10", updated_before="2026-02-15")
        assert [r["id"] for r in dated["results"]] == ["r-db", "r-ui"]  # newest first
        assert dated["filters"] == {"updated_after": "2026-01-10T00:00:00Z",
                                    "updated_before": "2026-02-15T00:00:00Z"}
        with pytest.raises(ValueError, match="since"):
            list_page(m, since="2026-01-01", updated_after="2026-01-02")
        with pytest.raises(ValueError, match="not_type"):
            list_page(m, not_type="essay")


def test_cli_list_takes_the_search_exclusion_flags(root):
    page = json.loads(cli(root, "list", "--not-type", "pattern", "--updated-before",
                          "2026-02-15", "--json").stdout)
    assert {r["id"] for r in page["results"]} == {"r-db"}
    assert page["filters"] == {"not_type": ["pattern"], "updated_before": "2026-02-15T00:00:00Z"}
    bad = cli(root, "list", "--updated-before", "soon", code=2)
    assert "--updated-before" in bad.stderr and "ISO 8601" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_mcp_list_entries_takes_exclusions(root):
    ok, dated, bad = mcp_calls(
        root,
        ("list_entries", {"not_domain": "net,ui", "exclude_ids": ["r-db"]}),
        ("list_entries", {"since": "2026-01-10"}),
        ("list_entries", {"updated_before": "later"}))
    assert not ok.is_error, ok.content[0].text
    assert ok.structured_content["results"] == [] and ok.structured_content["total"] == 0
    assert {r["id"] for r in dated.structured_content["results"]} == {"r-new", "r-db", "r-ui"}
    assert bad.is_error and "updated_before" in bad.content[0].text


def test_json_api_list_filters_and_echo(server):
    with server.client(server.token) as c:
        r = c.get("/api/v1/entries", params={"tier": "team", "not_domain": "net",
                                             "updated_after": "2026-01-10"})
        assert r.status_code == 200, r.text
        body = r.json()
        assert [e["id"] for e in body["entries"]] == ["r-db", "r-ui"] and body["total"] == 2
        assert body["filters"] == {"not_domain": ["net"], "updated_after": "2026-01-10T00:00:00Z"}
        bad = c.get("/api/v1/entries", params={"tier": "team", "not_type": "essay"})
        assert bad.status_code == 400 and error_of(bad)["field"] == "not_type"


def test_web_browse_form_applies_and_keeps_exclusions(root):
    with Brain.open(load_settings(root / "agent.yaml", env={"HOME": str(root / "home")})) as b:
        access = LocalAccess(Principal("me", {"team": "r"}), "t0k")
        client = TestClient(create_web_app(lambda p: b, access), base_url="http://127.0.0.1")
        client.cookies.set("tiervault_token", "t0k")
        page = client.get("/browse", params={"tier": "team", "not_type": "pattern"})
        assert page.status_code == 200
        assert "Retry policy r-db" in page.text and "Retry policy r-new" in page.text
        assert "Retry policy r-old" not in page.text and "Retry policy r-ui" not in page.text
        assert '<option selected>pattern</option>' in page.text.replace("selected ", "selected")
        bad = client.get("/browse", params={"tier": "team", "updated_after": "tomorrow"})
        assert bad.status_code == 400 and "updated_after" in bad.text
