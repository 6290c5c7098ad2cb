"""Embedding providers against a real HTTP server on 127.0.0.1, and the offline hash embedder."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from embeddings_server import FakeEmbeddingServer, Fault
from tiervault.config.settings import EmbeddingConfig, Secret
from tiervault.embeddings.base import Embedder
from tiervault.embeddings.factory import make_embedder
from tiervault.embeddings.providers.hash import HashEmbedder
from tiervault.embeddings.providers.http import HttpEmbedder
from tiervault.embeddings.providers.ollama import OllamaEmbedder
from tiervault.embeddings.providers.openai import OpenAIEmbedder
from tiervault.embeddings.providers.voyage import VoyageEmbedder
from tiervault.embeddings.transport import backoff_delay, parse_retry_after
from tiervault.errors import (
    ConfigError,
    EmbeddingAuthError,
    EmbeddingError,
    EmbeddingResponseError,
    ValidationError,
)

FAST = {"backoff_base_s": 0.01, "backoff_max_s": 0.05}
TEXTS = ["alpha", "bravo charlie", "delta", "echo foxtrot golf", "hotel", "india", "juliet kilo"]


def config(provider: str, *, keys: tuple[str, ...] = (), **fields: object) -> EmbeddingConfig:
    secrets = tuple(Secret(k) for k in keys)
    values: dict[str, object] = {
        "provider": provider,
        "model": {"openai": "text-embedding-3-small", "voyage": "voyage-3.5", "ollama": "nomic-embed-text",
                  "http": "my-model", "hash": "hash-v1", "local": "all-MiniLM-L6-v2-int8"}[provider],
        "api_key": secrets[0] if secrets else None,
        "base_url": None,
        "batch_size": None,
        "input_type": None,
        "dim": None,
        "api_keys": secrets,
    }
    values.update(fields)
    return EmbeddingConfig(**values)  # type: ignore[arg-type]


class SleepRecorder:
    """Records every wait tenacity asks for, and really waits."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)
        time.sleep(seconds)


def openai(server: FakeEmbeddingServer, keys: tuple[str, ...] = ("sk-test-1",), **kw: object) -> OpenAIEmbedder:
    params: dict[str, object] = {**FAST, **kw}
    return OpenAIEmbedder(base_url=server.openai_url, api_keys=keys, **params)  # type: ignore[arg-type]


# -- wire format, batching, order, normalisation --------------------------------------------


def test_openai_batches_preserve_order_and_normalise() -> None:
    with FakeEmbeddingServer(dim=12, reverse_order=True) as srv, openai(srv, batch_size=3) as emb:
        assert isinstance(emb, Embedder)
        assert emb.dim is None  # not configured: discovered from the first answer
        out = emb.embed(TEXTS)
        assert emb.dim == 12
        assert out.dtype == np.float32 and out.shape == (7, 12)
        np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-6)
        np.testing.assert_allclose(out, srv.expected(TEXTS), atol=1e-6)
        reqs = srv.requests
        assert [len(r.inputs) for r in reqs] == [3, 3, 1]
        assert [t for r in reqs for t in r.inputs] == TEXTS
        assert all(r.path == "/v1/embeddings" for r in reqs)
        assert reqs[0].body == {"model": "text-embedding-3-small", "input": TEXTS[:3]}
        assert reqs[0].bearer == "sk-test-1"
        assert reqs[0].headers["content-type"] == "application/json"


def test_default_batch_sizes_and_character_budget(embeddings_server: FakeEmbeddingServer) -> None:
    assert openai(embeddings_server).batch_size == 2048
    assert VoyageEmbedder(base_url=embeddings_server.voyage_url, api_keys=["v"]).batch_size == 128
    texts = [f"{i:02d}" + "x" * 38 for i in range(5)]  # 40 characters each
    emb = openai(embeddings_server, max_batch_chars=100)
    out = emb.embed(texts)
    assert [len(r.inputs) for r in embeddings_server.requests] == [2, 2, 1]
    np.testing.assert_allclose(out, embeddings_server.expected(texts), atol=1e-6)


def test_long_texts_are_cut_to_max_input_chars(embeddings_server: FakeEmbeddingServer) -> None:
    emb = openai(embeddings_server, max_input_chars=10)
    emb.embed(["0123456789abcdef", "short"])
    assert embeddings_server.requests[0].inputs == ["0123456789", "short"]


