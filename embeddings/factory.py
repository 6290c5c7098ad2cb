"""Build the configured :class:`Embedder` from an ``EmbeddingConfig``.

Provider modules are imported only when chosen, so ``local`` (onnxruntime,
tokenizers) costs nothing unless configured. Errors here are
:class:`ConfigError` (unknown provider, missing key/model/baseUrl) or, for
``local``, whatever the local embedder raises when its optional extra is missing;
the caller (engine start-up) logs one warning and runs without vectors.
Construction never touches the network: ``dim`` stays None until the first
``embed`` when it is not configured.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from typing import Any

from tiervault.embeddings.base import Embedder
from tiervault.embeddings.providers import PROVIDERS, REMOTE
from tiervault.errors import ConfigError

__all__ = ["make_embedder", "PROVIDERS"]



def make_embedder(cfg: Any, *, env: Mapping[str, str] = os.environ, **remote_kwargs: Any) -> Embedder:
    """The embedder for ``cfg.provider``.

    ``env`` supplies ``OPENAI_API_KEY`` / ``VOYAGE_API_KEY`` when the config holds no
    key (the config loader normally resolved them already). ``remote_kwargs`` are
    passed to the HTTP providers' constructors (retry tuning; used by tests).
    """
    provider = getattr(cfg, "provider", None)
    if provider not in PROVIDERS:
        raise ConfigError(
            f"embedding.provider {provider!r} is not supported; choose one of {', '.join(PROVIDERS)}",
            key="embedding.provider",
        )
    module_name, class_name = PROVIDERS[provider]
    cls = getattr(importlib.import_module(module_name), class_name)
    if provider in REMOTE:
        return cls.from_config(cfg, env=env, **remote_kwargs)
    return cls.from_config(cfg)
