"""``voyage``: the Voyage AI embeddings API (``POST {base}/embeddings``).

Wire format: request ``{"model", "input": [texts], "input_type": "document"|"query"}``
(Voyage embeds queries and documents differently, so retrieval should pass
``query`` for search strings); answer ``{"data": [{"index", "embedding"}]}``.
Key: ``embedding.apiKey`` or ``VOYAGE_API_KEY``, sent as ``Authorization: Bearer``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from tiervault.embeddings.base import InputType
from tiervault.embeddings.providers._remote import RemoteEmbedder, parse_openai_data

__all__ = ["VoyageEmbedder"]


class VoyageEmbedder(RemoteEmbedder):
    """Voyage AI embeddings (default ``voyage-3.5``, batches of 128)."""

    name: ClassVar[str] = "voyage"
    path: ClassVar[str] = "/embeddings"
    default_base_url: ClassVar[str | None] = "https://api.voyageai.com/v1"
    default_model: ClassVar[str | None] = "voyage-3.5"
    default_batch_size: ClassVar[int] = 128
    # Voyage limits tokens per request (120k for voyage-3-large, more for others);
    # 400k characters keeps a batch under the smallest limit for ordinary text.
    default_max_batch_chars: ClassVar[int | None] = 400_000
    env_var: ClassVar[str | None] = "VOYAGE_API_KEY"
    requires_key: ClassVar[bool] = True

    def _payload(self, batch: list[str], input_type: InputType) -> dict[str, Any]:
        return {"model": self.model, "input": batch, "input_type": input_type}

    def _parse(self, data: Any, expected: int) -> list[Any]:
        return parse_openai_data(self, data, expected)
