"""agent.yaml: a tier given as a mapping (a server URL with its schema, or a path)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tiervault.config import load_settings
from tiervault.errors import ConfigError


def _load(tmp_path, body: str):
    path = tmp_path / "agent.yaml"
    path.write_text(body)
    return {t.name: t for t in load_settings(path, env={"HOME": str(tmp_path)}).tiers}


def test_a_server_tier_in_three_lines(tmp_path):
    tiers = _load(tmp_path, "tiers:\n  team:\n    url: postgresql://vault:${TEAM_PW}@db/team\n"
                            "    schema: acme\n")
    team = tiers["team"]
    assert team.path is None and team.schema == "acme" and team.url.reveal().endswith("@db/team")
    assert "TEAM_PW" not in repr(team) and tiers["agent"].path is not None


def test_a_mapping_needs_exactly_one_of_path_or_url(tmp_path):
    with pytest.raises(ConfigError, match="exactly one of path"):
        _load(tmp_path, "tiers:\n  team:\n    schema: x\n")
    with pytest.raises(ConfigError, match="exactly one of path"):
        _load(tmp_path, "tiers:\n  team:\n    path: t.db\n    url: postgresql://h/db\n")
    assert _load(tmp_path, "tiers:\n  team:\n    path: t.db\n")["team"].path == tmp_path / "t.db"


def test_unknown_key_in_a_tier_mapping_is_named(tmp_path):
    with pytest.raises(ConfigError, match="passwd"):
        _load(tmp_path, "tiers:\n  team:\n    url: postgresql://h/db\n    passwd: x\n")


def test_init_team_url_writes_the_server_tier(tmp_path):
    done = _cli("init", "--dir", str(tmp_path), "--team-url",
                "postgresql://vault@db.example:5432/team?sslmode=require".replace(
                    "vault@", "vault:${TIERVAULT_TEAM_PASSWORD}@"))
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "agent.yaml").read_text()
    assert "url: postgresql://vault:${TIERVAULT_TEAM_PASSWORD}@db.example:5432/team" in text
    assert "schema: tiervault" in text
    from tiervault.config import load_settings

    team = {t.name: t for t in load_settings(tmp_path / "agent.yaml").tiers}["team"]
    assert team.path is None and team.schema == "tiervault"
    assert "${TIERVAULT_TEAM_PASSWORD}" in team.url.reveal() and "PASSWORD" not in team.location


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tiervault", *args], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ))


def test_a_token_reference_is_expanded_and_an_unset_one_named(tmp_path):
    body = "tiers:\n  team:\n    url: https://vault.example\n    token: ${TV_TOK}\n"
    path = tmp_path / "agent.yaml"
    path.write_text(body)
    team = {t.name: t for t in load_settings(path, env={"HOME": str(tmp_path), "TV_TOK": "tv_s3"}).tiers}["team"]
    assert team.token.reveal() == "tv_s3"
    with pytest.raises(ConfigError, match="TV_TOK"):
        load_settings(path, env={"HOME": str(tmp_path)})
