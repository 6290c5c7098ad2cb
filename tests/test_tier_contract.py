"""The storage contract (docs/backend.md), checked against every registered backend.

Each test runs once per entry of ``tests/backends.py:BACKENDS``. Nothing here
knows which backend it talks to: only :class:`TierBackend` methods are used.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pytest

from backends import BACKENDS
from tiervault.errors import EntryNotFound, ReadOnlyTier, TierVaultError, ValidationError
from tiervault.vault.backend import TierBackend
from tiervault.vault.entry import Entry
from tiervault.vault.filters import Filters
from tiervault.vault.rows import (Changes, CommittedBatch, EmbeddingStatus, FeedbackRow, LexicalHit, LightRow, Link,
                                  MemoryHit, MirrorRow, TermStats, VectorHit, VectorRow)
from tiervault.vault.scoring import B, K1
from tiervault.vault.tokenizer import STEMMER, split_words

Opener = Callable[..., TierBackend]
MODEL = "test:model-4"
EVERYTHING = Filters(include_expired=True, include_future=True)
# The definition of the lexical score (docs/backend.md): FTS column -> weight.
WEIGHTS = {"id": 5.0, "title": 10.0, "description": 3.0, "context": 1.0, "tags": 2.0}


@pytest.fixture(params=sorted(BACKENDS))
def open_tier(request, tmp_path: Path) -> Iterator[Opener]:
    """open_tier(name="agent", read_only=False): a handle on tier ``name`` of this test."""
    factory = BACKENDS[request.param]

    def opener(name: str = "agent", read_only: bool = False) -> TierBackend:
        backend = factory(request, tmp_path, name=name, read_only=read_only)
        # Registered after the factory's own clean-up: runs before it (LIFO).
        request.addfinalizer(backend.close)
        return backend

    yield opener


@pytest.fixture
def tier(open_tier: Opener) -> TierBackend:
    return open_tier("agent")


def entry(eid: str, title: str = "a title", description: str = "some text", **kw) -> Entry:
    return Entry.create(id=eid, title=title, description=description, **kw)


def terms_of(text: str) -> tuple[list[str], list[str]]:
    """(stems, words) of a query, as VaultManager makes them."""
    words = split_words(text)
    stem = STEMMER.stems(words)
    return list(dict.fromkeys(stem[w] for w in words if stem[w])), words


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


# -- lexical search ---------------------------------------------------------------------------
CORPUS = [
    dict(id="retry-policy", title="Retry policy for flaky networks",
         description="Retry idempotent calls with exponential backoff and jitter.",
         context="payments service", tags=("retry", "network")),
    dict(id="db-index", title="Index foreign keys",
         description="Every foreign key needs an index or deletes lock the table.",
         context="postgres", tags=("database",)),
    dict(id="retry-storm", title="Avoid retry storms",
         description="Unbounded retries amplify an outage; cap retries and add a circuit breaker.",
         context="network incidents", tags=("retry", "resilience"), type="anti-pattern"),
    dict(id="cache-ttl", title="Short TTL for volatile data",
         description="Cache entries of volatile data expire quickly; retry reads on a miss.",
         context="cache", tags=("cache",)),
    dict(id="log-ids", title="Log request ids",
         description="Every log line carries the request id so one request can be followed.",
         context="observability network", tags=("logging",)),
]


def _columns(fields: dict) -> dict[str, list[str]]:
    """FTS column -> its terms (stems), as the tokenizer defines them."""
    texts = {"id": fields["id"], "title": fields["title"], "description": fields["description"],
             "context": fields.get("context", ""), "tags": " ".join(fields.get("tags", ()))}
    out = {}
    for col, text in texts.items():
        words = split_words(text)
        stem = STEMMER.stems(words)
        out[col] = [stem[w] for w in words if stem[w]]
    return out


def reference_bm25(docs: list[dict], query: str) -> dict[str, float]:
    """BM25 as docs/backend.md defines it, computed from scratch over ``docs``."""
    stems, _ = terms_of(query)
    cols = {d["id"]: _columns(d) for d in docs}
    n = len(docs)
    lengths = {i: sum(len(t) for t in c.values()) for i, c in cols.items()}
    avglen = sum(lengths.values()) / n
    scores = {}
    for eid, c in cols.items():
        score = 0.0
        for term in stems:
            df = sum(1 for cc in cols.values() if any(term in toks for toks in cc.values()))
            idf = math.log((n - df + 0.5) / (df + 0.5))
            idf = 1e-6 if idf <= 0 else idf
            f = sum(WEIGHTS[col] * Counter(toks)[term] for col, toks in c.items())
            if f:
                score += idf * f * (K1 + 1) / (f + K1 * (1 - B + B * lengths[eid] / avglen))
        if score > 0:
            scores[eid] = score
    return scores


def test_term_stats_are_the_tiers_bm25_statistics(tier):
    tier.capture_many([Entry.create(**d) for d in CORPUS])
    stems, _ = terms_of("retry network zebra")
    stats = tier.term_stats(stems)
    cols = [_columns(d) for d in CORPUS]
    assert stats.n_docs == len(CORPUS)
    assert stats.total_len == pytest.approx(sum(len(t) for c in cols for t in c.values()))
    assert stats.df == tuple(sum(1 for c in cols if any(s in t for t in c.values())) for s in stems)
    assert stats.df[-1] == 0


@pytest.mark.parametrize("query", ["retry", "retry network", "index foreign key", "volatile cache retry"])
def test_lexical_top_k_equals_the_bm25_definition(tier, query):
    tier.capture_many([Entry.create(**d) for d in CORPUS])
    stems, words = terms_of(query)
    hits = tier.lexical_top_k(stems, tier.term_stats(stems), EVERYTHING, 10, words=words)
    expected = reference_bm25(CORPUS, query)
    assert {h.id: h.score for h in hits} == pytest.approx(expected, rel=1e-5)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert all(isinstance(h, LexicalHit) and 0.0 <= h.tfidf <= 1.0 + 1e-9 for h in hits)


def test_federated_statistics_score_each_tier_as_one_index(open_tier):
    """Two tiers scored with the summed statistics give the single-index scores."""
    a, b = open_tier("agent"), open_tier("team")
    a.capture_many([Entry.create(**d) for d in CORPUS[:2]])
    b.capture_many([Entry.create(**d) for d in CORPUS[2:]])
    query = "retry network"
    stems, words = terms_of(query)
    stats = a.term_stats(stems) + b.term_stats(stems)
    got = {h.id: h.score for t in (a, b) for h in t.lexical_top_k(stems, stats, EVERYTHING, 10, words=words)}
    assert got == pytest.approx(reference_bm25(CORPUS, query), rel=1e-5)


def test_filters_apply_before_k(tier):
    # 30 strong matches of type pattern, then 2 weak ones of type rule: with k = 2
    # and a type filter, the rules must still come back.
    tier.capture_many([entry(f"p{i:02d}", "retry retry retry", "retry") for i in range(30)] +
                      [entry(f"r{i}", "unrelated", "one retry among many other words here",
                             type="rule") for i in range(2)])
    stems, words = terms_of("retry")
    stats = tier.term_stats(stems)
    hits = tier.lexical_top_k(stems, stats, Filters(types=("rule",)), 2, words=words)
    assert sorted(h.id for h in hits) == ["r0", "r1"]
    assert len(tier.lexical_top_k(stems, stats, Filters(), 5)) == 5
    assert tier.lexical_count(stems, Filters(types=("rule",)), cap=1000) == 2
    assert tier.lexical_count(stems, Filters(), cap=1000) == 32


def test_validity_filters(tier):
    now = 2_000_000_000.0
    tier.capture_many([entry("old", "retry", valid_until=now - 10), entry("soon", "retry", valid_from=now + 10),
                       entry("live", "retry")])
    stems, _ = terms_of("retry")
    stats = tier.term_stats(stems)
    ids = lambda f: sorted(h.id for h in tier.lexical_top_k(stems, stats, f, 10))  # noqa: E731
    assert ids(Filters(now=now)) == ["live"]
    assert ids(Filters(now=now, include_expired=True)) == ["live", "old"]
    assert ids(Filters(now=now, include_future=True)) == ["live", "soon"]


def test_lexical_scores_by_id_and_hash_with_the_filter_verdict(tier):
    tier.capture_many([Entry.create(**d) for d in CORPUS])
    stems, words = terms_of("retry")
    stats = tier.term_stats(stems)
    storm_hash = tier.get("retry-storm").content_hash
    found = {h.id: h for h in tier.lexical_scores(stems, stats, ids=["retry-policy", "db-index", "zz"],
                                                  hashes=[storm_hash], filters=Filters(types=("pattern",)),
                                                  words=words)}
    assert set(found) == {"retry-policy", "db-index", "retry-storm"}
    expected = reference_bm25(CORPUS, "retry")
    assert found["retry-policy"].score == pytest.approx(expected["retry-policy"], rel=1e-5)
    assert found["db-index"].score == 0.0
    assert found["retry-policy"].passes and not found["retry-storm"].passes  # an anti-pattern
    assert all(h.passes for h in tier.lexical_scores(stems, stats, ids=["retry-storm"]))


def test_text_similarity_is_a_cosine(tier):
    tier.capture_many([Entry.create(**d) for d in CORPUS])
    sims = tier.text_similarity(["retry", "storms"], [["retry", "storms"], ["postgres"], []])
    assert len(sims) == 3 and all(0.0 <= s <= 1.0 + 1e-9 for s in sims)
    assert sims[1] == 0.0 and sims[2] == 0.0


def test_latent_scores_are_those_of_the_same_rows_in_a_sqlite_file(tier, tmp_path):
    """Latent (LSA) scores are a function of the rows: every backend (a remote tier's
    server over its own mirror too) gives exactly the scores of a SQLite file."""
    from tiervault.vault.store import TierStore

    (tmp_path / "ref").mkdir()
    ref = TierStore(tmp_path / "ref" / "ref.db", name="ref")
    try:
        rows = [Entry.create(**d) for d in CORPUS]
        late = entry("late-retry", "Retry budget", "Cap retries per client with a retry budget.")
        words, ids = ["retry", "network", "outage"], [d["id"] for d in CORPUS] + ["late-retry", "nope"]
        memories = [["retry", "backoff", "payments"], ["index", "postgres"], ["zzz"], []]
        for backend in (tier, ref):
            backend.capture_many(rows)
        got, want = tier.latent_scores(words, ids, 2), ref.latent_scores(words, ids, 2)
        assert got == want and len(got) == len(ids)
        assert all(s is not None and 0.0 <= s <= 1.0 for s in got) and got[-2:] == [0.0, 0.0]
        assert max(got) > 0.5
        text = tier.latent_text_scores(words, memories, 2)
        assert text == ref.latent_text_scores(words, memories, 2) and text[2:] == [0.0, 0.0]
        assert tier.latent_scores(["zzz"], ids, 2) == [0.0] * len(ids)  # no fitted query word
        assert tier.latent_scores(words, [], 2) == [] and tier.latent_text_scores(words, [], 2) == []
        # too small for 50 dimensions: no latent space (None each, JSON null over the wire)
        assert tier.latent_scores(words, ids[:2], 50) == [None, None]
        assert tier.latent_text_scores(words, memories[:1], 50) == [None]
        for backend in (tier, ref):  # a later write is folded into the same space
            backend.capture(late)
        assert tier.latent_scores(words, ids, 2) == ref.latent_scores(words, ids, 2)
        assert tier.latent_scores(words, ["late-retry"], 2)[0] > 0.0
    finally:
        ref.close()


@pytest.mark.parametrize("k", [0, -3, 257, 10**6, True, 2.5, "16"])
def test_latent_scores_refuse_a_dimension_count_out_of_bounds(tier, k):
    """k is the caller's (over HTTP too) and each k is an SVD fit: it is bounded, and a bad
    one is a ValidationError naming k on every backend, never a fit or a traceback."""
    tier.capture_many([Entry.create(**d) for d in CORPUS])
    for call in (lambda: tier.latent_scores(["retry"], [CORPUS[0]["id"]], k),
                 lambda: tier.latent_text_scores(["retry"], [["retry"]], k)):
        with pytest.raises(ValidationError, match="latent dimensions"):
            call()


def test_filter_mask_marks_live_entries_that_pass(tier):
    tier.capture_many([entry("a", type="rule"), entry("b"), entry("c", type="rule")])
    tier.capture(entry("a", "edited", type="rule"))  # an update may leave an old position behind
    view = tier.filter_mask(Filters(types=("rule",)))
    passing = [view.ids[i] for i in np.flatnonzero(view.mask)]
    assert sorted(passing) == ["a", "c"]


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


# -- browsing (the curator pages): orders, pages, totals, facets, sweeps, links by type --------
from types import SimpleNamespace  # noqa: E402

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tiervault.vault.entry import ENTRY_TYPES, SEVERITIES  # noqa: E402
from tiervault.vault.filter_compile import matches  # noqa: E402
from tiervault.vault.rows import FacetCounts, LightPage, TitleRow  # noqa: E402

NOW = 1_800_000_000.0
MOMENTS = tuple(NOW + d * 86_400.0 for d in (-30, -10, -1, 0, 5))
DOMAINS = ("net", "db", "ui")
TAGS = ("a", "b", "c", "d")

browse_entry = st.fixed_dictionaries({
    "type": st.sampled_from(ENTRY_TYPES), "domain": st.sampled_from(DOMAINS),
    "severity": st.sampled_from(SEVERITIES), "tags": st.lists(st.sampled_from(TAGS), max_size=3, unique=True),
    "updated_at": st.sampled_from(MOMENTS[:4]),
    "valid_until": st.one_of(st.none(), st.none(), st.sampled_from(MOMENTS)),
    "description": st.sampled_from(["x", "short", "a longer description " * 8]),
})
_BROWSE_FILTERS = {
    "type": st.lists(st.sampled_from(ENTRY_TYPES), min_size=1, max_size=2, unique=True),
    "domain": st.lists(st.sampled_from(DOMAINS + ("nowhere",)), min_size=1, max_size=2, unique=True),
    "tags": st.lists(st.sampled_from(TAGS), min_size=1, max_size=2, unique=True),
    "not_tags": st.lists(st.sampled_from(TAGS), min_size=1, max_size=1),
    "updated_after": st.sampled_from(MOMENTS), "include_expired": st.booleans(),
}
browse_filters = st.one_of(st.none(), st.lists(st.sampled_from(sorted(_BROWSE_FILTERS)), max_size=2,
                                               unique=True).flatmap(
    lambda keys: st.fixed_dictionaries({k: _BROWSE_FILTERS[k] for k in keys})))


def _ranked(counts: Counter) -> dict[str, int]:
    return dict(sorted(((k, v) for k, v in counts.items() if v), key=lambda kv: (-kv[1], kv[0])))


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(fields=st.lists(browse_entry, min_size=1, max_size=14),
       cuts=st.lists(st.integers(1, 13), max_size=3), edits=st.lists(st.integers(0, 13), max_size=4),
       gone=st.lists(st.integers(0, 13), max_size=2), filter_args=browse_filters,
       order=st.sampled_from(["newest", "updated"]), offset=st.integers(0, 6),
       limit=st.integers(0, 5))
def test_pages_facets_and_sweeps_equal_a_model_of_the_writes(tier, fields, cuts, edits, gone,
                                                             filter_args, order, offset, limit):
    """Random entries written in random batches, some rewritten and some deleted: every
    backend's page (order, filters, offset, limit), total, facet counts and title sweep
    equal the ones a model of those writes gives."""
    tier.delete_many([r.id for r in tier.title_rows(0, 10_000)])  # the tier of the last example
    def make(i: int, title: str) -> Entry:
        return Entry.create(id=f"e{i}", title=title, created_at=fields[i]["updated_at"] - 100.0,
                            **fields[i])

    entries = [make(i, f"note {i}") for i in range(len(fields))]
    written: dict[str, int] = {}  # id -> the write (generation order) that last changed it
    bounds = sorted({0, len(entries), *(c for c in cuts if c < len(entries))})
    for n, (lo, hi) in enumerate(zip(bounds, bounds[1:])):  # one transaction per batch
        assert tier.capture_many(entries[lo:hi]) == hi - lo
        written.update({e.id: n for e in entries[lo:hi]})
    for n, i in enumerate(edits, start=len(bounds)):  # a rewrite keeps the entry's place
        if i < len(entries):
            entries[i] = make(i, f"edited {n}")
            tier.capture(entries[i])
            written[entries[i].id] = n
    dead = {f"e{i}" for i in gone}
    tier.delete_many(sorted(dead))
    live = [e for e in entries if e.id not in dead]
    filters = Filters.build(now=NOW, **filter_args) if filter_args is not None else None
    passing = [e for e in live if filters is None or matches(filters, SimpleNamespace(
        id=e.id, type=e.type, domain=e.domain, severity=e.severity, origin=e.origin,
        tags=e.tag_text, updated_at=e.updated_at, valid_from=e.valid_from,
        valid_until=e.valid_until))]
    rank = {e.id: i for i, e in enumerate(entries)}  # insertion order (rewrites keep it)
    if order == "newest":
        expected = sorted(passing, key=lambda e: -rank[e.id])
    else:
        expected = sorted(passing, key=lambda e: (-written[e.id], -rank[e.id]))

    page = tier.light_page(order=order, filters=filters, offset=offset, limit=limit, snippet_chars=7)
    assert isinstance(page, LightPage) and page.total == len(passing)
    assert [r.id for r in page.rows] == [e.id for e in expected[offset:offset + limit]]
    assert page.rows == [tier.light_rows([r.id], 7)[r.id] for r in page.rows]  # the same rows

    facets = tier.facet_counts(filters)
    assert isinstance(facets, FacetCounts) and facets.total == len(passing)
    assert facets.by_type == {t: sum(e.type == t for e in passing) for t in ENTRY_TYPES}
    assert facets.by_severity == {s: sum(e.severity == s for e in passing) for s in SEVERITIES}
    assert facets.by_domain == _ranked(Counter(e.domain for e in passing))
    assert facets.by_tag == _ranked(Counter(t for e in passing for t in e.tags))

    swept: list[TitleRow] = []
    while True:  # the review's sweep, 3 rows a call
        rows = tier.title_rows(swept[-1].key if swept else 0, 3)
        swept.extend(rows)
        if len(rows) < 3:
            break
    assert [(r.id, r.title) for r in swept] == [(e.id, e.title) for e in live]
    assert [r.key for r in swept] == sorted({r.key for r in swept})
    assert [r.content_hash for r in swept] == [tier.get(e.id).content_hash for e in live]


def test_links_of_type_newest_first(open_tier):
    agent, team = open_tier("agent"), open_tier("team")
    agent.capture_many([entry(f"a{i}") for i in range(4)])
    agent.link("a0", "a1", "contradicts", "first")
    agent.link("a2", "t9", "contradicts", "across tiers")
    agent.link("a1", "a3", "supports")
    agent.link("a3", "a0", "contradicts", "last")
    found = agent.links_of_type("contradicts")
    assert [(l.source_id, l.target_id, l.note) for l in found] == \
        [("a3", "a0", "last"), ("a2", "t9", "across tiers"), ("a0", "a1", "first")]
    assert all(isinstance(l, Link) and l.tier == "agent" and l.link_type == "contradicts" for l in found)
    assert [l.source_id for l in agent.links_of_type("contradicts", 2)] == ["a3", "a2"]
    assert [l.source_id for l in agent.links_of_type("supports")] == ["a1"]
    assert agent.links_of_type("extends") == [] and team.links_of_type("contradicts") == []
    with pytest.raises(ValidationError):
        agent.links_of_type("likes")


def test_browse_arguments_are_refused_alike(tier):
    tier.capture(entry("a"))
    for bad in (lambda: tier.light_page(order="oldest"), lambda: tier.light_page(limit=-1),
                lambda: tier.light_page(limit=1_001), lambda: tier.light_page(offset=-3),
                lambda: tier.title_rows(0, 10_001), lambda: tier.links_of_type("contradicts", -1)):
        with pytest.raises(ValidationError):
            bad()
    assert tier.light_page(limit=0) == LightPage([], 1)


def test_a_new_tier_browses_as_empty(tier):
    assert tier.light_page() == LightPage([], 0) and tier.title_rows() == []
    empty = tier.facet_counts()
    assert empty.total == 0 and empty.by_domain == {} and empty.by_tag == {}
    assert empty.by_type == dict.fromkeys(ENTRY_TYPES, 0)
    assert tier.links_of_type("contradicts") == []


def test_vocabulary_is_the_same_before_and_after_the_mirror_is_built(open_tier):
    """A backend may answer ``vocabulary`` from its search mirror once it holds one:
    the answer is the one a fresh handle (no mirror yet) gives."""
    writer = open_tier("agent")
    writer.capture_many([entry("a", domain="net", tags=("x", "y")), entry("b", domain="net", tags=("x",)),
                         entry("c", domain="db", type="rule", severity="critical")])
    fresh = open_tier("agent").vocabulary()
    stems, _ = terms_of("title")
    writer.term_stats(stems)  # a search: the mirror is in memory now
    warm = writer.vocabulary()
    assert fresh == warm
    assert warm["domains"] == {"net": 2, "db": 1} and warm["tags"] == {"x": 2, "y": 1}
    assert warm["types"] == {"pattern": 2, "rule": 1}
    assert warm["severities"] == {"suggestion": 2, "critical": 1}
