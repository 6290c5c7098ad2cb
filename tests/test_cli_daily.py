"""The everyday CLI (issue 11), through the real `tiervault` in a subprocess: capture as an
upsert that says what it replaced, update (a patch), delete, list, memories, links in
get/load, filter-only search, --explain, stats vocabulary, status, config discovery."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def run(args: list[str], cwd: Path, home: Path, stdin: str | None = None,
        env: dict | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("TIERVAULT_")}
    return subprocess.run([sys.executable, "-m", "tiervault", *args], cwd=cwd,
                          env={**base, "HOME": str(home), **(env or {})}, input=stdin,
                          capture_output=True, text=True, timeout=120)


def ok(r: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert r.returncode == 0, r.stderr
    return r


@pytest.fixture
def proj(tmp_path) -> tuple[Path, Path]:
    """A project whose tiers all live in the project folder."""
    home = tmp_path / "home"
    home.mkdir()
    root = tmp_path / "proj"
    root.mkdir()
    (root / "agent.yaml").write_text("tiers:\n  agent: .tv/agent.db\n  project: .tv/project.db\n"
                                     "  team: .tv/team.db\n")
    return root, home


def test_capture_over_an_existing_id_says_replaced_and_update_patches(proj):
    root, home = proj
    r = ok(run(["capture", "--id", "close-sessions", "--title", "Close sessions",
                "--description", "Always close them.", "--severity", "critical",
                "--tags", "mcp,io"], root, home))
    assert r.stdout.strip() == "captured close-sessions into agent"
    r = ok(run(["capture", "--id", "close-sessions", "--title", "Close sessions",
                "--description", "Close them in finally.", "--json"], root, home))
    out = json.loads(r.stdout)
    assert out["status"] == "replaced"
    assert set(out["changed"]) == {"description", "severity", "tags"}  # reset, and said so
    r = ok(run(["capture", "--id", "close-sessions", "--title", "Close sessions",
                "--description", "Close them in finally."], root, home))
    assert r.stdout.startswith("unchanged close-sessions")

    r = ok(run(["update", "close-sessions", "--severity", "critical", "--add-tags", "mcp,db",
                "--remove-tags", "nothing-here", "--json"], root, home))
    out = json.loads(r.stdout)
    assert out["changed"] == ["tags", "severity"] and out["tier"] == "agent"
    entry = out["entry"]
    assert entry["severity"] == "critical" and entry["tags"] == ["mcp", "db"]
    assert entry["description"] == "Close them in finally."  # untouched
    r = ok(run(["update", "close-sessions", "--remove-tags", "mcp", "--context", "in tests"],
               root, home))
    assert r.stdout.startswith("updated close-sessions in agent (changed: context, tags)")
    got = json.loads(ok(run(["get", "close-sessions", "--json"], root, home)).stdout)["entry"]
    assert got["tags"] == ["db"] and got["context"] == "in tests" and got["severity"] == "critical"
    assert got["updated_at"] > got["created_at"]

    r = run(["update", "no-such-id", "--severity", "warning"], root, home)
    assert r.returncode == 1 and "no-such-id" in r.stderr
    r = run(["update", "close-sessions"], root, home)
    assert r.returncode == 2 and "at least one field" in r.stderr
    r = run(["update", "close-sessions", "--severity", "high"], root, home)
    assert r.returncode == 2 and "critical" in r.stderr


def test_capture_input_rules_json_array_and_help(proj, tmp_path):
    root, home = proj
    r = run(["capture", "--input", "-", "--title", "x"], root, home, stdin="{}")
    assert r.returncode == 2 and "--input" in r.stderr and "--title" in r.stderr
    array = json.dumps([{"id": "a1", "title": "A one", "description": "x"},
                        {"id": "a2", "title": "A two", "description": "y", "tags": ["t"]}])
    r = ok(run(["capture", "--input", "-", "--tier", "project"], root, home, stdin=array))
    assert "created a1" in r.stdout and "created a2" in r.stdout
    r = ok(run(["capture", "--input", "-", "--tier", "project", "--json"], root, home,
               stdin=json.dumps([{"id": "a1", "title": "A one", "description": "changed"}])))
    assert json.loads(r.stdout)["entries"] == [{"id": "a1", "status": "replaced",
                                                "changed": ["description"]}]
    helptext = ok(run(["capture", "--help"], root, home)).stdout
    for word in ("--severity", "critical", "warning", "suggestion", "anti-pattern", "--valid-until",
                 "REPLACES", "tiervault update"):
        assert word in helptext


def test_delete_list_and_filter_only_search(proj):
    root, home = proj
    for i, (domain, severity) in enumerate([("db", "critical"), ("db", "warning"),
                                            ("web", "critical"), ("db", "critical")]):
        ok(run(["capture", "--id", f"e{i}", "--title", f"Entry {i} about things",
                "--description", "text", "--domain", domain, "--severity", severity,
                "--tier", "team" if i == 0 else "agent"], root, home))
    page = json.loads(ok(run(["list", "--domain", "db", "--limit", "2", "--json"],
                             root, home)).stdout)
    assert page["total"] == 3 and page["count"] == 2 and page["nextOffset"] == 2
    assert [r["id"] for r in page["results"]] == ["e3", "e1"]  # newest first
    page2 = json.loads(ok(run(["list", "--domain", "db", "--limit", "2", "--offset", "2",
                               "--json"], root, home)).stdout)
    assert [(r["id"], r["tier"]) for r in page2["results"]] == [("e0", "team")]
    assert "nextOffset" not in page2
    text = ok(run(["list", "--severity", "critical", "--tier", "agent"], root, home)).stdout
    assert "e3" in text and "e2" in text and "e0" not in text and "1-2 of 2" in text
    assert run(["list", "--limit", "0"], root, home).returncode == 2

    rows = json.loads(ok(run(["search", "", "--severity", "critical", "--json"], root,
                             home)).stdout)
    assert [r["id"] for r in rows] == ["e3", "e2", "e0"]  # filters alone: newest first
    rows = json.loads(ok(run(["search", "--domain", "db", "--limit", "1", "--json"], root,
                             home)).stdout)
    assert [r["id"] for r in rows] == ["e3"]
    r = run(["search"], root, home)
    assert r.returncode == 2 and "--domain" in r.stderr  # neither words nor a filter

    r = ok(run(["delete", "e3", "--json"], root, home))
    assert json.loads(r.stdout) == {"id": "e3", "tier": "agent", "deleted": True, "stillIn": []}
    r = run(["delete", "e3"], root, home)
    assert r.returncode == 1 and "e3" in r.stderr
    r = run(["delete", "e0", "--tier", "agent"], root, home)
    assert r.returncode == 1  # e0 lives in team only
    assert ok(run(["delete", "e0"], root, home)).stdout.startswith("deleted e0 from team")


def test_links_in_get_and_load_and_unknown_get_json(proj):
    root, home = proj
    ok(run(["capture", "--id", "src", "--title", "Source rule", "--description", "s"], root, home))
    ok(run(["capture", "--id", "dst", "--title", "Target rule", "--description", "t",
            "--tier", "team"], root, home))
    ok(run(["link", "src", "dst", "--type", "extends", "--note", "builds on it"], root, home))
    got = json.loads(ok(run(["get", "dst", "--json"], root, home)).stdout)
    assert got["links"] == [{"direction": "in", "type": "extends", "id": "src",
                             "note": "builds on it", "tier": "agent"}]
    text = ok(run(["get", "src"], root, home)).stdout
    assert "-> extends dst (in agent): builds on it" in text
    loaded = json.loads(ok(run(["load", "src", "dst", "--json"], root, home)).stdout)
    assert loaded[0]["links"][0]["direction"] == "out" and loaded[1]["links"][0]["id"] == "src"
    assert "<- extends src (in agent)" in ok(run(["load", "dst"], root, home)).stdout
    r = run(["get", "nope", "--json"], root, home)
    assert r.returncode == 1
    assert json.loads(r.stdout) == {"error": "not_found", "id": "nope",
                                    "message": "no entry with id 'nope' in any connected tier"}
    # The class, not the example: every --json command answers a failure with JSON.
    r = run(["update", "src", "--severity", "high", "--json"], root, home)
    assert r.returncode == 2
    assert json.loads(r.stdout) == {"error": "invalid", "field": "severity", "message":
                                    "severity: 'high' is not one of critical, warning, suggestion"}
    r = run(["delete", "nope", "--json"], root, home)
    assert r.returncode == 1 and json.loads(r.stdout)["error"] == "not_found"


def test_memories_add_list_and_load_by_id(proj):
    root, home = proj
    out = json.loads(ok(run(["memory", "add", "Canary rollback drill took 4 minutes",
                             "--topics", "deploy,canary", "--project", "demo", "--json"],
                            root, home)).stdout)
    mid = out["id"]
    ok(run(["memory", "add", "Second note", "--project", "other"], root, home))
    listed = json.loads(ok(run(["memory", "list", "--project", "demo", "--json"], root,
                               home)).stdout)
    assert [m["id"] for m in listed["results"]] == [mid]
    assert listed["results"][0]["topics"] == ["deploy", "canary"]
    assert "Second note" in ok(run(["memory", "list"], root, home)).stdout
    rows = json.loads(ok(run(["search", "canary rollback drill", "--memories", "--json"],
                             root, home)).stdout)
    assert mid in [r["id"] for r in rows]
    loaded = json.loads(ok(run(["load", mid, "--json"], root, home)).stdout)
    assert loaded[0]["found"] and loaded[0]["entry"]["summary"].startswith("Canary")
    assert "Canary rollback" in ok(run(["get", mid], root, home)).stdout


def test_search_explain_shows_the_breakdown_and_stats_the_vocabulary(proj):
    root, home = proj
    ok(run(["capture", "--id", "retry", "--title", "Retry with backoff", "--description",
            "Use jitter.", "--domain", "reliability", "--tags", "http,retry"], root, home))
    ok(run(["capture", "--id", "timeouts", "--title", "Timeouts on every call",
            "--description", "Always.", "--domain", "reliability", "--tags", "http"], root, home))
    text = ok(run(["search", "retry backoff", "--explain"], root, home)).stdout
    assert "breakdown: semantic=" in text and "graphProximity=" in text
    assert "score = relevance" in text and "tierWeight" in text and "weights (fts)" in text
    stats = json.loads(ok(run(["stats", "--json"], root, home)).stdout)
    assert stats["vocabulary"]["domains"] == {"reliability": 2}
    assert stats["vocabulary"]["tags"] == {"http": 2, "retry": 1}
    text = ok(run(["stats"], root, home)).stdout
    assert "domains: reliability 2" in text and "tags: http 2, retry 1" in text


def test_config_found_in_a_parent_status_and_config_after_the_command(proj, tmp_path):
    root, home = proj
    deep = root / "src" / "pkg"
    deep.mkdir(parents=True)
    r = ok(run(["capture", "--id", "from-deep", "--title", "T", "--description", "d"], deep, home))
    assert f"using {root / 'agent.yaml'} (found in a parent folder)" in r.stderr
    assert (root / ".tv" / "agent.db").exists()
    assert not (home / ".tiervault").exists()  # not the home default
    assert "from-deep" in ok(run(["get", "from-deep"], root, home)).stdout

    status = json.loads(ok(run(["status", "--json"], deep, home)).stdout)
    assert status["config"] == str(root / "agent.yaml") and status["configSource"] == "parent"
    tiers = {t["name"]: t for t in status["tiers"]}
    assert tiers["agent"]["entries"] == 1 and tiers["agent"]["backend"] == "sqlite"
    assert tiers["team"]["exists"] is False and status["problems"] == []
    assert "found in a parent folder" in ok(run(["status"], deep, home)).stdout

    other = tmp_path / "other"
    other.mkdir()
    (other / "x.yaml").write_text("tiers:\n  agent: x.db\n")
    r = ok(run(["capture", "--id", "after", "--title", "T", "--description", "d",
                "--config", str(other / "x.yaml")], tmp_path, home))
    assert (other / "x.db").exists() and "using" not in r.stderr
    r = run(["status"], tmp_path, home)
    assert "no agent.yaml" in r.stderr and "home default" in r.stderr
    assert ok(run(["--version"], tmp_path, home)).stdout.startswith("tiervault ")


def test_config_errors_show_the_accepted_form(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (tmp_path / "agent.yaml").write_text("# only a comment\n")
    r = run(["stats"], tmp_path, home)
    assert r.returncode == 2 and "is empty" in r.stderr
    (tmp_path / "agent.yaml").write_text("features: [embedding-enabled]\n")
    r = run(["stats"], tmp_path, home)
    assert r.returncode == 2 and "embedding-enabled: true" in r.stderr
    (tmp_path / "agent.yaml").write_text("{}\n")
    r = run(["embed"], tmp_path, home)
    assert r.returncode == 2 and "embedding-enabled: true" in r.stderr
    assert "[embedding-enabled]" not in r.stderr
    (tmp_path / "agent.yaml").write_text("embedding: {provider: hash}\n"
                                         "features:\n  embedding-enabled: true\n")
    assert run(["stats"], tmp_path, home).returncode == 0  # the form the hint shows loads


def test_init_points_only_at_what_the_package_has_and_quickstart_keeps_shared_tiers(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    root = tmp_path / "proj"
    ok(run(["init", "--dir", str(root)], tmp_path, home))
    text = (root / "agent.yaml").read_text()
    assert "agent.yaml.example" not in text and "tiervault init --example" in text
    example = ok(run(["init", "--example"], tmp_path, home)).stdout
    assert "embedding-enabled" in example and "agent_id" in example
    r = ok(run(["quickstart", "--json"], root, home))
    pack = json.loads(r.stdout)["starterPack"]
    assert pack["tier"] == "project" and pack["written"] == 210 and "--tier team" in pack["note"]
    assert not (home / ".tiervault" / "team.db").exists() or json.loads(ok(run(
        ["status", "--json"], root, home)).stdout)["tiers"][2]["entries"] == 0


def test_limit_is_a_ceiling_and_a_widened_answer_says_so(proj):
    root, home = proj
    batch = [{"id": f"r{i}", "title": f"Retry rule number {i}", "description": "retry with care"}
             for i in range(25)]
    ok(run(["capture", "--input", "-"], root, home, stdin=json.dumps(batch)))
    r = ok(run(["search", "retry", "--json"], root, home))
    assert len(json.loads(r.stdout)) == 25 and "small vault" in r.stderr  # default: widened
    for args, n in ((["--limit", "5"], 5), (["--limit", "1"], 1),
                    (["--mode", "full", "--limit", "2"], 2)):
        r = ok(run(["search", "retry", "--json", *args], root, home))
        assert len(json.loads(r.stdout)) == n and "small vault" not in r.stderr
    for bad in ("0", "1001", "x"):
        assert run(["search", "retry", "--limit", bad], root, home).returncode == 2
