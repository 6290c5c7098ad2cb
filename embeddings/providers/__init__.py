"""Embedding providers: one module each, imported only when chosen (``local`` needs the
``local`` extra: onnxruntime, tokenizers), so this package imports none of them.

:data:`PROVIDERS` names each provider's module and class
(:func:`~tiervault.embeddings.factory.make_embedder` builds the configured one);
:data:`REMOTE` are those reached over HTTP (an API key or base URL, retries, a
dimension known only from the first answer).
"""

from __future__ import annotations

__all__ = ["PROVIDERS", "REMOTE"]

# provider name -> (module, class)
PROVIDERS: dict[str, tuple[str, str]] = {
    "openai": ("tiervault.embeddings.providers.openai", "OpenAIEmbedder"),
    "voyage": ("tiervault.embeddings.providers.voyage", "VoyageEmbedder"),
    "ollama": ("tiervault.embeddings.providers.ollama", "OllamaEmbedder"),
    "http": ("tiervault.embeddings.providers.http", "HttpEmbedder"),
    "hash": ("tiervault.embeddings.providers.hash", "HashEmbedder"),
    "local": ("tiervault.embeddings.providers.local", "LocalEmbedder"),
}
REMOTE = ("openai", "voyage", "ollama", "http")
