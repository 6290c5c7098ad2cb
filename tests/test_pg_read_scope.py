"""A search is one read scope: a PostgreSQL tier catches up once, on its first read.

Inside :func:`read_scope` every read of the tier answers from the generation it
caught up to first (one consistent view for the whole search, one version read);
the next scope, or a read outside any scope, sees every write committed before it.
"""

from __future__ import annotations

from tiervault.brain.brain import Brain
from tiervault.vault.entry import Entry
from tiervault.vault.filters import Filters
from tiervault.vault.manager import Tier, VaultManager
from tiervault.vault.read_scope import current_scope, read_scope


def _zebra(i: int) -> Entry:
    return Entry.create(id=f"z{i}", type="rule", title=f"zebra crossing {i}", description="stripes")


def test_one_generation_per_scope_and_the_next_scope_sees_the_write(pg_tier):
    writer = pg_tier()
    writer.capture(_zebra(0))
    reader = pg_tier(schema=writer.address.schema)
    assert reader.term_stats(["zebra"]).df == (1,)
    with read_scope() as outer:
        assert reader.term_stats(["zebra"]).df == (1,)
        writer.capture(_zebra(1))  # another connection commits mid-scope
        with read_scope() as inner:  # a nested scope joins the outer one
            assert inner is outer and current_scope() is outer
            assert reader.term_stats(["zebra"]).df == (1,)
            hits = reader.lexical_top_k(["zebra"], reader.term_stats(["zebra"]), Filters(), 5)
            assert [h.id for h in hits] == ["z0"]
    assert current_scope() is None
    assert reader.term_stats(["zebra"]).df == (2,)  # outside: caught up at once
    with read_scope():
        assert reader.term_stats(["zebra"]).df == (2,)
        reader.capture(_zebra(2))  # the reader's own write is seen inside its scope
        assert reader.term_stats(["zebra"]).df == (3,)


def test_each_search_sees_writes_committed_before_it(pg_tier):
    writer = pg_tier()
    reader = pg_tier(schema=writer.address.schema)
    brain = Brain(VaultManager([Tier("team", reader.location, 0.6, store=reader)]))
    for i in range(3):
        writer.capture(_zebra(i))
        assert len(brain.search_intelligent("zebra crossing", mode="scan")) == i + 1
        assert sorted(brain.manager.search("zebra", limit=10).ids) == [f"z{j}" for j in range(i + 1)]
