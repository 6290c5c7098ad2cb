"""``openai``: the OpenAI embeddings API (``POST {base}/embeddings``).

Wire format: request ``{"model", "input": [texts]}`` (plus ``"dimensions"`` when
``embedding.dim`` is set for a ``text-embedding-3*`` model, which can shorten its
vectors); answer ``{"data": [{"index", "embedding"}]}``, re-ordered by index.
Keys: the pool from ``embedding.apiKey`` or ``OPENAI_API_KEY`` (comma-separated for
several), sent as ``Authorization: Bearer``; rotated on 429.
"""

from __future__ import annotations

from typing import Any, ClassVar

from tiervault.embeddings.base import InputType
from tiervault.embeddings.providers._remote import RemoteEmbedder, parse_openai_data

__all__ = ["OpenAIEmbedder"]


class OpenAIEmbedder(RemoteEmbedder):
    """OpenAI embeddings (default ``text-embedding-3-small``, batches of 2048)."""

    name: ClassVar[str] = "openai"
    path: ClassVar[str] = "/embeddings"
    default_base_url: ClassVar[str | None] = "https://api.openai.com/v1"
    default_model: ClassVar[str | None] = "text-embedding-3-small"
    default_batch_size: ClassVar[int] = 2048
    # OpenAI caps a request at 300k tokens; 600k characters stays under it even
    # for token-dense text (~2 chars/token), so a batch of long entries is split.
    default_max_batch_chars: ClassVar[int | None] = 600_000
    env_var: ClassVar[str | None] = "OPENAI_API_KEY"
    requires_key: ClassVar[bool] = True

    def _payload(self, batch: list[str], input_type: InputType) -> dict[str, Any]:
        payload: dict[str, Any] = {"model": self.model, "input": batch}
        if self._configured_dim and self.model.startswith("text-embedding-3"):
            payload["dimensions"] = self._configured_dim
        return payload

    def _parse(self, data: Any, expected: int) -> list[Any]:
        return parse_openai_data(self, data, expected)
