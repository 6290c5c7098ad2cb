"""The dedup's index of the ids and hashes held by more than one tier (vault/shared_keys.py):
a federated search answers the same with it as without it (every tier asked about every
other tier's hits), through writes in the tiers, copies of an entry in two or three
tiers under the same id or the same content, deletes, updates, another process's
writes, rebuilt mirrors, reopened tiers, a tier left out. Real SQLite tier files."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tiervault.vault import dedup
from tiervault.vault.entry import Entry
from tiervault.vault.filters import Filters
from tiervault.vault.manager import VaultManager
from tiervault.vault.rows import LexicalHit
from tiervault.vault.shared_keys import SharedKeys
from tiervault.vault.store import TierStore

TIERS = ("agent", "project", "team")
WORDS = ["retry", "backoff", "jitter", "cache", "pool", "timeout", "index", "shard", "queue",
         "lock", "token", "schema", "vacuum", "replica", "cursor", "batch"]
TYPES = ["pattern", "rule", "decision"]


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _entry(rng: random.Random, eid: str, title: str | None = None, description: str | None = None,
           type_: str | None = None) -> Entry:
    return Entry.create(id=eid, title=title or _text(rng, 4), description=description or _text(rng, 8),
                        type=type_ or rng.choice(TYPES))


def _ready(index: SharedKeys, columns) -> dict:
    """The index's sets for ``columns`` (computed once it saw the same builds twice)."""
    for _ in range(3):
        shared = index.shared(columns, index.before())
        if shared is not None:
            return shared
    raise AssertionError("the index never answered")


def _answer(c) -> tuple:
    return (c.ids, c.tiers, c.also_in, c.hashes, c.lexical.tolist(), c.tier_weight.tolist(),
            c.tfidf.tolist())


