"""Shared pytest fixtures. Keep each fixture small; add yours below."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from embeddings_server import FakeEmbeddingServer


@pytest.fixture
def embeddings_server() -> Iterator[FakeEmbeddingServer]:
    """A fake OpenAI / Voyage / Ollama embeddings server on 127.0.0.1 (dim 8, any key).

    Script it with ``push(Fault(...))``; inspect ``requests``. See tests/embeddings_server.py.
    """
    with FakeEmbeddingServer(dim=8) as server:
        yield server
