"""Shared machinery of the HTTP embedding providers (openai, voyage, ollama, http).

:class:`RemoteEmbedder` does everything that does not depend on the wire format:
input checks and truncation, batching (by count and by a character budget, order
preserved), the response checks (count, dimension, finite values), dimension
discovery, L2 normalisation, and key-pool resolution from the configuration.
Subclasses only say how a batch becomes a JSON payload and how the JSON answer
becomes a list of vectors.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from tiervault.embeddings.base import InputType, check_input_type, prepare_texts
from tiervault.embeddings.transport import (
    DEFAULT_BACKOFF_BASE_S,
    DEFAULT_BACKOFF_MAX_S,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_RETRY_AFTER_CAP_S,
    EmbeddingTransport,
)
from tiervault.errors import ConfigError, EmbeddingResponseError

__all__ = ["RemoteEmbedder", "l2_normalize_rows", "resolve_keys"]


def l2_normalize_rows(m: np.ndarray) -> np.ndarray:
    """Return ``m`` (float32, 2-D) with each row divided by its L2 norm, in place.

    ``x_i <- x_i / ||x_i||_2``; rows of norm 0 stay 0 (no division by zero).
    """
    norms = np.sqrt(np.einsum("ij,ij->i", m, m, dtype=np.float64)).astype(np.float32)
    nz = norms > 0
    m[nz] /= norms[nz, None]
    return m


def resolve_keys(cfg: Any, env: Mapping[str, str], env_var: str | None) -> list[str]:
    """The key pool: ``cfg.api_keys`` (all of them), else ``cfg.api_key``, else the
    comma-separated environment variable ``env_var``. Values are revealed here and
    only handed to the transport, which puts them in a header and nowhere else."""
    keys: list[str] = []
    for secret in tuple(getattr(cfg, "api_keys", ()) or ()):
        value = secret.reveal() if secret is not None else ""
        if value and value not in keys:
            keys.append(value)
    single = getattr(cfg, "api_key", None)
    if not keys and single is not None and single.reveal():
        keys.append(single.reveal())
    if not keys and env_var:
        keys = [k.strip() for k in env.get(env_var, "").split(",") if k.strip()]
    return keys


class RemoteEmbedder:
    """Base of the HTTP providers; implements the :class:`Embedder` protocol.

    ``dim`` is the configured dimension or None until the first answer; once known
    every later answer must match it (else :class:`EmbeddingResponseError`).
    Blank texts (empty or whitespace only) are not sent: their rows are zero
    vectors (cosine 0 to everything), because several APIs reject empty input.
    ``embed([])`` makes no request and returns shape ``(0, dim or 0)``.
    ``input_type`` given to the constructor (``embedding.inputType``) overrides
    the per-call value; otherwise each call's own value is used.
    """

    name: ClassVar[str] = "remote"
    path: ClassVar[str] = "/embeddings"
    default_base_url: ClassVar[str | None] = None
    default_model: ClassVar[str | None] = None
    default_batch_size: ClassVar[int] = 128
    # Characters per request; keeps a full batch of long texts under the API's
    # per-request token limit. None = no budget.
    default_max_batch_chars: ClassVar[int | None] = None
    env_var: ClassVar[str | None] = None
    requires_key: ClassVar[bool] = False

    def __init__(
        self,
        *,
        model: str | None = None,
        base_url: str | None = None,
        api_keys: Sequence[str] = (),
        batch_size: int | None = None,
        dim: int | None = None,
        input_type: str | None = None,
        timeout_s: float = 30.0,
        max_input_chars: int = 8000,
        max_batch_chars: int | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        backoff_base_s: float = DEFAULT_BACKOFF_BASE_S,
        backoff_max_s: float = DEFAULT_BACKOFF_MAX_S,
        retry_after_cap_s: float = DEFAULT_RETRY_AFTER_CAP_S,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        model = model or self.default_model
        base = base_url or self.default_base_url
        if not model:
            raise ConfigError(f"embedding.model is required for provider {self.name!r}", key="embedding.model")
        if not base:
            raise ConfigError(f"embedding.baseUrl is required for provider {self.name!r}", key="embedding.baseUrl")
        if self.requires_key and not api_keys:
            raise ConfigError(
                f"provider {self.name!r} needs an API key: set embedding.apiKey in agent.yaml"
                + (f" or the {self.env_var} environment variable" if self.env_var else ""),
                key="embedding.apiKey",
            )
        if batch_size is not None and batch_size < 1:
            raise ConfigError(f"embedding.batchSize must be >= 1, got {batch_size}", key="embedding.batchSize")
        if dim is not None and dim < 1:
            raise ConfigError(f"embedding.dim must be >= 1, got {dim}", key="embedding.dim")
        self._model = model
        self._dim = dim
        self._configured_dim = dim
        self._input_type = check_input_type(input_type) if input_type else None
        self.batch_size = int(batch_size or self.default_batch_size)
        self.max_input_chars = int(max_input_chars)
        self.max_batch_chars = max_batch_chars if max_batch_chars is not None else self.default_max_batch_chars
        self._dim_lock = threading.Lock()
        hint = "embedding.apiKey" + (f" / {self.env_var}" if self.env_var else "")
        kwargs: dict[str, Any] = {"sleep": sleep} if sleep is not None else {}
        self.transport = EmbeddingTransport(
            self.name,
            base,
            api_keys=api_keys,
            key_hint=hint,
            timeout_s=timeout_s,
            max_attempts=max_attempts,
            backoff_base_s=backoff_base_s,
            backoff_max_s=backoff_max_s,
            retry_after_cap_s=retry_after_cap_s,
            **kwargs,
        )

    @classmethod
    def from_config(cls, cfg: Any, *, env: Mapping[str, str] | None = None, **kwargs: Any) -> RemoteEmbedder:
        """Build from a :class:`tiervault.config.settings.EmbeddingConfig`.

        ``kwargs`` reach the constructor (retry tuning, ``sleep``) for tests.
        """
        env = os.environ if env is None else env
        return cls(
            model=cfg.model,
            base_url=cfg.base_url,
            api_keys=resolve_keys(cfg, env, cls.env_var),
            batch_size=cfg.batch_size,
            dim=cfg.dim,
            input_type=cfg.input_type,
            timeout_s=cfg.timeout_s,
            max_input_chars=cfg.max_input_chars,
            **kwargs,
        )

    # -- protocol ---------------------------------------------------------------
    @property
    def model(self) -> str:
        return self._model

    @property
    def dim(self) -> int | None:
        return self._dim

    def embed(self, texts: list[str], input_type: InputType = "document") -> np.ndarray:
        """Embed ``texts`` -> float32 (len(texts), dim), rows L2-normalised, in order."""
        itype = self._input_type or check_input_type(input_type)
        prepared = prepare_texts(texts, self.max_input_chars)
        if not prepared:  # no network for nothing; width 0 while dim is unknown
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        live = [i for i, t in enumerate(prepared) if t.strip()]
        parts: list[tuple[list[int], np.ndarray]] = []
        for batch in self._batches(live, prepared):
            vecs = self._embed_batch([prepared[i] for i in batch], itype)
            parts.append((batch, vecs))
        if self._dim is None:
            # Only blank texts and no dimension yet: ask once so rows have a width.
            self._embed_batch(["dimension probe"], itype)
        assert self._dim is not None
        out = np.zeros((len(prepared), self._dim), dtype=np.float32)
        for batch, vecs in parts:
            out[batch] = vecs
        return out

    # -- batching and checks ----------------------------------------------------
    def _batches(self, indices: list[int], texts: list[str]) -> Iterator[list[int]]:
        """Consecutive runs of ``indices`` with <= batch_size items and, if a char
        budget is set, <= max_batch_chars characters (a lone long text still goes)."""
        batch: list[int] = []
        chars = 0
        budget = self.max_batch_chars
        for i in indices:
            n = len(texts[i])
            if batch and (len(batch) >= self.batch_size or (budget is not None and chars + n > budget)):
                yield batch
                batch, chars = [], 0
            batch.append(i)
            chars += n
        if batch:
            yield batch

    def _embed_batch(self, batch: list[str], input_type: InputType) -> np.ndarray:
        data = self.transport.post_json(self.path, self._payload(batch, input_type))
        rows = self._parse(data, len(batch))
        return self._check(rows, len(batch))

    def _check(self, rows: Any, expected: int) -> np.ndarray:
        where = f"{self.name} ({self._model})"
        try:
            m = np.array(rows, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise EmbeddingResponseError(f"{where} returned embeddings that are not numeric arrays of one length") from exc
        if m.ndim != 2:
            raise EmbeddingResponseError(f"{where} returned something that is not a list of vectors")
        if m.shape[0] != expected:
            raise EmbeddingResponseError(f"{where} returned {m.shape[0]} embeddings for {expected} inputs")
        if m.shape[1] == 0:
            raise EmbeddingResponseError(f"{where} returned empty embeddings")
        if not np.isfinite(m).all():
            raise EmbeddingResponseError(f"{where} returned embeddings with NaN or infinite values")
        with self._dim_lock:
            if self._dim is None:
                self._dim = int(m.shape[1])
            elif m.shape[1] != self._dim:
                source = "embedding.dim" if self._configured_dim else "earlier answers"
                raise EmbeddingResponseError(
                    f"{where} returned {m.shape[1]}-dimensional vectors but {source} say(s) {self._dim}; "
                    "vectors of different dimensions cannot be mixed"
                )
        return l2_normalize_rows(m)

    # -- wire format (subclasses) -----------------------------------------------
    def _payload(self, batch: list[str], input_type: InputType) -> dict[str, Any]:
        raise NotImplementedError

    def _parse(self, data: Any, expected: int) -> list[Any]:
        raise NotImplementedError

    def _bad(self, what: str) -> EmbeddingResponseError:
        return EmbeddingResponseError(f"{self.name} ({self._model}) response {what}")

    # -- lifecycle --------------------------------------------------------------
    def close(self) -> None:
        """Release the HTTP connections."""
        self.transport.close()

    def __enter__(self) -> RemoteEmbedder:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self._model!r}, dim={self._dim}, base_url={self.transport.base_url!r})"


def parse_openai_data(emb: RemoteEmbedder, data: Any, expected: int) -> list[Any]:
    """``{"data": [{"index": i, "embedding": [...]}, ...]}`` -> vectors ordered by index.

    The indices must be exactly 0..expected-1 (any order); else EmbeddingResponseError.
    """
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise emb._bad("has no 'data' list")
    items = data["data"]
    if len(items) != expected:
        raise emb._bad(f"has {len(items)} embeddings for {expected} inputs")
    ordered: list[Any] = [None] * expected
    for pos, item in enumerate(items):
        if not isinstance(item, dict) or "embedding" not in item:
            raise emb._bad(f"item {pos} has no 'embedding'")
        idx = item.get("index", pos)
        if not isinstance(idx, int) or not 0 <= idx < expected or ordered[idx] is not None:
            raise emb._bad(f"item {pos} has a bad or repeated 'index' {idx!r}")
        vec = item["embedding"]
        if not isinstance(vec, list):
            raise emb._bad(f"item {pos} 'embedding' is not a list of floats (base64 is not supported)")
        ordered[idx] = vec
    return ordered
