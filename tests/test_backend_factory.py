"""open_tier: the backend chosen by the tier's configuration; secrets never shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiervault.config.settings import Secret, TierConfig, redact_url
from tiervault.errors import ConfigError
from tiervault.vault.backend import backend_kind, open_tier


def _cfg(url: str | None = None, path: Path | None = None, token: str | None = None) -> TierConfig:
    return TierConfig("team", path, 0.6, False, url=Secret(url) if url else None,
                      token=Secret(token) if token else None)


@pytest.mark.parametrize("url, kind", [
    ("postgresql://u:pw@localhost/db", "postgres"),
    ("postgres://u@localhost/db", "postgres"),
    ("https://vault.example/tiers/team", "remote"),
    ("http://127.0.0.1:8765/tiers/team", "remote"),
])
def test_url_scheme_chooses_the_backend(url, kind):
    assert backend_kind(_cfg(url)) == kind


def test_path_chooses_sqlite(tmp_path):
    cfg = _cfg(path=tmp_path / "t.db")
    assert backend_kind(cfg) == "sqlite"
    store = open_tier(cfg)
    try:
        assert store.name == "team" and store.location == str(tmp_path / "t.db")
    finally:
        store.close()


def test_unknown_scheme_is_a_config_error_naming_what_works():
    with pytest.raises(ConfigError, match="postgresql://"):
        backend_kind(_cfg("mysql://u:hunter2@h/db"))


def test_neither_path_nor_url():
    with pytest.raises(ConfigError, match="needs a path or a url"):
        backend_kind(_cfg())


def test_location_and_repr_never_show_the_password_or_token():
    cfg = _cfg("postgresql://alice:hunter2@db.example/vault?sslpassword=s3cret", token="tok-123")
    shown = f"{cfg.location} {cfg!r} {cfg}"
    assert "hunter2" not in shown and "s3cret" not in shown and "tok-123" not in shown
    assert cfg.location == "postgresql://alice:***@db.example/vault?***"


def test_redact_url_keeps_a_url_without_secrets():
    assert redact_url("https://vault.example/tiers/team") == "https://vault.example/tiers/team"
    assert redact_url("postgresql://bob@h/db") == "postgresql://bob@h/db"


def _load(tmp_path, text, env=None):
    from tiervault.config import load_settings

    cfg = tmp_path / "agent.yaml"
    cfg.write_text(text, encoding="utf-8")
    return load_settings(cfg, env={"HOME": str(tmp_path), **(env or {})})


def test_agent_yaml_accepts_a_server_tier_and_never_shows_its_secrets(tmp_path):
    st = _load(tmp_path, "tiers:\n  project: p.db\n  team:\n    url: postgresql://bob:${PGPW}@db/vault\n"
                         "    schema: tiervault\n", env={"PGPW": "hunter2"})
    team = st.tier("team")
    assert team.path is None and team.url.reveal() == "postgresql://bob:hunter2@db/vault"
    assert team.schema == "tiervault" and backend_kind(team) == "postgres"
    assert st.tier("project").path == tmp_path / "p.db"
    assert "hunter2" not in repr(st) and "hunter2" not in team.location


def test_agent_yaml_remote_tier_with_a_token(tmp_path):
    st = _load(tmp_path, "tiers:\n  team:\n    url: https://vault.example/t/team\n    token: ${TOK}\n",
               env={"TOK": "s3cret-token"})
    team = st.tier("team")
    assert backend_kind(team) == "remote" and team.token.reveal() == "s3cret-token"
    assert "s3cret" not in repr(st)


@pytest.mark.parametrize("block, message", [
    ("team:\n    url: mysql://u:hunter2@h/db", "must be a postgresql:// URL"),
    ("team:\n    path: t.db\n    url: https://x", "exactly one of path"),
    ("team:\n    token: abc", "exactly one of path"),
    ("team:\n    path: t.db\n    token: hunter2", "url tier only"),
    ("team:\n    url: https://h/t\n    passwd: hunter2", "unknown key"),
])
def test_bad_server_tiers_are_config_errors_that_echo_no_secret(tmp_path, block, message):
    with pytest.raises(ConfigError, match=message) as info:
        _load(tmp_path, "tiers:\n  " + block + "\n")
    assert "hunter2" not in str(info.value)


def test_a_path_override_replaces_a_server_tier(tmp_path):
    from tiervault.config import load_settings

    cfg = tmp_path / "agent.yaml"
    cfg.write_text("tiers:\n  team:\n    url: https://h/t\n", encoding="utf-8")
    st = load_settings(cfg, env={"HOME": str(tmp_path)}, overrides={"team_tier": str(tmp_path / "t.db")})
    assert st.tier("team").url is None and st.tier("team").path == tmp_path / "t.db"


def test_a_missing_backend_extra_leaves_the_tier_out_with_a_clear_problem(tmp_path, monkeypatch):
    from tiervault.vault import backend
    from tiervault.vault.manager import Tier, VaultManager

    # As if the [server] extra (or the backend module) were not installed.
    monkeypatch.setitem(backend.BACKEND_MODULES, "remote",
                        ("tiervault.vault.no_such_backend", "open_backend", "server"))
    cfg = TierConfig("team", None, 0.6, False, url=Secret("https://u:hunter2@vault.example/t"))
    with pytest.raises(ConfigError, match=r"pip install 'tiervault\[server\]'"):
        open_tier(cfg)
    m = VaultManager([Tier("agent", str(tmp_path / "a.db"), 1.0),
                      Tier("team", cfg.location, 0.6, config=cfg)])
    assert "tiervault[server]" in m.problems["team"] and "hunter2" not in m.problems["team"]
    assert [t.name for t in m.ordered()] == ["agent"]
    assert m.search("anything").ids == []
    m.close()
