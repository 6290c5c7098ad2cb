"""The storage contract (docs/backend.md), checked against every registered backend:
the protocol, entries, generations, links, memories and feedback, vectors, identity,
read-only tiers, concurrency and bad input. The lexical search and the browsing pages
have files of their own (test_tier_lexical_contract.py, test_tier_browse_contract.py);
the fixtures are tests/tier_contract.py's.

Each test runs once per entry of ``tests/backends.py:BACKENDS``. Nothing here
knows which backend it talks to: only :class:`TierBackend` methods are used.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from tiervault.errors import EntryNotFound, ReadOnlyTier, TierVaultError, ValidationError
from tiervault.vault.backend import TierBackend
from tiervault.vault.filters import Filters
from tiervault.vault.rows import (Changes, CommittedBatch, EmbeddingStatus, FeedbackRow, LightRow, Link,
                                  MemoryHit, MirrorRow, TermStats, VectorHit, VectorRow)

from tier_contract import MODEL, entry, open_tier, terms_of, tier  # fixtures and builders


# -- the protocol itself ------------------------------------------------------------------
def test_backend_implements_every_protocol_member(tier):
    assert isinstance(tier, TierBackend)
    members = [n for n in dir(TierBackend) if not n.startswith("_")]
    missing = [n for n in members if not hasattr(tier, n)]
    assert not missing


def test_a_new_tier_is_empty_and_answers_every_read(tier):
    assert tier.count() == 0 and tier.get("nope") is None and tier.get_many(["a"]) == {}
    assert tier.list_entries() == [] and list(tier.iter_entries()) == []
    assert tier.generation() == 0 and tier.changes_since(-1).rows == []
    stems, words = terms_of("anything")
    assert tier.term_stats(stems) == TermStats(0, 0.0, (0,))
    assert tier.lexical_top_k(stems, TermStats(1, 1.0, (1,)), Filters(), 5, words=words) == []
    assert tier.links_touching(["x"]) == [] and tier.memory_count() == 0
    assert tier.feedback_counts() == {"accepted": 0, "modified": 0, "dismissed": 0, "failed": 0}
    assert tier.vectors_for(MODEL, ["x"]) == {} and tier.vector_search(MODEL, np.ones(4), 3) == []
    stats = tier.stats()
    assert (stats.entries, stats.links, stats.memories) == (0, 0, 0)
    assert tier.integrity_problems() == []


# -- entries ----------------------------------------------------------------------------------
def test_crud_round_trip(tier):
    stored = tier.capture(entry("e1", "Retry with backoff", "Use jitter.", tags=("net", "retry"),
                                type="rule", severity="critical", domain="infra"))
    assert stored.id == "e1" and stored.created_at is not None and stored.content_hash
    assert tier.get("e1") == stored
    assert tier.capture_many([entry("e2"), entry("e3")]) == 2
    assert tier.count() == 3
    assert set(tier.get_many(["e1", "e3", "zz"])) == {"e1", "e3"}
    assert [e.id for e in tier.list_entries()] == ["e1", "e2", "e3"]  # insertion order
    assert [e.id for e in tier.list_entries(offset=1, limit=1)] == ["e2"]
    assert [e.id for e in tier.iter_entries(batch=2)] == ["e1", "e2", "e3"]
    assert [e.id for e in tier.entries_after("e1", 10)] == ["e2", "e3"]
    assert tier.ids_by_hash([stored.content_hash]) == {stored.content_hash: "e1"}
    light = tier.light_rows(["e1", "zz"], snippet_chars=3)
    assert set(light) == {"e1"}
    row = light["e1"]
    assert isinstance(row, LightRow) and row.snippet == "Use" and row.tags == "net retry"
    assert (row.type, row.severity, row.domain) == ("rule", "critical", "infra")
    assert row.chars == len("Retry with backoff") + len("Use jitter.")
    assert tier.delete("e2") is True and tier.delete("e2") is False
    assert tier.get("e2") is None and tier.count() == 2
    tier.capture_many([entry("d1"), entry("d2")])
    gen = tier.generation()
    assert tier.delete_many(["d1", "d2", "zz"]) == 2 and tier.count() == 2
    assert len(tier.changes_since(gen).deleted) == 2 and tier.delete_many([]) == 0


def test_an_update_replaces_the_entry_and_keeps_created_at(tier):
    first = tier.capture(entry("e1", "old title"))
    second = tier.capture(entry("e1", "new title"))
    assert second.title == "new title" and second.created_at == first.created_at
    assert tier.count() == 1


def test_upsert_of_unchanged_entries_writes_nothing(tier):
    batch = [entry(f"e{i}", f"title {i}") for i in range(5)]
    assert tier.capture_many(batch) == 5
    gen = tier.generation()
    assert tier.capture_many(batch) == 0  # same content: skipped, not counted
    assert tier.changes_since(gen).rows == []  # and not rewritten (caches see no churn)
    batch[2] = entry("e2", "title 2 edited")
    assert tier.capture_many(batch) == 1
    assert [r.id for r in tier.changes_since(gen).rows] == ["e2"]


def test_a_repeated_id_in_a_batch_keeps_the_last(tier):
    assert tier.capture_many([entry("e1", "first"), entry("e1", "second")]) == 1
    assert tier.get("e1").title == "second"


def test_batches_report_progress_and_count_changes(tier):
    seen: list[CommittedBatch] = []
    stored_at_callback: list[int] = []

    def on_batch(batch: CommittedBatch) -> None:
        seen.append(batch)
        stored_at_callback.append(len(tier.get_many([e.id for e in batch.entries])))

    data = [entry(f"e{i}") for i in range(7)]
    tier.capture_many(data[:1])
    assert tier.capture_many(iter(data), batch_size=3, on_batch=on_batch) == 6
    assert [b.entries for b in seen] == [data[0:3], data[3:6], data[6:7]]
    assert [(b.written, b.total) for b in seen] == [(2, 2), (3, 5), (1, 6)]  # e0 was unchanged
    assert stored_at_callback == [3, 3, 1]  # each batch is committed before its callback


def test_list_filters_apply_before_the_page(tier):
    tier.capture_many([entry(f"n{i}") for i in range(20)] +
                      [entry(f"r{i}", type="rule") for i in range(3)])
    assert [e.id for e in tier.list_entries(limit=2, filters=Filters(types=("rule",)))] == ["r0", "r1"]
    assert [e.id for e in tier.list_entries(offset=2, limit=5, filters=Filters(types=("rule",)))] == ["r2"]


# -- generations ------------------------------------------------------------------------------
def test_generations_and_changes_since(tier):
    tier.capture_many([entry("e1"), entry("e2")])
    g1 = tier.generation()
    assert g1 > 0
    everything = tier.changes_since(-1)
    assert isinstance(everything, Changes) and everything.generation == g1
    assert [r.id for r in everything.rows] == ["e1", "e2"] and everything.deleted == []
    assert all(isinstance(r, MirrorRow) for r in everything.rows)
    keys = {r.id: r.key for r in everything.rows}
    assert keys["e1"] < keys["e2"]
    tier.capture(entry("e1", "edited"))
    tier.delete("e2")
    later = tier.changes_since(g1)
    assert later.generation == tier.generation() > g1
    assert [(r.id, r.key, r.title) for r in later.rows] == [("e1", keys["e1"], "edited")]  # key kept
    assert later.deleted == [keys["e2"]]
    assert tier.changes_since(later.generation).rows == []


def test_every_write_bumps_the_generation(tier):
    gens = [tier.generation()]
    tier.capture(entry("e1"))
    gens.append(tier.generation())
    tier.capture(entry("e2"))
    gens.append(tier.generation())
    tier.add_memory("a memory")
    gens.append(tier.generation())
    tier.add_feedback("q", "e1", "accepted")
    gens.append(tier.generation())
    assert gens == sorted(gens) and len(set(gens)) == len(gens)


# -- links ------------------------------------------------------------------------------------
def test_links_across_tiers(open_tier):
    agent, team = open_tier("agent"), open_tier("team")
    agent.capture(entry("a1"))
    team.capture(entry("t1"))
    link = agent.link("a1", "t1", "extends", "newer")
    assert isinstance(link, Link) and (link.tier, link.source_id, link.target_id) == ("agent", "a1", "t1")
    agent.link("a1", "t1", "extends", "newer still")  # same triple: the note is updated
    found = agent.links_touching(["t1"])
    assert [(l.source_id, l.target_id, l.link_type, l.note) for l in found] == \
        [("a1", "t1", "extends", "newer still")]
    assert agent.link_count() == 1 and team.links_touching(["a1"]) == []
    with pytest.raises(EntryNotFound):
        agent.link("missing", "t1", "extends")
    with pytest.raises(ValidationError):
        agent.link("a1", "t1", "likes")
    with pytest.raises(ValidationError):
        agent.link("a1", "a1", "extends")
    assert agent.unlink("a1", "t1") == 1 and agent.link_count() == 0


# -- memories and feedback --------------------------------------------------------------------
def test_memories(tier):
    mid = tier.add_memory("Deploy failed on friday", context="rollback", topics=["deploy", "ci"],
                          project="shop")
    tier.add_memory("Unrelated lunch note")
    assert mid.startswith("mem-") and tier.memory_count() == 2
    stems, _ = terms_of("deploy rollback")
    hits = tier.search_memories(stems, 5)
    assert [h.id for h in hits] == [mid]
    assert isinstance(hits[0], MemoryHit) and hits[0].topics == "deploy ci" and hits[0].score > 0
    with pytest.raises(ValidationError):
        tier.add_memory("   ")


def test_feedback_counters_and_rows(tier):
    tier.add_feedback("retry", "e1", "accepted")
    tier.add_feedback("retry", "e1", "accepted")
    tier.add_feedback("cache", "e2", "dismissed")
    assert tier.feedback_counts() == {"accepted": 2, "modified": 0, "dismissed": 1, "failed": 0}
    rows = sorted(tier.feedback_for(["e1"]))
    assert len(rows) == 2 and all(isinstance(r, FeedbackRow) for r in rows)
    assert (rows[0].entry_id, rows[0].query, rows[0].action) == ("e1", "retry", "accepted")
    with pytest.raises(ValidationError):
        tier.add_feedback("q", "e1", "loved")
    assert tier.feedback_counts()["accepted"] == 2  # the refused action counted nothing


# -- vectors ----------------------------------------------------------------------------------
def _unit(v) -> np.ndarray:
    v = np.asarray(v, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_vectors_round_trip_search_and_catch_up(tier):
    tier.capture_many([entry("a", type="rule"), entry("b"), entry("c")])
    vecs = {"a": _unit([1, 0, 0, 0]), "b": _unit([1, 1, 0, 0]), "c": _unit([0, 0, 1, 0])}
    g0 = tier.generation()
    assert tier.put_vectors(MODEL, [VectorRow(i, f"h-{i}", v) for i, v in vecs.items()]) == 3
    assert tier.put_vectors(MODEL, [VectorRow("gone", "h", vecs["a"])]) == 0  # no such entry
    got = tier.vectors_for(MODEL, ["a", "zz"])
    assert set(got) == {"a"} and np.allclose(got["a"], vecs["a"]) and got["a"].dtype == np.float32
    assert tier.vector_input_hashes(MODEL, ["a", "b"]) == {"a": "h-a", "b": "h-b"}
    hits = tier.vector_search(MODEL, _unit([1, 0.1, 0, 0]), 2)
    assert [h.id for h in hits] == ["a", "b"] and isinstance(hits[0], VectorHit)
    assert hits[0].score == pytest.approx(float(vecs["a"] @ _unit([1, 0.1, 0, 0])), rel=1e-5)
    assert [h.id for h in tier.vector_search(MODEL, _unit([0, 1, 0, 0]), 1,
                                             Filters(types=("rule",)))] == ["a"]  # filter before k
    everything = tier.vector_changes_since(MODEL, -1)
    assert sorted(everything.ids) == ["a", "b", "c"] and everything.matrix.shape == (3, 4)
    assert tier.vector_changes_since(MODEL, g0).ids != []
    g1 = tier.generation()
    tier.delete("c")
    later = tier.vector_changes_since(MODEL, g1)
    assert later.ids == [] and later.deleted == ["c"]
    assert tier.vector_changes_since("other:model", -1).ids == []


def test_embedding_states(tier):
    tier.capture_many([entry("a"), entry("b"), entry("c")])
    tier.mark_embedding(MODEL, [("a", "h1"), ("b", "h2")], "pending")
    tier.mark_embedding(MODEL, [("b", "h2")], "error", "provider down")
    tier.mark_embedding(MODEL, [("b", "h2")], "error", "provider down again")
    status = tier.embedding_status(MODEL, ["a", "b", "c"])
    assert status["a"] == EmbeddingStatus("pending", "", 0)
    assert status["b"].state == "error" and status["b"].retries == 2 and "again" in status["b"].error
    assert "c" not in status
    assert tier.embedding_counts(MODEL) == {"pending": 1, "ok": 0, "error": 1, "missing": 1}
    tier.put_vectors(MODEL, [VectorRow("a", "h1", _unit([1, 2, 3, 4]))])
    assert tier.embedding_status(MODEL, ["a"])["a"].state == "ok"
    assert [e.id for e in tier.embedding_backlog(MODEL, 10)] == ["b", "c"]
    assert [e.id for e in tier.embedding_backlog(MODEL, 10, after="b")] == ["c"]
    with pytest.raises(ValidationError):
        tier.mark_embedding(MODEL, [("a", "h")], "sleeping")


# -- identity, read-only, concurrency, bad input --------------------------------------------
def test_identity_and_stats(open_tier):
    tier = open_tier("agent")
    tier.capture(entry("a"))
    uid = tier.uid()
    assert uid and open_tier("agent").uid() == uid  # stable, and the same from another handle
    team = open_tier("team")
    team.capture(entry("t"))
    assert team.uid() != uid
    stats = tier.stats()
    assert (stats.entries, stats.exists, stats.location) == (1, True, tier.location)


def test_read_only_refuses_writes_and_reads(open_tier):
    writer = open_tier("agent")
    writer.capture(entry("a"))
    reader = open_tier("agent", read_only=True)
    assert reader.read_only and reader.get("a") is not None
    for write in (lambda: reader.capture(entry("b")), lambda: reader.delete("a"),
                  lambda: reader.add_memory("m"), lambda: reader.add_feedback("q", "a", "accepted"),
                  lambda: reader.put_vectors(MODEL, [VectorRow("a", "h", _unit([1, 0]))])):
        with pytest.raises(ReadOnlyTier):
            write()
    assert writer.count() == 1


def test_concurrent_writers_lose_nothing(open_tier):
    handles = [open_tier("agent") for _ in range(3)]
    handles[0].capture(entry("seed"))
    errors: list[BaseException] = []

    def write(h: TierBackend, w: int) -> None:
        try:
            for b in range(5):
                h.capture_many([entry(f"w{w}-{b}-{i}", f"writer {w}") for i in range(20)])
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(h, w)) for w, h in enumerate(handles)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert all(h.count() == 301 for h in handles)
    assert len({e.id for e in handles[1].iter_entries()}) == 301
    # Every handle's mirror caught up with the others' writes.
    stems, _ = terms_of("writer")
    assert handles[2].term_stats(stems).df == (300,)


@pytest.mark.parametrize("bad", ["\ud800", "x" * 100_000, "", "a' OR 1=1 --", "\x00"])
def test_bad_ids_are_answered_or_refused_cleanly(tier, bad):
    tier.capture(entry("a"))
    reads = {"get": (lambda: tier.get(bad), None),
             "get_many": (lambda: tier.get_many([bad]), {}),
             "light_rows": (lambda: tier.light_rows([bad]), {}),
             "links_touching": (lambda: tier.links_touching([bad]), [])}
    for name, (read, empty) in reads.items():
        # Each read either answers "nothing" or refuses with a ValidationError
        # saying what was wrong; anything else (a driver error, a hit) fails.
        try:
            assert read() == empty, name
        except ValidationError as exc:
            assert "value" in str(exc).lower() or "id" in str(exc).lower(), (name, str(exc))
    assert tier.count() == 1


def test_bad_writes_raise_tiervault_errors(tier):
    tier.capture(entry("a"))
    for bad in (lambda: tier.link("a", "\ud800", "extends"),
                lambda: tier.add_memory("\ud800 summary"),
                lambda: tier.add_feedback("q", "", "accepted"),
                lambda: tier.mark_embedding(MODEL, [("a", "h")], "bogus")):
        with pytest.raises(TierVaultError):
            bad()
    assert tier.count() == 1 and tier.link_count() == 0


