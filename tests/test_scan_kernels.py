"""Issue 16, session 10: the scan's Brain-side kernels give the same numbers, bit for bit,
as the formulas they replace (the rankings must not move; bench/rank_compare.py checks
the whole scan, these pin each kernel on the inputs where a shortcut could differ)."""

from __future__ import annotations

import sqlite3
import threading

import numpy as np
import pytest

from tiervault.brain import combine, relevance, signals, stages
from tiervault.brain.evidence import latent_share, proximity_weight
from tiervault.brain.matrix import pick
from tiervault.brain.pool import Pool
from tiervault.errors import StorageError, ValidationError
from tiervault.vault import latent as vlatent
from tiervault.vault.entry import Entry
from tiervault.vault.rows import LightRow
from tiervault.vault.store import TierStore

from brain_vault import NOW, at_a_day_old, fixed_brain, vault_at


def _scale_reference(x, top=None):
    """per_query_scale as written before session 10: nan_to_num, clip, divide."""
    x = np.clip(np.nan_to_num(np.asarray(x, dtype=np.float64)), 0.0, None)
    t = float(x.max()) if top is None and x.size else float(top or 0.0)
    return x / t if t > 0 else np.zeros_like(x)


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("values", [
    [0.3, 1.7, 0.0, 2.5],
    [-0.0, 0.0, -1.5, 2.0],                      # signed zeros and negatives clip to +0.0
    [np.nan, 0.4, 1.2],                          # NaN -> 0
    [np.inf, 0.5, 1.0],                          # +inf -> the largest float, then the scale
    [-np.inf, 0.5, 1.0],                         # -inf -> 0
    [np.nan, np.inf, -np.inf],
    [0.0, 0.0, 0.0],                             # no positive value: all zeros
    [-3.0, -1.0],
    [],
])
@pytest.mark.parametrize("top", [None, 0.0, 2.0, 0.5, -1.0])
@pytest.mark.filterwarnings("ignore:overflow encountered")
def test_per_query_scale_is_bit_for_bit_the_old_formula(values, top):
    x = np.array(values, dtype=np.float64)
    assert _same_bits(combine.per_query_scale(x, top), _scale_reference(x, top))
    # lists (the pool's columns) and int arrays are read the same way
    assert _same_bits(combine.per_query_scale(list(values), top), _scale_reference(list(values), top))


