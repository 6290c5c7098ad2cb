"""The mirror's fast paths give the numbers of the slow definitions they replace:
TF-IDF at a few slots (base and delta segments), the NumPy query vector, and the
single-thread cosine kernel."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from tiervault.embeddings.vector_math import cosine_scores, l2_normalize
from tiervault.vault.entry import Entry
from tiervault.vault.filters import Filters
from tiervault.vault.store import TierStore
from tiervault.vault.scoring import tfidf_rows
from tiervault.vault.tokenizer import STEMMER, STOP_WORDS

from tests.test_vault_manager import random_entries
from tests.tfidf_reference import scores_at_term_by_term

QUERIES = (["retry", "backoff", "the", "jitter"], ["cache", "cache", "invalidation"],
           ["zyzzyva", "lock"], ["the", "of"], [])


def _check_tfidf_at(store: TierStore) -> None:
    m = store.postings()
    rng = np.random.default_rng(3)
    slots = np.sort(rng.choice(len(m.ids), size=min(40, len(m.ids)), replace=False))
    for words in QUERIES:
        dense = m.tfidf_scores(words)
        np.testing.assert_allclose(m.tfidf_at(words, slots), dense[slots], rtol=1e-12, atol=0)
        # unsorted and repeated slots too (a caller's order is kept)
        odd = np.concatenate([slots[::-1], slots[:3]])
        np.testing.assert_allclose(m.tfidf_at(words, odd), dense[odd], rtol=1e-12, atol=0)


def test_tfidf_at_equals_the_dense_scores_in_base_and_delta(tmp_path):
    store = TierStore(tmp_path / "a.db")
    store.capture_many(random_entries(1500))
    _check_tfidf_at(store)
    # a small change goes to the delta segment (no refit): both segments answer
    store.capture_many(random_entries(40, seed=9, prefix="d"))
    store.capture(Entry.create(id="z", title="zyzzyva lock", description="cache zyzzyva"))
    store.delete("e7")
    assert store.postings().delta_W
    _check_tfidf_at(store)
    store.close()
    # reopened from the cache file: the loaded columns are searched the same way
    reopened = TierStore(tmp_path / "a.db")
    _check_tfidf_at(reopened)


def _check_bm25_at(store: TierStore) -> None:
    from tiervault.vault.scoring import fts5_idf, top_k

    m = store.postings()
    n = m.n_alive
    found = 0
    for words in QUERIES:
        stems = list(dict.fromkeys(s for s in STEMMER.stems(words).values() if s))
        matches = m.matches(stems)
        idf, avglen = fts5_idf(n, matches.df), m.total_len / n
        dense = m.bm25(matches, idf, avglen)
        at = m.union(matches)
        assert at.tolist() == np.flatnonzero(dense > 0).tolist()
        assert m.bm25_at(matches, idf, avglen, at).tobytes() == dense[at].tobytes()  # bit for bit
        # the lexicon's top k over the union: the dense top k's slots and scores
        filters = Filters(now=1_800_000_000.0, types=("pattern", "rule"))
        mask = m.mask(filters)
        expected = top_k(dense, 7, mask & (dense > 0))
        hits = store.lexical_top_k(stems, store.term_stats(stems), filters, 7)
        assert [h.id for h in hits] == m.ids.take(expected)
        assert [h.score for h in hits] == dense[expected].tolist()
        assert store.lexical_count(stems, filters, 10**6) == int(np.count_nonzero(mask & (dense > 0)))
        found += len(hits)
    assert found >= 10  # the filtered top k were not all empty


def test_bm25_at_the_matching_slots_equals_the_dense_scores(tmp_path):
    store = TierStore(tmp_path / "a.db")
    store.capture_many(random_entries(1500))
    _check_bm25_at(store)
    store.capture_many(random_entries(40, seed=9, prefix="d"))  # the delta segment
    store.capture(Entry.create(id="z", title="zyzzyva lock", description="cache zyzzyva"))
    store.delete("e7")
    assert store.postings().delta_W
    _check_bm25_at(store)
    store.close()
    _check_bm25_at(TierStore(tmp_path / "a.db"))  # loaded from the cache file


def test_query_tfidf_equals_the_sparse_definition(tmp_path):
    store = TierStore(tmp_path / "a.db")
    store.capture_many(random_entries(1200))
    m = store.postings()
    for words in QUERIES[:3]:
        stems = STEMMER.stems(words)
        cols = [m.term_ids[stems[w]] for w in words
                if w not in STOP_WORDS.get() and stems[w] in m.term_ids]
        counts = sp.csr_matrix((np.ones(len(cols)), ([0] * len(cols), cols)),
                               shape=(1, m.tfidf_terms))
        expected = tfidf_rows(counts, m.idf).toarray().ravel()
        got = np.zeros(m.tfidf_terms)
        q = m.query_tfidf(words)
        assert q is not None
        got[q[0]] = q[1]
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-15)
        assert np.array_equal(m.tfidf_vector(words).toarray().ravel(), got)
    assert m.query_tfidf(["the", "of"]) is None


def test_cosine_kernel_equals_the_matrix_product():
    rng = np.random.default_rng(0)
    m = l2_normalize(rng.standard_normal((3000, 64)).astype(np.float32))
    q = m[17]
    got = cosine_scores(m, q)
    assert got.dtype == np.float32 and got.shape == (3000,)
    np.testing.assert_allclose(got, (m.astype(np.float64) @ q.astype(np.float64)), atol=1e-5)
    assert int(np.argmax(got)) == 17


def test_reloaded_mirror_indexes_live_slots_like_a_built_one(tmp_path):
    """Look-ups of a mirror loaded from its cache file (dead slots, shared content
    hashes) equal those of the mirror that wrote it: the first live slot of a hash wins."""
    store = TierStore(tmp_path / "a.db")
    same = {"title": "Same words", "description": "identical content"}
    store.capture_many([Entry.create(id=f"dup{i}", **same) for i in range(3)]
                       + random_entries(1100))
    store.delete("dup0")  # the first holder of the shared hash dies
    store.capture_many(random_entries(300, seed=4, prefix="r"))  # > 256 rows: rebuild + save
    built = store.postings()
    assert not built.delta_W and built.slot("dup0") is None
    store.close()
    loaded = TierStore(tmp_path / "a.db").postings()
    assert loaded.ids == built.ids and np.array_equal(loaded.alive, built.alive)
    for eid in ("dup1", "dup2", "e5", "r7", "dup0"):
        assert loaded.slot(eid) == built.slot(eid)
    h = Entry.create(id="x", **same).content_hash
    assert loaded.slot_by_hash(h) == built.slot_by_hash(h) == built.slot("dup1")


def test_split_many_equals_split_words_one_by_one():
    from tiervault.vault.tokenizer import SEP, split_many, split_words

    texts = ["Retry with back-off", "", "  ", "ÉCOLE d'été: naïve café", "c++ & node.js",
             "ΟΔΟΣ Σ", "x_y", "tab\tand\nnewline", "", "x"]
    for chunk in (texts, texts[:1], texts[:3], ["plain ascii only", "more"], []):
        words = split_many(chunk)
        assert words is not None
        expected: list[str] = []
        for i, t in enumerate(chunk):
            expected += ([SEP] if i else []) + split_words(t)
        assert words == expected, chunk
    assert split_many(["a\x00b", "c"]) is None  # a text holding the separator: caller splits


def test_mirror_of_rows_with_odd_text_matches_fts5(tmp_path):
    """Non-ASCII, punctuation-only and empty fields: the chunked split keeps the
    mirror equal to FTS5's own scores."""
    from tests.test_vault_manager import mirror_top
    from tiervault.vault.filters import Filters
    from tiervault.vault.query import query_terms

    store = TierStore(tmp_path / "a.db")
    store.capture_many([
        Entry.create(id="greek", title="ΟΔΟΣ Σ δρόμος", description="naïve café résumé"),
        Entry.create(id="punct", title="!!!", description="... --- ???", context=""),
        Entry.create(id="mixed", title="Retry storms", description="retry, back-off; jitter",
                     tags=["ops", "retry"]),
    ] + random_entries(50))
    for q in ("δρόμος café", "οδος σ", "retry jitter", "naïve résumé", "punct"):
        ids, scores = mirror_top(store, q)
        ref = store.search_fts(query_terms(q), Filters(), 20)
        assert ids and set(ids) == set(ref.ids), q
        np.testing.assert_allclose(scores, ref.scores, rtol=1e-5)


