"""Term proximity in the Brain's lexical leg (issue 10, tiervault.brain.proximity):
consecutive content words of the query, in order, within a window of one field.

Real tier files and the real Brain; the feature checked on real Entry objects.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tiervault.brain.proximity import entry_proximity, query_pairs
from tiervault.vault.entry import Entry

from brain_vault import NOW, entry, filler, fixed_brain, vault_at


def E(**kw) -> Entry:
    return entry(**{"description": "Notes.", **kw})



@pytest.fixture
def manager(tmp_path: Path):
    yield from vault_at(tmp_path, "agent")


def test_pairs_are_consecutive_content_stems():
    # "what" and "the" are function words; stems are FTS5's (porter)
    assert query_pairs("what is the connection pool size?") == [
        ("is", "connect"), ("connect", "pool"), ("pool", "size")]
    assert query_pairs("jwt") == [] and query_pairs("how and why") == []
    assert query_pairs("retry retry") == []  # a == b is no pair


def test_a_pair_counts_in_order_within_the_window_of_one_field():
    pairs = query_pairs("connection pool")
    assert entry_proximity(E(id="a", title="Connection pool sizing"), pairs, 8) == 1.0
    assert entry_proximity(E(id="b", title="Connection settings and the worker pool"),
                           pairs, 8) == 1.0  # 4 positions apart
    assert entry_proximity(E(id="c", title="Connection settings and the worker pool"),
                           pairs, 3) == 0.0  # outside a window of 3
    assert entry_proximity(E(id="d", title="Pool of connections"), pairs, 8) == 0.0  # order
    # the two words in two fields (title ends, description starts) are no pair
    assert entry_proximity(E(id="e", title="Tuning one connection", description="Pool sizes."),
                           pairs, 8) == 0.0
    three = query_pairs("database connection pool")
    assert entry_proximity(E(id="f", title="Connection pool"), three, 8) == 0.5


def _twins(manager) -> None:
    manager.capture_many(filler(30))
    # same words, same lengths, one field each: BM25, TF-IDF (and hash vectors) are equal
    manager.capture_many([
        E(id="scattered", title="Api server", description="pool tuning for the api connection"),
        E(id="adjacent", title="Api server", description="connection pool tuning for the api")])


def test_adjacent_words_rank_above_the_same_words_scattered(manager):
    _twins(manager)
    q = "connection pool"
    off = fixed_brain(manager).search_intelligent(q, mode="full", explain=True)
    on = fixed_brain(manager, proximity_weight=0.3).search_intelligent(q, mode="full",
                                                                       explain=True)
    by_off = {r["entry"]["id"]: r for r in off}
    assert by_off["adjacent"]["explain"]["lexical"] == pytest.approx(
        by_off["scattered"]["explain"]["lexical"])
    assert by_off["adjacent"]["score"] == pytest.approx(by_off["scattered"]["score"])
    by_on = {r["entry"]["id"]: r for r in on}
    assert on[0]["entry"]["id"] == "adjacent"
    assert by_on["adjacent"]["breakdown"]["semantic"] == pytest.approx(1.0)
    assert by_on["scattered"]["breakdown"]["semantic"] < 1.0


def test_proximity_is_on_for_hybrid_and_opt_in_for_fts_only(manager):
    from tiervault.brain import Brain
    from tiervault.config import BrainConfig
    from tiervault.embeddings.providers.hash import HashEmbedder

    from test_brain import HashVectors

    assert BrainConfig().proximity_weight == 0.0 and BrainConfig().hybrid_proximity_weight > 0
    _twins(manager)
    vectors = HashVectors(manager, HashEmbedder(dim=64))

    def hybrid(**cfg):
        b = fixed_brain(manager, **cfg)
        return {r["entry"]["id"]: r for r in Brain(manager, b.settings, vectors=vectors,
                                                   clock=lambda: NOW).search_intelligent(
            "connection pool", mode="full", explain=True)}
    on, off = hybrid(), hybrid(hybrid_proximity_weight=0.0)
    assert off["adjacent"]["score"] == pytest.approx(off["scattered"]["score"])
    assert on["adjacent"]["score"] > on["scattered"]["score"]


def test_field_texts_give_the_proximity_of_the_full_entries(manager):
    """Term proximity reads the five FTS5 fields of a SQLite tier (``field_texts``)
    instead of full entries: the same texts (tags as stored), the same proximity."""
    entries = [
        E(id="conn-pool", title="Connection pool", description="Pool connection reuse.",
          context="A connection  pool per worker; the pool is shared.", tags=["pool", "db-connection"]),
        E(id="naive-cafe", title="Café connection pool", description="Connexión pool, café crème.",
          tags=["café"]),
        E(id="none", title="Nothing here", description="Unrelated words only."),
    ]
    manager.capture_many(entries)
    store = manager.store("agent")
    ids = [e.id for e in entries] + ["absent"]
    texts, full = store.field_texts(ids), store.get_many(ids)
    assert set(texts) == set(full) == {e.id for e in entries}
    for eid, entry in full.items():
        row = texts[eid]
        assert (row.id, row.title, row.description, row.context) == (
            entry.id, entry.title, entry.description, entry.context)
        assert row.tags.split() == list(entry.tags)
        for q in ("connection pool", "pool connection reuse", "cafe connection pool", "db connection"):
            pairs = query_pairs(q)
            assert entry_proximity(row, pairs, 8) == entry_proximity(entry, pairs, 8)
    assert entry_proximity(texts["conn-pool"], query_pairs("db connection"), 8) == 1.0  # tags field
    assert store.field_texts([]) == {}


def test_every_ascii_word_of_the_packs_starts_with_its_stems_prefix():
    # brain/proximity.py stems only words that start like a wanted stem: this must hold
    from tiervault.brain.proximity import stem_prefix
    from tiervault.vault.tokenizer import STEMMER, split_words

    root = Path(__file__).resolve().parents[1]
    words = set()
    for pack in (root / "vault/packs/starter.jsonl", root / "eval/agentset/ops/pack.jsonl"):
        words.update(w for w in split_words(pack.read_text(encoding="utf-8")) if w.isascii())
    stems = STEMMER.stems(words)
    assert len(words) > 3000
    assert [w for w, st in stems.items() if st and not w.startswith(stem_prefix(st))] == []


def test_field_texts_rows_are_lowered_field_by_field_and_agree_with_entries():
    # brain/proximity.py lowers the joined fields once when they are ASCII (the cheap
    # reject) and each field only when the entry may hold a pair: the answers of a
    # FieldTexts row (None columns, capitals, non-ASCII, a pair across two fields) must
    # be those of the equal Entry
    from types import SimpleNamespace

    from tiervault.vault.rows import FieldTexts

    pairs = query_pairs("connection pool")
    cases = [
        (("a", "CONNECTION POOL", None, None, ""), 1.0),
        (("b", "Connection", "POOL sizes", "", None), 0.0),  # a window never spans two fields
        (("c", "Café CONNECTION", "", "naïve Connection Pool", "x"), 1.0),
        (("d", "Pool connection", None, "", "KELVIN \u212a connection"), 0.0),
        (("e", "", "", "", "db CONNECTION pool"), 1.0),
    ]
    for cols, want in cases:
        row = FieldTexts(*cols)
        ent = SimpleNamespace(id=cols[0], title=cols[1], description=cols[2], context=cols[3],
                              tags=(cols[4] or "").split())  # an Entry's shape (tags: a list)
        assert entry_proximity(row, pairs, 8) == entry_proximity(ent, pairs, 8) == want, cols