@pytest.mark.filterwarnings("ignore:overflow encountered")
def test_per_query_scale_random_columns_and_a_fresh_array():
    rng = np.random.default_rng(16)
    for _ in range(200):
        x = rng.standard_normal(rng.integers(0, 200)) * 3
        if x.size and rng.random() < 0.3:
            x[rng.integers(0, x.size)] = rng.choice([np.nan, np.inf, -np.inf])
        if x.size and rng.random() < 0.5:  # signed zeros, on NumPy's vector paths too
            x[rng.integers(0, x.size, x.size // 3 + 1)] = rng.choice([-0.0, 0.0])
        top = None if rng.random() < 0.5 else float(rng.random() * 4 - 1)
        out = combine.per_query_scale(x, top)
        assert _same_bits(out, _scale_reference(x, top))
        assert out is not x and not np.shares_memory(out, x)  # callers write into it


# -- the pool's columns (brain/pool.py) -------------------------------------------------------
def _light(i: int, **kw) -> LightRow:
    base = dict(id=f"e-{i}", type="rule", domain="sec", severity="warning", title=f"t{i}",
                snippet="s", tags="a b", created_at=100.0 + i, updated_at=200.0 + i,
                valid_from=None, valid_until=None, content_hash=f"{i:064x}", chars=10 + i,
                origin="")
    base.update(kw)
    return LightRow(**base)


def test_pool_columns_follow_the_rows_as_the_pool_grows():
    pool = Pool()
    assert pool.column("severity") == [] and pool.times("valid_from").shape == (0,)
    assert pool.tag_lists() == []
    rows = [_light(0, valid_from=5, tags=""), _light(1, severity="critical", valid_until=9.5,
                                                      tags="x  Y"),
            _light(2, updated_at=None, tags=None)]
    pool.rows.extend(rows[:2])
    assert pool.column("severity") == ["warning", "critical"]
    pool.rows.append(rows[2])  # a graph neighbour joins
    for name in ("updated_at", "created_at", "valid_from", "valid_until"):
        # the old reading: None -> NaN, then float64, field by field
        want = np.array([np.nan if getattr(r, name) is None else getattr(r, name) for r in rows],
                        dtype=np.float64)
        assert _same_bits(pool.times(name), want)
    assert pool.column("severity") == ["warning", "critical", "warning"]
    assert pool.column("domain") == [r.domain for r in rows]
    assert pool.tag_lists() == [[], ["x", "Y"], []]
    col = pool.column("severity")
    col.append("mutated")  # a caller's list, not the pool's own
    assert pool.column("severity") == ["warning", "critical", "warning"]
    with pytest.raises(KeyError, match="not a LightRow field"):
        pool.column("nope")


# -- the latent query vector kept for the query's TF-IDF weights (vault/latent.py) ----------
def test_latent_query_vector_is_kept_only_for_the_same_words(tmp_path):
    words = ["payment", "charge", "retry", "timeout", "provider", "kafka", "consumer", "lag"]
    gen = vault_at(tmp_path, "agent")
    manager = next(gen)
    manager.capture_many([at_a_day_old(id=f"e-{i}", title=f"{words[i % 8]} {words[(i + 3) % 8]}",
                                       description=f"{words[(i + 5) % 8]} {words[(i + 1) % 8]}.")
                          for i in range(60)], tier="agent")
    p = manager.store("agent").postings()
    m = vlatent.model_for(p, 2)
    assert m is not None

    def fresh(ws):
        tids, w = p.query_tfidf(ws)
        v = w.astype(np.float32) @ np.asarray(m.V)[tids]
        return v / float(np.linalg.norm(v))

    first = m.query(p, ["retry", "timeout"])
    assert _same_bits(first, fresh(["retry", "timeout"]))
    assert m.query(p, ["retry", "timeout"]) is first  # the pool's call, then the graph's
    assert not first.flags.writeable
    other = m.query(p, ["kafka", "lag"])  # the next query's words: computed again
    assert other is not first and _same_bits(other, fresh(["kafka", "lag"]))
    assert m.query(p, ["zzz-unknown"]) is None
    assert _same_bits(m.query(p, ["retry", "timeout"]), first)
    ids = [f"e-{i}" for i in range(10)]
    assert vlatent.scores(p, ["retry", "timeout"], ids, 2) == vlatent.scores(p, ["retry", "timeout"],
                                                                             ids, 2)
    gen.close()


# -- SqliteDb.query maps errors only when the driver raised (vault/sqlite_db.py) -------------
def test_a_read_statement_still_leaves_only_tiervault_errors(tmp_path):
    path = tmp_path / "a.db"
    with TierStore(path) as store:
        store.capture(Entry.create(id="e1", title="one", description="x"))
        assert store.db.query("SELECT id FROM entries") == [("e1",)]
        with pytest.raises(StorageError, match=r"tier .*a\.db.*: light rows failed") as info:
            store.db.query("SELECT nope FROM nowhere", action="light rows")
        assert isinstance(info.value.__cause__, sqlite3.Error)
        with pytest.raises(ValidationError):  # a value the driver cannot bind
            store.db.query("SELECT ?", ("\ud800",))
        # the lock is released after a failure: another thread reads at once
        done = []
        reader = threading.Thread(target=lambda: done.append(store.db.query("SELECT 1")))
        reader.start()
        reader.join(5)
        assert done == [[(1,)]]


# -- text relevance without the memories' empty arrays (brain/relevance.py) ------------------
def _reference_latent(ctx):
    """brain/relevance._latent as written before session 10."""
    lsa = ctx.lsa_raw
    if lsa is None or not len(ctx.pool):
        return None, None
    m_lsa = ctx.memory_lsa_raw if ctx.memory_lsa_raw is not None else np.zeros(0)
    top = float(max(np.nanmax(lsa, initial=0.0), np.nanmax(m_lsa, initial=0.0)))
    lsa_q, m_lsa_q = combine.per_query_scale(lsa, top), combine.per_query_scale(m_lsa, top)
    lsa_q[np.isnan(lsa)], m_lsa_q[np.isnan(m_lsa)] = np.nan, np.nan
    return lsa_q, m_lsa_q


def _reference_text_relevance(ctx):
    """brain/relevance.text_relevance as written before session 10 (FTS-only part)."""
    w = ctx.weights.array
    w_sem, w_vec = (float(x) for x in pick(w, ("semantic", "vector")))
    ms = ctx.memories
    keep = ms.content if ms is not None else np.zeros(0, dtype=bool)
    lex, tfidf = np.asarray(ctx.pool.lexical), np.asarray(ctx.pool.tfidf)
    m_lex = ms.lexical[keep] if ms is not None else np.zeros(0)
    m_tfidf = ms.tfidf[keep] if ms is not None else np.zeros(0)
    lex_top = float(max(lex.max(initial=0.0), m_lex.max(initial=0.0)))
    tfidf_top = float(max(tfidf.max(initial=0.0), m_tfidf.max(initial=0.0)))
    share = ctx.config.tfidf_share
    lex_q = combine.per_query_scale(lex, lex_top)
    m_lex_q = combine.per_query_scale(m_lex, lex_top)
    if ctx.pairs:
        lex_q = lex_q + proximity_weight(ctx) * ctx.proximity
        top = float(max(lex_q.max(initial=0.0), m_lex_q.max(initial=0.0)))
        lex_q, m_lex_q = combine.per_query_scale(lex_q, top), combine.per_query_scale(m_lex_q, top)
    b = latent_share(ctx)
    lsa_q, m_lsa_q = _reference_latent(ctx)
    if lsa_q is not None:
        lsa_q = np.where(np.isnan(lsa_q), lex_q, lsa_q)
    sem = signals.semantic(combine.per_query_scale(tfidf, tfidf_top), lex_q, share, lsa_q, b)
    vec = np.zeros(len(ctx.pool))
    rel = combine.relevance(sem, vec, w_sem, 0.0)
    m_sem = np.zeros(len(keep))
    m_lsa_out = m_lsa_q
    if ms is not None:
        m_all = np.zeros(len(keep))
        m_all[keep] = m_lex_q
        if m_lsa_q is not None and len(m_lsa_q):
            m_lsa_q = np.where(np.isnan(m_lsa_q), m_all, m_lsa_q)
            m_lsa_out = m_lsa_q
        m_sem = signals.semantic(combine.per_query_scale(ms.tfidf, tfidf_top), m_all, share,
                                 m_lsa_q, b) * keep
    return (rel, sem, vec, m_sem), lsa_q, m_lsa_out


def test_text_relevance_is_bit_for_bit_the_old_formula(tmp_path, monkeypatch):
    pay = ["payment", "charge", "retry", "timeout", "provider", "idempotency", "duplicate", "refund"]
    gen = vault_at(tmp_path, "agent", "team")
    manager = next(gen)
    # the agent tier is too small for 16 latent dimensions: its candidates' LSA is NaN
    manager.capture(at_a_day_old(id="one", title="payment retry timeout", description="charge."),
                    tier="agent")
    manager.capture_many([at_a_day_old(id=f"p-{i}", title=f"{pay[i % 8]} {pay[(i + 1) % 8]}",
                                       description=f"{pay[(i + 3) % 8]} {pay[(i + 5) % 8]} note {i}.")
                          for i in range(80)], tier="team")
    manager.store("team").add_memory("Agreed payment retry policy: 3 attempts", topics=["retry"],
                                     created_at=NOW - 86_400)
    seen = []

    def checked(brain, ctx):
        (rel, sem, vec, m_sem), lsa_q, m_lsa_q = _reference_text_relevance(ctx)
        got = relevance.text_relevance(ctx)
        for a, b in ((got.entries, rel), (got.semantic, sem), (got.vector, vec),
                     (got.memories, m_sem)):
            assert _same_bits(a, b)
        assert (ctx.lsa is None) == (lsa_q is None) and (lsa_q is None or _same_bits(ctx.lsa, lsa_q))
        if ctx.memories is not None and m_lsa_q is not None:
            assert _same_bits(ctx.memory_lsa, m_lsa_q)
        seen.append((ctx.memories is not None,
                     ctx.lsa_raw is not None and bool(np.isnan(ctx.lsa_raw).any())))
        return score(brain, ctx)

    score = stages.score
    monkeypatch.setattr(stages, "STAGES", tuple(checked if s is score else s for s in stages.STAGES))
    for share in (0.1, 0.0):
        b = fixed_brain(manager, lsa_share=share)
        for q in ("payment retry timeout", "duplicate refund charge", "provider idempotency"):
            for memories in (False, True):
                b.search_intelligent(q, include_memories=memories, explain=True)
    assert (False, True) in seen and (True, True) in seen and len(seen) == 12
    gen.close()


def test_latent_norm_and_scores_are_the_old_numbers():
    rng = np.random.default_rng(10)
    for _ in range(300):
        v = (rng.standard_normal(16) * rng.choice([1e-3, 1.0, 1e3])).astype(np.float32)
        assert float(np.sqrt(v.dot(v))) == float(np.linalg.norm(v))
        x = (rng.standard_normal(7) * 0.8).astype(np.float32)
        old = [float(s) for s in np.clip(x, 0.0, 1.0)]
        new = np.clip(x, 0.0, 1.0).tolist()
        assert old == new and all(type(a) is float for a in new)
        assert [np.signbit(a) for a in old] == [np.signbit(a) for a in new]


def _reference_rows(m, p, slots):
    """LatentModel.rows as written before session 10 (base, stored or projected rows, then
    the delta's), after the delta has been folded in."""
    out = np.zeros((slots.size, m.V.shape[1]), dtype=np.float32)
    nb = m.n_base
    b = slots < nb
    if m.base is not None:
        out[b] = m.base[slots[b]]
    elif m.stored is not None:
        out[b] = m.stored.take(slots[b])
    d = ~b & (slots - nb < m.delta.shape[0])
    out[d] = m.delta[slots[d] - nb]
    return out


def test_latent_rows_of_base_slots_are_the_old_rows(tmp_path):
    words = ["payment", "charge", "retry", "timeout", "provider", "kafka", "consumer", "lag",
             "offset", "broker"]
    gen = vault_at(tmp_path, "team")
    manager = next(gen)
    # above SMALL_TIER_ROWS (1,000): the later writes go to the mirror's delta
    manager.capture_many([at_a_day_old(id=f"e-{i}", title=f"{words[i % 10]} {words[(i * 7) % 10]}",
                                       description=f"{words[(i + 3) % 10]} {words[(i * 3) % 10]}.")
                          for i in range(1100)], tier="team")
    assert vlatent.model_for(manager.store("team").postings(), 4) is not None  # the base built
    for i in range(5):
        manager.capture(at_a_day_old(id=f"late-{i}", title=f"{words[i]} {words[i + 4]}",
                                     description="late."), tier="team")
    p = manager.store("team").postings()
    m = vlatent.model_for(p, 4)
    assert m is not None and m.base is not None and p.delta_T
    late = np.array([s for s in p.slots_of([f"late-{i}" for i in range(5)]) if s is not None])
    assert late.size == 5 and late.min() >= m.n_base
    m.rows(p, late)  # the delta folded in
    rng = np.random.default_rng(3)
    for _ in range(50):
        base = rng.integers(0, m.n_base, rng.integers(1, 30))
        mixed = np.concatenate([base, rng.choice(late, 2)])
        for slots in (base, mixed, base[:1]):
            got = m.rows(p, slots)
            assert _same_bits(got, _reference_rows(m, p, slots))
    assert m.rows(p, np.zeros(0, dtype=np.int64)).shape == (0, m.V.shape[1])
    gen.close()
