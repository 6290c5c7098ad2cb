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

Failures. Timeouts are short (connect 2 s, read 5 s by default). A call is
retried (tenacity, jittered) only when it cannot have been applied: a refused
or timed-out connection, or a 502/503/504/429 before the server ran it. After a
transport failure the tier is *cooling down* for ``retry_after_s`` (2 s): calls
fail at once instead of waiting again, so one search pays at most one timeout;
the next call after that tries again. Failures are ``StorageError`` (the
manager leaves the tier out of the answer and lists it in ``problems``); a
write fails the same way and is never queued. A refused token (401) is a
``StorageError`` too (the tier is left out, the problem names the token's
refusal); ``403`` is ``ReadOnlyTier``, ``400``/``413`` ``ValidationError``,
``404`` on an entry ``EntryNotFound``.

Settings (environment, or attributes of the tier config when present):
``TIERVAULT_REMOTE_CONNECT_TIMEOUT`` (2), ``TIERVAULT_REMOTE_READ_TIMEOUT`` (5),
``TIERVAULT_REMOTE_RETRIES`` (2), ``TIERVAULT_REMOTE_RETRY_AFTER`` (2).
The token is sent only in the ``Authorization`` header; it is never part of
``location``, a message or a log line.
"""

from __future__ import annotations

import json
import os
import re
import time
from typing import Any, Callable, Iterable, Iterator, Sequence
from urllib.parse import urlsplit

import httpx
from tenacity import Retrying, retry_if_exception, stop_after_attempt, stop_after_delay
from tenacity import wait_random_exponential

from tiervault.errors import (
    ConfigError,
    EntryNotFound,
    ReadOnlyTier,
    StorageError,
    ValidationError,
)
from tiervault.vault.entry import Entry
from tiervault.vault.entry_rows import write_in_batches
from tiervault.vault.filters import Filters
from tiervault.vault.wire import decode, encode

__all__ = ["RemoteTier", "RemoteOptions", "open_backend", "split_url"]

_TIER_IN_PATH = re.compile(r"^(?P<base>.*?)(?:/api/v1)?/tiers/(?P<tier>[a-z0-9][a-z0-9._-]*)/?$")
#: Entries per capture request: keeps a request far under the server's body limit.
CAPTURE_CHUNK = 200


class RemoteOptions:
    """Timeouts and retry policy of a remote tier."""

    def __init__(self, connect_timeout: float = 2.0, read_timeout: float = 5.0, retries: int = 2,
                 retry_after_s: float = 2.0) -> None:
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.retries = retries
        self.retry_after_s = retry_after_s

    @classmethod
    def from_config(cls, config: Any, env: Any = None) -> "RemoteOptions":
        env = os.environ if env is None else env

        def number(attr: str, var: str, default: float) -> float:
            value = getattr(config, attr, None)
            if value is None:
                value = env.get(var) or default
            try:
                out = float(value)
            except (TypeError, ValueError):
                raise ConfigError(f"{var} must be a number of seconds, got {str(value)[:20]!r}") from None
            if out < 0:
                raise ConfigError(f"{var} must not be negative")
            return out
        return cls(number("connect_timeout", "TIERVAULT_REMOTE_CONNECT_TIMEOUT", 2.0),
                   number("read_timeout", "TIERVAULT_REMOTE_READ_TIMEOUT", 5.0),
                   int(number("retries", "TIERVAULT_REMOTE_RETRIES", 2)),
                   number("retry_after", "TIERVAULT_REMOTE_RETRY_AFTER", 2.0))


def split_url(url: str, name: str) -> tuple[str, str]:
    """(server base URL, server tier name) of a remote tier URL."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"tier {name!r}: a remote tier url must be http(s)://host[:port]",
                          key=f"tiers.{name}.url")
    if parts.query or parts.fragment or "@" in parts.netloc:
        raise ConfigError(f"tier {name!r}: put the token in `token:`, not in the url "
                          "(no user, query string or fragment)", key=f"tiers.{name}.url")
    path = parts.path.rstrip("/")
    m = _TIER_IN_PATH.match(path)
    base_path, tier = (m.group("base"), m.group("tier")) if m else (path, name)
    return f"{parts.scheme}://{parts.netloc}{base_path}", tier


class _Transient(Exception):
    """A failure after which the call certainly did not run: safe to retry."""

    def __init__(self, message: str, wait: float = 0.0) -> None:
        self.wait = wait
        super().__init__(message)


