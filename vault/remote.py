"""A remote tier: the storage contract served by ``tiervault serve``, over HTTP.

``tiers: {team: {url: https://vault.example.com, token: ${TIERVAULT_TEAM_TOKEN}}}``
opens a :class:`RemoteTier` (through :func:`tiervault.vault.backend.open_tier`).
Every :class:`~tiervault.vault.backend.TierBackend` method is one POST to
``<url>/api/v1/tiers/<tier>/<method>`` carrying its arguments in the wire
format of :mod:`tiervault.vault.wire`; the server runs the same method on its
own backend of that tier, as the token's agent and within its rights. The URL
may also name the tier itself (``https://host/api/v1/tiers/team`` or
``https://host/tiers/team``); otherwise the server tier has the local tier's name
(``agent`` is the token's own agent tier on the server).

Exact federation. The manager's lexical search is statistics-first: it sums
``term_stats`` over every searched tier (this one included: one small call),
then asks each tier for ``lexical_top_k`` *scored with the global statistics*,
and dedups with ``lexical_scores`` by id / content hash. Because the server
runs the same scorer on the same rows with the statistics it is given, a
remote tier ranks exactly as the same tier in a local file would.

Failures, timeouts, retries and settings: :mod:`tiervault.vault.remote_transport`
(a failure is a ``StorageError``: the manager leaves the tier out and lists it
in ``problems``). The token is never part of ``location``, a message or a log line.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Iterable, Iterator, Sequence

import httpx

from tiervault.vault.entry import Entry
from tiervault.vault.entry_rows import write_in_batches
from tiervault.vault.filters import Filters
from tiervault.vault.remote_transport import RemoteOptions, RemoteTransport, split_url
from tiervault.vault.rows import CommittedBatch, EmbeddingCounts, FacetCounts, LightPage, Link, TitleRow

__all__ = ["RemoteTier", "RemoteOptions", "open_backend", "split_url"]

#: Entries per capture request: keeps a request far under the server's body limit.
CAPTURE_CHUNK = 200


class RemoteTier:
    """One tier of a ``tiervault serve`` server, as a TierBackend."""

    def __init__(self, name: str, url: str, token: str | None, *, read_only: bool = False,
                 options: RemoteOptions | None = None,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.name = name
        self.read_only = read_only
        self.transport = RemoteTransport(name, url, token, read_only=read_only, options=options,
                                         transport=transport)
        self.options = self.transport.options
        self.base, self.remote_name = self.transport.base, self.transport.remote_name
        self._call = self.transport.call
        self._local_lexicon: Any = None  # a local mirror, for filter_mask (built on first use)

    # -- plumbing ---------------------------------------------------------------------
    @property
    def location(self) -> str:
        return self.transport.location

    def __repr__(self) -> str:
        return f"RemoteTier({self.name!r}, {self.location!r})"

    def close(self) -> None:
        self.transport.close()

    # -- identity ---------------------------------------------------------------------
    @property
    def exists(self) -> bool:
        return bool(self._call("exists"))

    def uid(self) -> str:
        return str(self._call("uid"))

    def generation(self) -> int:
        return int(self._call("generation"))

    def integrity_problems(self) -> list[str]:
        return list(self._call("integrity_problems"))

    def stats(self) -> Any:
        return replace(self._call("stats"), location=self.location)

    def cache_prefix(self) -> str | None:
        return None  # nothing of a remote tier is cached on local disk

    def create(self) -> bool:
        """A remote tier is created by its server, never by a client: always False."""
        return False

    def key_columns(self) -> None:
        """None: a remote tier scores on its server, not over an in-process mirror."""
        return None

    def filter_mask(self, filters: Filters) -> Any:
        """Answered from a local mirror fed by ``changes_since`` (ids cannot travel per query)."""
        from tiervault.vault.lexicon import LocalMirror, MirrorLexicon

        if self._local_lexicon is None:
            self._local_lexicon = MirrorLexicon(LocalMirror(self).get)
        return self._local_lexicon.filter_mask(filters)

    # -- entries ----------------------------------------------------------------------
    def capture(self, entry: Entry) -> Entry:
        return self._call("capture", True, entry=entry)

    def capture_many(self, entries: Iterable[Entry], *, batch_size: int = 5_000,
                     on_batch: Callable[[CommittedBatch], None] | None = None) -> int:
        size = max(1, min(batch_size, CAPTURE_CHUNK))
        return write_in_batches(
            entries, size,
            lambda batch: int(self._call("capture_many", True, entries=batch, batch_size=size)),
            on_batch)

    def get(self, entry_id: str) -> Entry | None:
        return self._call("get", entry_id=entry_id)

    def get_many(self, ids: Sequence[str]) -> dict[str, Entry]:
        return self._call("get_many", ids=list(ids)) if ids else {}

    def light_rows(self, ids: Sequence[str], snippet_chars: int = 120) -> dict[str, Any]:
        return self._call("light_rows", ids=list(ids), snippet_chars=snippet_chars) if ids else {}

    def list_entries(self, *, offset: int = 0, limit: int = 100, filters: Filters | None = None,
                     sort: str = "rowid", since: float | None = None) -> list[Entry]:
        if sort == "rowid" and since is None:  # also what a server of the first contract takes
            return self._call("list_entries", offset=offset, limit=limit, filters=filters)
        return self._call("list_entries", offset=offset, limit=limit, filters=filters, sort=sort,
                          since=since)

    def count_matching(self, filters: Filters | None = None, since: float | None = None) -> int:
        return int(self._call("count_matching", filters=filters, since=since))

    def vocabulary(self) -> dict[str, dict[str, int]]:
        return self._call("vocabulary")

    def light_page(self, *, order: str = "newest", filters: Filters | None = None, offset: int = 0,
                   limit: int = 25, snippet_chars: int = 120) -> LightPage:
        return self._call("light_page", order=order, filters=filters, offset=offset, limit=limit,
                          snippet_chars=snippet_chars)

    def facet_counts(self, filters: Filters | None = None) -> FacetCounts:
        return self._call("facet_counts", filters=filters)

    def title_rows(self, after: int = 0, limit: int = 5_000) -> list[TitleRow]:
        return self._call("title_rows", after=after, limit=limit)

    def iter_entries(self, batch: int = 2_000) -> Iterator[Entry]:
        offset = 0
        while True:
            page = self.list_entries(offset=offset, limit=min(batch, 500))
            yield from page
            if not page:
                return
            offset += len(page)

    def entries_after(self, after: str, limit: int) -> list[Entry]:
        return self._call("entries_after", after=after, limit=limit)

    def ids_by_hash(self, hashes: Sequence[str]) -> dict[str, str]:
        return self._call("ids_by_hash", hashes=list(hashes)) if hashes else {}

    def delete(self, entry_id: str) -> bool:
        return bool(self._call("delete", True, entry_id=entry_id))

    def delete_many(self, ids: Sequence[str]) -> int:
        return int(self._call("delete_many", True, ids=list(ids))) if ids else 0

    def count(self) -> int:
        return int(self._call("count"))

    def changes_since(self, since: int) -> Any:
        return self._call("changes_since", since=since)

    # -- lexical search ---------------------------------------------------------------
    def term_stats(self, terms: Sequence[str]) -> Any:
        return self._call("term_stats", terms=list(terms))

    def lexical_top_k(self, terms: Sequence[str], stats: Any, filters: Filters, k: int,
                      *, words: Sequence[str] = ()) -> list[Any]:
        return self._call("lexical_top_k", terms=list(terms), stats=stats, filters=filters, k=k,
                          words=list(words))

    def lexical_scores(self, terms: Sequence[str], stats: Any, *, ids: Sequence[str] = (),
                       hashes: Sequence[str] = (), filters: Filters | None = None,
                       words: Sequence[str] = (), content_hashes: bool = True) -> list[Any]:
        # ``content_hashes`` is not sent: the server answers with them (an older one knows no
        # such option), the caller reads none
        if not ids and not hashes:
            return []
        return self._call("lexical_scores", terms=list(terms), stats=stats, ids=list(ids),
                          hashes=list(hashes), filters=filters, words=list(words))

    def lexical_count(self, terms: Sequence[str], filters: Filters, cap: int) -> int:
        return int(self._call("lexical_count", terms=list(terms), filters=filters, cap=cap))

    def text_similarity(self, words: Sequence[str], documents: Sequence[Sequence[str]]) -> list[float]:
        return self._call("text_similarity", words=list(words),
                          documents=[list(d) for d in documents])

    def latent_scores(self, words: Sequence[str], ids: Sequence[str], k: int) -> list[float | None]:
        # the server scores over its own mirror of the rows (JSON null: no latent space)
        if not ids:
            return []
        return self._call("latent_scores", words=list(words), ids=list(ids), k=k)

    def latent_text_scores(self, words: Sequence[str], documents: Sequence[Sequence[str]],
                           k: int) -> list[float | None]:
        if not documents:
            return []
        return self._call("latent_text_scores", words=list(words),
                          documents=[list(d) for d in documents], k=k)

    # -- links, memories, feedback --------------------------------------------------------
    def _local(self, link: Link) -> Link:
        """A link as this side names its tier (the server names it by its own tier name)."""
        return replace(link, tier=self.name)

    def link(self, source_id: str, target_id: str, link_type: str, note: str = "") -> Any:
        return self._local(self._call("link", True, source_id=source_id, target_id=target_id,
                                      link_type=link_type, note=note))

    def unlink(self, source_id: str, target_id: str, link_type: str | None = None) -> int:
        return int(self._call("unlink", True, source_id=source_id, target_id=target_id,
                              link_type=link_type))

    def links_touching(self, ids: Sequence[str]) -> list[Any]:
        if not ids:
            return []
        return [self._local(link) for link in self._call("links_touching", ids=list(ids))]

    def links_of_type(self, link_type: str, limit: int = 200) -> list[Link]:
        return [self._local(link) for link in self._call("links_of_type", link_type=link_type,
                                                         limit=limit)]

    def link_count(self) -> int:
        return int(self._call("link_count"))

    def add_memory(self, summary: str, *, context: str = "", topics: Sequence[str] | str = (),
                   project: str = "", created_at: float | None = None) -> str:
        return self._call("add_memory", True, summary=summary, context=context,
                          topics=topics if isinstance(topics, str) else list(topics),
                          project=project, created_at=created_at)

    def search_memories(self, terms: Sequence[str], limit: int) -> list[Any]:
        return self._call("search_memories", terms=list(terms), limit=limit) if terms else []

    def get_memories(self, ids: Sequence[str]) -> dict[str, Any]:
        return self._call("get_memories", ids=list(ids)) if ids else {}

    def list_memories(self, *, limit: int = 20, offset: int = 0,
                      project: str | None = None) -> list[Any]:
        return self._call("list_memories", limit=limit, offset=offset, project=project)

    def memory_count(self) -> int:
        return int(self._call("memory_count"))

    def add_feedback(self, query: str, entry_id: str, action: str, *, agent: str = "",
                     context: str = "") -> None:
        self._call("add_feedback", True, query=query, entry_id=entry_id, action=action,
                   agent=agent, context=context)

    def feedback_counts(self) -> Any:
        return self._call("feedback_counts")

    def feedback_for(self, entry_ids: Sequence[str]) -> list[Any]:
        return self._call("feedback_for", entry_ids=list(entry_ids)) if entry_ids else []

    def feedback_events(self, limit: int) -> list[Any]:
        return self._call("feedback_events", limit=int(limit))

    def feedback_events_for(self, entry_ids: Sequence[str], limit: int) -> list[Any]:
        if not entry_ids:
            return []
        return self._call("feedback_events_for", entry_ids=list(entry_ids), limit=int(limit))

    def add_weight_record(self, events: int, pairs: int, weights: str,
                          created_at: float | None = None) -> None:
        self._call("add_weight_record", True, events=int(events), pairs=int(pairs), weights=weights,
                   created_at=created_at)

    def weight_history(self, limit: int = 20) -> list[Any]:
        return self._call("weight_history", limit=int(limit))

    # -- vectors ----------------------------------------------------------------------
    def put_vectors(self, model: str, rows: Iterable[Any]) -> int:
        rows = list(rows)
        return int(self._call("put_vectors", True, model=model, rows=rows)) if rows else 0

    def vectors_for(self, model: str, ids: Sequence[str]) -> dict[str, Any]:
        return self._call("vectors_for", model=model, ids=list(ids)) if ids else {}

    def vector_input_hashes(self, model: str, ids: Sequence[str]) -> dict[str, str]:
        return self._call("vector_input_hashes", model=model, ids=list(ids)) if ids else {}

    def vector_changes_since(self, model: str, since: int) -> Any:
        return self._call("vector_changes_since", model=model, since=since)

    def vector_search(self, model: str, query: Any, k: int, filters: Filters | None = None) -> list[Any]:
        return self._call("vector_search", model=model, query=query, k=k, filters=filters)

    def mark_embedding(self, model: str, items: Iterable[tuple[str, str]], state: str,
                       error: str = "") -> None:
        self._call("mark_embedding", True, model=model, items=[list(i) for i in items],
                   state=state, error=error)

    def embedding_backlog(self, model: str, limit: int, *, after: str = "") -> list[Entry]:
        return self._call("embedding_backlog", model=model, limit=limit, after=after)

    def embedding_counts(self, model: str) -> EmbeddingCounts:
        return self._call("embedding_counts", model=model)

    def embedding_status(self, model: str, ids: Sequence[str]) -> dict[str, Any]:
        return self._call("embedding_status", model=model, ids=list(ids)) if ids else {}


def open_backend(config: Any) -> RemoteTier:
    """The :func:`~tiervault.vault.backend.open_tier` factory for ``url: http(s)://...``."""
    url = config.url.reveal() if config.url is not None else ""
    token = config.token.reveal() if getattr(config, "token", None) is not None else None
    return RemoteTier(config.name, url, token, read_only=config.read_only,
                      options=RemoteOptions.from_config(config))
