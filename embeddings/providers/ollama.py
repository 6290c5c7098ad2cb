"""``ollama``: a local Ollama server (``POST {base}/api/embed``).

Wire format: request ``{"model", "input": [texts]}``; answer
``{"model", "embeddings": [[...], ...]}`` in input order. No key (a key, if
configured, is sent as Bearer for servers behind an authenticating proxy).
Default base ``http://127.0.0.1:11434``, default model ``nomic-embed-text``
(pull it first: ``ollama pull nomic-embed-text``), batches of 64.
"""

from __future__ import annotations

from typing import Any, ClassVar

from tiervault.embeddings.base import InputType
from tiervault.embeddings.providers._remote import RemoteEmbedder

__all__ = ["OllamaEmbedder"]


class OllamaEmbedder(RemoteEmbedder):
    """Ollama's batch embedding endpoint ``/api/embed`` (not the older ``/api/embeddings``)."""

    name: ClassVar[str] = "ollama"
    path: ClassVar[str] = "/api/embed"
    default_base_url: ClassVar[str | None] = "http://127.0.0.1:11434"
    default_model: ClassVar[str | None] = "nomic-embed-text"
    default_batch_size: ClassVar[int] = 64
    env_var: ClassVar[str | None] = None
    requires_key: ClassVar[bool] = False

    def _payload(self, batch: list[str], input_type: InputType) -> dict[str, Any]:
        return {"model": self.model, "input": batch}

    def _parse(self, data: Any, expected: int) -> list[Any]:
        if not isinstance(data, dict) or not isinstance(data.get("embeddings"), list):
            raise self._bad("has no 'embeddings' list")
        return data["embeddings"]
