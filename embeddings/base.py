"""The ``Embedder`` protocol every provider implements, and the checks of its input.

An embedder turns texts into L2-normalised float32 vectors of shape (n, dim).
``dim`` may be ``None`` until the first response when the configuration did
not give it; it is never hard-coded by a caller. The checks live here, not with the
HTTP providers, so an offline provider (``hash``) imports no HTTP client (httpx and
tenacity: ~0.1 s of a fresh process; issue 16, session 22).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol, runtime_checkable

import numpy as np

from tiervault.errors import ValidationError

__all__ = ["Embedder", "InputType", "check_input_type", "prepare_texts"]

InputType = Literal["document", "query"]
_INPUT_TYPES = ("document", "query")


def check_input_type(value: str) -> InputType:
    """Validate ``input_type`` (``document`` or ``query``)."""
    if value not in _INPUT_TYPES:
        raise ValidationError("input_type", f"must be 'document' or 'query', got {value!r}")
    return value  # type: ignore[return-value]


def prepare_texts(texts: Sequence[str], max_input_chars: int) -> list[str]:
    """Check that ``texts`` is a sequence of str and cut each to ``max_input_chars``."""
    if isinstance(texts, str):
        raise ValidationError("texts", "must be a list of strings, not a single string")
    out = []
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise ValidationError(f"texts[{i}]", f"must be a string, got {type(t).__name__}")
        out.append(t[:max_input_chars] if max_input_chars > 0 else t)
    return out


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