def test_a_query_instant_shares_one_mask_and_a_write_renews_it(tmp_path):
    import time

    from tiervault.vault.filters import Filters

    store = TierStore(tmp_path / "a.db")
    store.capture_many(random_entries(50))
    store.postings()  # built, cached on disk (its epoch pinned: one more generation)
    f = Filters.build(domain="db", now=time.time())
    first = store.filter_mask(f)
    again = store.filter_mask(f)
    assert again.mask is first.mask and not first.mask.flags.writeable  # shared, read-only
    store.capture(Entry.create(id="fresh", title="t", description="d", domain="db"))
    after = store.filter_mask(f)
    assert after.version != first.version and after.mask[after.ids.index("fresh")]
    # without an instant the wall clock decides each time: nothing kept
    assert store.filter_mask(Filters()).mask is not store.filter_mask(Filters()).mask


def test_a_saved_mirror_outlives_the_epoch_window(tmp_path, monkeypatch):
    """Writes after a cache was saved (embedding a vault is thousands of them) must not
    make it unusable once its generation leaves the epoch window; a copy of the file
    from another history is still refused."""
    import shutil

    from tiervault.vault import connection
    from tiervault.vault.postings import Postings

    monkeypatch.setattr(connection, "EPOCH_WINDOW", 4)
    path = tmp_path / "a.db"
    store = TierStore(path)
    store.capture_many(random_entries(1200))
    assert store.postings().n_alive == 1200  # built and saved
    store.close()
    for suffix in ("", "-wal"):  # a copy taken now: the same history so far
        if (tmp_path / f"a.db{suffix}").exists():
            shutil.copy(tmp_path / f"a.db{suffix}", tmp_path / f"backup.db{suffix}")
    store = TierStore(path)
    for i in range(12):  # more write transactions than the window, no entry changed
        store.link("e1", f"e{i + 2}", "supports")
    store.close()
    reopened = TierStore(path)
    loaded = Postings.load_cache(reopened)
    assert loaded is not None and loaded.n_alive == 1200
    # after the fork the live tier changes and saves its cache again (a rebuild)
    reopened.capture_many(random_entries(300, seed=8, prefix="live"))
    assert reopened.postings().slot("live1") is not None and not reopened.postings().delta_W
    # The other history: the backup gets its own writes, then is put in place of the
    # tier with the live tier's cache file next to it -> refused, rebuilt.
    backup = TierStore(tmp_path / "backup.db")
    for i in range(40):  # past the live cache's generation, with epochs of its own
        backup.link("e2", f"e{(i % 30) + 3}", "extends", note=str(i))
    backup.capture(Entry.create(id="only-in-backup", title="t", description="d"))
    backup.close()
    reopened.close()
    for suffix in ("-wal", "-shm"):
        (tmp_path / f"a.db{suffix}").unlink(missing_ok=True)
    shutil.copy(tmp_path / "backup.db", path)
    if (tmp_path / "backup.db-wal").exists():
        shutil.copy(tmp_path / "backup.db-wal", tmp_path / "a.db-wal")
    restored = TierStore(path)
    assert Postings.load_cache(restored) is None  # the live tier's cache: another history
    assert restored.postings().slot("only-in-backup") is not None
    assert restored.postings().slot("live1") is None


