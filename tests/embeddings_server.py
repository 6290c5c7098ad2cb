"""A real HTTP server on 127.0.0.1 imitating the OpenAI, Voyage and Ollama embedding APIs.

Reusable by any test that needs a provider (providers, pipeline, CLI ``embed``):
start it with the ``embeddings_server`` fixture from ``conftest.py`` or directly::

    with FakeEmbeddingServer(dim=8) as srv:
        cfg.base_url = srv.openai_url      # http://127.0.0.1:PORT/v1

Endpoints (shapes follow the public API docs):

* ``POST /v1/embeddings`` -- OpenAI (and OpenAI-compatible ``http``) and, when the
  body carries ``input_type`` or the path is ``/voyage/v1/embeddings``, Voyage.
  Answer ``{"object": "list", "data": [{"object": "embedding", "index", "embedding"}],
  "model", "usage"}``. Empty strings, a missing model or more than 2048 inputs
  (1000 for Voyage) give 400 like the real services; OpenAI's ``dimensions`` shortens
  the vectors.
* ``POST /api/embed`` -- Ollama: ``{"model", "input"}`` -> ``{"model", "embeddings",
  "total_duration", "load_duration", "prompt_eval_count"}``; an unknown model (when
  ``models`` is given) gives 404 like an un-pulled Ollama model.

Vectors are deterministic functions of (text, dim) -- :func:`fake_vector` -- and
deliberately *not* unit length, so tests can check both order and normalisation.

Keys: when ``keys`` is given, a request whose ``Authorization: Bearer`` is not one
of them gets 401 with a body that echoes the key (as OpenAI's does, partly), so a
test can prove the client never repeats it.

Faults: ``push(Fault(...))`` queues answers used by the next embedding requests,
one fault per request, in order; when the queue is empty the server answers
normally. Every request (path, lower-cased headers, JSON body, arrival time,
fault applied) is appended to ``requests``.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

__all__ = ["FakeEmbeddingServer", "Fault", "Recorded", "fake_vector"]


def fake_vector(text: str, dim: int) -> np.ndarray:
    """The server's vector for ``text`` (float64, length ``dim``, norm != 1)."""
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")
    v = np.random.default_rng(seed).standard_normal(dim)
    return v * (2.0 + len(text) % 5)


@dataclass(frozen=True)
class Fault:
    """One scripted answer.

    kind:
      ``status``      -- answer ``status`` (429, 500, 503, 401, 400, ...) with a JSON
                         error body (``body`` replaces its message; ``{key}`` in it
                         becomes the Bearer key received, as some proxies echo it);
                         ``retry_after`` (str) sets the Retry-After header.
      ``slow``        -- sleep ``delay`` seconds, then answer normally (or nothing if
                         the client has gone).
      ``truncated``   -- a 200 whose Content-Length promises the full body but only
                         half is sent before the connection closes.
      ``disconnect``  -- close the connection without any answer.
      ``malformed``   -- a complete 200 whose body is not JSON.
      ``missing``     -- valid JSON without the ``data`` / ``embeddings`` field.
      ``wrong_dim``   -- vectors of ``dim`` + 1 (or ``value``) dimensions.
      ``wrong_count`` -- one vector fewer than inputs.
      ``nan``         -- a vector containing NaN (written as the bare token ``NaN``).
    """

    kind: str
    status: int = 0
    retry_after: str | None = None
    delay: float = 0.0
    value: int | None = None
    body: str | None = None


@dataclass
class Recorded:
    """One request as the server saw it."""

    path: str
    headers: dict[str, str]
    body: Any
    at: float
    fault: Fault | None = None

    @property
    def bearer(self) -> str | None:
        auth = self.headers.get("authorization", "")
        return auth[7:] if auth.startswith("Bearer ") else None

    @property
    def inputs(self) -> list[str]:
        body = self.body if isinstance(self.body, dict) else {}
        value = body.get("input", [])
        return [value] if isinstance(value, str) else list(value)


