"""HTTP transport shared by the remote embedding providers.

One :class:`EmbeddingTransport` per provider instance owns one ``httpx.Client``
(connection pooling, explicit timeouts) and one key pool. ``post_json`` sends a
JSON body and returns the decoded JSON answer, retrying with tenacity:

* at most ``max_attempts`` (default 3) attempts in total;
* retried: ``httpx.TransportError`` (connect/read/write/pool timeouts, refused or
  reset connections, truncated bodies), HTTP 429 and HTTP 5xx. Nothing else:
  400/404/422 and friends fail at once (the same request would fail again);
* wait between attempts: ``Retry-After`` when the server sent one (seconds or
  HTTP-date form), capped at ``retry_after_cap_s`` (default 20 s) so a hostile or
  confused server cannot park a write for an hour; otherwise exponential backoff
  with jitter, ``d = min(backoff_max_s, backoff_base_s * 2**(attempt-1))`` and a
  sleep drawn uniformly from ``[d/2, d]`` ("equal jitter");
* on 429 with several keys, the pool rotates to the next key before retrying
  (and stays there: later requests start from the new key).

Errors (all from :mod:`tiervault.errors`, chained with ``raise ... from``):

* 401/403 -> :class:`EmbeddingAuthError` naming the provider and where the key
  comes from, never the key (nor the response body, which may echo part of it);
* a body that is not JSON -> :class:`EmbeddingResponseError` (providers raise the
  same for missing fields, wrong counts and wrong dimensions);
* other 4xx -> :class:`EmbeddingError` with the status and a short, key-scrubbed
  excerpt of the server's message;
* exhausted retries -> :class:`EmbeddingError` saying how many attempts were made
  and what the last one got (status or transport error).

Time bound of one request (``post_json``): each phase of an attempt (connect,
write, waiting for the response headers, each read of the body) has an httpx
timeout of ``timeout_s``, and the body is additionally cut once ``timeout_s`` has
passed since the request was sent (checked between reads), so a server trickling
bytes cannot stretch an attempt indefinitely. Per attempt this gives at most
``connect + write + 2 * timeout_s`` (the last body read may overrun the deadline
by one read timeout), i.e. <= 4 * timeout_s, and for the whole request::

    T(request) <= max_attempts * 4 * timeout_s
                  + (max_attempts - 1) * max(backoff_max_s, retry_after_cap_s)

The usual failure, a server that accepts the connection and never answers, costs
``max_attempts * timeout_s`` plus the waits: 3 * 30 + 2 * 20 = 130 s with the
defaults (3 attempts, ``timeout_s`` 30, backoff cap 8 s, Retry-After cap 20 s);
the theoretical worst case is 3 * 120 + 40 = 400 s. Lower ``timeout_s`` in the
``embedding:`` block to tighten both. An ``embed`` call sends
``ceil(n / batch_size)`` requests one after another, so its bound is that many
times this one.
"""

from __future__ import annotations

import email.utils
import json
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

import httpx
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt

from tiervault.errors import EmbeddingAuthError, EmbeddingError, EmbeddingResponseError

__all__ = [
    "EmbeddingTransport",
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_BACKOFF_BASE_S",
    "DEFAULT_BACKOFF_MAX_S",
    "DEFAULT_RETRY_AFTER_CAP_S",
    "parse_retry_after",
    "backoff_delay",
]

DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_BACKOFF_BASE_S = 0.5
DEFAULT_BACKOFF_MAX_S = 8.0
# A server may ask for minutes; one embedding batch is not worth blocking a
# capture for that long. 20 s covers the usual per-minute rate-limit windows'
# short waits; longer asks end as an EmbeddingError and the entry stays pending.
DEFAULT_RETRY_AFTER_CAP_S = 20.0
_EXCERPT_CHARS = 200
_CHUNK_BYTES = 64 * 1024


class _RetryableStatus(Exception):
    """An HTTP answer worth retrying (429 or 5xx); carries Retry-After if any."""

    def __init__(self, status: int, retry_after: float | None) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.retry_after = retry_after


