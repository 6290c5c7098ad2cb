"""Embed on write and backfill: what text is embedded, when, and what is stored.

Embedding input. Each entry is turned into one explicit text by a template
(:data:`DEFAULT_TEMPLATE`: title, tags, description, context) and cut to
``max_input_chars`` characters *before* it is hashed and sent, so the hash is
the hash of exactly what the provider saw. ``input_hash`` is
``sha256(model_key + "\\0" + text)``; the model key (:func:`model_key_for`,
``"provider:model"``) keeps vectors of different models and dimensions apart.

On write (:meth:`EmbeddingPipeline.on_write`, a ``VaultManager`` write hook):
entries whose input hash equals the stored vector's are skipped (no provider
call); the others are marked ``pending`` and embedded in batches (100 by
default, never more than the provider's configured batch size), stored with
their hash (state ``ok``). A provider failure marks the batch ``error`` with
the message and one more retry — it is never raised into the write, which is
already committed. After a failure the pipeline stops calling the provider
for ``cooldown_s`` seconds (entries written meanwhile stay ``pending``), so a
bulk import against a dead provider does not wait out every batch's retries.

Backfill (:meth:`EmbeddingPipeline.backfill`, ``tiervault embed``): one pass in
id order over the tier. Pending, errored and never-embedded entries are
embedded; entries whose stored hash differs from their current input (edits
that bypassed the write hook, a template change) are re-embedded; the rest are
skipped. Every batch is committed on its own, so an interrupted backfill
loses at most one batch of work and a rerun continues where it stopped.
``rebuild=True`` re-embeds everything.
"""

from __future__ import annotations

import hashlib
import logging
import string
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from tiervault.embeddings.base import Embedder
from tiervault.embeddings.index import l2_normalize
from tiervault.embeddings.providers import REMOTE
from tiervault.errors import ConfigError, EmbeddingError
from tiervault.vault.entry import Entry
from tiervault.vault.backend import TierBackend
from tiervault.vault.rows import VectorRow
from tiervault.vault.transfer import transfer_for

__all__ = [
    "EmbeddingPipeline",
    "DEFAULT_TEMPLATE",
    "DEFAULT_BATCH",
    "TEMPLATE_FIELDS",
    "embedding_input",
    "input_hash",
    "model_key_for",
    "check_template",
]

log = logging.getLogger(__name__)

#: The default embedding input: ``title + "\nTags: " + tags + "\n\n" + description + "\n" + context``.
DEFAULT_TEMPLATE = "{title}\nTags: {tags}\n\n{description}\n{context}"
#: Entries per provider call unless the provider's batch size is smaller.
DEFAULT_BATCH = 100
#: Fields a template may use (``tags`` and ``applies_to`` are joined with ", ").
TEMPLATE_FIELDS = ("id", "title", "description", "context", "example", "counter_example", "why",
                   "tags", "applies_to", "type", "domain", "severity")
_PAGE = 1_000

Progress = Callable[[int, int], None]


def check_template(template: str) -> str:
    """Validate ``template`` (``str.format`` fields from :data:`TEMPLATE_FIELDS` only)."""
    if not isinstance(template, str) or not template.strip():
        raise ConfigError("embedding input template must be a non-empty string",
                          key="embedding.inputTemplate")
    try:
        names = [f for _, f, spec, conv in string.Formatter().parse(template) if f is not None]
    except ValueError as exc:
        raise ConfigError(f"embedding input template {template!r} is not a valid format string: {exc}",
                          key="embedding.inputTemplate") from exc
    bad = [n for n in names if n not in TEMPLATE_FIELDS]
    if bad or not names:
        raise ConfigError(
            f"embedding input template uses {'{' + bad[0] + '}' if bad else 'no field'}; "
            f"allowed fields: {', '.join('{' + f + '}' for f in TEMPLATE_FIELDS)}",
            key="embedding.inputTemplate")
    return template


def embedding_input(entry: Entry, template: str = DEFAULT_TEMPLATE, max_chars: int = 8000) -> str:
    """The exact text embedded for ``entry``: the template filled in, cut to ``max_chars``."""
    values = {name: getattr(entry, name) for name in TEMPLATE_FIELDS}
    values["tags"] = ", ".join(entry.tags)
    values["applies_to"] = ", ".join(entry.applies_to)
    text = template.format(**values)
    return text[:max_chars] if max_chars > 0 else text


def input_hash(model_key: str, text: str) -> str:
    """``sha256(model_key + "\\0" + text)`` as hex: changes with the input or the model."""
    return hashlib.sha256(f"{model_key}\0{text}".encode("utf-8")).hexdigest()


def model_key_for(embedder: Embedder, dim: int | None = None) -> str:
    """Storage key of an embedder's vectors: ``"provider:model"``.

    ``dim`` (the configured ``embedding.dim``) is appended as ``@dim`` for the
    remote providers, where it can change the vectors of one model name
    (OpenAI's ``dimensions``); ``hash`` already carries its dimension in the model.
    """
    key = f"{embedder.name}:{embedder.model}"
    if dim and embedder.name in REMOTE:
        key += f"@{int(dim)}"
    return key


