"""Who is calling: a bearer token checked against the token store, then rate-limited.

Every ``/api`` and ``/mcp`` request must carry ``Authorization: Bearer tv_...``;
there is no anonymous access, on loopback either (a browser tab on the same
machine could otherwise reach the vault). A rejected token answers 401 with
the reason (unknown, expired, revoked, malformed) and never repeats the token;
logs name a token only by its public key.
"""

from __future__ import annotations

import logging
from typing import Mapping

from tiervault.server.errors import ApiError
from tiervault.server.limits import RateLimiter
from tiervault.server.principal import Principal
from tiervault.server.tokens import TokenRejected, TokenStore

__all__ = ["Authenticator", "Caller", "bearer"]

log = logging.getLogger("tiervault.server")


class Caller:
    """An authenticated request: the principal and the public key of its token."""

    __slots__ = ("principal", "key")

    def __init__(self, principal: Principal, key: str) -> None:
        self.principal = principal
        self.key = key


def bearer(headers: Mapping[str, str]) -> str | None:
    """The token of an ``Authorization: Bearer ...`` header, or None."""
    value = headers.get("authorization")
    if not value:
        return None
    scheme, _, token = value.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


class Authenticator:
    """Checks tokens and applies the per-token rate limit."""

    def __init__(self, tokens: TokenStore, limiter: RateLimiter) -> None:
        self.tokens = tokens
        self.limiter = limiter

    def principal(self, headers: Mapping[str, str]) -> Principal | None:
        """The principal of a valid token, or None (no rate limit: for the web page's own checks)."""
        token = bearer(headers)
        if token is None:
            return None
        try:
            principal, _ = self.tokens.check(token)
        except TokenRejected:
            return None
        return principal

    def require(self, headers: Mapping[str, str]) -> Caller:
        """The caller of a request: 401 without a valid token, 429 over its rate."""
        token = bearer(headers)
        if token is None:
            raise ApiError(401, "missing token: send 'Authorization: Bearer <token>' "
                                "(create one with `tiervault token create`)",
                           headers={"WWW-Authenticate": "Bearer"})
        try:
            principal, key = self.tokens.check(token)
        except TokenRejected as exc:
            raise ApiError(401, exc.reason, headers={"WWW-Authenticate": "Bearer"}) from None
        wait = self.limiter.take(key)
        if wait > 0:
            log.info("rate limit: token %s", key)
            raise ApiError(429, f"too many requests for this token; retry after "
                                f"{RateLimiter.retry_after(wait)} s",
                           headers={"Retry-After": RateLimiter.retry_after(wait)})
        return Caller(principal, key)
