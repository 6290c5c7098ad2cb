"""The remote tier's transport: one HTTP client to a tier of ``tiervault serve``.

:class:`RemoteTransport` POSTs one contract call to
``<base>/api/v1/tiers/<tier>/<method>`` (arguments and result in the wire format
of :mod:`tiervault.vault.wire`) and turns every failure into a tiervault error;
:class:`~tiervault.vault.remote.RemoteTier` is the contract built on it.

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
from typing import Any
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
from tiervault.vault.wire import decode, encode

__all__ = ["RemoteTransport", "RemoteOptions", "split_url"]

_TIER_IN_PATH = re.compile(r"^(?P<base>.*?)(?:/api/v1)?/tiers/(?P<tier>[a-z0-9][a-z0-9._-]*)/?$")


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


class RemoteTransport:
    """Calls to one server tier as one local tier ``name``; thread-safe (httpx's pool)."""

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

    @property
    def location(self) -> str:
        return f"{self.base}/api/v1/tiers/{self.remote_name}"

    def fail(self, message: str) -> StorageError:
        return StorageError(f"tier {self.name!r} ({self.location}): {message}")

    def call(self, method: str, write: bool = False, **kwargs: Any) -> Any:
        """The result of contract method ``method`` run on the server with ``kwargs``;
        ``write`` calls are refused here on a read-only tier and never retried blind."""
        if self._closed:
            raise self.fail("this remote tier was closed")
        if write and self.read_only:
            raise ReadOnlyTier(self.name, self.location, "this tier is configured read-only")
        now = time.monotonic()
        if now < self._down_until:
            raise self.fail(f"{self._last_failure} (at the last try; tried again in "
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
            raise self.fail(f"malformed answer from the server ({type(exc).__name__})") from None

    def _down(self, reason: str) -> StorageError:
        """Start the cool-down after a transport failure; the error to raise."""
        self._last_failure = reason
        self._down_until = time.monotonic() + self.options.retry_after_s
        return self.fail(reason)

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
            return self.fail(f"the server refused the token: {message}")
        if status == 403:
            return ReadOnlyTier(self.name, self.location, message)
        if status == 404 and field == "id":
            m = re.search(r"id '([^']*)'", message)
            return EntryNotFound(m.group(1) if m else "")
        if status == 404:
            return self.fail(f"the server does not serve this: {message}")
        if status in (400, 413):
            return ValidationError(field or "arguments", message)
        return self.fail(f"the server answered {status}: {message}")

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._http.close()


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


