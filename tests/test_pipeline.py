"""Embed on write and backfill against real tier files and the fake provider server."""

from __future__ import annotations

import hashlib
import sqlite3
import socket

import numpy as np
import pytest

from embeddings_server import FakeEmbeddingServer, Fault
from tiervault.embeddings.pipeline import (
    DEFAULT_TEMPLATE,
    EmbeddingPipeline,
    check_template,
    embedding_input,
    input_hash,
    model_key_for,
)
from tiervault.embeddings.providers.hash import HashEmbedder
from tiervault.embeddings.providers.openai import OpenAIEmbedder
from tiervault.errors import ConfigError
from tiervault.vault.entry import Entry
from tiervault.vault.filters import Filters
from tiervault.vault.manager import VaultManager
from tiervault.vault.store import TierStore

KEY = "sk-secret-do-not-print-4242"
FAST = {"backoff_base_s": 0.001, "backoff_max_s": 0.002}


def openai(url: str, model: str = "text-embedding-3-small", **kw) -> OpenAIEmbedder:
    return OpenAIEmbedder(base_url=url, api_keys=(KEY,), model=model, **{**FAST, **kw})


def entry(i: int, **over) -> Entry:
    fields = {"id": f"e{i:04d}", "title": f"Entry number {i}", "description": f"body of entry {i}",
              "tags": ["alpha", f"t{i % 3}"], "context": f"ctx {i}"}
    fields.update(over)
    return Entry.create(**fields)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def vault(tmp_path):
    with VaultManager.at({"agent": str(tmp_path / "agent.db"), "team": str(tmp_path / "team.db")}) as m:
        yield m


def attach(manager: VaultManager, emb, **kw) -> EmbeddingPipeline:
    pipe = EmbeddingPipeline(emb, **kw)
    manager.add_write_hook(pipe.hook(manager))
    return pipe


def inputs_sent(server: FakeEmbeddingServer, since: int = 0) -> list[str]:
    return [t for r in server.requests[since:] for t in r.inputs]


def stored(store: TierStore, model: str) -> dict[str, tuple[str, np.ndarray]]:
    """{id: (input_hash, vector)} straight from SQLite."""
    con = sqlite3.connect(store.path)
    rows = con.execute("SELECT entry_id, input_hash, vector FROM entry_vectors WHERE model = ?",
                       (model,)).fetchall()
    con.close()
    return {r[0]: (r[1], np.frombuffer(r[2], dtype=np.float32)) for r in rows}


# -- the embedding input -----------------------------------------------------------------------


def test_input_text_template_truncation_and_hash():
    e = Entry.create(id="x", title="Use WAL", description="Readers never block writers.",
                     tags=["sqlite", "perf"], context="Many readers", why="not embedded")
    text = embedding_input(e)
    assert text == "Use WAL\nTags: sqlite, perf\n\nReaders never block writers.\nMany readers"
    assert embedding_input(e, DEFAULT_TEMPLATE, max_chars=10) == text[:10]
    custom = embedding_input(e, "{title} ({domain}): {why}")
    assert custom == "Use WAL (general): not embedded"
    h = input_hash("openai:m", text)
    assert h == hashlib.sha256(b"openai:m\0" + text.encode()).hexdigest()
    assert input_hash("openai:other", text) != h
    with pytest.raises(ConfigError, match="created_at"):
        check_template("{title} {created_at}")
    with pytest.raises(ConfigError):
        check_template("no fields at all")


def test_model_key_separates_providers_models_and_configured_dims():
    assert model_key_for(HashEmbedder(64)) == "hash:hash-v1-64"
    emb = openai("http://127.0.0.1:9/v1")
    assert model_key_for(emb) == "openai:text-embedding-3-small"
    assert model_key_for(emb, dim=256) == "openai:text-embedding-3-small@256"


# -- embed on write ------------------------------------------------------------------------------


def test_capture_embeds_once_and_unchanged_input_makes_no_request(vault, embeddings_server):
    srv = embeddings_server
    pipe = attach(vault, openai(srv.openai_url))
    entries = [entry(i) for i in range(5)]
    vault.capture_many(entries, "agent")
    assert len(srv.requests) == 1 and srv.requests[0].inputs == [pipe.text(e) for e in entries]
    store = vault.store("agent")
    rows = stored(store, pipe.model_key)
    assert set(rows) == {e.id for e in entries}
    want = srv.expected([pipe.text(e) for e in entries])
    for e, vec in zip(entries, want):
        assert rows[e.id][0] == input_hash(pipe.model_key, pipe.text(e))
        np.testing.assert_allclose(rows[e.id][1], vec, rtol=1e-6)
    assert store.embedding_counts(pipe.model_key) == {"pending": 0, "ok": 5, "error": 0, "missing": 0}

    before = len(srv.requests)
    vault.capture_many(entries, "agent")  # identical
    vault.capture(entry(0, why="new rationale", severity="critical"), "agent")
    # `why` and severity changed the entry but not its embedding input: no provider call.
    assert store.get("e0000").why == "new rationale"
    assert len(srv.requests) == before


