"""VaultManager federation and the in-memory mirror, on real tier files."""

from __future__ import annotations

import numpy as np
import pytest

from tiervault.errors import ReadOnlyTier, TierUnavailable, ValidationError
from tiervault.vault.entry import Entry
from tiervault.vault.filters import Filters
from tiervault.vault.manager import Tier, VaultManager
from tiervault.vault.query import query_terms
from tiervault.vault.scoring import fts5_idf, top_k
from tiervault.vault.store import TierStore
from tiervault.vault.tokenizer import STEMMER

WORDS = ("retry backoff jitter cache invalidation token rotation schema migration index "
         "vacuum lock deadlock timeout circuit breaker queue worker idempotent request "
         "response latency throughput memory leak profile trace span metric alert").split()


def random_entries(n: int, seed: int = 0, prefix: str = "e") -> list[Entry]:
    rng = np.random.default_rng(seed)
    p = 1 / np.arange(1, len(WORDS) + 1) ** 1.1
    p /= p.sum()
    def text(k: int) -> str:
        return " ".join(rng.choice(WORDS, size=k, p=p))
    return [Entry.create(id=f"{prefix}{i}", title=text(int(rng.integers(2, 6))),
                         description=text(int(rng.integers(5, 25))), context=text(int(rng.integers(0, 8))),
                         tags=list(rng.choice(WORDS, size=2, replace=False)),
                         domain=str(rng.choice(["db", "http", "ops"])))
            for i in range(n)]


def mirror_top(store: TierStore, query: str, k: int = 20) -> tuple[list[str], np.ndarray]:
    """The mirror's ranking with the tier's own statistics (what FTS5 computes)."""
    m = store.postings()
    stems = list(dict.fromkeys(s for s in STEMMER.stems(query_terms(query)).values() if s))
    matches = m.matches(stems)
    scores = m.bm25(matches, fts5_idf(m.n_alive, matches.df), m.total_len / m.n_alive)
    top = top_k(scores, k, m.mask(Filters()) & (scores > 0))
    return [m.ids[i] for i in top], scores[top]


QUERIES = ["retry with backoff", "cache invalidation", "how to fix a deadlock timeout",
           "token rotation schema", "memory leak profile trace", "queue"]


def assert_mirror_matches_fts5(store: TierStore) -> None:
    for q in QUERIES:
        ids, scores = mirror_top(store, q)
        ref = store.search_fts(query_terms(q), Filters(), 20)
        np.testing.assert_allclose(scores, ref.scores, rtol=1e-5)
        # Ties may order differently; compare rankings as score-sorted sets.
        assert set(ids) == set(ref.ids) or np.allclose(scores[-1], ref.scores[-1], rtol=1e-5)


def test_mirror_reproduces_fts5_bm25_through_updates_deletes_and_reopen(tmp_path):
    path = tmp_path / "agent.db"
    store = TierStore(path)
    store.capture_many(random_entries(400))
    assert_mirror_matches_fts5(store)
    # Writes after the mirror exists: updates, deletes, inserts (delta segment).
    store.capture_many(random_entries(30, seed=1))  # same ids e0..e29: updates
    for i in range(30, 40):
        store.delete(f"e{i}")
    store.capture_many(random_entries(20, seed=2, prefix="new"))
    assert_mirror_matches_fts5(store)
    # Another process/connection writes; the mirror catches up by generation.
    other = TierStore(path)
    other.capture_many(random_entries(15, seed=3, prefix="other"))
    other.delete("e50")
    assert store.postings().slot("other3") is not None and store.postings().slot("e50") is None
    assert_mirror_matches_fts5(store)
    store.close()
    # Reopen: loaded from the cache file, then caught up.
    assert (tmp_path / "agent.db.postings.mirror").exists()
    other.capture(Entry.create(id="late", title="retry retry", description="x"))
    reopened = TierStore(path)
    assert reopened.postings().slot("late") is not None
    assert_mirror_matches_fts5(reopened)


def test_large_delta_triggers_rebuild_and_tfidf_refit(tmp_path):
    store = TierStore(tmp_path / "a.db")
    store.capture_many(random_entries(1200))
    m = store.postings()
    first_fit = m.tfidf_terms
    store.capture(Entry.create(id="zeta", title="zyzzyva unique word", description="zyzzyva"))
    m = store.postings()
    assert m.tfidf_terms == first_fit and m.delta_W  # small delta: TF-IDF not refitted yet
    assert m.slot("zeta") is not None
    store.capture_many(random_entries(300, seed=5, prefix="more"))  # > 256 rows: rebuild
    m = store.postings()
    assert m.tfidf_terms == len(m.terms) and not m.delta_W
    assert_mirror_matches_fts5(store)