def test_words_the_stemmer_skips_are_what_fts5_itself_makes_of_them():
    """``unchanged_by_fts5`` (no SQL for numbers, short and long words) is checked
    against a real ``porter unicode61`` FTS5 table; the shortcut must also hold for
    words porter would change if they ended in a letter."""
    import random
    import sqlite3

    from tiervault.vault.tokenizer import Stemmer, unchanged_by_fts5, unchanged_many

    rng = random.Random(5)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    words = {"0000042", "sha256", "v2", "ab", "x", "is", "running1", "ies9", "ational7",
             "caresses", "ponies", "a" * 64, "b" * 65, "ing" * 30 + "4", "9", "10k", "Ab1",
             "é1", "ü"}
    for _ in range(3000):
        n = rng.choice([1, 2, 3, 4, 6, 9, 14, 63, 64, 65, 70])
        words.add("".join(rng.choice(alphabet) for _ in range(n)))
    for suffix in ("ing", "ed", "ies", "sses", "ational", "ization", "ful", "ness", "ll", "e", "y"):
        words.add("walk" + suffix)
        words.add("walk" + suffix + "3")
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE w USING fts5(word, tokenize='porter unicode61')")
    conn.execute("CREATE VIRTUAL TABLE wv USING fts5vocab(w, instance)")
    ordered = sorted(words)
    conn.executemany("INSERT INTO w(rowid, word) VALUES (?, ?)", enumerate(ordered, start=1))
    fts5 = {ordered[doc - 1]: term for doc, term in conn.execute(
        "SELECT doc, term FROM wv WHERE offset = 0")}
    skipped = [w for w in ordered if unchanged_by_fts5(w)]
    odd = ["", "ＡＢ1", "²3", "٣", "ab\u00b2", "AB", "aB1", "1A", "ß1", "a-1", "a_1", " 1", "x" * 65 + "A"]
    assert unchanged_many(ordered + odd) == skipped + [w for w in odd if unchanged_by_fts5(w)]
    assert len(skipped) > 1000 and "walking" not in skipped and "Ab1" not in skipped
    assert "é1" not in skipped
    for w in skipped:
        assert fts5[w] == w, w
    # and a fresh stemmer answers every word as FTS5 does, skipped or not
    stems = Stemmer().stems(ordered)
    assert stems == {w: fts5.get(w, "") for w in ordered}


