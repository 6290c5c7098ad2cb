"""Modulations through search_intelligent (hash embedder, offline): each one changes the
ranking the way its formula says, the token string equals the typed value, and a
lexical-only vault says which modulations need vectors."""

from __future__ import annotations

import time

import numpy as np
import pytest

from tiervault.brain import Brain
from tiervault.brain.modulation_spec import Modulations
from tiervault.config import load_settings
from tiervault.embeddings.runtime import attach_embeddings
from tiervault.errors import QueryError
from tiervault.vault.entry import Entry
from tiervault.vault.manager import VaultManager

NOW = time.time()
DAY = 86_400.0

ENTRIES = [
    ("pool-size", "Size the database connection pool", "Keep the database pool small: cores * 2.",
     "databases", 1),
    ("pool-leak", "Find database connection pool leaks", "A database pool leak shows as timeouts.",
     "databases", 40),
    ("pool-pgbouncer", "Put pgbouncer in front of database pools", "Transaction pooling for database "
     "connections.", "databases", 200),
    ("pool-threads", "Thread pool sizing for CPU work", "A thread pool sized to the cores.",
     "concurrency", 5),
    ("pool-retry", "Retry database connection with backoff", "Jittered backoff on database "
     "connection errors.", "databases", 400),
]


@pytest.fixture()
def brain(tmp_path):
    path = tmp_path / "agent.yaml"
    path.write_text(f"tiers:\n  agent: {tmp_path / 'agent.db'}\n  team: {tmp_path / 'team.db'}\n"
                    "embedding: {provider: hash, dim: 64}\nfeatures:\n  embedding-enabled: true\n")
    settings = load_settings(path, env={})
    manager = VaultManager.from_settings(settings)
    vectors = attach_embeddings(manager, settings)
    for eid, title, desc, domain, age in ENTRIES:
        stamp = NOW - age * DAY
        manager.capture(Entry.create(id=eid, title=title, description=desc, domain=domain,
                                     created_at=stamp, updated_at=stamp), "team")
    b = Brain(manager, settings, vectors=vectors, clock=lambda: NOW)
    yield b
    b.close()


def _ids(rows):
    return [r["id"] for r in rows]


def test_tokens_and_typed_values_give_the_same_answer(brain):
    q = "database connection pool"
    a = brain.search_intelligent(q, limit=5, modulate="suppress:pgbouncer decay:30")
    b = brain.search_intelligent(q, limit=5, modulate=Modulations.build(
        suppress=["pgbouncer"], decay_days=30))
    assert _ids(a) == _ids(b) and [r["score"] for r in a] == [r["score"] for r in b]


def test_decay_multiplies_each_score_by_its_age_factor(brain):
    q = "database connection pool"
    plain = {r["id"]: r["score"] for r in brain.search_intelligent(q, limit=5)}
    decayed = brain.search_intelligent(q, limit=5, modulate="decay:30")
    ages = {eid: age for eid, *_, age in ENTRIES}
    for r in decayed:
        assert r["score"] == pytest.approx(plain[r["id"]] / (1 + ages[r["id"]] / 30), rel=1e-4)
    # the 400-day-old entry falls to the bottom
    assert _ids(decayed)[-1] == "pool-retry"


def test_suppress_lowers_what_resembles_the_text_and_keeps_the_rest(brain):
    q = "database connection pool"
    plain = _ids(brain.search_intelligent(q, limit=5))
    sup = _ids(brain.search_intelligent(q, limit=5, modulate='suppress:"pgbouncer transaction pooling"'))
    assert sorted(sup) == sorted(plain)
    assert sup.index("pool-pgbouncer") > plain.index("pool-pgbouncer")
    by_id = _ids(brain.search_intelligent(q, limit=5, modulate="suppress:@pool-pgbouncer"))
    assert by_id.index("pool-pgbouncer") > plain.index("pool-pgbouncer")


def test_diverse_keeps_the_best_first_and_reports_a_permutation(brain):
    q = "database connection pool"
    plain = _ids(brain.search_intelligent(q, limit=5))
    div = _ids(brain.search_intelligent(q, limit=5, modulate="diverse:0.3"))
    assert div[0] == plain[0] and sorted(div) == sorted(plain)


def test_pool_and_limit_are_honoured(brain):
    rows = brain.search_intelligent("database", limit=2, modulate="pool:3 diverse")
    assert len(rows) <= 2


def test_unknown_tokens_and_missing_vectors_are_clear_errors(tmp_path, brain):
    with pytest.raises(QueryError, match="unknown token 'recent'"):
        brain.search_intelligent("pool", modulate="recent")
    with pytest.raises(QueryError, match="no vector"):
        brain.search_intelligent("pool", modulate="centroid:not-here")
    lexical = Brain(VaultManager.at({"agent": str(tmp_path / "lex.db")}))
    lexical.manager.capture(Entry.create(id="x", title="pool", description="d"), "agent")
    with pytest.raises(QueryError, match="need embeddings"):
        lexical.search_intelligent("pool", modulate="diverse suppress:x")
    assert _ids(lexical.search_intelligent("pool", modulate="decay:7 pool:5")) == ["x"]
    lexical.close()


