"""The real `tiervault` CLI in a subprocess: init, capture, import, export, get, link."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def run(args: list[str], cwd: Path, home: Path, stdin: str | None = None, env: dict | None = None):
    base = {k: v for k, v in os.environ.items() if not k.startswith("TIERVAULT_")}
    full_env = {**base, "HOME": str(home), **(env or {})}
    return subprocess.run([sys.executable, "-m", "tiervault", *args], cwd=cwd, env=full_env,
                          input=stdin, capture_output=True, text=True, timeout=120)


@pytest.fixture
def project(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    proj = tmp_path / "proj"
    r = run(["init", "--dir", str(proj), "--agent-id", "bot"], tmp_path, home)
    assert r.returncode == 0, r.stderr
    return proj, home


def test_init_capture_get_and_exit_codes(project):
    proj, home = project
    assert (proj / "agent.yaml").exists()
    r = run(["capture", "--title", "Parameterise SQL", "--description", "Never format SQL",
             "--tags", "sql,security", "--severity", "critical", "--json"], proj, home)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["id"] == "parameterise-sql" and out["tier"] == "agent"
    assert (home / ".tiervault" / "agents" / "bot.db").exists()
    assert not (proj / ".tiervault" / "project.db").exists()  # nothing written elsewhere
    r = run(["get", "parameterise-sql", "--json"], proj, home)
    assert r.returncode == 0 and json.loads(r.stdout)["entry"]["tags"] == ["sql", "security"]
    r = run(["get", "no-such-entry"], proj, home)
    assert r.returncode == 1 and "no-such-entry" in r.stderr and "Traceback" not in r.stderr
    r = run(["capture", "--title", "x", "--description", "y", "--severity", "high"], proj, home)
    assert r.returncode == 2 and "severity" in r.stderr and "critical" in r.stderr
    r = run(["capture", "--title", "x"], proj, home)
    assert r.returncode == 2 and "description" in r.stderr
    r = run(["bogus-command"], proj, home)
    assert r.returncode == 2


def test_capture_from_jsonl_stdin_and_link(project):
    proj, home = project
    lines = "\n".join(json.dumps({"id": f"e{i}", "title": f"Entry {i}", "description": "d"})
                      for i in range(3))
    r = run(["capture", "--input", "-", "--tier", "project"], proj, home, stdin=lines)
    assert r.returncode == 0, r.stderr
    r = run(["link", "e0", "e1", "--type", "supports", "--note", "why", "--json"], proj, home)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"source": "e0", "target": "e1", "type": "supports",
                                    "note": "why", "tier": "project"}
    r = run(["link", "e0", "missing", "--type", "supports"], proj, home)
    assert r.returncode == 1 and "missing" in r.stderr
    r = run(["link", "e0", "e1", "--type", "likes"], proj, home)
    assert r.returncode == 2 and "supports" in r.stderr


def test_import_reports_bad_lines_and_strict_imports_nothing(project, tmp_path):
    proj, home = project
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join([
        json.dumps({"id": "good-1", "title": "Good", "description": "fine"}),
        "{not json",
        json.dumps({"id": "bad-sev", "title": "Bad", "description": "x", "severity": "huge"}),
        json.dumps({"id": "good-2", "title": "Good two", "description": "fine",
                    "links": [{"target": "good-1", "type": "extends"}]}),
    ]) + "\n")
    r = run(["import", str(src), "--tier", "team", "--strict"], proj, home)
    assert r.returncode == 2 and "line 2" in r.stderr and "nothing imported" in r.stderr
    r = run(["export", "--tier", "team"], proj, home)
    assert r.stdout == ""
    r = run(["import", str(src), "--tier", "team", "--json"], proj, home)
    assert r.returncode == 2
    report = json.loads(r.stdout)
    assert report["written"] == 2 and report["links"] == 1
    assert any(e.startswith("line 2:") for e in report["errors"])
    assert any(e.startswith("line 3:") and "severity" in e for e in report["errors"])


def test_jsonl_export_import_roundtrips_exactly(project, tmp_path):
    proj, home = project
    records = [
        {"id": "r1", "title": "Ünïcode title ✓", "description": "multi\nline", "type": "rule",
         "domain": "security", "tags": ["a", "b"], "applies_to": ["Python"], "severity": "warning",
         "origin": "user", "valid_from": "2025-01-01T00:00:00Z", "valid_until": "2027-01-01T00:00:00Z",
         "created_at": "2024-05-06T07:08:09.123456Z", "updated_at": "2024-06-01T00:00:00Z",
         "example": "x = 1", "counter_example": "x=1", "why": "because", "context": "ctx"},
        {"id": "r2", "title": "Second", "description": "d", "created_at": 1700000000,
         "links": [{"target": "r1", "type": "contradicts", "note": "n"}]},
    ]
    src = tmp_path / "src.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    assert run(["import", str(src), "--tier", "project"], proj, home).returncode == 0
    first = run(["export", "--tier", "project"], proj, home).stdout
    dump = tmp_path / "dump.jsonl"
    dump.write_text(first)
    assert run(["import", str(dump), "--tier", "team"], proj, home).returncode == 0
    second = run(["export", "--tier", "team"], proj, home).stdout
    assert first == second and first.count("\n") == 2
    exported = [json.loads(l) for l in first.splitlines()]
    assert exported[0]["created_at"] == "2024-05-06T07:08:09.123456Z"
    assert exported[1]["links"] == [{"target": "r1", "type": "contradicts", "note": "n"}]
    # Re-importing the same file changes nothing (no duplicates, nothing rewritten).
    r = run(["import", str(dump), "--tier", "team", "--json"], proj, home)
    assert json.loads(r.stdout)["unchanged"] == 2


def test_config_flag_and_env_select_the_config(project, tmp_path):
    proj, home = project
    r = run(["--config", str(tmp_path / "missing.yaml"), "get", "x"], tmp_path, home)
    assert r.returncode == 2 and "missing.yaml" in r.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("agent_id: bot\ntiers:\n  agnet: x.db\n")
    r = run(["get", "x"], tmp_path, home, env={"TIERVAULT_CONFIG": str(bad)})
    assert r.returncode == 2 and "bad.yaml:3" in r.stderr and "agent" in r.stderr
    assert "Traceback" not in r.stderr