def test_deletes_count_toward_the_rebuild_as_writes_do(tmp_path):
    store = TierStore(tmp_path / "a.db")
    store.capture_many(random_entries(1200))
    m = store.postings()
    assert m.base_rows == 1200
    store.delete_many([f"e{i}" for i in range(200)])  # 200 <= max(256, 5%): kept in the delta
    m = store.postings()
    assert m.base_rows == 1200 and m.n_alive == 1000
    store.delete_many([f"e{i}" for i in range(200, 260)])  # 260 dead slots in all: rebuilt
    m = store.postings()
    assert m.base_rows == 940 and m.n_alive == 940
    assert m.tfidf_terms == len(m.terms)  # TF-IDF refitted without the deleted entries
    fresh = TierStore(tmp_path / "copy.db")
    fresh.capture_many([e for e in random_entries(1200) if int(e.id[1:]) >= 260])
    want, got = fresh.postings(), store.postings()
    words = list(WORDS[:6])
    np.testing.assert_allclose(got.tfidf_scores(words)[[got.slot(f"e{i}") for i in range(260, 300)]],
                               want.tfidf_scores(words)[[want.slot(f"e{i}") for i in range(260, 300)]])
    assert_mirror_matches_fts5(store)


def test_updates_are_counted_once_toward_the_rebuild(tmp_path):
    store = TierStore(tmp_path / "a.db")
    store.capture_many(random_entries(1200))
    store.postings()
    store.capture_many(random_entries(200, seed=9))  # updates of e0..e199: 200 dead + 200 written
    m = store.postings()
    assert m.base_rows == 1200 and m.delta_W  # 200 changes, not 400: still in the delta


def test_small_tier_sees_new_words_in_tfidf_at_once(tmp_path):
    store = TierStore(tmp_path / "a.db")
    assert store.postings().n_alive == 0  # mirror built while the tier is empty
    store.capture(Entry.create(id="one", title="Rotate signing keys", description="keys"))
    m = store.postings()
    scores = m.tfidf_scores(["rotate", "keys"])
    assert scores[m.slot("one")] > 0.5


def test_tfidf_rows_equals_scikit_learn_transform():
    import scipy.sparse as sp
    from sklearn.feature_extraction.text import TfidfTransformer

    from tiervault.vault.scoring import tfidf_rows

    counts = sp.random(60, 40, density=0.2, random_state=1, format="csr")
    counts.data = np.ceil(counts.data * 5)
    model = TfidfTransformer(smooth_idf=True, norm="l2").fit(counts)
    query = sp.random(7, 40, density=0.3, random_state=2, format="csr")
    query.data = np.ceil(query.data * 3)
    np.testing.assert_allclose(tfidf_rows(query, model.idf_).toarray(),
                               model.transform(query).toarray(), atol=1e-12)


@pytest.fixture
def vault(tmp_path):
    m = VaultManager.at({"agent": str(tmp_path / "a.db"), "project": str(tmp_path / "p.db"),
                         "team": str(tmp_path / "t.db")})
    yield m
    m.close()


def entry(eid: str, title: str, description: str = "details", **kw) -> Entry:
    return Entry.create(id=eid, title=title, description=description, **kw)


def test_dedup_by_id_highest_priority_copy_wins(vault):
    vault.capture(entry("jwt", "Rotate JWT keys", "team says 90 days"), "team")
    vault.capture(entry("jwt", "Rotate JWT keys", "agent says 30 days"), "agent")
    vault.capture(entry("jwt", "Rotate JWT keys", "project says 60 days"), "project")
    c = vault.search("rotate jwt keys")
    assert c.ids == ["jwt"] and c.tiers == ["agent"]
    assert set(c.also_in[0]) == {"project", "team"}
    assert vault.get("jwt")[1] == "agent"


def test_a_winning_copy_outside_its_tiers_top_k_gets_its_own_evidence(vault):
    # The agent's copy of "tok" (edited: no query word left) is not among the agent's
    # hits but wins the team hit's dedup: its BM25 and TF-IDF are the agent copy's.
    vault.capture(entry("tok", "Rotate JWT keys", "rotate keys often"), "team")
    vault.capture(entry("tok", "Token lifetime", "agent says 30 days"), "agent")
    vault.capture(entry("keys", "Rotate keys rotate keys", "rotate JWT keys"), "agent")
    c = vault.search("rotate jwt keys")
    assert c.ids == ["keys", "tok"] and c.tiers == ["agent", "agent"]
    expected = vault.lexical_scores(c.query, "agent", ["tok", "keys"])
    assert [(x, y) for x, y in zip(c.lexical, c.tfidf)] == [expected["keys"], expected["tok"]]
    assert c.tfidf[0] > 0 and expected["tok"] == (0.0, 0.0)


