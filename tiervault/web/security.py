"""Web page safety: the response headers, CSRF tokens and the login cookie.

CSRF: every form carries ``csrf = HMAC(app secret, browser id + agent id)``.
The browser id is a random value in an HttpOnly, SameSite=Strict cookie set on
the first page; a POST is accepted only when its ``csrf`` field matches (a
constant-time comparison) and, when the browser sends an ``Origin`` header,
that origin is this server. The app secret is random per process, so a
restart invalidates open forms (they ask to reload, nothing is written).

Content-Security-Policy: ``default-src 'none'`` with only same-origin styles
and images and same-origin form targets: no script runs at all (the pages
are plain HTML forms and inline SVG), inline styles are refused, and the page
cannot be framed. Responses are ``no-store`` and send no Referer (the
``tiervault ui`` URL carries a token once).

Login: the credential a request carries is read, in this order, from an
``Authorization: Bearer`` header, the ``tiervault_token`` cookie, and a
``token`` query parameter (the URL ``tiervault ui`` prints); the page moves a
query token into the cookie at once and redirects to the clean URL.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Any

__all__ = ["CSP", "SECURITY_HEADERS", "TOKEN_COOKIE", "BROWSER_COOKIE", "CsrfGuard", "request_token",
           "cookie_options"]

CSP = ("default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
       "frame-ancestors 'none'; base-uri 'none'")
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "Cross-Origin-Opener-Policy": "same-origin",
}
TOKEN_COOKIE = "tiervault_token"
BROWSER_COOKIE = "tiervault_browser"


def cookie_options(request: Any) -> dict[str, Any]:
    """HttpOnly, SameSite=Strict, path /; Secure when the page is served over https."""
    return {"httponly": True, "samesite": "strict", "path": "/",
            "secure": request.url.scheme == "https"}


def request_token(request: Any) -> str | None:
    """The credential a request carries (header, then cookie, then ``?token=``), or None."""
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip() or None
    cookie = request.cookies.get(TOKEN_COOKIE)
    if cookie:
        return cookie
    return request.query_params.get("token") or None


class CsrfGuard:
    """Issues and checks the per-browser, per-principal form tokens."""

    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secret or secrets.token_bytes(32)

    @staticmethod
    def new_browser_id() -> str:
        return secrets.token_urlsafe(24)

    def token(self, browser_id: str, agent_id: str) -> str:
        msg = f"{browser_id}\0{agent_id}".encode()
        return hmac.new(self._secret, msg, hashlib.sha256).hexdigest()

    def check(self, request: Any, submitted: str | None, agent_id: str) -> bool:
        """True when ``submitted`` is this browser's token and the origin (if sent) is ours."""
        browser_id = request.cookies.get(BROWSER_COOKIE)
        if not browser_id or not submitted:
            return False
        origin = request.headers.get("origin")
        if origin and origin != "null" and origin != _own_origin(request):
            return False
        return hmac.compare_digest(self.token(browser_id, agent_id), submitted)


def _own_origin(request: Any) -> str:
    host = request.headers.get("host", "")
    return f"{request.url.scheme}://{host}"