def test_blank_texts_are_not_sent_and_give_zero_rows(embeddings_server: FakeEmbeddingServer) -> None:
    emb = openai(embeddings_server)
    out = emb.embed(["one", "", "  ", "two"])
    assert embeddings_server.requests[0].inputs == ["one", "two"]
    assert not out[1].any() and not out[2].any()
    np.testing.assert_allclose(out[[0, 3]], embeddings_server.expected(["one", "two"]), atol=1e-6)
    # Only blanks and no dimension known yet: one probe fixes the width.
    fresh = openai(embeddings_server)
    assert fresh.embed([]).shape == (0, 0)  # nothing to embed: no request, width unknown
    assert len(embeddings_server.requests) == 1
    assert fresh.embed(["", " "]).shape == (2, embeddings_server.dim)
    assert embeddings_server.requests[-1].inputs == ["dimension probe"]
    assert fresh.embed([]).shape == (0, embeddings_server.dim)


def test_configured_dim_is_requested_and_enforced() -> None:
    with FakeEmbeddingServer(dim=16) as srv:
        short = openai(srv, dim=6)
        assert short.dim == 6
        out = short.embed(["a", "b"])
        assert srv.requests[-1].body["dimensions"] == 6
        np.testing.assert_allclose(out, srv.expected(["a", "b"], dim=6), atol=1e-6)
        # An OpenAI-compatible server that ignores "dimensions" answers 16-d: refused, not mixed.
        other = HttpEmbedder(base_url=srv.openai_url, model="m", dim=6, **FAST)
        with pytest.raises(EmbeddingResponseError, match="16-dimensional.*6"):
            other.embed(["a"])


def test_dimension_change_between_answers_is_refused(embeddings_server: FakeEmbeddingServer) -> None:
    emb = openai(embeddings_server)
    emb.embed(["a"])
    embeddings_server.push(Fault("wrong_dim"))
    with pytest.raises(EmbeddingResponseError, match="9-dimensional"):
        emb.embed(["b"])
    assert len(embeddings_server.requests) == 2  # a bad body is not retried


@pytest.mark.parametrize(
    ("fault", "match"),
    [
        (Fault("malformed"), "not valid JSON"),
        (Fault("missing"), "no 'data'"),
        (Fault("wrong_count"), "1 embeddings for 2 inputs"),
        (Fault("nan"), "NaN"),
    ],
)
def test_bad_bodies_raise_response_error_without_retry(
    embeddings_server: FakeEmbeddingServer, fault: Fault, match: str
) -> None:
    embeddings_server.push(fault)
    with pytest.raises(EmbeddingResponseError, match=match):
        openai(embeddings_server).embed(["a", "b"])
    assert len(embeddings_server.requests) == 1


def test_invalid_arguments(embeddings_server: FakeEmbeddingServer) -> None:
    emb = openai(embeddings_server)
    with pytest.raises(ValidationError, match="input_type"):
        emb.embed(["a"], input_type="passage")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="texts"):
        emb.embed("a single string")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match=r"texts\[1\]"):
        emb.embed(["a", 3])  # type: ignore[list-item]
    assert embeddings_server.requests == []


# -- retries -----------------------------------------------------------------------------


def test_5xx_is_retried_until_success(embeddings_server: FakeEmbeddingServer) -> None:
    embeddings_server.push(Fault("status", 500), Fault("status", 503))
    sleeps = SleepRecorder()
    out = openai(embeddings_server, sleep=sleeps).embed(["a"])
    np.testing.assert_allclose(out, embeddings_server.expected(["a"]), atol=1e-6)
    assert len(embeddings_server.requests) == 3
    # Backoff with jitter: attempt n waits in [d/2, d], d = base * 2**(n-1).
    assert len(sleeps.calls) == 2
    assert 0.005 <= sleeps.calls[0] <= 0.01 and 0.01 <= sleeps.calls[1] <= 0.02