def test_an_edit_reembeds_exactly_that_entry(vault, embeddings_server):
    srv = embeddings_server
    pipe = attach(vault, openai(srv.openai_url))
    vault.capture_many([entry(i) for i in range(4)], "agent")
    old = stored(vault.store("agent"), pipe.model_key)
    before = len(srv.requests)
    edited = entry(2, description="a completely new body")
    vault.capture(edited, "agent")
    assert inputs_sent(srv, before) == [pipe.text(edited)]
    new = stored(vault.store("agent"), pipe.model_key)
    assert new["e0002"][0] == input_hash(pipe.model_key, pipe.text(edited)) != old["e0002"][0]
    np.testing.assert_allclose(new["e0002"][1], srv.expected([pipe.text(edited)])[0], rtol=1e-6)
    for other in ("e0000", "e0001", "e0003"):
        assert new[other][0] == old[other][0]


def test_batches_of_100_capped_by_provider_batch_size(vault, embeddings_server):
    srv = embeddings_server
    attach(vault, openai(srv.openai_url))
    vault.capture_many([entry(i) for i in range(250)], "agent")
    assert [len(r.inputs) for r in srv.requests] == [100, 100, 50]
    srv.clear()
    pipe = EmbeddingPipeline(openai(srv.openai_url, model="other-model"), provider_batch=40)
    counts = pipe.backfill(vault.store("agent"))
    assert [len(r.inputs) for r in srv.requests] == [40] * 6 + [10]
    assert counts == {"embedded": 250, "skipped": 0, "failed": 0, "pending": 0}


def test_model_switch_reembeds_and_keeps_vectors_apart(vault, embeddings_server):
    srv = embeddings_server
    first = attach(vault, openai(srv.openai_url, model="model-a"))
    vault.capture_many([entry(i) for i in range(6)], "agent")
    srv.clear()
    srv.dim = 12  # the new model has another dimension
    second = EmbeddingPipeline(openai(srv.openai_url, model="model-b"))
    store = vault.store("agent")
    assert second.backfill(store) == {"embedded": 6, "skipped": 0, "failed": 0, "pending": 0}
    assert {r.body["model"] for r in srv.requests} == {"model-b"}
    a, b = stored(store, first.model_key), stored(store, second.model_key)
    assert set(a) == set(b) and {v.shape[0] for _, v in a.values()} == {8}
    assert {v.shape[0] for _, v in b.values()} == {12}
    # A rerun for either model has nothing to do.
    srv.clear()
    assert second.backfill(store)["skipped"] == 6 and first.backfill(store)["skipped"] == 6
    assert srv.requests == []
    _ch = store.vector_changes_since(first.model_key, -1)
    ids_a, m_a = _ch.ids, _ch.matrix
    _ch = store.vector_changes_since(second.model_key, -1)
    ids_b, m_b = _ch.ids, _ch.matrix
    assert m_a.shape == (6, 8) and m_b.shape == (6, 12)


def test_failing_provider_never_loses_the_write_and_records_the_error(vault, embeddings_server):
    srv = embeddings_server
    clock = Clock()
    pipe = attach(vault, openai(srv.openai_url), clock=clock)
    srv.push(*[Fault("status", status=500, body="upstream broke for {key}")] * 3)
    e = entry(1)
    stored_entry = vault.capture(e, "agent")
    assert stored_entry.id == e.id and vault.store("agent").get(e.id) is not None
    assert len(srv.requests) == 3  # the provider's own retries, then given up
    hits = vault.search("number", filters=Filters())
    assert hits.ids == [e.id]  # lexical search still answers
    vectors = vault.store("agent")
    state, error, retries = vectors.embedding_status(pipe.model_key, [e.id])[e.id]
    assert state == "error" and retries == 1 and "500" in error and KEY not in error

    # Within the cool-down the provider is not called again: the next write stays pending.
    vault.capture(entry(2), "agent")
    assert len(srv.requests) == 3
    assert vectors.embedding_status(pipe.model_key, ["e0002"])["e0002"][0] == "pending"

    # Another failure later bumps the retry count of the entry that failed.
    clock.now += 60
    srv.push(*[Fault("status", status=503)] * 3)
    vault.capture(entry(1, description="edited while the provider is down"), "agent")
    state, error, retries = vectors.embedding_status(pipe.model_key, ["e0001"])["e0001"]
    assert state == "error" and "503" in error and retries == 2

    # The provider is back: backfill picks up the errored and the pending entry.
    counts = pipe.backfill(vault.store("agent"))
    assert counts == {"embedded": 2, "skipped": 0, "failed": 0, "pending": 0}
    assert vectors.embedding_counts(pipe.model_key) == {"pending": 0, "ok": 2, "error": 0, "missing": 0}
    assert vectors.embedding_status(pipe.model_key, ["e0001"])["e0001"] == ("ok", "", 0)


