"""`tiervault serve`'s JSON API against a real server process: operations, the auth
matrix (each refusal with its status and nothing written), hostile requests, and
tokens never leaking into responses, errors, stats or logs."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest

from serve_process import ServeProcess, create_token, error_of, run_cli

PACK = Path(__file__).resolve().parents[1] / "vault" / "packs" / "starter.jsonl"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve")
    (root / "home").mkdir()
    (root / "agent.yaml").write_text("tiers:\n  project: project.db\n  team: team.db\n")
    run_cli(root, "import", str(PACK), "--tier", "team")
    run_cli(root, "capture", "--tier", "project", "--id", "proj-rule", "--title",
            "Project rule about deploy freezes", "--description", "No deploys on Friday afternoons.")
    tokens = {
        "alice": create_token(root, "alice", "team:rw,project:r"),
        "bob": create_token(root, "bob", "team:rw,project:r"),
        "reader": create_token(root, "reader", "agent:r,team:r"),
        "teamonly": create_token(root, "teamonly", "team:rw"),
        "expired": create_token(root, "alice", "team:rw", "--expires", "1s"),
        "revoked": create_token(root, "alice", "team:rw"),
    }
    key = run_cli(root, "token", "list", "--json").stdout
    revoked_key = next(t["key"] for t in json.loads(key)["tokens"]
                       if tokens["revoked"].startswith(f"tv_{t['key']}_"))
    run_cli(root, "token", "revoke", revoked_key)
    time.sleep(1.1)  # let the 1 s token expire (no timing is asserted)
    with ServeProcess(root, "--rate", "1000", "--burst", "1000", "--max-body", "200000") as srv:
        srv.tokens = tokens
        yield srv


def call(server, who, method, path, **kw):
    token = server.tokens.get(who, who) if who else None
    with server.client(token) as c:
        return c.request(method, path, **kw)


def team_count(server) -> int:
    r = call(server, "alice", "GET", "/api/v1/stats")
    return r.json()["tiers"]["team"]["entries"]


# -- operations ----------------------------------------------------------------------------
def test_health_needs_no_token(server):
    r = httpx.get(f"{server.url}/healthz")
    assert r.status_code == 200 and r.json()["status"] == "ok"


def test_search_load_feedback_round_trip(server):
    r = call(server, "alice", "POST", "/api/v1/search", json={"query": "retry http timeout"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["count"] > 0 and body["problems"] == []
    first = body["results"][0]
    assert {"id", "title", "score", "tier", "snippet"} <= set(first)
    r = call(server, "alice", "POST", "/api/v1/load", json={"ids": [first["id"], "nope"]})
    assert r.status_code == 200
    assert [e["found"] for e in r.json()["entries"]] == [True, False]
    r = call(server, "alice", "POST", "/api/v1/feedback",
             json={"query": "retry http timeout", "entry_id": first["id"], "action": "accepted"})
    assert r.status_code == 201, r.text
    assert r.json()["feedback"]["accepted"] >= 1
    r = call(server, "alice", "POST", "/api/v1/search",
             json={"query": "retry http timeout", "mode": "full", "limit": 3})
    assert r.json()["results"][0]["breakdown"]


def test_capture_update_get_link_delete_list(server):
    entry = {"id": "srv-op-test", "title": "Pin dependency versions in CI",
             "description": "Lock files make builds reproducible.", "tags": ["ci"]}
    r = call(server, "alice", "POST", "/api/v1/entries", json={"entries": [entry], "tier": "team"})
    assert r.status_code == 201 and r.json()["written"] == ["srv-op-test"], r.text
    r = call(server, "alice", "PATCH", "/api/v1/entries/srv-op-test",
             json={"tier": "team", "fields": {"severity": "critical"}})
    assert r.status_code == 200 and r.json()["entry"]["severity"] == "critical"
    assert r.json()["changed"] == ["severity"]
    r = call(server, "alice", "PATCH", "/api/v1/entries/srv-op-test",
             json={"tier": "team", "fields": {"add_tags": ["lockfile"], "remove_tags": ["ci"]}})
    assert r.status_code == 200 and r.json()["entry"]["tags"] == ["lockfile"], r.text
    r = call(server, "alice", "PATCH", "/api/v1/entries/srv-op-test",
             json={"tier": "team", "fields": {"severity": "critical"}})
    assert r.status_code == 200 and r.json()["changed"] == []
    r = call(server, "alice", "PATCH", "/api/v1/entries/srv-op-test",
             json={"tier": "team", "fields": {"colour": "blue"}})
    assert r.status_code == 400 and "colour" in error_of(r)["message"], r.text
    r = call(server, "alice", "PATCH", "/api/v1/entries/no-such-entry",
             json={"tier": "team", "fields": {"severity": "critical"}})
    assert r.status_code == 404, r.text
    r = call(server, "bob", "GET", "/api/v1/entries/srv-op-test")
    assert r.status_code == 200 and r.json()["tier"] == "team"
    r = call(server, "alice", "POST", "/api/v1/links",
             json={"source_id": "srv-op-test", "target_id": "proj-rule", "link_type": "supports"})
    assert r.status_code == 201 and r.json()["tier"] == "team"
    r = call(server, "alice", "GET", "/api/v1/entries", params={"tier": "team", "limit": 1000})
    assert "srv-op-test" in [e["id"] for e in r.json()["entries"]]
    r = call(server, "alice", "DELETE", "/api/v1/entries/srv-op-test", params={"tier": "team"})
    assert r.status_code == 200
    r = call(server, "alice", "GET", "/api/v1/entries/srv-op-test")
    assert r.status_code == 404 and error_of(r)["code"] == "not_found"


def test_memories_are_the_agents_own(server):
    r = call(server, "alice", "POST", "/api/v1/memories",
             json={"summary": "alice deployed the canary", "topics": ["canary"]})
    assert r.status_code == 201
    r = call(server, "alice", "GET", "/api/v1/memories", params={"query": "canary"})
    assert [m["summary"] for m in r.json()["memories"]] == ["alice deployed the canary"]
    r = call(server, "bob", "GET", "/api/v1/memories", params={"query": "canary"})
    assert r.json()["memories"] == []


# -- who may do what -----------------------------------------------------------------------
CAPTURE = {"entries": [{"id": "forbidden-write", "title": "Must not be written",
                        "description": "This write has to be refused."}], "tier": "team"}


@pytest.mark.parametrize("who, status, reason", [
    (None, 401, "missing token"),
    ("tv_0123456789_" + "A" * 43, 401, "unknown token"),
    ("not-a-token", 401, "malformed"),
    ("expired", 401, "expired"),
    ("revoked", 401, "revoked"),
    ("reader", 403, "may not write tier 'team'"),
])
def test_refused_writes_change_nothing(server, who, status, reason):
    before = team_count(server)
    r = call(server, who, "POST", "/api/v1/entries", json=CAPTURE)
    assert r.status_code == status, r.text
    assert reason in error_of(r)["message"]
    assert team_count(server) == before
    r = call(server, "alice", "GET", "/api/v1/entries/forbidden-write")
    assert r.status_code == 404


def test_token_for_one_tier_cannot_reach_another(server):
    r = call(server, "teamonly", "POST", "/api/v1/search",
             json={"query": "deploy freezes", "tiers": ["project"]})
    assert r.status_code == 403 and error_of(r)["field"] == "tiers"
    r = call(server, "teamonly", "GET", "/api/v1/entries/proj-rule")
    assert r.status_code == 404  # the project tier is not in its view at all
    r = call(server, "alice", "POST", "/api/v1/entries",
             json={**CAPTURE, "tier": "project"})  # project:r
    assert r.status_code == 403 and "project" in error_of(r)["message"]
    r = call(server, "alice", "DELETE", "/api/v1/entries/proj-rule", params={"tier": "project"})
    assert r.status_code == 403
    r = call(server, "alice", "GET", "/api/v1/entries/proj-rule")
    assert r.status_code == 200


def test_agent_never_reaches_another_agents_tier(server):
    secret = {"id": "bob-private", "title": "Bob's private note on canaries",
              "description": "Only bob may see this."}
    r = call(server, "bob", "POST", "/api/v1/entries", json={"entries": [secret]})
    assert r.status_code == 201 and r.json()["tier"] == "agent"
    assert call(server, "bob", "GET", "/api/v1/entries/bob-private").status_code == 200
    assert call(server, "alice", "GET", "/api/v1/entries/bob-private").status_code == 404
    r = call(server, "alice", "POST", "/api/v1/search", json={"query": "bob private canaries"})
    assert "bob-private" not in [row["id"] for row in r.json()["results"]]
    r = call(server, "alice", "POST", "/api/v1/feedback",
             json={"query": "x", "entry_id": "bob-private", "action": "accepted"})
    assert r.status_code == 404
    for tier in ("bob", "agents/bob", "../agents/bob", "agent:bob"):
        r = call(server, "alice", "DELETE", "/api/v1/entries/bob-private", params={"tier": tier})
        assert r.status_code == 400, (tier, r.text)
    r = call(server, "alice", "DELETE", "/api/v1/entries/bob-private")  # alice's own agent tier
    assert r.status_code == 404
    assert call(server, "bob", "GET", "/api/v1/entries/bob-private").status_code == 200


def test_read_only_agent_tier_refuses_feedback(server):
    r = call(server, "reader", "POST", "/api/v1/feedback",
             json={"query": "q", "entry_id": "proj-rule", "action": "accepted"})
    assert r.status_code == 403


# -- hostile requests ----------------------------------------------------------------------
@pytest.mark.parametrize("body, status, field", [
    (b"{not json", 400, "body"),
    (b"[1, 2]", 400, "body"),
    (b'{"query": ["a"]}', 400, "query"),
    (b'{"query": "x", "limit": "ten"}', 400, "limit"),
    (b'{"query": "x", "limit": true}', 400, "limit"),
    (b'{"query": "x", "mode": "everything"}', 400, "mode"),
    (b'{"query": "x", "tags": {"a": 1}}', 400, "tags"),
    (b'{"query": "x", "tiers": ["nope"]}', 403, "tiers"),
    (b"\xff\xfe\x00garbage", 400, "body"),
    (b"[" * 100_000 + b"]" * 100_000, 400, "body"),
])
def test_malformed_requests(server, body, status, field):
    r = call(server, "alice", "POST", "/api/v1/search", content=body,
             headers={"Content-Type": "application/json"})
    assert r.status_code == status, r.text
    assert error_of(r)["field"] == field
    assert "Traceback" not in r.text


def test_huge_bodies_and_queries(server):
    r = call(server, "alice", "POST", "/api/v1/search",
             json={"query": "x" * 10_000_000})  # 10 MB query
    assert r.status_code == 413 and error_of(r)["field"] == "body"
    r = call(server, "alice", "POST", "/api/v1/search", json={"query": "word " * 2_000})
    assert r.status_code == 413 and error_of(r)["field"] == "query"
    r = call(server, "alice", "POST", "/api/v1/load", json={"ids": [f"id-{i}" for i in range(101)]})
    assert r.status_code == 413 and error_of(r)["field"] == "ids"

    def chunks():
        for _ in range(40):
            yield b"x" * 10_000  # no Content-Length: refused while streaming
    r = call(server, "alice", "POST", "/api/v1/search", content=chunks())
    assert r.status_code == 413


@pytest.mark.parametrize("path", ["/api/v1/../../etc/passwd", "/api/v1/entries/..%2F..%2Fetc",
                                  "/api/v1/entries/%00", "/api/v2/search", "/api/v1/search%00",
                                  "/%2e%2e/%2e%2e/etc/passwd"])
def test_path_tricks(server, path):
    r = call(server, "alice", "GET", path)
    assert r.status_code in (404, 405), (path, r.status_code, r.text)
    assert error_of(r)["code"] in ("not_found", "method_not_allowed")
    assert "root:" not in r.text


def test_rate_limit_answers_429_with_retry_after(tmp_path):
    (tmp_path / "home").mkdir()
    (tmp_path / "agent.yaml").write_text("tiers:\n  team: team.db\n")
    token = create_token(tmp_path, "rl", "team:r")
    with ServeProcess(tmp_path, "--rate", "0.01", "--burst", "3") as srv, srv.client(token) as c:
        codes = [c.get("/api/v1/stats").status_code for _ in range(5)]
        assert codes[:3] == [200, 200, 200] and codes[3:] == [429, 429]
        r = c.get("/api/v1/stats")
        assert error_of(r)["code"] == "rate_limited" and int(r.headers["Retry-After"]) >= 1


# -- tokens never leak ---------------------------------------------------------------------
def test_planted_token_never_appears(server):
    """The token goes in through every field; it comes out nowhere the server writes
    (only where the caller itself put it: an unknown id is named back to its sender)."""
    planted = server.tokens["alice"]
    secret_part = planted.split("_", 2)[2]
    for method, path, kw in [
        ("POST", "/api/v1/search", {"json": {"query": planted}}),
        ("POST", "/api/v1/load", {"json": {"ids": [planted]}}),
        ("GET", f"/api/v1/entries/{planted}", {}),
        ("POST", "/api/v1/feedback", {"json": {"query": planted, "entry_id": planted,
                                               "action": "accepted"}}),
    ]:
        call(server, "alice", method, path, **kw)
    seen = [
        call(server, "alice", "POST", "/api/v1/search", json={"query": "x", "mode": planted}).text,
        call(server, "alice", "POST", "/api/v1/feedback",
             json={"query": "q", "entry_id": "x", "action": planted}).text,
        call(server, "alice", "GET", "/api/v1/stats").text,
        call(server, "bob", "GET", "/api/v1/stats").text,
        call(server, planted + "x", "GET", "/api/v1/stats").text,  # a near miss
        call(server, planted[:-1], "GET", "/api/v1/stats").text,
        httpx.get(f"{server.url}/healthz").text,
    ]
    for text in seen:
        assert secret_part not in text
    assert secret_part not in server.output()
    tokens_file = (server.root / ".tiervault-server" / "tokens.json").read_text()
    assert secret_part not in tokens_file
    listing = run_cli(server.root, "token", "list", "--json")
    assert secret_part not in listing.stdout + listing.stderr


def test_non_loopback_host_refused_without_token(tmp_path):
    (tmp_path / "home").mkdir()
    (tmp_path / "agent.yaml").write_text("tiers:\n  team: team.db\n")
    r = run_cli(tmp_path, "serve", "--host", "0.0.0.0", "--port", "1", check=False)
    assert r.returncode == 2
    assert "no active token" in r.stderr and "token create" in r.stderr