class Walk:
    """Two managers over the same tier files (with and without the index) and a third
    set of handles writing as another process would."""

    def __init__(self, folder: Path, seed: int) -> None:
        self.rng = random.Random(seed)
        self.paths = {t: str(folder / f"{t}.db") for t in TIERS}
        self.other = {t: TierStore(p, name=t) for t, p in self.paths.items()}  # "another process"
        self.fast = VaultManager.at(self.paths)
        self.full = VaultManager.at(self.paths)
        self.full.shared_keys = None
        self.held: dict[str, dict[str, Entry]] = {t: {} for t in TIERS}
        self.n = 0
        self.copies_seen = 0

    def close(self) -> None:
        for m in (self.fast, self.full):
            m.close()
        for s in self.other.values():
            s.close()

    def new_id(self) -> str:
        self.n += 1
        return f"e{self.n}"

    def write(self, tier: str, entries: list[Entry]) -> None:
        # through the index's own manager, the other one, or another handle
        writer = self.rng.choice(["fast", "full", "other"])
        if writer == "other":
            self.other[tier].capture_many(entries)
        else:
            getattr(self, writer).capture_many(entries, tier)
        for e in entries:
            self.held[tier][e.id] = e

    def delete(self, tier: str, eid: str) -> None:
        writer = self.rng.choice(["fast", "other"])
        if writer == "other":
            self.other[tier].delete(eid)
        else:
            self.fast.delete(eid, tier)
        self.held[tier].pop(eid, None)

    def step(self) -> None:
        rng = self.rng
        op = rng.choices(["new", "same_id", "same_content", "update", "delete", "bulk", "reopen"],
                         [4, 3, 3, 2, 2, 1, 1])[0]
        tier = rng.choice(TIERS)
        others = [t for t in TIERS if t != tier]
        if op == "new":
            self.write(tier, [_entry(rng, self.new_id()) for _ in range(rng.randint(1, 5))])
        elif op in ("same_id", "same_content"):
            src = rng.choice(others)
            if self.held[src]:
                e = self.held[src][rng.choice(sorted(self.held[src]))]
                eid = e.id if op == "same_id" else self.new_id()
                same = rng.random() < 0.6  # a copy under the same id may differ in content
                self.write(tier, [_entry(rng, eid, e.title if same or op == "same_content" else None,
                                         e.description if same or op == "same_content" else None,
                                         e.type)])
        elif op == "update" and self.held[tier]:
            eid = rng.choice(sorted(self.held[tier]))
            self.write(tier, [_entry(rng, eid)])
        elif op == "delete" and self.held[tier]:
            self.delete(tier, rng.choice(sorted(self.held[tier])))
        elif op == "bulk":  # past the delta's 5% / 256 rows: that tier's mirror is rebuilt
            self.write(tier, [_entry(rng, self.new_id()) for _ in range(300)])
        elif op == "reopen":  # a new manager: new mirrors (loaded from their cache files)
            self.fast.close()
            self.fast = VaultManager.at(self.paths)

    def compare(self, queries: int = 3) -> None:
        rng = self.rng
        for _ in range(queries):
            text = _text(rng, rng.randint(1, 3))
            limit = rng.choice([5, 10, 30])
            filters = rng.choice([None, None, Filters.build(type=rng.choice(TYPES))])
            tiers = rng.choice([None, None, None, ["agent", "team"]])
            a = self.fast.search(text, limit=limit, filters=filters, tiers=tiers)
            b = self.full.search(text, limit=limit, filters=filters, tiers=tiers)
            assert _answer(a) == _answer(b), (text, limit, filters, tiers)
            self.copies_seen += sum(1 for x in a.also_in if x)
        self.check_superset()

    def check_superset(self) -> None:
        """The index's sets hold every live id and hash that two tiers hold (a superset)."""
        index = self.fast.shared_keys
        columns = {t: self.fast.tiers[t].store.key_columns() for t in TIERS}
        shared = _ready(index, columns)  # (the last search's tiers may differ)
        for t in TIERS:
            ids = set(self.held[t])
            hashes = {e.content_hash for e in self.held[t].values()}
            for u in TIERS:
                if u == t:
                    continue
                other = set(self.held[u])
                other_hashes = {e.content_hash for e in self.held[u].values()}
                assert ids & other <= shared[t][0], (t, u)
                assert hashes & other_hashes <= shared[t][1], (t, u)
            # every slot of the tier's mirror holding one of its shared ids or hashes is in
            # its slots (the lazy dedup reads no id or hash of a hit at another slot)
            p = self.fast.tiers[t].store.postings()
            every = np.arange(min(len(p.ids), len(p.hashes)))
            holding = {s for s, i, h in zip(every.tolist(), p.ids.take(every), p.hashes.take(every))
                       if i in shared[t][0] or h in shared[t][1]}
            assert holding <= shared.slots[t], t


def _filled(walk: "Walk", rng: random.Random) -> dict:
    """50 entries written in each tier; each tier's store of ``walk``'s indexed manager."""
    for tier in TIERS:
        walk.write(tier, [_entry(rng, f"{tier}-{i}") for i in range(50)])
    return {t: walk.fast.tiers[t].store for t in TIERS}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_random_walk_answers_as_asking_every_tier(tmp_path, seed):
    walk = Walk(tmp_path, seed)
    try:
        rng = walk.rng
        # project and team past SMALL_TIER_ROWS: their writes go to the mirror's delta
        # (slots appended, the index grown); agent below it: rebuilt on every write
        for tier, n in (("agent", 150), ("project", 1100), ("team", 1200)):
            walk.write(tier, [_entry(rng, walk.new_id()) for _ in range(n)])
        for tier in ("project", "team"):  # copies across tiers before the first search
            src = walk.held["agent"] if tier == "project" else walk.held["project"]
            picks = [src[k] for k in sorted(src)[:40]]
            walk.write(tier, [_entry(rng, e.id if i % 2 else walk.new_id(), e.title, e.description, e.type)
                              for i, e in enumerate(picks)])
        walk.compare(5)
        for _ in range(70):
            walk.step()
            walk.compare()
        assert walk.copies_seen > 20  # the walk made copies that the searches found
    finally:
        walk.close()