def test_retries_stop_after_three_attempts(embeddings_server: FakeEmbeddingServer) -> None:
    embeddings_server.push(*[Fault("status", 503)] * 4)
    with pytest.raises(EmbeddingError, match=r"after 3 attempts; last answer: HTTP 503") as info:
        openai(embeddings_server).embed(["a"])
    assert type(info.value) is EmbeddingError
    assert info.value.__cause__ is not None
    assert len(embeddings_server.requests) == 3
    assert embeddings_server.pending_faults == 1


def test_retry_after_is_honoured(embeddings_server: FakeEmbeddingServer) -> None:
    embeddings_server.push(Fault("status", 429, retry_after="1"))
    sleeps = SleepRecorder()
    openai(embeddings_server, sleep=sleeps).embed(["a"])
    assert sleeps.calls == [1.0]
    first, second = embeddings_server.requests
    assert second.at - first.at >= 0.95


def test_retry_after_is_capped_and_429_without_it_backs_off(embeddings_server: FakeEmbeddingServer) -> None:
    embeddings_server.push(Fault("status", 429, retry_after="3600"), Fault("status", 429))
    sleeps = SleepRecorder()
    openai(embeddings_server, sleep=sleeps, retry_after_cap_s=0.05).embed(["a"])
    assert sleeps.calls[0] == 0.05
    assert 0.01 <= sleeps.calls[1] <= 0.02  # no header: exponential backoff (2nd retry)
    assert len(embeddings_server.requests) == 3


def test_429_rotates_the_key_pool() -> None:
    keys = ("sk-one", "sk-two", "sk-three")
    with FakeEmbeddingServer(keys=list(keys)) as srv:
        emb = openai(srv, keys=keys)
        srv.push(Fault("status", 429, retry_after="0"), Fault("status", 429, retry_after="0"))
        emb.embed(["a"])
        assert [r.bearer for r in srv.requests] == ["sk-one", "sk-two", "sk-three"]
        emb.embed(["b"])  # the pool stays on the key that worked
        assert srv.requests[-1].bearer == "sk-three"
        srv.push(Fault("status", 503))  # 5xx is not the key's fault: same key again
        emb.embed(["c"])
        assert [r.bearer for r in srv.requests[-2:]] == ["sk-three", "sk-three"]


@pytest.mark.parametrize("status", [400, 404, 422])
def test_other_4xx_are_not_retried(embeddings_server: FakeEmbeddingServer, status: int) -> None:
    embeddings_server.push(Fault("status", status))
    with pytest.raises(EmbeddingError, match=f"HTTP {status}.*not retried"):
        openai(embeddings_server).embed(["a"])
    assert len(embeddings_server.requests) == 1


def test_401_names_the_provider_and_never_the_key() -> None:
    secret = "sk-live-THIS-MUST-NOT-LEAK-1234"
    with FakeEmbeddingServer(keys=["sk-the-right-one"]) as srv:
        with pytest.raises(EmbeddingAuthError) as info:
            openai(srv, keys=(secret, "sk-other")).embed(["a"])
        assert len(srv.requests) == 1  # not retried, not rotated
        assert srv.requests[0].bearer == secret  # the key was really sent...
        message = str(info.value)
        assert message == "openai refused the API key (HTTP 401); check embedding.apiKey / OPENAI_API_KEY"
        assert secret not in message and secret not in repr(info.value)  # ...and never repeated
        with pytest.raises(EmbeddingAuthError, match=r"^voyage refused the API key \(HTTP 401\); check embedding.apiKey / VOYAGE_API_KEY"):
            VoyageEmbedder(base_url=srv.voyage_url, api_keys=[secret], **FAST).embed(["a"])
        srv.push(Fault("status", 403))
        with pytest.raises(EmbeddingAuthError, match="HTTP 403"):
            openai(srv, keys=("sk-the-right-one",)).embed(["a"])


def test_error_bodies_are_scrubbed_of_keys(embeddings_server: FakeEmbeddingServer) -> None:
    secret = "sk-echoed-by-a-proxy-987"
    embeddings_server.push(Fault("status", 400, body="bad request for key {key}"))
    with pytest.raises(EmbeddingError) as info:
        openai(embeddings_server, keys=(secret,)).embed(["a"])
    assert embeddings_server.requests[0].bearer == secret
    assert "bad request for key ***" in str(info.value) and secret not in str(info.value)
    assert secret not in repr(openai(embeddings_server, keys=(secret,)))


