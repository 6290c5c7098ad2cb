"""``http``: any OpenAI-compatible embeddings endpoint (``POST {baseUrl}/embeddings``).

Same wire format as :mod:`.openai` (vLLM, llama.cpp server, LocalAI, TEI's OpenAI
route, LiteLLM, ...). ``embedding.baseUrl`` and ``embedding.model`` are required
(a generic endpoint's model cannot be guessed); the key is optional (the loader
falls back to ``OPENAI_API_KEY``). ``baseUrl`` is the part before ``/embeddings``,
e.g. ``http://127.0.0.1:8080/v1``. Default batch 32, the smallest common server
limit (TEI's ``--max-client-batch-size``); raise ``batchSize`` if yours allows more.
"""

from __future__ import annotations

from typing import Any, ClassVar

from tiervault.embeddings.base import InputType
from tiervault.embeddings.providers._remote import RemoteEmbedder, parse_openai_data

__all__ = ["HttpEmbedder"]


class HttpEmbedder(RemoteEmbedder):
    """A generic OpenAI-compatible endpoint; no default URL or model."""

    name: ClassVar[str] = "http"
    path: ClassVar[str] = "/embeddings"
    default_base_url: ClassVar[str | None] = None
    default_model: ClassVar[str | None] = None
    default_batch_size: ClassVar[int] = 32
    default_max_batch_chars: ClassVar[int | None] = 600_000
    env_var: ClassVar[str | None] = "OPENAI_API_KEY"
    requires_key: ClassVar[bool] = False

    def _payload(self, batch: list[str], input_type: InputType) -> dict[str, Any]:
        return {"model": self.model, "input": batch}

    def _parse(self, data: Any, expected: int) -> list[Any]:
        return parse_openai_data(self, data, expected)
