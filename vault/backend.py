"""The storage contract: what one tier must do, whatever stores it.

:class:`TierBackend` is the ONE thing a new backend implements (SQLite file:
:class:`tiervault.vault.store.TierStore`; PostgreSQL: ``tiervault.vault.postgres``;
a remote tier over HTTP: ``tiervault.vault.remote``). VaultManager, the Brain,
embeddings, the CLI, the MCP server and the HTTP server use only these methods.
The full contract of each method (ordering, filters, errors, atomicity) is in
``docs/backend.md``; the suite ``tests/test_tier_contract.py`` checks it for every
backend registered in ``tests/backends.py``.

:func:`open_tier` chooses the backend from the tier's configuration:
``path`` -> SQLite, ``url: postgresql://...`` -> PostgreSQL, ``url: http(s)://...``
-> remote. Backends other than SQLite are imported lazily (optional extras).

Terms. Lexical methods take ``terms``: the query's distinct stems as produced by
:mod:`tiervault.vault.tokenizer` (FTS5 porter + unicode61), in query order, and
``words``: the query's words before stemming (for the TF-IDF signal).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Protocol, Sequence, runtime_checkable

import numpy as np

from tiervault.errors import ConfigError
from tiervault.vault.entry import Entry
from tiervault.vault.filters import Filters
from tiervault.vault.rows import (
    Changes,
    CommittedBatch,
    EmbeddingCounts,
    EmbeddingStatus,
    FacetCounts,
    FeedbackCounts,
    FeedbackEvent,
    FeedbackRow,
    IdMask,
    KeyColumns,
    LexicalHit,
    LightPage,
    LightRow,
    Memory,
    Link,
    MemoryHit,
    TermStats,
    TierStats,
    TitleRow,
    VectorChanges,
    VectorHit,
    VectorRow,
    WeightRecord,
)

if TYPE_CHECKING:
    from tiervault.config.settings import TierConfig

__all__ = ["TierBackend", "open_tier", "backend_kind", "BACKEND_MODULES"]


@runtime_checkable
class TierBackend(Protocol):
    """One tier's storage. Thread-safe; every write is atomic (see docs/backend.md)."""

    #: The tier's name (agent, project, team, or a source's name).
    name: str
    #: True when every write must raise ReadOnlyTier.
    read_only: bool

    # -- identity and lifecycle -----------------------------------------------------
    @property
    def location(self) -> str:
        """Where the tier lives, safe to print: a path, or a URL without password/token."""
        ...

    @property
    def exists(self) -> bool:
        """False while the tier has never been written (it searches as empty)."""
        ...

    def create(self) -> bool:
        """Create the tier's storage if it does not exist yet (schema only, no entries);
        True when this call created it. ``tiervault init`` / quickstart use it."""
        ...

    def uid(self) -> str:
        """A stable random id of this tier's storage (names caches of it)."""
        ...

    def generation(self) -> int:
        """Monotonic counter bumped by every committed write (0 for a new tier)."""
        ...

    def close(self) -> None:
        """Release connections; idempotent. The backend is unusable afterwards."""
        ...

    def integrity_problems(self) -> list[str]:
        """Empty when the storage and its indexes are consistent; else one line per problem."""
        ...

    def stats(self) -> TierStats:
        """Counts and size (never a secret)."""
        ...

    def cache_prefix(self) -> str | None:
        """A local path prefix where upper layers may persist caches of this tier
        (``<prefix>.vec-<model>...``), or None: do not cache on disk."""
        ...

    # -- entries ----------------------------------------------------------------------
    def capture(self, entry: Entry) -> Entry:
        """Upsert one entry by id; returns it as stored (timestamps, content hash)."""
        ...

    def capture_many(self, entries: Iterable[Entry], *, batch_size: int = 5_000,
                     on_batch: Callable[[CommittedBatch], None] | None = None) -> int:
        """Upsert entries, one transaction per batch; returns how many changed.

        ``entries`` may be any iterable, read once (a generator over a file): hand a whole
        load to ONE call, so a backend can take its bulk path (the PostgreSQL one prepares
        batches ahead and, into an empty tier, builds its indexes once at the end).
        ``on_batch(CommittedBatch(entries, written, total))`` runs after each batch's
        transaction committed, before the next batch commits, in order; an exception it
        raises stops the load (the batches before stay committed).

        An entry identical to the stored one (content hash, origin, validity and
        given timestamps) is skipped: not rewritten, not counted, generation of
        its row unchanged. A repeated id within a batch: the last one wins.
        """
        ...

    def get(self, entry_id: str) -> Entry | None:
        ...

    def get_many(self, ids: Sequence[str]) -> dict[str, Entry]:
        """Entries held here by id; unknown ids are absent from the mapping."""
        ...

    def light_rows(self, ids: Sequence[str], snippet_chars: int = 120) -> dict[str, LightRow]:
        """Scan-path rows of the ids held here (unknown ids absent)."""
        ...

    def list_entries(self, *, offset: int = 0, limit: int = 100, filters: Filters | None = None,
                     sort: str = "rowid", since: float | None = None) -> list[Entry]:
        """A page of entries; filters (and ``since``: updated_at >= since) are applied
        before offset/limit. ``sort``: "rowid" (insertion order), "updated" or "created"
        (newest first, ties: latest inserted first)."""
        ...

    def count_matching(self, filters: Filters | None = None, since: float | None = None) -> int:
        """How many entries :meth:`list_entries` pages through with these filters."""
        ...

    def vocabulary(self) -> dict[str, dict[str, int]]:
        """{"domains" | "types" | "severities" | "tags": {value: entry count}}."""
        ...

    def iter_entries(self, batch: int = 2_000) -> Iterator[Entry]:
        """Every entry, streamed in insertion order (export, migrate)."""
        ...

    # -- browsing (the curator pages; docs/backend.md "Browsing") ------------------------
    def light_page(self, *, order: str = "newest", filters: Filters | None = None, offset: int = 0,
                   limit: int = 25, snippet_chars: int = 120) -> LightPage:
        """Light rows ``offset`` .. ``offset + limit`` (limit <= 1,000) of the entries passing
        ``filters`` (None: every entry; applied before offset/limit) in ``order``, latest
        first: "newest" (insertion; an update keeps its place) or "updated" (the write
        generation that last changed the entry; ties: latest inserted first). ``total``:
        how many entries pass the filters. Index-backed: the cost does not grow with
        the tier beyond the rows skipped by ``offset``."""
        ...

    def facet_counts(self, filters: Filters | None = None) -> FacetCounts:
        """Entries passing ``filters`` (None: every entry) counted per type, severity,
        domain and tag (see :class:`~tiervault.vault.rows.FacetCounts`), without a table scan."""
        ...

    def title_rows(self, after: int = 0, limit: int = 5_000) -> list[TitleRow]:
        """Up to ``limit`` (<= 10,000) entries with key > ``after`` in key order, as
        (key, id, title, content hash): a sweep of the whole tier without its text."""
        ...

    def entries_after(self, after: str, limit: int) -> list[Entry]:
        """Up to ``limit`` entries with id > ``after``, in id order (resumable paging)."""
        ...

    def ids_by_hash(self, hashes: Sequence[str]) -> dict[str, str]:
        """content_hash -> id for hashes held here (cross-tier dedup)."""
        ...

    def delete(self, entry_id: str) -> bool:
        """Delete an entry with its links (as source), vectors and embedding state.

        Returns False when the id is not held here. Readers catch up through a
        tombstone (``changes_since().deleted``).
        """
        ...

    def delete_many(self, ids: Sequence[str]) -> int:
        """Delete entries in ONE transaction (all or, on failure, none); returns how many
        were held here and deleted. Each leaves a tombstone, as :meth:`delete`."""
        ...

    def count(self) -> int:
        ...

    # -- generations (the mirrors' catch-up) -------------------------------------------
    def changes_since(self, since: int) -> Changes:
        """Rows written and keys deleted after generation ``since`` (-1: every live row)."""
        ...

    # -- lexical search (federated BM25) ------------------------------------------------
    def term_stats(self, terms: Sequence[str]) -> TermStats:
        """This tier's BM25 statistics for ``terms`` (unfiltered, live entries)."""
        ...

    def lexical_top_k(self, terms: Sequence[str], stats: TermStats, filters: Filters, k: int,
                      *, words: Sequence[str] = ()) -> list[LexicalHit]:
        """The ``k`` best entries with score > 0 passing ``filters`` (applied before k),
        scored with ``stats`` (the federated sum), best first; ties by insertion order."""
        ...

    def lexical_scores(self, terms: Sequence[str], stats: TermStats, *,
                       ids: Sequence[str] = (), hashes: Sequence[str] = (),
                       filters: Filters | None = None,
                       words: Sequence[str] = (), content_hashes: bool = True) -> list[LexicalHit]:
        """The entries held here whose id is in ``ids`` or content hash in ``hashes``,
        scored with ``stats`` (score may be 0); ``passes`` tells whether each passes
        ``filters``. Order: unspecified. ``content_hashes`` False: a caller that reads no
        hit's ``content_hash`` (it may then be ``""``: not read)."""
        ...

    def lexical_count(self, terms: Sequence[str], filters: Filters, cap: int) -> int:
        """Entries matching at least one term and passing ``filters``; exact below
        ``cap``, any value >= ``cap`` means "at least cap"."""
        ...

    def text_similarity(self, words: Sequence[str], documents: Sequence[Sequence[str]]) -> list[float]:
        """TF-IDF cosine of ``words`` with each document (a list of words) under this
        tier's TF-IDF model; 0.0 each when the backend has no model."""
        ...

    def latent_scores(self, words: Sequence[str], ids: Sequence[str], k: int) -> list[float | None]:
        """LSA match in [0, 1] of the query ``words`` with each entry id, in this tier's
        rank-``k`` latent space of its TF-IDF rows (vault/latent.py); 0.0 for an id not
        held here; None each when the tier has no latent space (no more rows or terms
        than ``k``: the caller uses its lexical stand-in). A function of the rows only."""
        ...

    def latent_text_scores(self, words: Sequence[str], documents: Sequence[Sequence[str]],
                           k: int) -> list[float | None]:
        """LSA match of ``words`` with each document (a list of words: a memory) in the
        same latent space as :meth:`latent_scores` (None each as there)."""
        ...

    def filter_mask(self, filters: Filters) -> IdMask:
        """Which entries pass ``filters``, over the tier's id positions (the vector
        index's pre-filter, see :class:`~tiervault.vault.rows.IdMask`)."""
        ...

    def key_columns(self) -> KeyColumns | None:
        """The ids and content hashes of the slots of this tier's in-process lexical mirror,
        caught up as the lexical methods read it (:class:`~tiervault.vault.rows.KeyColumns`:
        slots only appended within a ``build``); None when the lexical answers do not come
        from an in-process mirror (then the federated dedup asks this tier about every
        other tier's hit, and every other tier about this one's)."""
        ...

    # -- links ------------------------------------------------------------------------
    def link(self, source_id: str, target_id: str, link_type: str, note: str = "") -> Link:
        """Store a link from ``source_id`` (held here, else EntryNotFound) to
        ``target_id`` (any tier). Re-linking the same triple updates the note."""
        ...

    def unlink(self, source_id: str, target_id: str, link_type: str | None = None) -> int:
        """Remove links (every type when None); returns how many were removed."""
        ...

    def links_touching(self, ids: Sequence[str]) -> list[Link]:
        """Every link stored here whose source or target is one of ``ids``."""
        ...

    def links_of_type(self, link_type: str, limit: int = 200) -> list[Link]:
        """The newest ``limit`` (<= 10,000) links of ``link_type`` stored here (ties: source
        id, then target id, in byte order); ValidationError for an unknown type."""
        ...

    def link_count(self) -> int:
        ...

    # -- memories ---------------------------------------------------------------------
    def add_memory(self, summary: str, *, context: str = "", topics: Sequence[str] | str = (),
                   project: str = "", created_at: float | None = None) -> str:
        """Store a session memory; returns its generated id (``mem-...``)."""
        ...

    def search_memories(self, terms: Sequence[str], limit: int) -> list[MemoryHit]:
        """Memories matching any term, best BM25 first (at most ``limit``)."""
        ...

    def get_memories(self, ids: Sequence[str]) -> dict[str, Memory]:
        """Memories held here by id; unknown ids are absent."""
        ...

    def list_memories(self, *, limit: int = 20, offset: int = 0,
                      project: str | None = None) -> list[Memory]:
        """Memories newest first (ties: latest inserted first), optionally of one project."""
        ...

    def memory_count(self) -> int:
        ...

    # -- feedback ---------------------------------------------------------------------
    def add_feedback(self, query: str, entry_id: str, action: str, *, agent: str = "",
                     context: str = "") -> None:
        """Record one action (with who gave it and the Brain's JSON context); its
        counter updates in the same transaction."""
        ...

    def feedback_counts(self) -> FeedbackCounts:
        ...

    def feedback_for(self, entry_ids: Sequence[str]) -> list[FeedbackRow]:
        """Every feedback row recorded for these entries (unspecified order)."""
        ...

    def feedback_events(self, limit: int) -> list[FeedbackEvent]:
        """The newest ``limit`` actions, oldest first (``seq`` increasing)."""
        ...

    def feedback_events_for(self, entry_ids: Sequence[str], limit: int) -> list[FeedbackEvent]:
        """The newest ``limit`` actions on these entries, oldest first."""
        ...

    def add_weight_record(self, events: int, pairs: int, weights: str,
                          created_at: float | None = None) -> None:
        """Append one refit of the learned weights; keeps the newest 200 records."""
        ...

    def weight_history(self, limit: int = 20) -> list[WeightRecord]:
        """The newest ``limit`` weight records, oldest first."""
        ...

    # -- vectors ----------------------------------------------------------------------
    def put_vectors(self, model: str, rows: Iterable[VectorRow]) -> int:
        """Upsert vectors of ``model`` and mark them ok, one transaction; rows of
        entries that no longer exist are skipped. Returns how many were stored."""
        ...

    def vectors_for(self, model: str, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored float32 vectors of ``model`` by entry id (unknown ids absent)."""
        ...

    def vector_input_hashes(self, model: str, ids: Sequence[str]) -> dict[str, str]:
        """{entry id: input hash} of the vectors stored for ``model``."""
        ...

    def vector_changes_since(self, model: str, since: int) -> VectorChanges:
        """Vectors of ``model`` written after ``since`` (-1: all) and ids deleted after it."""
        ...

    def vector_search(self, model: str, query: np.ndarray, k: int,
                      filters: Filters | None = None) -> list[VectorHit]:
        """Exact top-``k`` by cosine (vectors are unit length) among entries passing
        ``filters`` (applied before k), best first."""
        ...

    def mark_embedding(self, model: str, items: Iterable[tuple[str, str]], state: str,
                       error: str = "") -> None:
        """Set (entry id, input hash) items to pending|ok|error; error bumps retries."""
        ...

    def embedding_backlog(self, model: str, limit: int, *, after: str = "") -> list[Entry]:
        """Entries (id > after, id order) without an ok vector for ``model``."""
        ...

    def embedding_counts(self, model: str) -> EmbeddingCounts:
        """{pending, ok, error, missing} for ``model``."""
        ...

    def embedding_status(self, model: str, ids: Sequence[str]) -> dict[str, EmbeddingStatus]:
        ...


# -- the factory ------------------------------------------------------------------------
#: Backend kind -> (module, factory function, extra to install). Each factory takes the
#: TierConfig and returns a TierBackend.
BACKEND_MODULES = {
    "postgres": ("tiervault.vault.postgres", "open_backend", "postgres"),
    "remote": ("tiervault.vault.remote", "open_backend", "server"),
}


def backend_kind(config: "TierConfig") -> str:
    """sqlite | postgres | remote, from the config's ``path`` or ``url`` scheme."""
    url = config.url.reveal() if config.url is not None else None
    if url is None:
        if config.path is None:
            raise ConfigError(f"tier {config.name!r} needs a path or a url", key=f"tiers.{config.name}")
        return "sqlite"
    scheme = url.split(":", 1)[0].lower()
    if scheme in ("postgresql", "postgres"):
        return "postgres"
    if scheme in ("http", "https"):
        return "remote"
    raise ConfigError(f"tier {config.name!r}: url scheme {scheme!r} is not supported; "
                      "use postgresql://... or http(s)://..., or a path for an SQLite file",
                      key=f"tiers.{config.name}.url")


def open_tier(config: "TierConfig") -> TierBackend:
    """Open the tier ``config`` describes.

    Raises TierUnavailable when the storage cannot be used (missing server,
    corrupt file, newer schema) and ConfigError when the backend's extra is not
    installed or the configuration is wrong.
    """
    kind = backend_kind(config)
    if kind == "sqlite":
        from tiervault.vault.store import TierStore

        return TierStore(config.path, name=config.name, read_only=config.read_only)  # type: ignore[arg-type]
    module_name, factory_name, extra = BACKEND_MODULES[kind]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(
            f"tier {config.name!r} ({config.location}) needs the {kind} backend, which is not "
            f"available ({exc.msg}); install it with: pip install 'tiervault[{extra}]'",
            key=f"tiers.{config.name}.url") from exc
    factory = getattr(module, factory_name)
    return factory(config)