class RemoteTier:
    """One tier of a ``tiervault serve`` server, as a TierBackend."""

    def __init__(self, name: str, url: str, token: str | None, *, read_only: bool = False,
                 options: RemoteOptions | None = None,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.name = name
        self.read_only = read_only
        self.options = options or RemoteOptions()
        self.base, self.remote_name = split_url(url, name)
        headers = {"User-Agent": "tiervault-remote-tier"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        o = self.options
        self._http = httpx.Client(
            base_url=self.base, headers=headers, transport=transport,
            timeout=httpx.Timeout(connect=o.connect_timeout, read=o.read_timeout,
                                  write=o.read_timeout, pool=o.connect_timeout))
        self._down_until = 0.0
        self._last_failure = ""
        self._closed = False
        self._local_lexicon: Any = None  # a local mirror, for filter_mask (built on first use)

    # -- plumbing ---------------------------------------------------------------------
    @property
    def location(self) -> str:
        return f"{self.base}/api/v1/tiers/{self.remote_name}"

    def __repr__(self) -> str:
        return f"RemoteTier({self.name!r}, {self.location!r})"

    def _fail(self, message: str) -> StorageError:
        return StorageError(f"tier {self.name!r} ({self.location}): {message}")

    def _call(self, method: str, write: bool = False, **kwargs: Any) -> Any:
        if self._closed:
            raise self._fail("this remote tier was closed")
        if write and self.read_only:
            raise ReadOnlyTier(self.name, self.location, "this tier is configured read-only")
        now = time.monotonic()
        if now < self._down_until:
            raise self._fail(f"{self._last_failure} (at the last try; tried again in "
                             f"{self._down_until - now:.1f} s)")
        # Serialised here, not by httpx: ASCII escapes carry any string (a lone surrogate
        # reaches the server, which refuses it as a ValidationError like a local tier).
        body = json.dumps({"args": encode(kwargs)}, ensure_ascii=True).encode("ascii")
        path = f"/api/v1/tiers/{self.remote_name}/{method}"
        o = self.options
        retrying = Retrying(
            stop=stop_after_attempt(o.retries + 1) | stop_after_delay(o.read_timeout),
            wait=lambda rs: min(1.0, max(getattr(rs.outcome.exception(), "wait", 0.0),
                                         wait_random_exponential(multiplier=0.05, max=0.5)(rs))),
            retry=retry_if_exception(lambda e: isinstance(e, _Transient)), reraise=True)
        try:
            response = retrying(self._post, path, body, write)
        except _Transient as exc:
            raise self._down(str(exc)) from None
        except httpx.TimeoutException:
            raise self._down(f"no answer within {o.read_timeout:g} s"
                             + ("; the write may or may not have been applied: load the entry "
                                "to check" if write else "")) from None
        except httpx.HTTPError as exc:
            raise self._down(f"transport error ({type(exc).__name__})") from None
        self._down_until = 0.0
        if response.status_code != 200:
            raise self._error(response)
        try:
            return decode(response.json()["result"])
        except (ValueError, KeyError, TypeError) as exc:
            raise self._fail(f"malformed answer from the server ({type(exc).__name__})") from None

    def _down(self, reason: str) -> StorageError:
        """Start the cool-down after a transport failure; the error to raise."""
        self._last_failure = reason
        self._down_until = time.monotonic() + self.options.retry_after_s
        return self._fail(reason)

    def _post(self, path: str, body: bytes, write: bool) -> httpx.Response:
        try:
            response = self._http.post(path, content=body,
                                       headers={"Content-Type": "application/json"})
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            raise _Transient(f"cannot connect to the server ({type(exc).__name__})") from None
        if response.status_code in (429, 502, 503, 504) and not (write and response.status_code == 502):
            wait = response.headers.get("Retry-After", "")
            raise _Transient(f"the server answered {response.status_code}: {_message(response)}",
                             float(wait) if wait.isdigit() else 0.0)
        return response

    def _error(self, response: httpx.Response) -> Exception:
        status, message = response.status_code, _message(response)
        field = _field(response)
        if status == 401:  # StorageError: a read then leaves this tier out instead of failing
            return self._fail(f"the server refused the token: {message}")
        if status == 403:
            return ReadOnlyTier(self.name, self.location, message)
        if status == 404 and field == "id":
            m = re.search(r"id '([^']*)'", message)
            return EntryNotFound(m.group(1) if m else "")
        if status == 404:
            return self._fail(f"the server does not serve this: {message}")
        if status in (400, 413):
            return ValidationError(field or "arguments", message)
        return self._fail(f"the server answered {status}: {message}")

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._http.close()

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
        from dataclasses import replace

        return replace(self._call("stats"), location=self.location)

    def cache_prefix(self) -> str | None:
        return None  # nothing of a remote tier is cached on local disk

    def create(self) -> bool:
        """A remote tier is created by its server, never by a client: always False."""
        return False

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
                     on_batch: Callable[[int], None] | None = None) -> int:
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
                       words: Sequence[str] = ()) -> list[Any]:
        if not ids and not hashes:
            return []
        return self._call("lexical_scores", terms=list(terms), stats=stats, ids=list(ids),
                          hashes=list(hashes), filters=filters, words=list(words))

    def lexical_count(self, terms: Sequence[str], filters: Filters, cap: int) -> int:
        return int(self._call("lexical_count", terms=list(terms), filters=filters, cap=cap))

    def text_similarity(self, words: Sequence[str], documents: Sequence[Sequence[str]]) -> list[float]:
        return self._call("text_similarity", words=list(words),
                          documents=[list(d) for d in documents])

    # -- links, memories, feedback --------------------------------------------------------
    def _local(self, link: Any) -> Any:
        """A link as this side names its tier (the server names it by its own tier name)."""
        from dataclasses import replace

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

    def embedding_counts(self, model: str) -> dict[str, int]:
        return self._call("embedding_counts", model=model)

    def embedding_status(self, model: str, ids: Sequence[str]) -> dict[str, Any]:
        return self._call("embedding_status", model=model, ids=list(ids)) if ids else {}


def _json_error(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
        err = body.get("error") if isinstance(body, dict) else None
        return err if isinstance(err, dict) else {}
    except ValueError:
        return {}


def _message(response: httpx.Response) -> str:
    return str(_json_error(response).get("message") or f"HTTP {response.status_code}")[:500]


def _field(response: httpx.Response) -> str | None:
    field = _json_error(response).get("field")
    return field if isinstance(field, str) else None


def open_backend(config: Any) -> RemoteTier:
    """The :func:`~tiervault.vault.backend.open_tier` factory for ``url: http(s)://...``."""
    url = config.url.reveal() if config.url is not None else ""
    token = config.token.reveal() if getattr(config, "token", None) is not None else None
    return RemoteTier(config.name, url, token, read_only=config.read_only,
                      options=RemoteOptions.from_config(config))
