"""The federated dedup's look-ups (vault/dedup.py): a tier is asked only about the
other tiers' hits, and the copies kept are the ones asking about every hit kept.
Real SQLite tier files."""

from __future__ import annotations

import pytest

from tiervault.vault.entry import Entry

from brain_vault import vault_at


@pytest.fixture
def vault(tmp_path):
    yield from vault_at(tmp_path, "agent", "project", "team")


def entry(eid: str, title: str, description: str = "details") -> Entry:
    return Entry.create(id=eid, title=title, description=description)


def test_a_tier_is_not_asked_about_its_own_hits(vault):
    for t in ("agent", "project", "team"):
        vault.capture_many([entry(f"{t}-{i}", f"retry backoff {t} {i}", "jitter") for i in range(4)], t)
    vault.capture(entry("project-1", "retry backoff project 1", "jitter"), "team")  # same id
    asked: dict[str, list[str]] = {}
    for t in ("agent", "project", "team"):
        store = vault.store(t)
        real = store.lexical_scores

        def spy(*a, _t=t, _real=real, **kw):
            asked.setdefault(_t, []).extend(kw.get("ids", ()))
            return _real(*a, **kw)
        store.lexical_scores = spy
    c = vault.search("retry backoff jitter", limit=30)
    assert len(c) == 12  # team's copy of project-1 is dropped
    assert c.tiers[c.ids.index("project-1")] == "project" and c.also_in[c.ids.index("project-1")] == ("team",)
    pool = {f"{t}-{i}" for t in ("agent", "project", "team") for i in range(4)}
    for t in ("agent", "project", "team"):
        own = {f"{t}-{i}" for i in range(4)} | ({"project-1"} if t == "team" else set())
        assert set(asked[t]) == pool - own, t  # every other tier's hit, none of its own

def test_same_content_twice_in_a_tier_and_once_in_another(vault):
    vault.capture(entry("p1", "Use connection pooling", "pool size"), "project")
    vault.capture(entry("p2", "Use connection pooling", "pool size"), "project")
    vault.capture(entry("t1", "Use connection pooling", "pool size"), "team")
    c = vault.search("connection pooling")
    assert c.ids == ["p1", "p2"] and c.tiers == ["project", "project"]
    assert c.also_in == [("team",), ("team",)]
