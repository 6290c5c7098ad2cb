"""Error mapping of the server: every failure becomes ``{"error": {code, message, field}}``.

One table turns the vault's exception tree into HTTP statuses (400 bad input,
401 no or invalid token, 403 not allowed, 404 unknown id, 413 too large, 429
rate limited, 503 tier unavailable). Anything else is a bug: it is logged with
its traceback on the server and the client gets a 500 with a short message.
No message echoes a token or a request body, and tier errors name the tier,
never a server path.
"""

from __future__ import annotations

import logging
from typing import Any

from starlette.responses import JSONResponse

from tiervault.errors import (
    ConfigError,
    EmbeddingError,
    EntryNotFound,
    ReadOnlyTier,
    StorageError,
    TierError,
    TierVaultError,
    ValidationError,
)

__all__ = ["ApiError", "error_response", "api_error_from", "STATUS_CODES"]

log = logging.getLogger("tiervault.server")

#: The ``code`` string of each status this server answers with.
STATUS_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
                405: "method_not_allowed", 408: "request_timeout", 413: "too_large",
                415: "unsupported_media_type", 429: "rate_limited", 500: "internal",
                503: "unavailable"}


class ApiError(Exception):
    """A client-visible failure: HTTP ``status``, stable ``code``, ``message``, ``field``."""

    def __init__(self, status: int, message: str, *, field: str | None = None,
                 code: str | None = None, headers: dict[str, str] | None = None) -> None:
        self.status = status
        self.code = code or STATUS_CODES.get(status, "error")
        self.message = message
        self.field = field
        self.headers = headers or {}
        super().__init__(message)

    def response(self) -> JSONResponse:
        return error_response(self.status, self.message, field=self.field, code=self.code,
                              headers=self.headers)


def error_response(status: int, message: str, *, field: str | None = None,
                   code: str | None = None, headers: dict[str, str] | None = None) -> JSONResponse:
    body: dict[str, Any] = {"error": {"code": code or STATUS_CODES.get(status, "error"),
                                      "message": message, "field": field}}
    return JSONResponse(body, status_code=status, headers=headers)


def api_error_from(exc: BaseException) -> ApiError:
    """The :class:`ApiError` for an exception raised by the vault (or a bug)."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, EntryNotFound):
        return ApiError(404, f"{exc}; ids come from search results", field="id")
    if isinstance(exc, ValidationError):
        return ApiError(400, str(exc), field=exc.field)
    if isinstance(exc, ReadOnlyTier):
        return ApiError(403, f"tier {exc.tier!r} is read-only for this token", field="tier")
    if isinstance(exc, TierError):
        log.warning("tier unavailable: %s", exc)
        return ApiError(503, f"tier {exc.tier!r} is unavailable on the server ({_short(exc.reason)});"
                             " retry later or ask the server's operator", field="tier")
    if isinstance(exc, (StorageError, EmbeddingError)):
        log.warning("storage failure: %s", exc)
        return ApiError(503, f"the server's storage failed ({type(exc).__name__}); retry later")
    if isinstance(exc, ConfigError):
        log.error("configuration error while serving: %s", exc)
        return ApiError(503, "the server is misconfigured; its operator must check the log")
    if isinstance(exc, TierVaultError):
        return ApiError(400, str(exc))
    log.error("internal error", exc_info=exc)
    return ApiError(500, f"internal error ({type(exc).__name__}); the details are in the server "
                         "log. Retry once; report it if it persists")


def _short(reason: str) -> str:
    """The first clause of a tier problem, without a file path."""
    text = reason.split(":")[0].strip()
    return text if "/" not in text else "unavailable"
