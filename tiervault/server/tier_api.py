"""The remote-tier protocol, server side: ``POST /api/v1/tiers/<tier>/<method>``.

A :class:`~tiervault.vault.remote.RemoteTier` on an agent's machine calls the
storage contract's methods here; each runs on this server's backend of
``<tier>`` *as the token's agent*: ``agent`` is that agent's own agent tier,
other names are the shared tiers its rights let it read. Read methods need the
read right, write methods the write right (403 otherwise; a tier the token may
not read answers 403 too, never revealing whether it exists). Arguments and
results travel in the wire format of :mod:`tiervault.vault.wire`; arguments
are decoded untrusted (entries validated, unknown kinds refused, 400).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tiervault.errors import ValidationError
from tiervault.server.api import ApiContext
from tiervault.server.errors import ApiError, api_error_from
from tiervault.server.rights import require_read, require_write
from tiervault.vault.wire import METHODS, WRITE_METHODS, decode, encode

__all__ = ["tier_routes"]


def _backend(ctx: ApiContext, principal: Any, tier: str) -> Any:
    """The caller's backend of ``tier`` (its own agent tier for ``agent``)."""
    require_read(principal, [tier], field="tier")
    manager = ctx.host.brain_for(principal).manager
    entry = manager.tiers.get(tier)
    if entry is None:
        raise ApiError(404, f"tier {tier!r} is not served here; tiers: "
                            f"{', '.join(ctx.host.tier_names())}", field="tier")
    if entry.store is None:
        raise ApiError(503, f"tier {tier!r} is unavailable on the server; retry later", field="tier")
    return entry.store


def _bind(ctx: ApiContext) -> Any:
    async def call(request: Request) -> Response:
        try:
            caller = ctx.auth.require(request.headers)
            tier = request.path_params["tier"]
            method = request.path_params["method"]
            if method not in METHODS:
                raise ApiError(404, f"{method!r} is not a tier method this server offers",
                               field="method")
            if method in WRITE_METHODS:
                require_write(caller.principal, tier)
            body = await ctx.body(request)
            args = decode(body.data.get("args", {"$t": "map", "v": {}}), trusted=False)
            if not isinstance(args, dict):
                raise ApiError(400, "args: expected an object of keyword arguments", field="args")
            backend = _backend(ctx, caller.principal, tier)

            def run() -> Any:
                target = getattr(backend, method)
                if not callable(target):  # a property of the contract (exists)
                    return target
                try:
                    return target(**args)
                except TypeError as exc:
                    if "argument" in str(exc):
                        raise ValidationError("args", f"bad arguments for {method}: {exc}") from None
                    raise
            result = await ctx.host.call(run)
        except Exception as exc:  # the JSON error shape, never a traceback
            return api_error_from(exc).response()
        return JSONResponse({"result": encode(result)})
    return call


def tier_routes(ctx: ApiContext) -> list[Route]:
    """The remote-tier protocol route bound to ``ctx``."""
    return [Route("/api/v1/tiers/{tier}/{method}", _bind(ctx), methods=["POST"])]
