"""The curator pages' read model (tiervault.web.catalog) on every backend: an SQLite
tier, a PostgreSQL tier (real server) and a remote tier (a real `tiervault serve`
process) side by side in one manager. The catalog uses only the storage contract."""

from __future__ import annotations

import pytest

from tiervault.vault.entry import Entry
from tiervault.vault.filters import Filters
from tiervault.vault.manager import Tier, VaultManager
from tiervault.web.catalog import Catalog
from remote_backend import remote_backend


@pytest.fixture
def manager(tmp_path, pg_tier):
    team = pg_tier("team")
    remote = remote_backend(tmp_path, name="remote")
    m = VaultManager([Tier("agent", str(tmp_path / "agent.db"), 1.0),
                      Tier("team", "postgres", 0.6, store=team),
                      Tier("remote", remote.location, 0.4, store=remote)])
    yield m
    m.close()


def _fill(m: VaultManager, tier: str) -> None:
    for i in range(7):
        m.capture(Entry.create(id=f"{tier}-{i}", title=f"Note {i} of {tier}", domain="d",
                               severity="critical" if i % 3 == 0 else "suggestion",
                               description=f"text {i}"), tier)
    m.capture(Entry.create(id=f"{tier}-2", title=f"Note 2 of {tier}, edited", domain="d",
                           description="text 2 edited"), tier)  # updated last, created third


@pytest.mark.parametrize("tier", ["agent", "team", "remote"])
def test_pages_newest_and_recently_updated_with_filters(manager, tier):
    _fill(manager, tier)
    c = Catalog(manager)
    new = c.page(tier, order="new", per_page=3)
    assert [e.id for e in new.entries] == [f"{tier}-6", f"{tier}-5", f"{tier}-4"] and new.has_more
    assert new.total == 7 and new.pages == 3
    last = c.page(tier, order="new", page=3, per_page=3)
    assert [e.id for e in last.entries] == [f"{tier}-0"] and not last.has_more and last.total == 7
    updated = c.page(tier, order="updated", per_page=2)
    assert [e.id for e in updated.entries] == [f"{tier}-2", f"{tier}-6"]
    crit = c.page(tier, per_page=10, filters=Filters.build(severity="critical",
                                                          include_expired=True, include_future=True))
    assert sorted(e.id for e in crit.entries) == [f"{tier}-0", f"{tier}-3", f"{tier}-6"]
    assert crit.total == 3
    dist = c.distribution(tier)
    assert dist.total == 7 and dist.by_severity["critical"] == 3 and dist.by_domain == {"d": 7}


def test_review_lists_across_sqlite_and_postgres(manager):
    _fill(manager, "agent")
    _fill(manager, "team")
    same = dict(title="Cache HTTP responses", description="Use ETags.", domain="perf")
    manager.capture(Entry.create(id="cache-a", **same), "agent")
    manager.capture(Entry.create(id="cache-b", **same), "team")
    manager.capture(Entry.create(id="cache-c", **same), "remote")
    manager.capture(Entry.create(id="cache-d", **same), "remote")  # twice in one tier too
    manager.capture(Entry.create(id="solo-1", title="Only here", description="once"), "remote")
    manager.capture(Entry.create(id="solo-2", title="Only here", description="once"), "remote")
    manager.capture(Entry.create(id="use-etags", title="Use ETags for caching", description="x"), "team")
    manager.capture(Entry.create(id="etags-use", title="ETags: use them for caching", description="y"),
                    "team")
    manager.link("team-1", "team-4", "contradicts", "monthly vs weekly", tier="team")
    manager.link("agent-1", "team-4", "contradicts", "", tier="agent")
    manager.link("team-1", "team-5", "supports", "", tier="team")
    manager.link("solo-1", "agent-3", "contradicts", "", tier="remote")
    c = Catalog(manager)
    tiers = ["agent", "team", "remote"]
    found = {(x.link.source_id, x.link.target_id, x.link.tier): (x.source_title, x.target_title)
             for x in c.contradictions(tiers)}
    assert found == {("team-1", "team-4", "team"): ("Note 1 of team", "Note 4 of team"),
                     ("agent-1", "team-4", "agent"): ("Note 1 of agent", "Note 4 of team"),
                     ("solo-1", "agent-3", "remote"): ("Only here", "Note 3 of agent")}
    groups = {g.reason: sorted((m.tier, m.id, m.title) for m in g.members) for g in c.duplicates(tiers)}
    assert groups["same content, several tiers"] == [
        ("agent", "cache-a", "Cache HTTP responses"), ("remote", "cache-c", "Cache HTTP responses"),
        ("remote", "cache-d", "Cache HTTP responses"), ("team", "cache-b", "Cache HTTP responses")]
    assert groups["same content"] == [("remote", "solo-1", "Only here"), ("remote", "solo-2", "Only here")]
    assert groups["similar title"] == [("team", "etags-use", "ETags: use them for caching"),
                                       ("team", "use-etags", "Use ETags for caching")]
    assert c.duplicates(tiers) is c.duplicates(tiers)  # cached while nothing is written
    manager.delete("etags-use", "team")
    assert "similar title" not in {g.reason for g in c.duplicates(tiers)}