def _error_text(exc: BaseException) -> str:
    """One line for ``embedding_state.error``: type and message (providers scrub keys)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:500]


class EmbeddingPipeline:
    """Embeds entries of any tier with one embedder under one model key."""

    def __init__(
        self,
        embedder: Embedder,
        model_key: str | None = None,
        *,
        template: str = DEFAULT_TEMPLATE,
        max_input_chars: int = 8000,
        batch_size: int = DEFAULT_BATCH,
        provider_batch: int | None = None,
        cooldown_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if batch_size < 1:
            raise ConfigError(f"embedding batch size must be >= 1, got {batch_size}", key="embedding.batchSize")
        self.embedder = embedder
        self.model_key = model_key or model_key_for(embedder)
        self.template = check_template(template)
        self.max_input_chars = int(max_input_chars)
        # The provider's configured batch size caps one call (embedding.batchSize).
        self.batch_size = min(batch_size, provider_batch) if provider_batch else batch_size
        self.cooldown_s = float(cooldown_s)
        self._clock = clock
        self._down_until = 0.0
        self.last_error: str | None = None

    @classmethod
    def from_config(cls, embedder: Embedder, cfg: Any, **kwargs: Any) -> EmbeddingPipeline:
        """A pipeline for an ``EmbeddingConfig`` (max_input_chars, batch_size, dim, template)."""
        template = getattr(cfg, "input_template", None) or DEFAULT_TEMPLATE
        return cls(embedder, model_key_for(embedder, getattr(cfg, "dim", None)), template=template,
                   max_input_chars=getattr(cfg, "max_input_chars", 8000),
                   provider_batch=getattr(cfg, "batch_size", None), **kwargs)

    # -- inputs ------------------------------------------------------------------------
    def text(self, entry: Entry) -> str:
        return embedding_input(entry, self.template, self.max_input_chars)

    def hashed(self, entries: Iterable[Entry]) -> list[tuple[Entry, str, str]]:
        """(entry, text, input hash) per entry; a repeated id keeps its last version."""
        latest = {e.id: e for e in entries}
        out = []
        for e in latest.values():
            text = self.text(e)
            out.append((e, text, input_hash(self.model_key, text)))
        return out

    # -- on write ----------------------------------------------------------------------
    def on_write(self, store: TierBackend, entries: Sequence[Entry]) -> dict[str, int]:
        """Embed what changed among ``entries`` just committed to ``store``. Never raises
        for provider problems (states record them); returns the counts of this call."""
        counts = {"embedded": 0, "skipped": 0, "failed": 0, "pending": 0}
        if not entries:
            return counts
        items = self.hashed(entries)
        todo = self._up_to_date(store, items, counts, force=False)
        if not todo:
            return counts
        store.mark_embedding(self.model_key, [(e.id, h) for e, _, h in todo], "pending")
        if self.provider_down():
            counts["pending"] += len(todo)  # provider failed moments ago: leave it to backfill
            return counts
        self._embed_all(store, todo, counts, stop_after=1)
        return counts

    # The provider's health is shared by writes and queries (see EmbeddingRuntime):
    # after a failure, nobody calls it again for ``cooldown_s`` seconds.
    def provider_down(self) -> bool:
        """True within ``cooldown_s`` of the provider's last failure."""
        return self._clock() < self._down_until

    def record_failure(self, message: str) -> None:
        self.last_error = message
        self._down_until = self._clock() + self.cooldown_s

    def record_success(self) -> None:
        self._down_until = 0.0

    def hook(self, manager: Any) -> Callable[[str, list[Entry]], None]:
        """A ``VaultManager`` write hook: ``hook(tier, entries)`` -> :meth:`on_write`."""

        def embed_on_write(tier: str, entries: list[Entry]) -> None:
            self.on_write(manager.store(tier), entries)

        return embed_on_write

    # -- backfill ----------------------------------------------------------------------
    def backfill(self, store: TierBackend, *, rebuild: bool = False, rehash: bool = True,
                 on_progress: Progress | None = None) -> dict[str, int]:
        """Bring every vector of ``store`` up to date for this model.

        Returns ``{"embedded", "skipped", "failed", "pending"}``: entries embedded
        now, already up to date, failed now (state ``error``), and still pending
        afterwards (not attempted: e.g. the provider failed three batches in a row,
        after which this run stops calling it). ``rehash=False`` only visits
        entries without an ``ok`` state (faster on a huge tier, misses edits that
        bypassed the write hook). Safe to interrupt and rerun.
        """
        counts = {"embedded": 0, "skipped": 0, "failed": 0, "pending": 0}
        if not store.exists:
            return counts
        # A backend's ANN index (PostgreSQL's HNSW) is not created on the way when the
        # backfill crosses its threshold -- pgvector would then insert every later vector
        # into the graph one by one -- but built once at the end, as ``migrate`` does; an
        # index that already exists is maintained as usual. Killed before the end: the next
        # write of vectors (or backfill) builds it; searches meanwhile are exact.
        transfer = transfer_for(store)
        with transfer.deferred_vector_indexes():
            self._backfill(store, counts, rebuild=rebuild, rehash=rehash, on_progress=on_progress)
        transfer.build_vector_indexes()
        left = store.embedding_counts(self.model_key)
        counts["pending"] = max(counts["pending"], left["pending"] + left["missing"])
        return counts

    def _backfill(self, store: TierBackend, counts: dict[str, int], *, rebuild: bool, rehash: bool,
                  on_progress: Progress | None) -> None:
        """The pages of :meth:`backfill` (counts updated in place)."""
        total = store.count() if (rehash or rebuild) else _backlog_size(store, self.model_key)
        fetch = (lambda limit, after: store.entries_after(after, limit)) if (rehash or rebuild) else (
            lambda limit, after: store.embedding_backlog(self.model_key, limit, after=after))
        after, seen, given_up = "", 0, False
        while True:
            page = fetch(_PAGE, after=after)
            if not page:
                break
            after = page[-1].id
            seen += len(page)
            items = self.hashed(page)
            todo = self._up_to_date(store, items, counts, force=rebuild)
            if given_up:
                counts["pending"] += len(todo)
            elif todo:
                # Failures are reported by the caller from the counts and last_error.
                given_up = not self._embed_all(store, todo, counts, stop_after=3, level=logging.INFO,
                                               progress=(on_progress, seen - len(page), total))
            if on_progress:
                on_progress(min(seen, total) if total else seen, max(total, seen))

    # -- internals ---------------------------------------------------------------------
    def _up_to_date(self, store: TierBackend, items: list[tuple[Entry, str, str]],
                    counts: dict[str, int], *, force: bool) -> list[tuple[Entry, str, str]]:
        """Items needing a provider call; counts the others as skipped (and marks them
        ok when their stored vector already matches but the state says otherwise)."""
        if force:
            return items
        ids = [e.id for e, _, _ in items]
        stored = store.vector_input_hashes(self.model_key, ids)
        same = [(e, t, h) for e, t, h in items if stored.get(e.id) == h]
        if same:
            states = store.embedding_status(self.model_key, [e.id for e, _, _ in same])
            stale = [(e.id, h) for e, _, h in same if e.id in states and states[e.id].state != "ok"]
            if stale:  # e.g. an edit that failed to embed was reverted: the vector fits again
                store.mark_embedding(self.model_key, stale, "ok")
            counts["skipped"] += len(same)
        return [(e, t, h) for e, t, h in items if stored.get(e.id) != h]

    def _embed_all(self, store: TierBackend, todo: list[tuple[Entry, str, str]],
                   counts: dict[str, int], *, stop_after: int,
                   progress: tuple[Progress | None, int, int] | None = None,
                   level: int = logging.WARNING) -> bool:
        """Embed ``todo`` batch by batch; False when ``stop_after`` batches failed in a
        row (the rest is left pending and counted so)."""
        failures = 0
        for start in range(0, len(todo), self.batch_size):
            batch = todo[start:start + self.batch_size]
            try:
                vecs = self._embed([t for _, t, _ in batch])
            except Exception as exc:  # noqa: BLE001 - recorded in the state and logged, never lost
                # Not raised: the entries are committed; their state says what went wrong.
                message = _error_text(exc)
                self.record_failure(message)
                store.mark_embedding(self.model_key, [(e.id, h) for e, _, h in batch], "error", message)
                counts["failed"] += len(batch)
                failures += 1
                log.log(level, "embedding %d entries of tier %r with %s failed (they are kept; "
                        "`tiervault embed` retries): %s", len(batch), store.name,
                        self.model_key, message)
                if failures >= stop_after:
                    counts["pending"] += len(todo) - start - len(batch)
                    return False
                continue
            failures = 0
            self.record_success()
            counts["embedded"] += store.put_vectors(
                self.model_key, [VectorRow(e.id, h, v) for (e, _, h), v in zip(batch, vecs)])
            if progress and progress[0]:
                progress[0](min(progress[1] + start + len(batch), progress[2]), progress[2])
        return True

    def _embed(self, texts: list[str]) -> np.ndarray:
        vecs = np.asarray(self.embedder.embed(texts, input_type="document"), dtype=np.float32)
        if vecs.ndim != 2 or vecs.shape[0] != len(texts) or vecs.shape[1] == 0:
            raise EmbeddingError(f"{self.model_key} returned shape {vecs.shape} for {len(texts)} texts")
        if not np.isfinite(vecs).all():
            raise EmbeddingError(f"{self.model_key} returned NaN or infinite values")
        # Providers normalise already; stored rows must be unit length for the
        # index to use them without another pass (VectorIndex.build normalized=True).
        return l2_normalize(vecs)


def _backlog_size(store: TierBackend, model_key: str) -> int:
    c = store.embedding_counts(model_key)
    return c["pending"] + c["error"] + c["missing"]
