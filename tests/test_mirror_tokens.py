"""A first mirror build's tokens (vault/mirror_tokens.py): the same in the helper process
as in this one, and a helper that cannot start costs a warning, not the build."""

from __future__ import annotations

import logging
import sys

import numpy as np

from tiervault.vault import postings as vpostings
from tiervault.vault.mirror_analysis import text_columns
from tiervault.vault.mirror_tokens import chunk_tokens, tokenise
from tiervault.vault.store import TierStore
from tiervault.vault.tokenizer import SEP, split_words

from tests.test_mirror_analysis import _rows
from tests.test_vault_manager import random_entries


def _words(tokens, column: int) -> list[str]:
    return [tokens.words[i] for i in tokens.positions[column].tolist()]


def test_tokens_are_the_words_of_each_text_with_separators():
    rows = _rows(120, seed=5)
    columns = text_columns(rows)
    tokens = tokenise(columns)
    assert len(set(tokens.words)) == len(tokens.words)  # distinct, first appearance first
    for col, texts in enumerate(columns):
        want: list[str] = []
        for i, text in enumerate(texts):
            if i:
                want.append(SEP)
            want.extend(w for w in split_words(text or "") if w != SEP)
        assert _words(tokens, col) == want
        assert tokens.positions[col].dtype == np.int32


def test_the_helper_answers_what_this_process_computes():
    chunks = [_rows(90, seed=s, first=1000 * s) for s in range(4)]
    helped = list(chunk_tokens(len(chunks), lambda i: text_columns(chunks[i]), True))
    local = [tokenise(text_columns(c)) for c in chunks]
    assert len(helped) == len(local) == 4
    for h, l in zip(helped, local):
        assert h.words == l.words
        assert all(np.array_equal(a, b) for a, b in zip(h.positions, l.positions))


def test_a_helper_that_cannot_start_leaves_the_chunks_to_this_process(monkeypatch, caplog):
    chunks = [_rows(30, seed=s) for s in range(3)]
    monkeypatch.setattr(sys, "executable", "/bin/false")  # exits at once: no hello
    with caplog.at_level(logging.WARNING, logger="tiervault.vault.mirror_tokens"):
        got = list(chunk_tokens(len(chunks), lambda i: text_columns(chunks[i]), True))
    assert [g.words for g in got] == [tokenise(text_columns(c)).words for c in chunks]
    assert "tokenising in this process from chunk 0" in caplog.text


def test_a_helped_build_writes_the_same_mirror(tmp_path, monkeypatch):
    monkeypatch.setattr(vpostings, "_CHUNK", 400)  # several chunks through the helper
    mirrors = {}
    for helped in ("1", "0"):
        monkeypatch.setenv("TIERVAULT_MIRROR_HELPER", helped)
        store = TierStore(tmp_path / f"h{helped}.db")
        store.capture_many(random_entries(2500, seed=4))
        mirrors[helped] = store.postings()
    a, b = mirrors["1"], mirrors["0"]
    assert a.vocab.tolist() == b.vocab.tolist()
    for name in ("indptr", "indices", "data", "counts"):
        x, y = a.W.arrays()[name], b.W.arrays()[name]
        assert x.dtype == y.dtype and np.array_equal(x, y), name
    for name, x in a.T.arrays().items():
        assert np.array_equal(x, b.T.arrays()[name]), name
    assert np.array_equal(a.doclen, b.doclen) and a.ids.tolist() == b.ids.tolist()