def test_the_index_is_used_and_follows_appended_slots(tmp_path):
    """After the first search the look-ups ask no tier about a hit only its own tier
    holds; a copy written later (in the delta) is asked about and found."""
    rng = random.Random(5)
    walk = Walk(tmp_path, 5)
    try:
        for tier, n in (("agent", 1050), ("project", 1050), ("team", 1050)):
            walk.write(tier, [_entry(rng, f"{tier}-{i}", f"alpha {tier} n{i}x", "bravo words") for i in range(n)])
        asked: list[str] = []
        for t in TIERS:
            store = walk.fast.store(t)
            real = store.lexical_scores

            def spy(*a, _t=t, _real=real, **kw):
                asked.append(_t)
                return _real(*a, **kw)
            store.lexical_scores = spy
        walk.fast.search("alpha bravo")  # the first two searches: every tier asked (the index
        walk.fast.search("alpha bravo")  # computed once the same builds were seen twice)
        asked.clear()
        first = walk.fast.search("alpha bravo")
        assert asked == [] and not any(first.also_in)
        walk.other["team"].capture(Entry.create(id="agent-3", title="other words", description="here"))
        c = walk.fast.search("alpha n3x")
        assert asked == ["team"]  # the new copy (not in team's top k) is asked about
        assert c.also_in[c.ids.index("agent-3")] == ("team",)
        assert _answer(c) == _answer(walk.full.search("alpha n3x"))
    finally:
        walk.close()


def test_holders_ask_everything_of_a_tier_outside_the_index(tmp_path):
    """A tier without key columns (a remote tier): its hits are asked of every other
    tier and it is asked about every other tier's hits; the same answer as no index."""
    rng = random.Random(11)
    walk = Walk(tmp_path, 11)
    try:
        for tier in TIERS:
            walk.write(tier, [_entry(rng, walk.new_id()) for _ in range(60)])
        for tier, src in (("team", "agent"), ("project", "team"), ("agent", "project")):
            picks = [walk.held[src][k] for k in sorted(walk.held[src])[:15]]
            walk.write(tier, [_entry(rng, e.id if i % 2 else walk.new_id(), e.title, e.description, e.type)
                              for i, e in enumerate(picks)])
        chosen = [walk.fast.tiers[t] for t in TIERS]
        columns = {t.name: t.store.key_columns() for t in chosen}

        def each(tiers, read):
            return [(t, read(t.store)) for t in tiers]
        tried = 0
        for _ in range(40):
            text = _text(rng, 2)
            lq = walk.fast.lexical_query(text, None)
            hits = [(t.name, h) for t in chosen
                    for h in t.store.lexical_top_k(lq.stems, lq.stats, Filters(), 30, words=lq.words)]
            want = dedup.holders(each, chosen, hits, lq.stems, lq.stats, Filters())
            for left_out in TIERS:
                index = SharedKeys()
                part = {n: c for n, c in columns.items() if n != left_out}
                shared = _ready(index, part)
                assert set(shared) == set(part)
                assert dedup.holders(each, chosen, hits, lq.stems, lq.stats, Filters(), shared) == want
                tried += any(h.id in shared[n][0] for n in shared for _, h in hits)
        assert tried  # some pooled id was held by two indexed tiers
    finally:
        walk.close()