def test_every_candidates_tfidf_is_its_kept_copys_own(vault):
    """Kept copies that are their tier's own top-k hits keep the TF-IDF they came with;
    copies from another tier's look-up get theirs read: each equals the tier's own."""
    rng = np.random.default_rng(4)
    words = ["rotate", "jwt", "keys", "token", "cache", "retry", "pool", "index"]
    for i in range(120):
        text = " ".join(rng.choice(words, size=4))
        tier = ("agent", "project", "team")[i % 3]
        vault.capture(entry(f"e{i % 50}", text, " ".join(rng.choice(words, size=6))), tier)
    # the agent's copy of "e1" has none of the words: the team copy's hit brings it in
    vault.capture(entry("e1", "rotate jwt keys rotate", "rotate jwt keys"), "team")
    vault.capture(entry("e1", "unrelated zebra", "nothing here"), "agent")
    outside = 0
    for query, limit in (("rotate jwt keys", 200), ("cache retry", 12), ("pool index token", 12),
                         ("keys", 12)):
        c = vault.search(query, limit=limit)
        assert len(c) >= 5 and any(c.also_in)
        for eid, tier, lexical, tfidf in zip(c.ids, c.tiers, c.lexical, c.tfidf):
            assert vault.lexical_scores(c.query, tier, [eid])[eid] == (lexical, tfidf)
        outside += ("e1", "agent") in zip(c.ids, c.tiers) and query == "rotate jwt keys"
    assert outside == 1  # a kept copy outside its tier's top k was among them


def test_dedup_by_content_hash_under_other_ids(vault):
    vault.capture(entry("team-copy", "Use connection pooling", "pool size"), "team")
    vault.capture(entry("project-copy", "Use connection pooling", "pool size"), "project")
    c = vault.search("connection pooling")
    assert c.ids == ["project-copy"] and c.tiers == ["project"] and c.also_in == [("team",)]


def test_tier_weight_orders_equal_entries(vault):
    vault.capture(entry("t1", "Index foreign keys", "speeds joins"), "team")
    vault.capture(entry("a1", "Index foreign keys", "speeds joins", domain="other"), "agent")
    c = vault.search("index foreign keys")
    assert c.ids == ["a1", "t1"]
    assert c.score[0] / c.score[1] == pytest.approx(1.0 / 0.6)
    np.testing.assert_allclose(c.lexical[0], c.lexical[1])  # same evidence, same scale


def test_federated_statistics_make_tiers_comparable(vault):
    # A word common in the team tier but rare overall must not be inflated there.
    vault.capture_many([entry(f"t{i}", f"vacuum note {i}", "vacuum") for i in range(30)], "team")
    vault.capture(entry("a-vac", "vacuum", "vacuum"), "agent")
    c = vault.search("vacuum", limit=40)
    assert c.ids[0] == "a-vac" and len(c) == 31
    assert np.all(c.lexical < 1.0) and np.all(c.lexical > 0)


def test_filters_reach_every_tier_before_the_limit(vault):
    vault.capture_many([entry(f"n{i}", "retry retry policy", "retry", domain="noise")
                        for i in range(100)], "agent")
    vault.capture(entry("want", "timeouts", "retry later", domain="target"), "team")
    c = vault.search("retry", filters=Filters.build(domain="target"), limit=5)
    assert c.ids == ["want"]


def test_writes_go_only_to_the_named_tier(vault, tmp_path):
    vault.capture(entry("only-project", "A", "x"), "project")
    assert vault.store("project").count() == 1
    assert vault.store("agent").count() == 0 and not (tmp_path / "a.db").exists()
    assert not (tmp_path / "t.db").exists()
    with pytest.raises(ValidationError, match="configured tiers"):
        vault.capture(entry("x", "A", "x"), "nonexistent")


def test_corrupt_tier_is_reported_and_skipped(tmp_path):
    (tmp_path / "t.db").write_bytes(b"garbage" * 1000)
    good = TierStore(tmp_path / "a.db")
    good.capture(entry("ok", "Healthy entry", "searchable"))
    good.close()
    m = VaultManager.at({"agent": str(tmp_path / "a.db"), "team": str(tmp_path / "t.db")})
    assert "team" in m.problems and "t.db" in m.problems["team"]
    assert m.search("healthy").ids == ["ok"]
    with pytest.raises(TierUnavailable, match="t.db"):
        m.capture(entry("y", "Y", "y"), "team")
    assert m.stats()["team"]["available"] is False


def test_read_only_source_refuses_writes(tmp_path):
    src = TierStore(tmp_path / "shared.db")
    src.capture(entry("shared", "Shared knowledge", "from another team"))
    src.close()
    m = VaultManager([Tier("agent", str(tmp_path / "a.db"), 1.0),
                      Tier("vendor", str(tmp_path / "shared.db"), 0.5, read_only=True)])
    assert m.search("shared knowledge").tiers == ["vendor"]
    with pytest.raises(ReadOnlyTier):
        m.capture(entry("z", "Z", "z"), "vendor")


def test_links_across_tiers(vault):
    vault.capture(entry("a", "A", "x"), "agent")
    vault.capture(entry("b", "B", "x"), "team")
    link = vault.link("a", "b", "supports")
    assert link.tier == "agent"
    assert [(l.source_id, l.target_id, l.tier) for l in vault.links_touching(["b"])] == [("a", "b", "agent")]


def test_bad_limit_is_a_clear_error(vault):
    with pytest.raises(ValidationError, match="limit"):
        vault.search("x", limit=0)
