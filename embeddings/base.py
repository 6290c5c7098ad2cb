"""The ``Embedder`` protocol every provider implements.

An embedder turns texts into L2-normalised float32 vectors of shape (n, dim).
``dim`` may be ``None`` until the first response when the configuration did
not give it; it is never hard-coded by a caller.
"""

from __future__ import annotations

from typing import Literal, Protocol, runtime_checkable

import numpy as np

__all__ = ["Embedder", "InputType"]

InputType = Literal["document", "query"]


@runtime_checkable
class Embedder(Protocol):
    """Text -> vector. Implementations: hash, local, openai, voyage, ollama, http."""

    @property
    def name(self) -> str:
        """Provider name as written in agent.yaml (``openai``, ``hash``, ...)."""

    @property
    def model(self) -> str:
        """Model identifier; vectors of different models are never compared."""

    @property
    def dim(self) -> int | None:
        """Vector dimension, or None until discovered from the first response."""

    def embed(self, texts: list[str], input_type: InputType = "document") -> np.ndarray:
        """Embed ``texts`` -> float32 array (len(texts), dim), each row L2-normalised."""