def test_a_rebuild_between_the_top_k_and_the_look_ups_asks_everything(tmp_path):
    """The sets are used only when every tier's build is the one the index had before
    the search's top k (a hit may come from a mirror since rebuilt)."""
    rng = random.Random(3)
    walk = Walk(tmp_path, 3)
    try:
        for tier in TIERS:
            walk.write(tier, [_entry(rng, walk.new_id()) for _ in range(50)])
        stores = {t: walk.fast.tiers[t].store for t in TIERS}
        index = SharedKeys()
        assert index.before() == {}
        cols = {t: s.key_columns() for t, s in stores.items()}
        assert index.shared(cols, index.before()) is None and index.before() == {}  # not computed
        assert index.shared(cols, index.before()) is None  # computed (these builds seen twice)
        before = index.before()
        assert before == {frozenset(TIERS): {t: c.build for t, c in cols.items()}}
        assert index.shared(cols, before) is not None
        walk.other["agent"].capture(_entry(rng, "late"))  # agent is small: its mirror is rebuilt
        cols2 = {t: s.key_columns() for t, s in stores.items()}
        assert cols2["agent"].build != cols["agent"].build
        assert index.shared(cols2, before) is None  # built under the old build: not used
        assert _ready(index, cols2) is not None
    finally:
        walk.close()


def test_a_rebuilt_mirror_is_indexed_again(tmp_path):
    """A small tier's mirror is rebuilt on every write (slots renumbered, fewer of them
    after deletes): the index is computed again, the new copy in it."""
    rng = random.Random(6)
    walk = Walk(tmp_path, 6)
    try:
        stores = _filled(walk, rng)
        index = SharedKeys()
        assert _ready(index, {t: s.key_columns() for t, s in stores.items()}) == {
            t: (frozenset(), frozenset()) for t in TIERS}
        for i in range(5):
            walk.other["agent"].delete(f"agent-{i}")
        copy = walk.other["team"].get("team-7")
        walk.other["agent"].capture(Entry.create(id="team-7", title=copy.title, description=copy.description,
                                                 type=copy.type))
        walk.other["agent"].capture(Entry.create(id="agent-copy", title=copy.title,
                                                 description=copy.description, type=copy.type))
        columns = {t: s.key_columns() for t, s in stores.items()}
        assert columns["agent"].slots < 50  # renumbered: the copies are not past the old count
        assert index.shared(columns, index.before()) is None  # the build changed since the index was read
        shared = _ready(index, columns)
        assert shared["agent"][0] == {"team-7"} == shared["team"][0] and shared["project"][0] == set()
        assert shared["agent"][1] == {copy.content_hash} == shared["team"][1]
    finally:
        walk.close()


def test_key_columns_hold_every_slot_of_a_build(tmp_path):
    store = TierStore(tmp_path / "t.db", name="team")
    try:
        rng = random.Random(8)
        store.capture_many([_entry(rng, f"k{i}") for i in range(1100)])
        c = store.key_columns()
        assert c.slots == 1100 and c.ids.take(list(range(c.slots))) == [f"k{i}" for i in range(1100)]
        old_hash = store.get("k5").content_hash
        store.capture(_entry(rng, "k5"))  # an update: a new slot, the old one stays (dead)
        store.delete("k6")
        d = store.key_columns()
        assert d.build == c.build and d.slots == 1101
        assert d.ids.take([5, 6, 1100]) == ["k5", "k6", "k5"]
        assert d.hashes.take([5]) == [old_hash]
        assert d.hashes.take([1100]) == [store.get("k5").content_hash]
    finally:
        store.close()


def test_hits_of_the_same_tier_are_never_asked(tmp_path):
    """A pool of one tier's hits only: no tier is asked about anything."""
    rng = random.Random(4)
    walk = Walk(tmp_path, 4)
    try:
        walk.write("agent", [_entry(rng, walk.new_id()) for _ in range(30)])
        chosen = [walk.fast.tiers[t] for t in TIERS]
        columns = {t.name: t.store.key_columns() for t in chosen}
        index = SharedKeys()
        shared = _ready(index, columns)
        calls: list[str] = []

        def each(tiers, read):
            calls.extend(t.name for t in tiers)
            return [(t, read(t.store)) for t in tiers]
        hits = [("agent", LexicalHit(e.id, e.content_hash, 1.0, 0.0, True))
                for e in list(walk.held["agent"].values())[:10]]
        by_id, by_hash = dedup.holders(each, chosen, hits, [], None, Filters(), shared)
        assert calls == [] and set(by_id["agent"]) == {h.id for _, h in hits}
        assert by_id["team"] == {} and by_hash["project"] == {}
    finally:
        walk.close()