def test_timeouts_are_retried_then_fail(embeddings_server: FakeEmbeddingServer) -> None:
    embeddings_server.push(Fault("slow", delay=3))
    out = openai(embeddings_server, timeout_s=0.3).embed(["a"])
    np.testing.assert_allclose(out, embeddings_server.expected(["a"]), atol=1e-6)
    assert len(embeddings_server.requests) == 2
    embeddings_server.clear()
    embeddings_server.push(*[Fault("slow", delay=3)] * 3)
    with pytest.raises(EmbeddingError, match=r"after 3 attempts; last error: ReadTimeout"):
        openai(embeddings_server, timeout_s=0.3).embed(["a"])
    assert len(embeddings_server.requests) == 3


@pytest.mark.parametrize("kind", ["truncated", "disconnect"])
def test_broken_connections_are_transport_errors_and_retried(embeddings_server: FakeEmbeddingServer, kind: str) -> None:
    embeddings_server.push(Fault(kind))
    out = openai(embeddings_server).embed(["a", "b"])
    np.testing.assert_allclose(out, embeddings_server.expected(["a", "b"]), atol=1e-6)
    assert len(embeddings_server.requests) == 2
    embeddings_server.push(*[Fault(kind)] * 3)
    with pytest.raises(EmbeddingError, match=r"after 3 attempts; last error: RemoteProtocolError"):
        openai(embeddings_server).embed(["a"])


def test_connection_refused_is_retried_then_fails() -> None:
    srv = FakeEmbeddingServer().start()
    url = srv.openai_url
    srv.stop()
    sleeps = SleepRecorder()
    emb = OpenAIEmbedder(base_url=url, api_keys=["k"], sleep=sleeps, **FAST)
    with pytest.raises(EmbeddingError, match=r"after 3 attempts; last error: ConnectError"):
        emb.embed(["a"])
    assert len(sleeps.calls) == 2


def test_non_http_base_url_fails_at_once() -> None:
    sleeps = SleepRecorder()
    with pytest.raises(EmbeddingError, match="not http"):
        OpenAIEmbedder(base_url="ftp://127.0.0.1/v1", api_keys=["k"], sleep=sleeps).embed(["a"])
    assert sleeps.calls == []


def test_retry_after_parsing() -> None:
    assert parse_retry_after(None) is None
    assert parse_retry_after("") is None
    assert parse_retry_after("soon") is None
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after("-3") == 0.0
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
    later = (now + timedelta(seconds=30)).strftime("%a, %d %b %Y %H:%M:%S GMT")
    assert parse_retry_after(later, now=now) == 30.0
    for attempt, (lo, hi) in {1: (0.25, 0.5), 2: (0.5, 1.0), 3: (1.0, 2.0), 10: (4.0, 8.0)}.items():
        d = backoff_delay(attempt, 0.5, 8.0)
        assert lo <= d <= hi


# -- voyage, ollama, http ------------------------------------------------------------------


def test_voyage_sends_input_type(embeddings_server: FakeEmbeddingServer) -> None:
    emb = make_embedder(config("voyage", base_url=embeddings_server.voyage_url, batch_size=2),
                        env={"VOYAGE_API_KEY": "pa-voyage"}, **FAST)
    assert (emb.name, emb.model) == ("voyage", "voyage-3.5")
    docs = emb.embed(["a", "b", "c"])
    emb.embed(["a"], input_type="query")
    reqs = embeddings_server.requests
    assert [r.path for r in reqs] == ["/voyage/v1/embeddings"] * 3
    assert [r.body["input_type"] for r in reqs] == ["document", "document", "query"]
    assert reqs[0].body == {"model": "voyage-3.5", "input": ["a", "b"], "input_type": "document"}
    assert {r.bearer for r in reqs} == {"pa-voyage"}
    np.testing.assert_allclose(docs, embeddings_server.expected(["a", "b", "c"]), atol=1e-6)
    # embedding.inputType in agent.yaml forces one value for every call.
    forced = make_embedder(config("voyage", keys=("k",), base_url=embeddings_server.voyage_url,
                                  input_type="query"), **FAST)
    forced.embed(["x"], input_type="document")
    assert embeddings_server.requests[-1].body["input_type"] == "query"


