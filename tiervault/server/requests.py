"""Reading a JSON API request safely: bounded body, bounded time, typed arguments.

The body is read in chunks and refused (413) as soon as it passes the size
limit, without buffering the rest; it must arrive within ``body_timeout_s``
(408). It must be one JSON object (400 naming the JSON problem, never echoing
the body). :class:`Args` then reads each argument with its type checked, so a
wrong type is a 400 naming the field and what was expected.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
from starlette.requests import Request

from tiervault.server.errors import ApiError
from tiervault.server.limits import Limits

__all__ = ["read_json", "Args"]


async def read_json(request: Request, limits: Limits) -> dict[str, Any]:
    """The request body as a JSON object (empty body = ``{}``)."""
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            too_big = int(declared) > limits.max_body_bytes
        except ValueError:
            raise ApiError(400, "Content-Length is not a number") from None
        if too_big:
            raise ApiError(413, f"request body is {declared} bytes; the limit is "
                                f"{limits.max_body_bytes} bytes", field="body")
    chunks: list[bytes] = []
    size = 0
    try:
        with anyio.fail_after(limits.body_timeout_s):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limits.max_body_bytes:
                    raise ApiError(413, f"request body exceeds the limit of "
                                        f"{limits.max_body_bytes} bytes", field="body")
                chunks.append(chunk)
    except TimeoutError:
        raise ApiError(408, f"the request body did not arrive within {limits.body_timeout_s:g} s; "
                            "send it at once") from None
    raw = b"".join(chunks)
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except UnicodeDecodeError:
        raise ApiError(400, "request body is not UTF-8 JSON", field="body") from None
    except json.JSONDecodeError as exc:
        raise ApiError(400, f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}",
                       field="body") from None
    except RecursionError:
        raise ApiError(400, "JSON nested too deeply", field="body") from None
    if not isinstance(value, dict):
        raise ApiError(400, f"request body must be a JSON object, got {_kind(value)}", field="body")
    return value


def _kind(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
            int: "a number", float: "a number", type(None): "null"}.get(type(value), "a value")


class Args:
    """Typed access to a request's arguments (a JSON body or query parameters)."""

    def __init__(self, data: dict[str, Any], limits: Limits, *, from_query: bool = False) -> None:
        self.data = data
        self.limits = limits
        self.from_query = from_query

    def _bad(self, name: str, expected: str) -> ApiError:
        return ApiError(400, f"{name}: expected {expected}, got {_kind(self.data.get(name))}",
                        field=name)

    def string(self, name: str, *, required: bool = False, default: str | None = None,
               max_chars: int = 100_000) -> str | None:
        value = self.data.get(name)
        if value is None:
            if required:
                raise ApiError(400, f"{name}: is required", field=name)
            return default
        if not isinstance(value, str):
            raise self._bad(name, "a string")
        if len(value) > max_chars:
            raise ApiError(413, f"{name}: {len(value)} characters; the limit is {max_chars}",
                           field=name)
        return value

    def query(self) -> str:
        text = self.string("query", required=True, max_chars=self.limits.max_query_chars)
        return text or ""

    def integer(self, name: str, *, default: int | None = None, minimum: int = 0,
                maximum: int | None = None) -> int | None:
        value = self.data.get(name)
        if value is None:
            return default
        if self.from_query and isinstance(value, str):
            try:
                value = int(value)
            except ValueError:
                raise self._bad(name, "an integer") from None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._bad(name, "an integer")
        if value < minimum or (maximum is not None and value > maximum):
            raise ApiError(400, f"{name}: {value} is out of range {minimum}.."
                                f"{maximum if maximum is not None else ''}", field=name)
        return value

    def boolean(self, name: str, *, default: bool = False) -> bool:
        value = self.data.get(name)
        if value is None:
            return default
        if self.from_query and isinstance(value, str) and value.lower() in ("true", "false", "1", "0"):
            return value.lower() in ("true", "1")
        if not isinstance(value, bool):
            raise self._bad(name, "true or false")
        return value

    def strings(self, name: str, *, max_items: int = 100) -> list[str] | None:
        """A list of strings; a single string (or a comma list in a URL) is one item / split."""
        value = self.data.get(name)
        if value is None:
            return None
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",")] if self.from_query else [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self._bad(name, "a list of strings")
        if len(value) > max_items:
            raise ApiError(413, f"{name}: {len(value)} items; the limit is {max_items} per call",
                           field=name)
        return [v for v in value if v]

    def ids(self, name: str = "ids") -> list[str]:
        wanted = self.strings(name, max_items=self.limits.max_ids)
        if not wanted:
            raise ApiError(400, f"{name}: pass at least one entry id (ids come from search results)",
                           field=name)
        return wanted

    def choice(self, name: str, allowed: tuple[str, ...], *, default: str | None = None) -> str:
        value = self.string(name, required=default is None, default=default, max_chars=64)
        if value not in allowed:
            # The value is not echoed: it may be anything (a pasted secret included).
            raise ApiError(400, f"{name}: must be one of {', '.join(allowed)}", field=name)
        return value  # type: ignore[return-value]