def test_kept_equals_holders_then_keep(tmp_path):
    """dedup.kept with the index (simple hits kept as they are, the others walked) gives
    keep's rows over holders' answer without it, also with hits failing the filters."""
    rng = random.Random(21)
    walk = Walk(tmp_path, 21)
    try:
        for tier in TIERS:
            walk.write(tier, [_entry(rng, walk.new_id()) for _ in range(80)])
        for tier, src in (("team", "agent"), ("project", "team"), ("agent", "project"), ("team", "project")):
            picks = [walk.held[src][k] for k in sorted(walk.held[src])[:20]]
            walk.write(tier, [_entry(rng, e.id if i % 2 else walk.new_id(), e.title, e.description, e.type)
                              for i, e in enumerate(picks)])
        chosen = [walk.fast.tiers[t] for t in TIERS]
        index = SharedKeys()
        columns = {t.name: t.store.key_columns() for t in chosen}
        shared = _ready(index, columns)

        def each(tiers, read):
            return [(t, read(t.store)) for t in tiers]
        walked = 0
        for _ in range(60):
            text = _text(rng, rng.randint(1, 3))
            lq = walk.fast.lexical_query(text, None)
            pool = []
            for rank, t in enumerate(chosen):
                for h in t.store.lexical_top_k(lq.stems, lq.stats, Filters(), 30, words=lq.words):
                    if rng.random() < 0.15:
                        h = LexicalHit(h.id, h.content_hash, h.score, h.tfidf, False)
                    pool.append(dedup.Pooled(-h.score * t.weight, rank, t.name, h))
            limit = rng.choice([None, 5, 30])
            by_id, by_hash = dedup.holders(each, chosen, [(p.tier, p.hit) for p in pool], lq.stems,
                                           lq.stats, Filters())
            want = dedup.keep(pool, chosen, by_id, by_hash, walk.fast.tiers, limit)
            got = dedup.kept(each, chosen, pool, lq.stems, lq.stats, Filters(), shared, walk.fast.tiers, limit)
            assert got == want, text
            walked += any(p.hit.id in shared.ids or p.hit.content_hash in shared.hashes for p in pool)
            alone = [p for p in pool if p.hit.id not in shared.ids and p.hit.content_hash not in shared.hashes]
            by_id, by_hash = dedup.holders(each, chosen, [(p.tier, p.hit) for p in alone], lq.stems,
                                           lq.stats, Filters())
            assert dedup.kept(each, chosen, alone, lq.stems, lq.stats, Filters(), shared, walk.fast.tiers,
                              limit) == dedup.keep(alone, chosen, by_id, by_hash, walk.fast.tiers, limit)
        assert walked > 10
    finally:
        walk.close()


def test_a_copy_written_by_another_process_is_found(tmp_path):
    """A real second process appends a copy to a tier (its mirror here catches up: slots
    appended, the index grown): the next search asks that tier and lists the copy."""
    rng = random.Random(9)
    walk = Walk(tmp_path, 9)
    try:
        for tier in TIERS:
            walk.write(tier, [_entry(rng, f"{tier}-{i}", f"alpha {tier} n{i}x", "bravo words")
                              for i in range(1050)])
        for _ in range(3):  # the index computed once the same builds were seen twice
            walk.fast.search("alpha bravo")
        code = ("import sys; from tiervault.vault.store import TierStore; "
                "from tiervault.vault.entry import Entry; s = TierStore(sys.argv[1], name='team'); "
                "s.capture(Entry.create(id='project-7', title='other words', description='here')); s.close()")
        before = walk.fast.search("alpha n7x")
        assert before.also_in[before.ids.index("project-7")] == ()
        subprocess.run([sys.executable, "-c", code, walk.paths["team"]], check=True, timeout=120)
        c = walk.fast.search("alpha n7x")
        assert c.also_in[c.ids.index("project-7")] == ("team",)  # team's new copy (not in its top k)
        assert _answer(c) == _answer(walk.full.search("alpha n7x"))
    finally:
        walk.close()