def test_tag_slots_of_a_build_equal_a_loop_over_rows(tmp_path):
    """The column-wise registration of a first build gives every tag the slots a
    loop over the rows would, repeats and odd tag texts (written by outside SQL) too."""
    import sqlite3

    path = tmp_path / "a.db"
    store = TierStore(path)
    store.capture_many(random_entries(1500))
    store.close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE entries SET tags = 'dup dup other' WHERE id = 'e3'")
    conn.execute("UPDATE entries SET tags = '  spaced\tout  ' WHERE id = 'e4'")
    conn.execute("UPDATE entries SET tags = '' WHERE id = 'e5'")
    conn.commit()
    conn.close()
    store = TierStore(path)
    m = store.postings()
    expected: dict[str, list[int]] = {}
    for slot, eid in enumerate(m.ids):
        row = store.get(eid)
        assert row is not None
        text = {"e3": "dup dup other", "e4": "  spaced\tout  ", "e5": ""}.get(eid, row.tag_text)
        for tag in text.split():
            expected.setdefault(tag, []).append(slot)
    assert list(m.tags) == list(expected)
    assert all(m.tags[t].tolist() == s for t, s in expected.items())
    assert m.tags["dup"].tolist().count(m.slot("e3")) == 2


def test_split_each_equals_split_words_one_by_one():
    """One translate over a whole batch (ASCII) or text by text (non-ASCII, a NUL):
    the same words per text either way."""
    from tiervault.vault.tokenizer import split_each, split_words

    ascii_texts = ["Retry with back-off", "", "  ", "c++ & node.js", "x_y", "tab\tand\nnewline", "", "x",
                   "MiXeD CaSe 42abc ABC-0007"]
    for chunk in (ascii_texts, ascii_texts[:1], [""], [], ascii_texts + ["ÉCOLE d'été: naïve café", "ΟΔΟΣ Σ"],
                  ["a\x00b", "c"]):
        assert split_each(chunk) == [split_words(t) for t in chunk], chunk


