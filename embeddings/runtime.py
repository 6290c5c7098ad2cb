"""One entry point that switches vectors on for a :class:`VaultManager`.

``attach_embeddings(manager, settings)`` makes the configured embedder, registers
embed-on-write as the manager's write hook and returns an
:class:`EmbeddingRuntime` -- which is also what the Brain takes as its vector
source (``Brain(manager, settings, vectors=runtime)``: ``embed_query``,
``similarities``, ``search``). With embeddings disabled it returns None; when
the embedder cannot be made (bad config, optional extra missing) it logs one
warning on stderr and returns None, and tiervault runs on FTS-only weights.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from tiervault.brain.vectors import VectorMatch
from tiervault.embeddings.base import Embedder
from tiervault.embeddings.pipeline import EmbeddingPipeline
from tiervault.embeddings.recall import VectorRecall
from tiervault.errors import EmbeddingError, TierVaultError
from tiervault.vault.filters import Filters

__all__ = ["EmbeddingRuntime", "attach_embeddings"]

log = logging.getLogger(__name__)

_QUERY_CACHE = 256


@dataclass(eq=False)
class EmbeddingRuntime:
    """The embedder, its write pipeline and vector recall of one manager.

    Implements the Brain's ``VectorSource`` protocol (``tiervault.brain.vectors``).
    """

    manager: Any
    embedder: Embedder
    pipeline: EmbeddingPipeline
    recall: VectorRecall
    _queries: OrderedDict[str, np.ndarray] = field(default_factory=OrderedDict, repr=False)
    _qlock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def model_key(self) -> str:
        """Storage key of the active model (``"provider:model"``)."""
        return self.pipeline.model_key

    # -- the Brain's VectorSource ---------------------------------------------------------
    def embed_query(self, query: str) -> np.ndarray:
        """The query's unit vector (``input_type="query"``); the last 256 are cached.

        Any failure becomes :class:`EmbeddingError` so the Brain falls back to
        FTS-only weights for this query.
        """
        with self._qlock:
            hit = self._queries.get(query)
            if hit is not None:
                self._queries.move_to_end(query)
                return hit
        if self.pipeline.provider_down():
            # A search must not wait out the retry bound again on a provider that
            # just failed: answer FTS-only until the cooldown ends.
            raise EmbeddingError(f"{self.model_key} failed moments ago ({self.pipeline.last_error}); "
                                 f"retrying it after {self.pipeline.cooldown_s:.0f} s")
        text = query[: self.pipeline.max_input_chars] if self.pipeline.max_input_chars > 0 else query
        try:
            vec = np.asarray(self.embedder.embed([text], input_type="query"), dtype=np.float32)[0]
        except Exception as exc:  # noqa: BLE001 - one typed error for the Brain's fallback
            self.pipeline.record_failure(str(exc))
            if isinstance(exc, EmbeddingError):
                raise
            raise EmbeddingError(f"embedding the query with {self.model_key} failed: {exc}") from exc
        self.pipeline.record_success()
        if not np.isfinite(vec).all():
            raise EmbeddingError(f"{self.model_key} returned a query vector with NaN or infinite values")
        vec.setflags(write=False)
        with self._qlock:
            self._queries[query] = vec
            if len(self._queries) > _QUERY_CACHE:
                self._queries.popitem(last=False)
        return vec

    def similarities(self, query_vector: np.ndarray, tier: str, ids: Sequence[str]) -> np.ndarray:
        """Cosine of each entry of ``tier`` in ``ids`` (NaN where it has no vector)."""
        return self.recall.scores_for(query_vector, [(tier, i) for i in ids])

    def vectors_for(self, tier: str, ids: Sequence[str]) -> np.ndarray | None:
        """Stored vectors of ``ids`` in ``tier`` ((n, dim), NaN rows where none)."""
        return self.recall.vectors_for(tier, ids)

    def prefetch(self, query_vector: np.ndarray, tiers: Sequence[str] | None = None) -> bool:
        """The int8 scan of ``tiers`` started on the scan pool for a search soon after
        (:meth:`VectorRecall.prefetch`)."""
        return self.recall.prefetch(query_vector, tiers)

    def search(self, query_vector: np.ndarray, k: int, tiers: Sequence[str] | None = None,
               filters: Filters | None = None) -> list[VectorMatch]:
        """Top ``k`` (id, tier, cosine) over ``tiers``, filters applied first."""
        ids, tier_names, cos = self.recall.search(query_vector, k, filters=filters, tiers=tiers)
        return [VectorMatch(i, t, c) for i, t, c in zip(ids, tier_names, cos.tolist())]

    # -- maintenance -----------------------------------------------------------------------
    def backfill(self, tier: str, *, rebuild: bool = False, on_progress: Any = None) -> dict[str, int]:
        """``pipeline.backfill`` on one tier, then refresh and persist its vector index."""
        counts = self.pipeline.backfill(self.manager.store(tier), rebuild=rebuild, on_progress=on_progress)
        self.recall.warm([tier])
        return counts

    def close(self) -> None:
        """Release the embedder's connections (the manager is closed by its owner)."""
        close = getattr(self.embedder, "close", None)
        if callable(close):
            close()


def attach_embeddings(manager: Any, settings: Any, *, embedder: Embedder | None = None,
                      strict: bool = False, env: Mapping[str, str] | None = None,
                      **embedder_kwargs: Any) -> EmbeddingRuntime | None:
    """Switch vectors on for ``manager`` when ``settings.embedding_enabled``.

    Returns the runtime (also set as ``manager.embeddings``) or None: embeddings
    disabled, or the embedder failed to initialise (one warning on stderr; with
    ``strict=True`` the error is raised instead, for ``tiervault embed``).
    ``embedder`` replaces the configured one (tests, custom providers);
    ``embedder_kwargs`` reach the HTTP providers (retry tuning).
    """
    if not getattr(settings, "embedding_enabled", False):
        return None
    cfg = settings.embedding
    try:
        if embedder is None:
            from tiervault.embeddings.factory import make_embedder

            embedder = make_embedder(cfg, env=os.environ if env is None else env, **embedder_kwargs)
        pipeline = EmbeddingPipeline.from_config(embedder, cfg)
    except Exception as exc:  # noqa: BLE001 - any init failure means "run without vectors"
        if strict:
            if isinstance(exc, TierVaultError):
                raise
            raise EmbeddingError(f"embedding provider {getattr(cfg, 'provider', '?')!r} could not "
                                 f"start: {exc}") from exc
        log.warning("embedding provider %r could not start (%s); running without vectors "
                    "(FTS-only ranking)", getattr(cfg, "provider", "?"), " ".join(str(exc).split()))
        return None
    runtime = EmbeddingRuntime(manager, embedder, pipeline, VectorRecall(manager, pipeline.model_key))
    manager.add_write_hook(pipeline.hook(manager))
    manager.attach_embeddings(runtime)
    return runtime