def test_suppress_by_id_equals_its_formula(brain):
    q = "database connection pool"
    plain = {r["id"]: r["score"] for r in brain.search_intelligent(q, limit=5)}
    sup = brain.search_intelligent(q, limit=5, modulate="suppress:@pool-pgbouncer")
    ids = [r["id"] for r in sup]
    vecs = brain.vectors.vectors_for("team", ids + ["pool-pgbouncer"])
    x = vecs[-1] / np.linalg.norm(vecs[-1])
    for r, v in zip(sup, vecs[:-1]):
        expect = plain[r["id"]] - max(float(v @ x), 0.0)
        assert r["score"] == pytest.approx(expect, abs=1e-5)


@pytest.fixture()
def lexical(tmp_path):
    """The same entries in a vault without embeddings."""
    b = Brain(VaultManager.at({"agent": str(tmp_path / "lexical.db")}))
    b.manager.capture_many([Entry.create(id=i, title=t, description=d, domain=dom,
                                         updated_at=NOW - age * DAY, created_at=NOW - age * DAY)
                            for i, t, d, dom, age in ENTRIES], "agent")
    yield b
    b.close()


def test_suppress_by_id_works_without_embeddings_by_tfidf_resemblance(lexical):
    q = "database connection pool"
    plain = {r["id"]: r["score"] for r in lexical.search_intelligent(q, limit=5)}
    sup = lexical.search_intelligent(q, limit=5, modulate="suppress:@pool-size")
    assert set(plain) == {r["id"] for r in sup} and next(iter(plain)) == "pool-size"
    assert _ids(sup)[0] != "pool-size" and _ids(sup).index("pool-size") >= 2  # demoted
    m = lexical.manager
    target = m.get_many(["pool-size"])["pool-size"][0]
    lq = m.lexical_query(" ".join([target.title, target.description, target.context]), None)
    cos = {i: s[1] for i, s in m.lexical_scores(lq, "agent", list(plain)).items()}
    assert cos["pool-size"] > 0.8 and cos["pool-size"] == max(cos.values())
    for r in sup:  # s' = s - max(S, 0), S = TF-IDF cosine with the suppressed entry's text
        assert r["score"] == pytest.approx(plain[r["id"]] - max(cos[r["id"]], 0.0), abs=1e-6)
    assert [r["id"] for r in sup] == sorted(plain, key=lambda i: -(plain[i] - cos[i]))


def test_lexical_vault_names_the_modulations_that_need_embeddings(lexical):
    for tokens, named in (("suppress:legacy", "suppress:TEXT"), ("centroid:pool-size", "centroid"),
                          ("trajectory:@pool-size->@pool-leak", "trajectory"),
                          ("diverse", "diverse")):
        with pytest.raises(QueryError, match="need embeddings") as err:
            lexical.search_intelligent("pool", modulate=tokens)
        assert named in str(err.value) and err.value.field == "modulate"
    with pytest.raises(QueryError, match="no searched tier holds") as err:
        lexical.search_intelligent("pool", modulate="suppress:@not-here")
    rows = lexical.search_intelligent("database pool", modulate="suppress:@pool-size decay:30 pool:20")
    assert rows and rows[0]["id"] != "pool-size" and "pool-size" in _ids(rows)


def test_diverse_rows_carry_relevance_and_the_mmr_score(brain):
    q = "database connection pool"
    assert all("mmr" not in r for r in brain.search_intelligent(q, limit=5))
    lam = 0.4
    rows = brain.search_intelligent(q, limit=4, modulate=f"diverse:{lam}")
    full = brain.search_intelligent(q, limit=4, mode="full", modulate=f"diverse:{lam}")
    assert [r["mmr"] for r in rows] == [r["mmr"] for r in full]
    assert [r["score"] for r in rows] == [r["score"] for r in full]
    ids = _ids(rows)
    vecs = brain.vectors.vectors_for("team", ids).astype(np.float64)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    for k, r in enumerate(rows):  # mmr = lam * score - (1 - lam) * max(0, cos to rows above)
        above = max([0.0] + [float(vecs[k] @ vecs[j]) for j in range(k)])  # MMR starts at 0
        assert r["mmr"] == pytest.approx(lam * r["score"] - (1 - lam) * above, abs=1e-5)


def test_a_vector_hit_keeps_the_scans_cosine_the_same_number_as_a_read(brain):
    # gather takes a vector hit's cosine from the scan instead of reading its row again
    from tiervault.brain.stages import ScoringContext, gather
    from tiervault.vault.filters import Filters

    ctx = ScoringContext(query="database connection pool", mode="scan", limit=10,
                         limit_given=True, filters=Filters.build(now=NOW), tiers=None,
                         query_tags=[], query_domain=None, include_memories=False,
                         explain=False, fusion="signals", now=NOW, config=brain.config)
    gather(brain, ctx)
    pool = ctx.pool
    reused = [i for i, key in enumerate(zip(pool.tiers, pool.ids)) if key in ctx.known_cosines]
    assert reused  # the scan's hits are in the pool
    for i, (tier, eid) in enumerate(zip(pool.tiers, pool.ids)):
        read = brain.vectors.similarities(ctx.qvec, tier, [eid])
        assert np.float64(read[0]).tobytes() == ctx.cosines[i].tobytes()
