"""The federated search reads ids, hashes and TF-IDF of the hits it keeps only
(the optional ``lexical_top_k_slots`` of a tier with an in-process mirror,
vault/mirror_search.py; ``dedup.kept_of_tops``): the same answer as making every tier's
top-k hits first, with copies of an entry in several tiers, equal tier weights (ties
across tiers), filters and limits. Real SQLite tier files, and every registered
backend (a PostgreSQL server started by the tests, a remote tier's real server)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from tiervault.vault import dedup
from tiervault.vault.entry import Entry
from tiervault.vault.filters import Filters
from tiervault.vault.manager import Tier, VaultManager
from tiervault.vault.string_table import StringColumn

from tier_contract import open_tier  # noqa: F401  (a fixture: a tier of each registered backend)

TIERS = ("agent", "project", "team")
WORDS = ["retry", "backoff", "jitter", "cache", "pool", "timeout", "index", "shard"]


def _answer(c) -> tuple:
    return (c.ids, c.tiers, c.also_in, c.hashes, c.lexical.tolist(), c.tier_weight.tolist(),
            c.tfidf.tolist(), c.matched)


class WithoutSlots:
    """A tier's store without the optional ``lexical_top_k_slots``: the federated search
    asks it for its top-k hits, every one made (the contract's ``lexical_top_k``, as a
    remote tier)."""

    def __init__(self, store) -> None:
        self.store = store

    def __getattr__(self, name: str):
        if name == "lexical_top_k_slots":
            raise AttributeError(name)
        return getattr(self.store, name)


def _fill(m: VaultManager) -> None:
    """Each tier's own entries, copies of shared ones (same id, same content under
    another id, an expired copy)."""
    rng = random.Random(7)
    shared = [Entry.create(id=f"s{i}", title=" ".join(rng.choices(WORDS, k=3)),
                           description=" ".join(rng.choices(WORDS, k=6))) for i in range(40)]
    for t in TIERS:
        own = [Entry.create(id=f"{t}{i}", title=" ".join(rng.choices(WORDS, k=3)),
                            description=" ".join(rng.choices(WORDS, k=6)),
                            type=rng.choice(["pattern", "rule"])) for i in range(120)]
        # the same ids in every tier (some with other content), the same content under
        # another id, and an expired copy
        copies = [e if rng.random() < 0.5 else Entry.create(id=e.id, title=" ".join(rng.choices(WORDS, k=3)),
                                                               description=e.description)
                  for e in shared[:30]]
        moved = [Entry.create(id=f"{t}-m{i}", title=e.title, description=e.description, type=e.type)
                 for i, e in enumerate(shared[30:])]
        expired = [Entry.create(id=f"{t}-x", title=shared[0].title, description=shared[0].description,
                                valid_until=1.0)]
        m.capture_many(own + copies + moved + expired, t)


@pytest.fixture
def paths(tmp_path):
    paths = {t: str(tmp_path / f"{t}.db") for t in TIERS}
    with VaultManager.at(paths) as m:
        _fill(m)
    return paths


@pytest.mark.parametrize("weights", [None, {"agent": 1.0, "project": 1.0, "team": 1.0},
                                     {"agent": 0.5, "project": 0.9, "team": 0.9}])
def test_the_lazy_top_k_answers_as_every_hit_made(paths, weights):
    lazy, full = VaultManager.at(paths, weights), VaultManager.at(paths, weights)
    for tier in full.tiers.values():
        tier.store = WithoutSlots(tier.store)
    try:
        _same_answers(lazy, full, 60)
    finally:
        lazy.close()
        for tier in full.tiers.values():
            tier.store.store.close()


def _same_answers(lazy: VaultManager, full: VaultManager, n_queries: int) -> None:
    rng = random.Random(3)
    seen_copies = 0
    for n in range(n_queries):
        text = " ".join(rng.choices(WORDS, k=rng.randint(1, 3)))
        limit = rng.choice([1, 3, 5, 10, 30, 200])
        filters = rng.choice([None, Filters.build(type="pattern"), Filters.build(now=5.0)])
        tiers = rng.choice([None, None, ["agent", "team"]])
        a = lazy.search(text, limit=limit, filters=filters, tiers=tiers)
        b = full.search(text, limit=limit, filters=filters, tiers=tiers)
        assert _answer(a) == _answer(b), (n, text, limit, filters, tiers)
        seen_copies += sum(1 for x in a.also_in if x)
    assert seen_copies > 20


def test_every_backend_with_a_mirror_answers_lazily_as_every_hit_made(open_tier, monkeypatch):
    """SQLite and PostgreSQL tiers keep an in-process mirror and offer
    ``lexical_top_k_slots``; a remote tier does not (its server scores). The federated
    answer is the same either way, with every backend."""
    stores = {t: open_tier(t) for t in TIERS}
    weights = {"agent": 0.5, "project": 0.9, "team": 0.9}  # ties across two tiers
    lazy = VaultManager([Tier(t, s.location, weights[t], store=s) for t, s in stores.items()])
    _fill(lazy)
    kinds = {type(s).__name__ for s in stores.values()}
    has = {hasattr(s, "lexical_top_k_slots") for s in stores.values()}
    assert has == ({False} if kinds == {"RemoteTier"} else {True}), kinds
    full = VaultManager([Tier(t, s.location, weights[t], store=WithoutSlots(s)) for t, s in stores.items()])
    lazy.search("retry", limit=5)  # the dedup's index is computed once the builds are seen twice
    lazy.search("retry", limit=5)
    eager: list[int] = []  # searches that made every hit (dedup.kept): none with the capability
    real = dedup.kept
    monkeypatch.setattr(dedup, "kept", lambda *a, **k: eager.append(1) or real(*a, **k))
    lazy.search("retry cache", limit=5)
    assert len(eager) == (1 if kinds == {"RemoteTier"} else 0), kinds
    _same_answers(lazy, full, 30)


def test_only_the_kept_hits_are_read(tmp_path, monkeypatch):
    """Three tiers of 60 matches each, a top 5: after the dedup's index is ready, the
    search reads the ids of the 5 hits it keeps, not of each tier's top 5 (15)."""
    paths = {t: str(tmp_path / f"{t}.db") for t in TIERS}
    with VaultManager.at(paths) as m:
        for t in TIERS:
            m.capture_many([Entry.create(id=f"{t}{i}", title=f"alpha {'bravo ' * (i % 7)}{t}",
                                         description=f"words {i}") for i in range(60)], t)
        m.search("alpha bravo", limit=5)
        m.search("alpha bravo", limit=5)  # the index is computed once the builds are seen twice
        read: list[int] = []
        real = StringColumn.take_distinct

        def spy(self, slots):
            read.append(int(np.asarray(slots).size))
            return real(self, slots)
        monkeypatch.setattr(StringColumn, "take_distinct", spy)
        c = m.search("alpha bravo", limit=5)
    assert len(c) == 5 and sum(read) == 5, read
