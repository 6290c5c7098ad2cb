"""The mirror's row analysis (vault/mirror_analysis.py) against a loop over rows and
words: the packed (weighted tf, TF-IDF count) sums, the term ids, and the assembled
CSC postings with their aligned counts."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from tiervault.vault.mirror_analysis import TEXT_FIELDS, analyse_rows, assemble
from tiervault.vault.rows import MirrorRow
from tiervault.vault.scoring import FTS_WEIGHTS
from tiervault.vault.vocabulary import Vocabulary
from tiervault.vault.word_codes import WordCodes
from tiervault.vault.tokenizer import STEMMER, STOP_WORDS, split_words

WORDS = ("the", "of", "retry", "retries", "retrying", "backoff", "Jitter", "cache", "caches",
         "naïve", "Größe", "x", "ab", "n42", "2024", "was", "this", "other", "others", "déjà",
         "ΑΒΓ", "東京", "a_b", "don't", "it's")


def _rows(n: int, seed: int, first: int = 1) -> list[MirrorRow]:
    rng = np.random.default_rng(seed)

    def text(k: int) -> str:
        seps = (" ", "  ", ", ", "-", "\n", "/", ". ")
        return "".join(str(w) + str(rng.choice(seps)) for w in rng.choice(WORDS, k))

    rows = []
    for i in range(n):
        rows.append(MirrorRow(
            key=first + i, id=f"id-{first + i:05d}-{rng.choice(WORDS)}", content_hash="0" * 64,
            type="pattern", domain="d", severity="info", origin="human", valid_from=None,
            valid_until=None, updated_at=None,
            title=text(int(rng.integers(0, 6))), description=text(int(rng.integers(0, 40))),
            context="" if i % 5 == 0 else text(int(rng.integers(0, 20))),
            tags=" ".join(rng.choice(WORDS, int(rng.integers(0, 3))))))
    # a text holding NUL takes the one-by-one split; an empty row has no terms at all
    rows[1] = rows[1]._replace(description="retry\x00backoff the cache")
    rows[2] = rows[2]._replace(id="", title="", description="", context="", tags="")
    return rows


def _reference(rows: list[MirrorRow], vocab: Vocabulary) -> tuple[dict, dict, np.ndarray]:
    """{(row, term id): weighted tf} and {(row, term id): TF-IDF count} by loops."""
    stop = STOP_WORDS.get()
    wtf: dict[tuple[int, int], float] = {}
    cnt: dict[tuple[int, int], int] = {}
    doclen = np.zeros(len(rows), dtype=np.float32)
    for r, row in enumerate(rows):
        for col, name in enumerate(TEXT_FIELDS):
            for word in split_words(getattr(row, name) or ""):
                if word == "\x00":
                    continue
                stem = STEMMER.stem(word)
                if not stem:
                    continue
                tid = vocab.ids([stem])[0]
                assert tid is not None
                doclen[r] += 1
                wtf[r, tid] = wtf.get((r, tid), 0.0) + FTS_WEIGHTS[col]
                if col != 0 and word not in stop:
                    cnt[r, tid] = cnt.get((r, tid), 0) + 1
    return wtf, cnt, doclen


def _as_dict(m: sp.spmatrix) -> dict:
    m = sp.coo_matrix(m)
    return {(int(r), int(c)): float(v) for r, c, v in zip(m.row, m.col, m.data)}


def test_chunks_sharing_codes_equal_a_loop_over_rows_and_words():
    rows = _rows(300, seed=1)
    vocab, codes_of = Vocabulary(), WordCodes()
    parts = [analyse_rows(rows[a:a + 70], vocab, codes_of) for a in range(0, len(rows), 70)]
    fresh_vocab = Vocabulary()
    fresh = [analyse_rows(rows[a:a + 70], fresh_vocab) for a in range(0, len(rows), 70)]
    # term ids: each chunk's new stems in sorted order, with or without the shared codes
    assert vocab.tolist() == fresh_vocab.tolist()
    n_terms = len(vocab)
    w = sp.vstack([p.w(n_terms) for p in parts], format="csr")
    c = sp.vstack([p.c(n_terms) for p in parts], format="csr")
    for p, q in zip(parts, fresh):
        assert np.array_equal(p.indptr, q.indptr) and np.array_equal(p.tids, q.tids)
        assert np.array_equal(p.packed, q.packed)
    want_w, want_c, want_len = _reference(rows, vocab)
    assert _as_dict(w) == want_w
    assert _as_dict(c) == {k: float(v) for k, v in want_c.items()}
    assert c.nnz == len(want_c) and not np.any(c.data == 0)  # no explicit zeros
    assert np.array_equal(np.concatenate([p.doclen for p in parts]), want_len)
    for m in (w, c):  # canonical rows: term ids ascending
        assert all(np.all(np.diff(m.indices[m.indptr[i]:m.indptr[i + 1]]) > 0)
                   for i in range(m.shape[0]))
    assert w.dtype == c.dtype == np.float32


def test_assembled_postings_carry_each_entry_count():
    rows = _rows(250, seed=2)
    vocab, codes_of = Vocabulary(), WordCodes()
    parts = [analyse_rows(rows[a:a + 100], vocab, codes_of) for a in range(0, len(rows), 100)]
    n_terms = len(vocab)
    base = assemble(parts, n_terms)
    w = sp.vstack([p.w(n_terms) for p in parts], format="csr")
    c = sp.vstack([p.c(n_terms) for p in parts], format="csr")
    want = w.tocsc()
    want.sort_indices()
    assert np.array_equal(base.w.indptr, want.indptr)
    assert np.array_equal(base.w.indices, want.indices)
    assert base.w.data.dtype == np.float32 and np.array_equal(base.w.data, want.data)
    # the count at each posting: c's entry there, 0 where c has none
    cc = sp.csc_matrix(c)
    cols = np.repeat(np.arange(n_terms), np.diff(want.indptr))
    got = {(int(r), int(t)): int(v) for r, t, v in zip(want.indices, cols, base.w_counts) if v}
    assert got == {k: int(v) for k, v in _as_dict(cc).items()}
    assert base.w_counts.dtype == np.uint8
    assert (base.c != c).nnz == 0 and np.array_equal(base.c.indptr, c.indptr)
    assert np.array_equal(base.c.indices, c.indices)


def test_a_row_repeating_a_word_past_255_gets_wider_counts():
    rows = _rows(3, seed=3)
    rows[0] = rows[0]._replace(description="retry " * 300)
    vocab = Vocabulary()
    part = analyse_rows(rows, vocab)
    base = assemble([part], len(vocab))
    assert base.w_counts.dtype == np.uint16 and int(base.w_counts.max()) >= 300
    tid = vocab.ids(["retri"])[0]
    assert base.c[0, tid] >= 300 and base.w[0, tid] >= 300 * FTS_WEIGHTS[2]


def test_no_rows_and_rows_without_terms():
    vocab = Vocabulary()
    empty = analyse_rows([], vocab)
    assert empty.indptr.tolist() == [0] and empty.tids.size == 0
    blank = _rows(3, seed=4)
    blank = [r._replace(id="", title="", description="...", context="", tags="") for r in blank]
    part = analyse_rows(blank, vocab)
    base = assemble([empty, part], len(vocab))
    assert base.w.shape == (3, 0) and base.w.nnz == 0 and base.c.nnz == 0
    assert part.doclen.tolist() == [0.0, 0.0, 0.0]


def test_rows_summed_in_blocks_equal_the_chunk_summed_at_once(monkeypatch):
    """A chunk is split and summed BLOCK_ROWS rows at a time (cache-sized); the words new
    to the chunk are still learned as one set: the same arrays and term ids as one block."""
    import tiervault.vault.mirror_analysis as mirror_analysis

    rows = _rows(260, seed=5)
    whole_vocab = Vocabulary()
    whole = [analyse_rows(rows[a:a + 130], whole_vocab, WordCodes()) for a in (0, 130)]
    for block in (1, 7, 64, 129, 130):
        monkeypatch.setattr(mirror_analysis, "BLOCK_ROWS", block)
        vocab, codes = Vocabulary(), WordCodes()
        parts = [analyse_rows(rows[a:a + 130], vocab, codes) for a in (0, 130)]
        assert vocab.tolist() == whole_vocab.tolist()
        for p, q in zip(parts, whole):
            for name in ("indptr", "tids", "packed", "doclen"):
                a, b = getattr(p, name), getattr(q, name)
                assert a.dtype == b.dtype and np.array_equal(a, b), (block, name)


def test_assembled_through_the_narrow_and_the_wide_packing_alike(monkeypatch):
    """The transposition carries 32-bit pairs when every weighted tf and count fits in
    16 bits, else the 64-bit packing: the same postings, weights and counts either way
    (the wide path forced here), and a row past 16 bits takes the wide one by itself."""
    import tiervault.vault.mirror_analysis as mirror_analysis

    rows = _rows(300, seed=6)
    vocab, codes_of = Vocabulary(), WordCodes()
    parts = [analyse_rows(rows[a:a + 70], vocab, codes_of) for a in range(0, len(rows), 70)]
    n_terms = len(vocab)
    assert mirror_analysis.packed_pairs(parts, sum(p.packed.size for p in parts)).dtype == np.uint32
    narrow = assemble(parts, n_terms)
    monkeypatch.setattr(mirror_analysis, "packed_pairs",
                        lambda ps, total: np.concatenate([p.packed for p in ps]))
    wide = assemble(parts, n_terms)
    monkeypatch.undo()
    for a, b in ((narrow.w, wide.w), (narrow.c, wide.c)):
        assert a.dtype == b.dtype and np.array_equal(a.indptr, b.indptr)
        assert np.array_equal(a.indices, b.indices) and a.data.tobytes() == b.data.tobytes()
    assert narrow.w_counts.dtype == wide.w_counts.dtype
    assert narrow.w_counts.tobytes() == wide.w_counts.tobytes()
    # 22,000 tokens of one word in the title (weight 10): a weighted tf past 65,535
    big = [rows[0]._replace(title="retry " * 22_000), *rows[1:5]]
    vocab = Vocabulary()
    part = analyse_rows(big, vocab)
    assert mirror_analysis.packed_pairs([part], part.packed.size).dtype == np.int64
    base = assemble([part], len(vocab))
    tid = vocab.ids(["retri"])[0]
    assert base.w[0, tid] >= 22_000 * FTS_WEIGHTS[1] and base.c[0, tid] >= 22_000
    assert base.w_counts.dtype == np.uint16