_scores_at_term_by_term = scores_at_term_by_term  # (how scores_at summed before it batched)


def test_tfidf_at_batched_weights_equal_the_term_by_term_sum_bit_for_bit(tmp_path):
    """The batched weights (one np.add.at in term order) give each slot the same sum as
    adding term by term: not one bit differs, so no ranking moves (issue 16)."""
    store = TierStore(tmp_path / "a.db")
    store.capture_many(random_entries(1500))
    m = store.postings()
    rng = np.random.default_rng(11)
    for words in [*QUERIES, ["cache", "cache", "retry", "lock", "zyzzyva", "cache"]]:
        q = m.query_tfidf(words)
        if q is None:
            continue
        slots = rng.choice(m.base_rows, size=60, replace=True).astype(np.int64)  # repeats too
        np.testing.assert_array_equal(m.tfidf_at(words, slots), _scores_at_term_by_term(q, slots, m))
    store.close()


def test_kept_live_count_and_query_weights_follow_every_write(tmp_path):
    """n_alive and a query's TF-IDF weights are kept between calls; a delete (a slot
    killed in place), an update (a new delta slot) and a rebuild each show at once."""
    store = TierStore(tmp_path / "a.db")
    store.capture_many(random_entries(1500))
    m = store.postings()
    words = ["retry", "backoff", "cache"]
    before = m.query_tfidf(words)
    assert m.n_alive == int(np.count_nonzero(m.alive)) == 1500
    store.delete("e7")
    store.capture(Entry.create(id="e8", title="retry zyzzyva", description="an update"))
    m = store.postings()
    assert m.n_alive == int(np.count_nonzero(m.alive)) == 1499 and m.delta_W
    assert m.query_tfidf(words).weights.tobytes() == before.weights.tobytes()  # no refit
    store.capture_many(random_entries(400, seed=5, prefix="r"))  # past 5%: a rebuild
    m = store.postings()
    assert not m.delta_W and m.n_alive == int(np.count_nonzero(m.alive)) == 1899
    fresh = TierStore(tmp_path / "a.db").postings().query_tfidf(words)
    assert m.query_tfidf(words).weights.tobytes() == fresh.weights.tobytes()
    store.close()


def test_tag_slots_equal_a_loop_over_rows_few_and_many_distinct_tags():
    """tag_slots (codes given in order of first appearance, a stable sort of 16-bit codes
    when the chunk's tags fit, else of 64-bit ones) equals a loop over the rows: the tags
    in order of first appearance, each with its ascending slots, a repeat repeated."""
    from tiervault.vault.slot_columns import tag_slots

    def loop(texts, first):
        out: dict[str, list[int]] = {}
        for offset, text in enumerate(texts):
            for tag in (text or "").split():
                out.setdefault(tag, []).append(first + offset)
        return out

    rng = np.random.default_rng(5)
    few = [" ".join(f"t{j}" for j in rng.integers(0, 300, rng.integers(0, 6))) for _ in range(3000)]
    many = [f"u{i} u{i + 1} shared" for i in range(40_000)]  # 40,001 distinct tags: past int16
    for texts, first in ((few + [None, "", "dup x dup"], 7), (many + ["shared shared", None], 0), ([""], 3)):
        got, want = tag_slots(texts, first), loop(texts, first)
        assert list(got) == list(want)
        assert all(got[t].dtype == np.int64 and got[t].tolist() == s for t, s in want.items())