def test_a_small_rebuilt_tier_is_indexed_by_look_ups_not_every_column(tmp_path, monkeypatch):
    """A small tier's mirror is rebuilt on every write: its strings are looked up in the
    other tiers (the full computation over every column is not run again), the new copy
    is found, and a rebuilt tier past REINDEX_SLOTS and 1/LOOKUP_COST of all slots takes the
    full computation."""
    from tiervault.vault import shared_keys

    rng = random.Random(8)
    walk = Walk(tmp_path, 8)
    try:
        stores = _filled(walk, rng)
        index = SharedKeys()
        _ready(index, {t: s.key_columns() for t, s in stores.items()})
        copy = walk.other["team"].get("team-3")
        walk.other["agent"].capture(Entry.create(id="team-3", title="other words", description="here",
                                                 type=copy.type))
        walk.other["project"].capture(Entry.create(id="project-copy", title=copy.title,
                                                   description=copy.description, type=copy.type))
        before = index.before()
        columns = {t: s.key_columns() for t, s in stores.items()}
        assert columns["agent"].build != before[frozenset(TIERS)]["agent"]  # rebuilt: a small tier
        assert index.shared(columns, index.before()) is None  # this search's top k saw the old build
        # indexed at once by look-ups (the full computation waits for the builds seen twice)
        assert index.before() == {frozenset(TIERS): {t: c.build for t, c in columns.items()}}
        shared = index.shared(columns, index.before())
        assert shared["agent"][0] == {"team-3"} and "team-3" in shared["team"][0]
        assert shared["project"][1] == {copy.content_hash} and copy.content_hash in shared["team"][1]
        # past the bound: every column again
        monkeypatch.setattr(shared_keys, "REINDEX_SLOTS", 0)
        walk.other["agent"].delete("team-3")
        columns = {t: s.key_columns() for t, s in stores.items()}
        assert index.shared(columns, index.before()) is None
        assert index.before() == {}  # every column read again, once seen twice
        shared = _ready(index, columns)
        assert shared["agent"][0] == set() and "team-3" not in shared["team"][0]
    finally:
        walk.close()


def test_alternating_tier_sets_keep_their_indexes(tmp_path):
    """A search naming a subset of the tiers has its own index: alternating two sets
    answers from both, without computing either again; past KEEP_SETS sets the least
    recently used one is dropped."""
    from tiervault.vault.shared_keys import KEEP_SETS

    rng = random.Random(9)
    walk = Walk(tmp_path, 9)
    try:
        for tier in TIERS:
            walk.write(tier, [_entry(rng, f"{tier}-{i}") for i in range(30)])
        copy = walk.other["team"].get("team-1")
        walk.other["agent"].capture(Entry.create(id="team-1", title=copy.title, description=copy.description,
                                                 type=copy.type))
        stores = {t: walk.fast.tiers[t].store for t in TIERS}
        index = SharedKeys()
        sets = [TIERS, ("agent", "team")]
        for names in sets:
            _ready(index, {t: stores[t].key_columns() for t in names})
        for _ in range(3):  # alternating: each answers at once from its own sets
            for names in sets:
                shared = index.shared({t: stores[t].key_columns() for t in names}, index.before())
                assert shared is not None and set(shared) == set(names)
                assert shared["agent"][0] == {"team-1"} == shared["team"][0]
        for names in [("agent", "project"), ("project", "team"), ("agent",), ("team",)][:KEEP_SETS]:
            _ready(index, {t: stores[t].key_columns() for t in names})
        assert len(index.before()) == KEEP_SETS and frozenset(TIERS) not in index.before()
    finally:
        walk.close()