class _Deadline(httpx.ReadTimeout):
    """The response took longer than ``timeout_s`` in total (a trickling server)."""


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header, or None if absent/unparsable.

    Accepts the delay-seconds form (``"3"``; fractions are tolerated) and the
    HTTP-date form (``"Wed, 21 Oct 2015 07:28:00 GMT"``); negative values give 0.
    """
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        seconds = (when - (now or datetime.now(timezone.utc))).total_seconds()
    if seconds != seconds:  # NaN
        return None
    return max(0.0, seconds)


def backoff_delay(attempt: int, base_s: float, max_s: float, rng: random.Random | None = None) -> float:
    """Equal-jitter exponential backoff before retry number ``attempt`` (1-based).

    ``d = min(max_s, base_s * 2**(attempt-1))``; the result is uniform in ``[d/2, d]``.
    """
    d = min(max_s, base_s * (2.0 ** max(0, attempt - 1)))
    r = (rng or random).random()
    return d / 2.0 + r * d / 2.0


class EmbeddingTransport:
    """JSON-over-HTTP with timeouts, bounded retries and a rotating key pool.

    ``provider`` names the service in every error message; ``key_hint`` says where
    the key comes from (e.g. ``"apiKey / OPENAI_API_KEY"``). ``auth_header`` and
    ``auth_scheme`` shape the header sent when a key is present (Bearer by default).
    ``sleep`` is the function tenacity waits with (kept injectable so tests can
    record the waits while still sleeping for real).
    """

    def __init__(
        self,
        provider: str,
        base_url: str,
        *,
        api_keys: Sequence[str] = (),
        key_hint: str = "apiKey",
        timeout_s: float = 30.0,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        backoff_base_s: float = DEFAULT_BACKOFF_BASE_S,
        backoff_max_s: float = DEFAULT_BACKOFF_MAX_S,
        retry_after_cap_s: float = DEFAULT_RETRY_AFTER_CAP_S,
        auth_header: str = "Authorization",
        auth_scheme: str = "Bearer",
        extra_headers: Mapping[str, str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        if timeout_s <= 0:
            raise ValueError("timeout_s must be > 0")
        self.provider = provider
        self.base_url = base_url.rstrip("/")
        self.key_hint = key_hint
        self.timeout_s = float(timeout_s)
        self.max_attempts = int(max_attempts)
        self.backoff_base_s = float(backoff_base_s)
        self.backoff_max_s = float(backoff_max_s)
        self.retry_after_cap_s = float(retry_after_cap_s)
        self._keys = [k for k in api_keys if k]
        self._key_index = 0
        self._lock = threading.Lock()
        self._auth_header = auth_header
        self._auth_scheme = auth_scheme
        self._sleep = sleep
        headers = {"Accept": "application/json", "User-Agent": "tiervault-embeddings"}
        headers.update(extra_headers or {})
        timeout = httpx.Timeout(self.timeout_s)
        self._client = httpx.Client(timeout=timeout, headers=headers, follow_redirects=False)

    # -- key pool ---------------------------------------------------------------
    @property
    def key_count(self) -> int:
        """How many keys the pool holds (0 = requests go out unauthenticated)."""
        return len(self._keys)

    def _current_key(self) -> str | None:
        with self._lock:
            return self._keys[self._key_index] if self._keys else None

    def _rotate_key(self, used: str | None) -> None:
        """Move to the next key, unless another thread already moved off ``used``."""
        with self._lock:
            if len(self._keys) > 1 and self._keys[self._key_index] == used:
                self._key_index = (self._key_index + 1) % len(self._keys)

    def _scrub(self, text: str) -> str:
        for key in self._keys:
            text = text.replace(key, "***")
        return text

    # -- requests ---------------------------------------------------------------
    def post_json(self, path: str, payload: Mapping[str, Any]) -> Any:
        """POST ``payload`` as JSON to ``base_url + path``; return the decoded JSON.

        Raises EmbeddingAuthError (401/403), EmbeddingResponseError (not JSON),
        EmbeddingError (other 4xx, exhausted retries).
        """
        url = self.base_url + path
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        retrying = Retrying(
            stop=stop_after_attempt(self.max_attempts),
            wait=self._wait,
            retry=retry_if_exception(_is_retryable),
            sleep=self._sleep,
            reraise=True,
        )
        attempts = 0
        try:
            for attempt in retrying:
                with attempt:
                    attempts = attempt.retry_state.attempt_number
                    return self._attempt(url, body)
        except _RetryableStatus as exc:
            raise EmbeddingError(
                f"{self.provider} embedding request to {url} failed after {attempts} "
                f"attempt{'s' if attempts != 1 else ''}; last answer: HTTP {exc.status}"
            ) from exc
        except httpx.UnsupportedProtocol as exc:
            raise EmbeddingError(
                f"{self.provider} base URL {self.base_url!r} is not http(s); fix embedding.baseUrl"
            ) from exc
        except httpx.TransportError as exc:
            raise EmbeddingError(
                f"{self.provider} embedding request to {url} failed after {attempts} "
                f"attempt{'s' if attempts != 1 else ''}; last error: "
                f"{type(exc).__name__}: {self._scrub(str(exc)) or 'no detail'}"
            ) from exc
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise EmbeddingError(
                f"{self.provider} embedding request to {url} failed: {type(exc).__name__}: "
                f"{self._scrub(str(exc))}"
            ) from exc
        raise AssertionError("unreachable: tenacity either returns or raises")  # pragma: no cover

    def _attempt(self, url: str, body: bytes) -> Any:
        key = self._current_key()
        headers = {"Content-Type": "application/json"}
        if key is not None:
            headers[self._auth_header] = f"{self._auth_scheme} {key}".strip()
        request = self._client.build_request("POST", url, content=body, headers=headers)
        deadline = time.monotonic() + self.timeout_s
        response = self._client.send(request, stream=True)
        try:
            chunks = []
            for chunk in response.iter_bytes(_CHUNK_BYTES):
                chunks.append(chunk)
                if time.monotonic() > deadline:
                    raise _Deadline(
                        f"response not complete within timeout_s={self.timeout_s:g}s", request=request
                    )
            raw = b"".join(chunks)
        finally:
            response.close()
        status = response.status_code
        if status in (401, 403):
            raise EmbeddingAuthError(
                f"{self.provider} refused the API key (HTTP {status}); check {self.key_hint}"
            )
        if status == 429 or 500 <= status <= 599:
            if status == 429:
                self._rotate_key(key)
            raise _RetryableStatus(status, parse_retry_after(response.headers.get("Retry-After")))
        if not 200 <= status <= 299:
            excerpt = self._scrub(raw.decode("utf-8", "replace"))[:_EXCERPT_CHARS].strip()
            raise EmbeddingError(
                f"{self.provider} rejected the embedding request to {url} (HTTP {status}): "
                f"{excerpt or 'no message'}; not retried (fix the request or the configuration)"
            )
        try:
            return json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise EmbeddingResponseError(
                f"{self.provider} answered HTTP {status} with a body that is not valid JSON "
                f"({len(raw)} bytes): {exc}"
            ) from exc

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        if isinstance(exc, _RetryableStatus) and exc.retry_after is not None:
            return min(exc.retry_after, self.retry_after_cap_s)
        return backoff_delay(state.attempt_number, self.backoff_base_s, self.backoff_max_s)

    # -- lifecycle --------------------------------------------------------------
    def close(self) -> None:
        """Close the pooled connections."""
        self._client.close()

    def __enter__(self) -> EmbeddingTransport:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:  # never shows keys
        return f"EmbeddingTransport({self.provider!r}, {self.base_url!r}, keys={len(self._keys)})"


def _is_retryable(exc: BaseException) -> bool:
    if isinstance(exc, httpx.UnsupportedProtocol):  # a wrong URL does not heal by waiting
        return False
    return isinstance(exc, (_RetryableStatus, httpx.TransportError))
