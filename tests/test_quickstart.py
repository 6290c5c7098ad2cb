"""`tiervault quickstart` in a subprocess: config, three local tiers, the starter pack,
a scan-then-full search; idempotent on a second run; no network, nothing under $HOME."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

# Runs the real CLI with every outgoing connection refused, so any network use fails loudly.
NO_NETWORK = """\
import socket, sys
def _refuse(*args, **kwargs):
    raise OSError("network access attempted during quickstart")
socket.socket.connect = _refuse
socket.socket.connect_ex = _refuse
socket.create_connection = _refuse
from tiervault.cli import main
sys.exit(main(sys.argv[1:]))
"""
SCAN_KEYS = {"id", "title", "score", "type", "domain", "severity", "tags", "snippet",
             "tokenEstimate", "tier"}


def quickstart(cwd: Path, home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("TIERVAULT_") and k not in ("OPENAI_API_KEY", "VOYAGE_API_KEY")}
    env["HOME"] = str(home)
    return subprocess.run([sys.executable, "-c", NO_NETWORK, "quickstart", *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=120)


def test_quickstart_twice_in_a_fresh_directory(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    r = quickstart(tmp_path, home, "--dir", "proj")
    assert r.returncode == 0, r.stderr
    proj = tmp_path / "proj"
    config = (proj / "agent.yaml").read_text()
    assert "agent: .tiervault/agent.db" in config and "team: .tiervault/team.db" in config
    for tier in ("agent", "project", "team"):
        assert (proj / ".tiervault" / f"{tier}.db").is_file()
    assert "210 entries imported into the team tier" in r.stdout
    assert "pass 1 - scan" in r.stdout and "pass 2 - full" in r.stdout
    assert "rel-retry-backoff-jitter" in r.stdout  # the sample query finds the retry rule
    assert "description:" in r.stdout and "why:" in r.stdout  # the full pass prints entries
    assert list(home.iterdir()) == []  # nothing written under $HOME

    again = quickstart(tmp_path, home, "--dir", "proj", "--json")
    assert again.returncode == 0, again.stderr
    out = json.loads(again.stdout)
    assert out["configWritten"] is False and out["tiersCreated"] == []
    assert out["starterPack"]["written"] == 0 and out["starterPack"]["unchanged"] == 210
    assert 1 <= len(out["scan"]) <= 5
    assert all(set(row) == SCAN_KEYS for row in out["scan"])
    assert [row["id"] for row in out["full"]] == [row["id"] for row in out["scan"][:2]]
    assert all(row["found"] and row["entry"]["description"] for row in out["full"])
    assert (proj / "agent.yaml").read_text() == config  # not rewritten
    # The vault it made is an ordinary one: the CLI reads it from that directory.
    r = subprocess.run([sys.executable, "-m", "tiervault", "get", out["scan"][0]["id"], "--json"],
                       cwd=proj, env={**os.environ, "HOME": str(home)}, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and json.loads(r.stdout)["tier"] == "team"


def test_quickstart_uses_an_existing_config_as_is(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    existing = "agent_id: mine\ntiers:\n  agent: data/a.db\n  team: data/shared.db\n"
    (tmp_path / "agent.yaml").write_text(existing)
    r = quickstart(tmp_path, home, "--query", "sql injection")
    assert r.returncode == 0, r.stderr
    assert "using existing" in r.stdout and "sec-parameterized-queries" in r.stdout
    assert (tmp_path / "agent.yaml").read_text() == existing
    assert (tmp_path / "data" / "shared.db").is_file() and (tmp_path / "data" / "a.db").is_file()
    assert not (tmp_path / ".tiervault").exists()


def test_quickstart_without_a_team_tier_says_how_to_fix_it(tmp_path):
    (tmp_path / "agent.yaml").write_text("tiers:\n  agent: a.db\n")
    r = quickstart(tmp_path, tmp_path)
    assert r.returncode == 2 and "team" in r.stderr and "Traceback" not in r.stderr