def test_refused_connection_keeps_entries_and_backfill_recovers(vault, embeddings_server):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    pipe = attach(vault, openai(dead))
    vault.capture_many([entry(i) for i in range(3)], "agent")
    assert vault.store("agent").count() == 3
    vectors = vault.store("agent")
    states = vectors.embedding_status(pipe.model_key, ["e0000", "e0001", "e0002"])
    assert {s[0] for s in states.values()} == {"error"} and all(s[2] == 1 for s in states.values())
    assert all("Embedding" in s[1] for s in states.values())
    down = EmbeddingPipeline(openai(dead))
    assert down.backfill(vault.store("agent")) == {"embedded": 0, "skipped": 0, "failed": 3, "pending": 0}
    up = EmbeddingPipeline(openai(embeddings_server.openai_url))
    assert up.backfill(vault.store("agent")) == {"embedded": 3, "skipped": 0, "failed": 0, "pending": 0}


# -- backfill ------------------------------------------------------------------------------------


def test_backfill_picks_up_pending_unhooked_and_edited_entries(vault, embeddings_server):
    srv = embeddings_server
    pipe = EmbeddingPipeline(openai(srv.openai_url))
    store = vault.store("agent")
    store.capture_many([entry(i) for i in range(10)])  # no hook: never embedded
    vectors = store
    # A process that died after marking its batch pending, before embedding it:
    vectors.mark_embedding(pipe.model_key, [("e0003", "h"), ("e0004", "h")], "pending")
    assert vectors.embedding_counts(pipe.model_key)["pending"] == 2
    assert pipe.backfill(store) == {"embedded": 10, "skipped": 0, "failed": 0, "pending": 0}
    # Edits written without the hook (e.g. markdown import): found by the re-hash pass only.
    store.capture_many([entry(5, title="Renamed five"), entry(7, context="new context")])
    srv.clear()
    assert pipe.backfill(store, rehash=False) == {"embedded": 0, "skipped": 0, "failed": 0, "pending": 0}
    assert pipe.backfill(store) == {"embedded": 2, "skipped": 8, "failed": 0, "pending": 0}
    assert sorted(inputs_sent(srv)) == sorted([pipe.text(entry(5, title="Renamed five")),
                                              pipe.text(entry(7, context="new context"))])
    srv.clear()
    assert pipe.backfill(store, rebuild=True) == {"embedded": 10, "skipped": 0, "failed": 0, "pending": 0}
    assert len(inputs_sent(srv)) == 10


def test_interrupted_backfill_resumes_without_redoing_work(vault, embeddings_server):
    srv = embeddings_server
    store = vault.store("agent")
    store.capture_many([entry(i) for i in range(250)])
    pipe = EmbeddingPipeline(openai(srv.openai_url))
    seen: list[tuple[int, int]] = []

    def stop_after_first_batch(done: int, total: int) -> None:
        seen.append((done, total))
        if done >= 100:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        pipe.backfill(store, on_progress=stop_after_first_batch)
    assert seen == [(100, 250)]
    assert store.embedding_counts(pipe.model_key)["ok"] == 100
    counts = pipe.backfill(store)
    assert counts == {"embedded": 150, "skipped": 100, "failed": 0, "pending": 0}
    assert len(inputs_sent(srv)) == 250  # every entry sent exactly once over both runs


def test_backfill_stops_calling_a_dead_provider_and_reports_pending(vault, embeddings_server):
    srv = embeddings_server
    store = vault.store("agent")
    store.capture_many([entry(i) for i in range(600)])
    srv.push(*[Fault("status", status=500)] * 9)  # three batches x three attempts
    pipe = EmbeddingPipeline(openai(srv.openai_url))
    counts = pipe.backfill(store)
    assert counts == {"embedded": 0, "skipped": 0, "failed": 300, "pending": 300}
    assert len(srv.requests) == 9
    assert pipe.backfill(store) == {"embedded": 600, "skipped": 0, "failed": 0, "pending": 0}


def test_deleted_entry_is_not_resurrected_by_a_late_vector(vault):
    emb = HashEmbedder(32)
    pipe = attach(vault, emb)
    vault.capture(entry(1), "agent")
    vault.delete("e0001", "agent")
    vectors = vault.store("agent")
    assert vectors.embedding_counts(pipe.model_key) == {"pending": 0, "ok": 0, "error": 0, "missing": 0}
    assert stored(vault.store("agent"), pipe.model_key) == {}


def test_hash_embedder_offline_end_to_end(vault):
    pipe = attach(vault, HashEmbedder(64))
    vault.capture_many([entry(i) for i in range(20)], "team")
    counts = pipe.backfill(vault.store("team"))
    assert counts == {"embedded": 0, "skipped": 20, "failed": 0, "pending": 0}
    rows = stored(vault.store("team"), "hash:hash-v1-64")
    np.testing.assert_allclose(np.linalg.norm(np.stack([v for _, v in rows.values()]), axis=1), 1.0, rtol=1e-5)
