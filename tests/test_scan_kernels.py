"""Issue 16, session 10: the scan's Brain-side kernels give the same numbers, bit for bit,
as the formulas they replace (the rankings must not move; bench/rank_compare.py checks
the whole scan, these pin each kernel on the inputs where a shortcut could differ)."""

from __future__ import annotations

import sqlite3
import threading

import numpy as np
import pytest

from tiervault.brain import combine
from tiervault.brain.pool import Pool
from tiervault.errors import StorageError, ValidationError
from tiervault.vault import latent as vlatent
from tiervault.vault.entry import Entry
from tiervault.vault.rows import LightRow
from tiervault.vault.store import TierStore

from brain_vault import at_a_day_old, vault_at


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
        x = rng.standard_normal(rng.integers(0, 40)) * 3
        if x.size and rng.random() < 0.3:
            x[rng.integers(0, x.size)] = rng.choice([np.nan, np.inf, -np.inf])
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