@dataclass
class _State:
    dim: int
    keys: frozenset[str] | None
    models: frozenset[str] | None
    reverse_order: bool
    faults: deque[Fault] = field(default_factory=deque)
    requests: list[Recorded] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # keep pytest output clean
        pass

    # -- plumbing -----------------------------------------------------------------
    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None, raw: bytes | None = None) -> None:
        body = raw if raw is not None else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:  # noqa: N802 (http.server API)
        st = self.server.state
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = None
        with st.lock:
            fault = st.faults.popleft() if st.faults else None
            st.requests.append(
                Recorded(self.path, {k.lower(): v for k, v in self.headers.items()}, body, time.monotonic(), fault)
            )
        try:
            self._answer(st, body, fault)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout test): nothing to answer to

    # -- behaviour -----------------------------------------------------------------
    def _answer(self, st: _State, body: Any, fault: Fault | None) -> None:
        path = self.path.rstrip("/")
        ollama = path == "/api/embed"
        if path not in ("/v1/embeddings", "/voyage/v1/embeddings") and not ollama:
            self._send(404, {"error": f"no route {self.path}"})
            return
        voyage = path.startswith("/voyage") or (isinstance(body, dict) and "input_type" in body)
        if fault is not None:
            if fault.kind == "status":
                headers = {"Retry-After": fault.retry_after} if fault.retry_after is not None else {}
                auth = self.headers.get("Authorization", "")
                text = (fault.body or f"scripted HTTP {fault.status}").replace("{key}", auth[7:])
                msg = {"error": {"message": text, "type": "fake", "code": None}}
                self._send(fault.status, msg, headers)
                return
            if fault.kind == "slow":
                if st.stopping.wait(fault.delay):
                    return
            elif fault.kind == "disconnect":
                self.close_connection = True
                return
        if st.keys is not None and not ollama:
            auth = self.headers.get("Authorization", "")
            key = auth[7:] if auth.startswith("Bearer ") else ""
            if key not in st.keys:
                # Real services echo (part of) the bad key; the client must not repeat it.
                if voyage:
                    self._send(401, {"detail": f"Provided API key is invalid: {key}"})
                else:
                    self._send(401, {"error": {"message": f"Incorrect API key provided: {key}.",
                                               "type": "invalid_request_error", "code": "invalid_api_key"}})
                return
        if not isinstance(body, dict) or not body.get("model"):
            self._send(400, {"error": {"message": "you must provide a model parameter", "type": "invalid_request_error"}})
            return
        model = body["model"]
        if st.models is not None and model not in st.models:
            if ollama:
                self._send(404, {"error": f'model "{model}" not found, try pulling it first'})
            else:
                self._send(404, {"error": {"message": f"The model `{model}` does not exist", "type": "invalid_request_error"}})
            return
        texts = body.get("input")
        if isinstance(texts, str):
            texts = [texts]
        limit = 1000 if voyage else 2048
        if not isinstance(texts, list) or not texts or len(texts) > limit or not all(isinstance(t, str) for t in texts):
            self._send(400, {"error": {"message": f"'input' must be 1..{limit} strings", "type": "invalid_request_error"}})
            return
        if not ollama and any(t == "" for t in texts):
            self._send(400, {"error": {"message": "'$.input' is invalid: empty string", "type": "invalid_request_error"}})
            return
        if voyage and body.get("input_type") not in (None, "query", "document"):
            self._send(400, {"detail": "input_type must be None, 'query' or 'document'"})
            return
        dim = st.dim
        if not ollama and not voyage and isinstance(body.get("dimensions"), int):
            dim = min(dim, body["dimensions"])
        vectors = [fake_vector(t, st.dim)[:dim].tolist() for t in texts]
        if fault is not None:
            if fault.kind == "wrong_dim":
                extra = (fault.value or dim + 1) - dim
                vectors = [v + [0.5] * extra if extra > 0 else v[:extra] for v in vectors]
            elif fault.kind == "wrong_count":
                vectors = vectors[:-1]
        if ollama:
            payload: dict[str, Any] = {"model": model, "embeddings": vectors, "total_duration": 1000,
                                       "load_duration": 10, "prompt_eval_count": sum(len(t) for t in texts)}
        else:
            data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
            if st.reverse_order:
                data.reverse()  # the index field, not the position, is authoritative
            tokens = sum(len(t.split()) for t in texts)
            payload = {"object": "list", "data": data, "model": model,
                       "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}
        if fault is not None and fault.kind == "missing":
            payload.pop("embeddings" if ollama else "data")
        if fault is not None and fault.kind == "nan":
            vectors[0][0] = float("nan")  # json.dumps writes the bare token NaN
        encoded = json.dumps(payload).encode()
        if fault is not None and fault.kind == "malformed":
            self._send(200, None, raw=b'{"object": "list", "data": [{"index": 0, "embedding": [0.1, 0.2,,]}')
            return
        if fault is not None and fault.kind == "truncated":
            self.close_connection = True
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(encoded)))
            self.end_headers()
            self.wfile.write(encoded[: len(encoded) // 2])
            self.wfile.flush()
            return
        self._send(200, payload, raw=encoded)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: _State


class FakeEmbeddingServer:
    """The fake provider. ``dim`` of the vectors; ``keys`` the accepted Bearer keys
    (None = any or none); ``models`` the known models (None = any);
    ``reverse_order`` answers OpenAI/Voyage data in reverse (index stays right)."""

    def __init__(self, dim: int = 8, *, keys: list[str] | None = None, models: list[str] | None = None,
                 reverse_order: bool = False) -> None:
        self.state = _State(dim, frozenset(keys) if keys is not None else None,
                            frozenset(models) if models is not None else None, reverse_order)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> FakeEmbeddingServer:
        server = _Server(("127.0.0.1", 0), _Handler)
        server.state = self.state
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self.state.stopping.set()
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeEmbeddingServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- addresses -------------------------------------------------------------------
    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (Ollama's base URL)."""
        assert self._server is not None, "server not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def openai_url(self) -> str:
        """Base URL for openai / http providers (``.../v1``)."""
        return self.url + "/v1"

    @property
    def voyage_url(self) -> str:
        """Base URL for the voyage provider (``.../voyage/v1``)."""
        return self.url + "/voyage/v1"

    # -- scripting and inspection -------------------------------------------------------
    @property
    def dim(self) -> int:
        return self.state.dim

    @dim.setter
    def dim(self, value: int) -> None:
        self.state.dim = value

    def push(self, *faults: Fault) -> None:
        """Queue faults for the next requests, one each, in order."""
        with self.state.lock:
            self.state.faults.extend(faults)

    @property
    def requests(self) -> list[Recorded]:
        with self.state.lock:
            return list(self.state.requests)

    @property
    def pending_faults(self) -> int:
        with self.state.lock:
            return len(self.state.faults)

    def clear(self) -> None:
        """Forget recorded requests and queued faults."""
        with self.state.lock:
            self.state.requests.clear()
            self.state.faults.clear()

    def expected(self, texts: list[str], dim: int | None = None) -> np.ndarray:
        """What a correct client returns for ``texts``: the fake vectors, L2-normalised, float32."""
        d = dim or self.state.dim
        m = np.array([fake_vector(t, self.state.dim)[:d] for t in texts], dtype=np.float64)
        return (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)