def test_ollama_wire_format(embeddings_server: FakeEmbeddingServer) -> None:
    emb = make_embedder(config("ollama", base_url=embeddings_server.url, batch_size=2), **FAST)
    assert isinstance(emb, OllamaEmbedder)
    out = emb.embed(["x", "y", "z"])
    reqs = embeddings_server.requests
    assert [r.path for r in reqs] == ["/api/embed", "/api/embed"]
    assert reqs[0].body == {"model": "nomic-embed-text", "input": ["x", "y"]}
    assert "authorization" not in reqs[0].headers
    np.testing.assert_allclose(out, embeddings_server.expected(["x", "y", "z"]), atol=1e-6)
    assert emb.dim == embeddings_server.dim


def test_ollama_unknown_model_and_missing_field() -> None:
    with FakeEmbeddingServer(models=["nomic-embed-text"]) as srv:
        emb = OllamaEmbedder(base_url=srv.url, model="not-pulled", **FAST)
        with pytest.raises(EmbeddingError, match=r"HTTP 404.*try pulling it first"):
            emb.embed(["a"])
        assert len(srv.requests) == 1
        srv.push(Fault("missing"))
        with pytest.raises(EmbeddingResponseError, match="no 'embeddings'"):
            OllamaEmbedder(base_url=srv.url, **FAST).embed(["a"])


def test_http_provider_key_optional_and_required_fields(embeddings_server: FakeEmbeddingServer) -> None:
    emb = make_embedder(config("http", base_url=embeddings_server.openai_url, model="bge-small"), env={}, **FAST)
    out = emb.embed(["a", "b"])
    req = embeddings_server.requests[0]
    assert req.body == {"model": "bge-small", "input": ["a", "b"]}
    assert "authorization" not in req.headers
    np.testing.assert_allclose(out, embeddings_server.expected(["a", "b"]), atol=1e-6)
    with_key = make_embedder(config("http", base_url=embeddings_server.openai_url, model="m"),
                             env={"OPENAI_API_KEY": "sk-env"}, **FAST)
    with_key.embed(["a"])
    assert embeddings_server.requests[-1].bearer == "sk-env"
    with pytest.raises(ConfigError, match="baseUrl"):
        HttpEmbedder(model="m")
    with pytest.raises(ConfigError, match="model"):
        HttpEmbedder(base_url=embeddings_server.openai_url)


# -- factory ---------------------------------------------------------------------------------


def test_factory_dispatch_and_key_sources(embeddings_server: FakeEmbeddingServer) -> None:
    emb = make_embedder(config("openai", keys=("sk-a", "sk-b"), base_url=embeddings_server.openai_url), env={})
    assert isinstance(emb, OpenAIEmbedder) and emb.transport.key_count == 2
    from_env = make_embedder(config("openai", base_url=embeddings_server.openai_url), env={"OPENAI_API_KEY": "sk-1, sk-2"})
    assert from_env.transport.key_count == 2
    assert make_embedder(config("openai", base_url="https://example.invalid/v1", keys=("k",))).dim is None
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        make_embedder(config("openai"), env={})
    with pytest.raises(ConfigError, match="VOYAGE_API_KEY"):
        make_embedder(config("voyage"), env={})
    with pytest.raises(ConfigError, match="'cohere' is not supported"):
        make_embedder(dataclasses.replace(config("openai"), provider="cohere"), env={})
    hashed = make_embedder(config("hash", dim=64))
    assert isinstance(hashed, HashEmbedder) and hashed.dim == 64 and hashed.model == "hash-v1-64"
    assert make_embedder(config("hash")).dim == 384


def test_provider_timeout_comes_from_config(embeddings_server: FakeEmbeddingServer) -> None:
    emb = make_embedder(config("openai", keys=("k",), base_url=embeddings_server.openai_url, timeout_s=0.3), **FAST)
    embeddings_server.push(Fault("slow", delay=3))
    emb.embed(["a"])
    assert len(embeddings_server.requests) == 2


def test_factory_loads_local_lazily() -> None:
    import onnxruntime  # noqa: F401  (the [local] extra: CI installs it)
    emb = make_embedder(config("local"))
    assert isinstance(emb, Embedder)
    assert (emb.name, emb.dim) == ("local", 384)
    vec = emb.embed(["offline embedding"])
    assert vec.shape == (1, 384)


