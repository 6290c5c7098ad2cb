"""Federated vector recall: NumPy reference, pre-filters, generation catch-up, persistence,
and the runtime the Brain uses (attach_embeddings)."""

from __future__ import annotations

import logging
import shutil
import time

import numpy as np
import pytest

from embeddings_server import Fault
from tiervault.brain.vectors import VectorSource
from tiervault.config import load_settings
from tiervault.embeddings.recall import VectorRecall, cache_paths
from tiervault.embeddings.runtime import EmbeddingRuntime, attach_embeddings
from tiervault.errors import ConfigError, EmbeddingError, ValidationError
from tiervault.vault.entry import ENTRY_TYPES, Entry
from tiervault.vault.filters import Filters
from tiervault.vault.manager import VaultManager
from tiervault.vault.store import TierStore

MODEL = "test:random"
DIM = 24


def unit(rng: np.random.Generator, n: int, dim: int = DIM) -> np.ndarray:
    m = rng.standard_normal((n, dim)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def fill(store: TierStore, rng: np.random.Generator, n: int, prefix: str, **pick) -> dict[str, np.ndarray]:
    """n entries with random unit vectors under MODEL; returns {id: vector}.

    ``pick`` maps a field to a function of the index (e.g. domain=lambda i: ...)."""
    entries = []
    for i in range(n):
        fields = {"id": f"{prefix}{i:05d}", "title": f"title {i}", "description": "d",
                  "type": ENTRY_TYPES[i % len(ENTRY_TYPES)]}
        fields.update({k: f(i) for k, f in pick.items()})
        entries.append(Entry.create(**fields))
    store.capture_many(entries)
    vecs = unit(rng, n)
    store.put_vectors(MODEL, [(e.id, "h", v) for e, v in zip(entries, vecs)])
    return {e.id: v for e, v in zip(entries, vecs)}


def reference(q: np.ndarray, tiers: list[tuple[str, float, dict[str, np.ndarray]]], k: int,
              keep=lambda tier, eid: True) -> list[tuple[str, str, float]]:
    """Brute force: cosine of every allowed vector, ranked by cosine * tier weight."""
    rows = []
    for tier, weight, vecs in tiers:
        for eid, v in vecs.items():
            if keep(tier, eid):
                c = float(np.dot(v.astype(np.float64), q.astype(np.float64)))
                rows.append((-c * weight, tier, eid, c))
    rows.sort()
    return [(eid, tier, c) for _, tier, eid, c in rows[:k]]


def check_same(got: tuple[list[str], list[str], np.ndarray], want: list[tuple[str, str, float]]) -> None:
    ids, tiers, cos = got
    assert list(zip(ids, tiers)) == [(w[0], w[1]) for w in want]
    np.testing.assert_allclose(cos, [w[2] for w in want], atol=1e-5)


@pytest.fixture
def vault(tmp_path):
    with VaultManager.at({"agent": str(tmp_path / "agent.db"), "team": str(tmp_path / "team.db")}) as m:
        yield m


def test_recall_equals_numpy_reference_across_tiers(vault):
    rng = np.random.default_rng(7)
    a = fill(vault.store("agent"), rng, 1500, "a")
    t = fill(vault.store("team"), rng, 2500, "t")
    recall = VectorRecall(vault, MODEL)
    for _ in range(5):
        q = unit(rng, 1)[0]
        want = reference(q, [("agent", 1.0, a), ("team", 0.6, t)], 50)
        check_same(recall.search(q, 50), want)
    q = unit(rng, 1)[0]
    check_same(recall.search(q, 20, tiers=["team"]), reference(q, [("team", 0.6, t)], 20))
    assert recall.search(q, 0) == ([], [], pytest.approx(np.zeros(0)))
    with pytest.raises(ValidationError, match="dimension"):
        recall.search(np.ones(DIM + 1), 5)
    with pytest.raises(ValidationError, match="tier"):
        recall.search(q, 5, tiers=["nope"])


def test_scores_for_candidates_found_by_fts(vault):
    rng = np.random.default_rng(1)
    a = fill(vault.store("agent"), rng, 50, "a")
    recall = VectorRecall(vault, MODEL)
    q = unit(rng, 1)[0]
    got = recall.scores_for(q, [("agent", "a00003"), ("team", "a00003"), ("agent", "missing"),
                                ("agent", "a00042"), ("elsewhere", "x")])
    assert got[0] == pytest.approx(float(a["a00003"] @ q), abs=1e-6)
    assert got[3] == pytest.approx(float(a["a00042"] @ q), abs=1e-6)
    assert np.isnan(got[[1, 2, 4]]).all()


def test_same_id_in_two_tiers_is_returned_once_from_the_higher_priority_tier(vault):
    rng = np.random.default_rng(3)
    v = unit(rng, 1)[0]
    for name in ("agent", "team"):
        store = vault.store(name)
        store.capture(Entry.create(id="shared", title="shared", description="d"))
        store.put_vectors(MODEL, [("shared", "h", v)])
    ids, tiers, cos = VectorRecall(vault, MODEL).search(v, 5)
    assert ids == ["shared"] and tiers == ["agent"] and cos[0] == pytest.approx(1.0, abs=1e-6)


def test_prefilter_matching_one_percent_still_returns_its_best_k(vault):
    rng = np.random.default_rng(11)
    store = vault.store("agent")
    rare = lambda i: "rare" if i % 100 == 0 else "common"  # noqa: E731
    vecs = fill(store, rng, 6000, "a", domain=rare, tags=lambda i: ["odd"] if i % 2 else ["even"])
    domain = {f"a{i:05d}": rare(i) for i in range(6000)}
    recall = VectorRecall(vault, MODEL)
    for _ in range(3):
        q = unit(rng, 1)[0]
        want = reference(q, [("agent", 1.0, vecs)], 10, keep=lambda t, e: domain[e] == "rare")
        check_same(recall.search(q, 10, filters=Filters.build(domain="rare")), want)
        assert len(want) == 10
    # Most entries pass (the complement is looked up instead): still exact.
    q = unit(rng, 1)[0]
    not_bug = [t for t in ENTRY_TYPES if t != ENTRY_TYPES[0]]
    types = {f"a{i:05d}": ENTRY_TYPES[i % len(ENTRY_TYPES)] for i in range(6000)}
    want = reference(q, [("agent", 1.0, vecs)], 30, keep=lambda t, e: types[e] in not_bug)
    check_same(recall.search(q, 30, filters=Filters.build(type=not_bug)), want)
    want = reference(q, [("agent", 1.0, vecs)], 30, keep=lambda t, e: int(e[1:]) % 2 == 1)
    check_same(recall.search(q, 30, filters=Filters.build(tags=["odd"])), want)
    # A filter nothing matches returns nothing (not the unfiltered best).
    assert recall.search(q, 5, filters=Filters.build(domain="absent"))[0] == []


def test_recent_filter_views_reused_across_queries_and_writes(vault):
    """The row masks of a tier's last few filter views are kept (allowed_rows): queries
    cycling through more filters than it keeps, the unfiltered one in between, then a
    delete and a capture (new view positions) -- every answer is the brute force's."""
    rng = np.random.default_rng(21)
    store = vault.store("agent")
    vecs = fill(store, rng, 3000, "a", domain=lambda i: f"d{i % 7}",
                valid_until=lambda i: "2001-01-01T00:00:00Z" if i % 13 == 0 else None)
    domain = {f"a{i:05d}": f"d{i % 7}" for i in range(3000)}
    live = {e: v for e, v in vecs.items() if int(e[1:]) % 13}
    recall = VectorRecall(vault, MODEL)
    for _ in range(2):
        for d in [None, "d0", "d1", None, "d2", "d3", "d4", "d5", None, "d6", "d0"]:
            q = unit(rng, 1)[0]
            keep = (lambda t, e: True) if d is None else (lambda t, e, d=d: domain[e] == d)
            want = reference(q, [("agent", 1.0, live)], 15, keep=keep)
            got = recall.search(q, 15, filters=None if d is None else Filters.build(domain=d))
            check_same(got, want)
    gone = next(iter(live))
    store.delete(gone)
    del live[gone]
    new = fill(store, rng, 1, "b", domain=lambda i: "d0")
    live.update(new)
    domain.update(dict.fromkeys(new, "d0"))
    for d in [None, "d0", None]:
        q = live[next(iter(new))] if d == "d0" else unit(rng, 1)[0]
        keep = (lambda t, e: True) if d is None else (lambda t, e, d=d: domain[e] == d)
        want = reference(q, [("agent", 1.0, live)], 15, keep=keep)
        check_same(recall.search(q, 15, filters=None if d is None else Filters.build(domain=d)), want)
    # A new vector for an entry (the index changes, the filter views do not) between a
    # filtered and an unfiltered query: the unfiltered view's kept mask is stale now.
    moved = next(e for e in live if domain[e] == "d1")
    q = unit(rng, 1)[0]
    store.put_vectors(MODEL, [(moved, "h2", q)])
    live[moved] = q
    check_same(recall.search(q, 15, filters=Filters.build(domain="d1")),
               reference(q, [("agent", 1.0, live)], 15, keep=lambda t, e: domain[e] == "d1"))
    got = recall.search(q, 15)
    assert got[0][0] == moved
    check_same(got, reference(q, [("agent", 1.0, live)], 15))


def test_expired_entries_are_not_recalled(vault):
    rng = np.random.default_rng(5)
    store = vault.store("agent")
    vecs = fill(store, rng, 40, "a", valid_until=lambda i: "2001-01-01T00:00:00Z" if i < 5 else None)
    q = unit(rng, 1)[0]
    ids, _, _ = VectorRecall(vault, MODEL).search(q, 40)
    assert sorted(ids) == sorted(e for e in vecs if int(e[1:]) >= 5)


def test_catch_up_after_writes_and_deletes_by_another_store_instance(vault, tmp_path):
    rng = np.random.default_rng(21)
    vecs = fill(vault.store("agent"), rng, 300, "a")
    recall = VectorRecall(vault, MODEL)
    q = unit(rng, 1)[0]
    check_same(recall.search(q, 10), reference(q, [("agent", 1.0, vecs)], 10))
    index = recall.index("agent")

    other = TierStore(tmp_path / "agent.db", name="agent")  # e.g. another agent's process
    try:
        extra = fill(other, rng, 20, "b")
        vecs.update(extra)
        gone = [e for e in list(vecs)[:300:7]]
        for e in gone:
            assert other.delete(e)
            del vecs[e]
        changed = "a00001"
        newv = unit(rng, 1)[0]
        other.put_vectors(MODEL, [(changed, "h2", newv)])
        vecs[changed] = newv
    finally:
        other.close()

    for _ in range(3):
        q = unit(rng, 1)[0]
        check_same(recall.search(q, 25), reference(q, [("agent", 1.0, vecs)], 25))
    assert recall.index("agent") is index  # caught up in place, never rebuilt
    assert len(index) == len(vecs)
    got = recall.scores_for(q, [("agent", changed), ("agent", gone[0])])
    assert got[0] == pytest.approx(float(newv @ q), abs=1e-6) and np.isnan(got[1])


def test_persisted_index_opens_memory_mapped_and_catches_up(vault, monkeypatch):
    rng = np.random.default_rng(8)
    store = vault.store("agent")
    vecs = fill(store, rng, 400, "a")
    first = VectorRecall(vault, MODEL)
    q = unit(rng, 1)[0]
    first.search(q, 5)
    ids_path, base = cache_paths(store, MODEL)
    files = list(ids_path.parent.glob(ids_path.name.replace(".ids", "") + "-*.npy"))
    assert ids_path.exists() and len(files) == (6 if first.dtype == "int8" else 3)  # + ids' index; int8 codes, bounds, row CRCs

    reopened = VectorRecall(vault, MODEL).index("agent")
    # not copied: owned is the id table only (~9 KB here, a quarter of the 24-d rows; a copy is > 1/2)
    assert reopened.mapped and reopened.owned_bytes < reopened.nbytes / 4

    extra = fill(store, rng, 10, "b")
    vecs.update(extra)
    loads: list[int] = []
    real_load = TierStore.vector_changes_since

    def counting_load(self, model, since):
        loads.append(since)
        return real_load(self, model, since)

    monkeypatch.setattr(TierStore, "vector_changes_since", counting_load)
    second = VectorRecall(vault, MODEL)
    check_same(second.search(q, 30), reference(q, [("agent", 1.0, vecs)], 30))
    assert loads and -1 not in loads  # opened from the cache, only the 10 new rows read from SQL
    caught_up = second.index("agent")
    assert caught_up.mapped and caught_up.delta_rows == 10  # the 10 rows went to the delta

    # warm() re-persists; a cache of another tier file (different uid) is ignored.
    second.warm(["agent"])
    team = vault.store("team")
    fill(team, rng, 3, "t")
    team_ids, _ = cache_paths(team, MODEL)
    shutil.copy(ids_path, team_ids)
    loads.clear()
    assert len(VectorRecall(vault, MODEL).index("team")) == 3
    assert loads == [-1]


def test_corrupt_cache_is_ignored_with_a_warning(vault, caplog):
    rng = np.random.default_rng(9)
    store = vault.store("agent")
    vecs = fill(store, rng, 30, "a")
    VectorRecall(vault, MODEL).search(unit(rng, 1)[0], 1)
    ids_path, base = cache_paths(store, MODEL)
    for npy in ids_path.parent.glob(ids_path.name.replace(".ids", "") + "-*.npy"):
        npy.write_bytes(b"not numpy")
    q = unit(rng, 1)[0]
    with caplog.at_level(logging.WARNING):
        check_same(VectorRecall(vault, MODEL).search(q, 5), reference(q, [("agent", 1.0, vecs)], 5))
    assert "ignoring the vector cache" in caplog.text


# -- the runtime ------------------------------------------------------------------------------------


def settings_file(tmp_path, embedding: str, enabled: bool = True):
    path = tmp_path / "agent.yaml"
    path.write_text(
        f"tiers:\n  agent: {tmp_path / 'agent.db'}\n  project: {tmp_path / 'project.db'}\n"
        f"  team: {tmp_path / 'team.db'}\n"
        f"embedding: {embedding}\nfeatures:\n  embedding-enabled: {str(enabled).lower()}\n")
    return load_settings(path, env={})


def test_attach_embeddings_hash_offline_end_to_end(tmp_path):
    settings = settings_file(tmp_path, "{provider: hash, dim: 64}")
    with VaultManager.from_settings(settings) as manager:
        rt = attach_embeddings(manager, settings)
        assert isinstance(rt, EmbeddingRuntime) and isinstance(rt, VectorSource)
        assert manager.embeddings is rt and rt.model_key == "hash:hash-v1-64"
        assert rt.embedder.dim == 64 and rt.pipeline is not None and rt.recall is not None
        manager.capture(Entry.create(id="wal", title="Use WAL mode for SQLite readers",
                                     description="Readers never block the writer"), "agent")
        manager.capture(Entry.create(id="jwt", title="Rotate JWT signing keys",
                                     description="Keys expire"), "team")
        q = rt.embed_query("sqlite wal readers")
        hits = rt.search(q, 2, None, Filters())
        assert [(h.id, h.tier) for h in hits] == [("wal", "agent"), ("jwt", "team")]
        sims = rt.similarities(q, "agent", ["wal", "jwt"])
        assert sims[0] == pytest.approx(hits[0][2]) and np.isnan(sims[1])
        assert rt.embed_query("sqlite wal readers") is q  # cached


def test_attach_embeddings_disabled_or_broken(tmp_path, caplog):
    off = settings_file(tmp_path, "{provider: hash}", enabled=False)
    with VaultManager.from_settings(off) as manager:
        assert attach_embeddings(manager, off) is None
    broken = settings_file(tmp_path, "{provider: openai, model: m}")  # no key anywhere
    with VaultManager.from_settings(broken) as manager:
        with caplog.at_level(logging.WARNING):
            assert attach_embeddings(manager, broken) is None
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1 and "running without vectors" in warnings[0].getMessage()
        manager.capture(Entry.create(id="x", title="still writes", description="d"), "agent")
        assert manager.store("agent").get("x") is not None
        with pytest.raises(ConfigError, match="API key"):
            attach_embeddings(manager, broken, strict=True)


def test_query_embedding_failure_is_a_typed_error_and_brain_falls_back(tmp_path, embeddings_server):
    from tiervault.brain import Brain

    srv = embeddings_server
    settings = settings_file(tmp_path, f"{{provider: http, model: m, baseUrl: '{srv.openai_url}'}}")
    with VaultManager.from_settings(settings) as manager:
        rt = attach_embeddings(manager, settings, backoff_base_s=0.001, backoff_max_s=0.002)
        assert rt is not None
        manager.capture(Entry.create(id="wal", title="Use WAL mode", description="readers"), "agent")
        assert manager.store("agent").embedding_counts(rt.model_key)["ok"] == 1
        brain = Brain(manager, settings, vectors=rt)
        assert [r["id"] for r in brain.search_intelligent("WAL mode")] == ["wal"]
        srv.push(*[Fault("status", status=500)] * 3)
        with pytest.raises(EmbeddingError):
            rt.embed_query("a query never seen")
        srv.push(*[Fault("status", status=500)] * 3)
        rows = brain.search_intelligent("readers WAL")
        assert [r["id"] for r in rows] == ["wal"]


def test_scores_for_maps_ids_through_the_last_filter_views_slots(vault):
    """Candidates' cosines (scores_for) find their rows through the slot -> row map of the
    tier's last filter view (the mirror's id column remembers the slots a search read),
    not the index's own id table -- while the index is the one the map was made for.
    After a capture without a vector, a rewrite, a new vector and a delete, every cosine
    is still the brute force's (NaN: no vector)."""
    from tiervault.embeddings.slot_map import rows_by_slot

    rng = np.random.default_rng(29)
    store = vault.store("agent")
    vecs = fill(store, rng, 400, "a")
    recall = VectorRecall(vault, MODEL)
    index = recall.index("agent")

    def check(q, ids):
        got = recall.scores_for(q, [("agent", i) for i in ids])
        want = [float(vecs[i] @ q) if i in vecs else np.nan for i in ids]
        np.testing.assert_allclose(got, want, atol=1e-6)

    q = unit(rng, 1)[0]
    ids = [f"a{i:05d}" for i in range(0, 400, 9)] + ["missing"]
    assert rows_by_slot(recall._state("agent").slots, index, ids) is None  # no search yet: no map
    check(q, ids)
    recall.search(q, 10)
    rows = rows_by_slot(recall._state("agent").slots, index, ids)
    assert rows is not None and rows.tolist() == index.rows_of(ids).tolist()
    check(q, ids)
    store.capture(Entry.create(id="b00000", title="no vector yet", description="d"))
    store.capture(Entry.create(id="a00009", title="rewritten", description="d2"))
    check(q, ids + ["b00000"])
    recall.search(q, 10)
    check(q, ids + ["b00000"])
    new = unit(rng, 1)[0]
    store.put_vectors(MODEL, [("a00018", "h2", new)])
    vecs["a00018"] = new
    store.delete("a00027")
    del vecs["a00027"]
    check(q, ids + ["b00000"])
    assert rows_by_slot(recall._state("agent").slots, recall.index("agent"), ids) is None  # index moved on
    recall.search(q, 10)
    check(q, ids + ["b00000"])


def test_a_hybrid_search_prefetches_its_int8_scan_and_answers_alike(tmp_path, monkeypatch):
    """The Brain names its query vector before its lexical leg (VectorSource.prefetch):
    the tiers' int8 scans start on the scan pool and the vector leg takes them. Every
    answer (scan and full, with and without filters) is the one without the prefetch;
    with more than one CPU the prefetched jobs are what the scans used."""
    import os

    from tiervault.brain.brain import Brain
    from tiervault.embeddings import dot_job
    from tiervault.embeddings.vector_math import simd_available

    if not simd_available():
        pytest.skip("needs the simd extra (CI installs it)")
    settings = settings_file(tmp_path, "{provider: hash, dim: 64}")
    words = ["sqlite", "wal", "reader", "writer", "jwt", "key", "cache", "index", "retry", "timeout",
             "queue", "lock", "backup", "schema", "token", "shard"]
    rng = np.random.default_rng(4)
    with Brain.open(settings) as brain:
        for t, tier in enumerate(("agent", "project", "team")):
            brain.manager.capture_many([Entry.create(
                id=f"{tier}-{i}", title=" ".join(rng.choice(words, 4)), description=" ".join(rng.choice(words, 9)),
                domain=("db", "auth", "ops")[i % 3]) for i in range(300 + 100 * t)], tier)
        queries = [" ".join(rng.choice(words, 3)) for _ in range(12)]
        kwargs = [{}, {"domain": "db"}]

        def answers() -> list:
            return [brain.search_intelligent(q, mode=mode, explain=True, **kw)
                    for q in queries for mode in ("scan", "full") for kw in kwargs]

        brain.search_intelligent("warm every index up")
        # one frozen clock for both passes: they run seconds apart, and a fresh entry's
        # freshness decays between them, so a score printed to 6 decimals that sits at a
        # rounding edge moves across it now and then (seen at 0.910518 / 0.910517 under load)
        now = time.time()
        brain.clock = lambda: now
        taken: list[int] = []
        real = dot_job.prefetched
        monkeypatch.setattr(dot_job, "prefetched",
                            lambda qc, codes: (lambda j: (taken.append(j is not None), j)[1])(real(qc, codes)))
        with_prefetch = answers()
        monkeypatch.setattr(type(brain.vectors), "prefetch", lambda self, qv, tiers=None: False)
        taken_before = len(taken)
        without = answers()
    assert with_prefetch == without
    assert any(taken[:taken_before]) == ((os.cpu_count() or 1) > 1)
    assert not any(taken[taken_before:])
