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