# -- hash (offline) ------------------------------------------------------------------------


def test_hash_is_normalised_and_lexically_similar() -> None:
    emb = HashEmbedder(384)
    texts = [
        "Retry failed HTTP requests with exponential backoff",
        "exponential backoff when retrying failed http requests",
        "Bake sourdough bread at a high oven temperature",
        "",
    ]
    out = emb.embed(texts)
    assert out.dtype == np.float32 and out.shape == (4, 384)
    np.testing.assert_allclose(np.linalg.norm(out[:3], axis=1), 1.0, rtol=1e-6)
    assert not out[3].any()  # empty text -> zero vector, stays zero
    sim = out @ out.T
    assert sim[0, 1] > 0.6 > 0.2 > abs(sim[0, 2])
    # Morphology helps through character 3-grams: "retry" ~ "retrying".
    a, b, c = emb.embed(["retry", "retrying", "oven"])
    assert a @ b > 0.25 > abs(a @ c)
    assert emb.embed(["  !!  "]).any() == False  # noqa: E712 (no tokens -> zero)


def test_hash_is_deterministic_batch_independent_and_case_insensitive() -> None:
    emb = HashEmbedder(256)
    texts = [f"entry {i} about topic {i % 7} and caching" for i in range(2500)]  # > one sub-batch
    batch = emb.embed(texts)
    singles = np.vstack([HashEmbedder(256).embed([t]) for t in texts[::500]])
    np.testing.assert_array_equal(batch[::500], singles)
    np.testing.assert_array_equal(emb.embed(["Hello World"]), emb.embed(["hello world"]))
    assert emb.embed(["x"], input_type="query").tolist() == emb.embed(["x"]).tolist()


def test_hash_one_text_path_gives_the_batch_bits() -> None:
    """A single text (a search's query: ``_embed_one``) gets the very bits of its row in a
    batch (the ragged gather), whatever its tokens: repeats, one letter, other scripts,
    digits, none at all, the same token cached or not."""
    rng = np.random.default_rng(17)
    words = ["cache", "x", "naïve", "数据库", "v2", "re-try", "ÉCOLE", "a_b", "the", "9000",
             "connection", "pool", "ß", "ok!"]
    texts = ["", "  !!  ", "cache cache cache", "x"] + [
        " ".join(rng.choice(words, size=int(rng.integers(1, 30))).tolist()) for _ in range(300)]
    batch = HashEmbedder(384).embed(texts + ["padding so the batch has two rows"])
    warm = HashEmbedder(384)
    for i, text in enumerate(texts):
        np.testing.assert_array_equal(HashEmbedder(384).embed([text])[0], batch[i])  # cold
        np.testing.assert_array_equal(warm.embed([text])[0], batch[i])  # tokens cached


def test_hash_is_stable_across_processes() -> None:
    text = "Same input, same vector: no salted hash() anywhere"
    code = (
        "import json,sys; from tiervault.embeddings.providers.hash import HashEmbedder;"
        f"print(json.dumps(HashEmbedder(64).embed([{text!r}])[0].tolist()))"
    )
    # Another interpreter with another string-hash seed must give the same bytes.
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONHASHSEED": "12345", "PATH": ""}).stdout
    here = HashEmbedder(64).embed([text])[0]
    np.testing.assert_array_equal(np.array(json.loads(out), dtype=np.float32), here)


def test_hash_rejects_bad_dim() -> None:
    with pytest.raises(ConfigError, match="embedding.dim"):
        HashEmbedder(1)


def test_the_offline_hash_provider_imports_no_http_client() -> None:
    """A hybrid vault on the ``hash`` embedder opens without httpx (~0.1 s of a fresh
    process): the input checks it shares with the HTTP providers live in embeddings/base.py.
    A fresh process: this one has httpx already."""
    code = ("import sys\nimport tiervault.embeddings.factory\n"
            "from tiervault.embeddings.providers.hash import HashEmbedder\n"
            "assert HashEmbedder(dim=32).embed(['a text'], 'query').shape == (1, 32)\n"
            "print('httpx' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "False"
