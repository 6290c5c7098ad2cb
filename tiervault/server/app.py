"""The server application: ``create_app`` builds it, ``serve`` runs it with uvicorn.

Routes: ``/healthz`` (no token), ``/api/v1/...`` (:mod:`~tiervault.server.api`),
``/api/v1/tiers/...`` (the remote-tier protocol, :mod:`~tiervault.server.tier_api`),
``/mcp`` (:mod:`~tiervault.server.mcp_http`) and, when ``tiervault.web``
provides ``create_web_app``, the web page at ``/``. Unknown paths and methods
answer in the same JSON error shape; an unexpected exception is logged and
answered with a 500 in that shape (never a traceback).

Where things live (:class:`ServerPaths`): the state directory is
``<directory of agent.yaml>/.tiervault-server`` (or ``~/.tiervault/server``
without a config file, or ``--state-dir``); it holds ``tokens.json`` and the
agents' tiers in ``agents/<agent id>.db``; it is created owner-only (0700).
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator

from tiervault.errors import ConfigError
from tiervault.server.api import ApiContext, api_routes
from tiervault.server.auth import Authenticator
from tiervault.server.errors import ApiError, error_response
from tiervault.server.host import VaultHost
from tiervault.server.limits import Limits, RateLimiter
from tiervault.server.mcp_http import McpEndpoint
from tiervault.server.tokens import TokenStore

__all__ = ["create_app", "serve", "ServerPaths", "is_loopback", "DEFAULT_PORT"]

log = logging.getLogger("tiervault.server")

DEFAULT_PORT = 8765


@dataclass(frozen=True, slots=True)
class ServerPaths:
    """The server's state directory, token file and agent-tier folder."""

    state_dir: Path

    @classmethod
    def resolve(cls, settings: Any, state_dir: str | Path | None = None) -> "ServerPaths":
        if state_dir:
            return cls(Path(state_dir).expanduser().absolute())
        config = getattr(settings, "config_path", None)
        if config is not None:
            return cls(Path(config).parent / ".tiervault-server")
        return cls(Path(os.environ.get("HOME", "~")).expanduser() / ".tiervault" / "server")

    @property
    def tokens(self) -> Path:
        return self.state_dir / "tokens.json"

    @property
    def agents(self) -> Path:
        return self.state_dir / "agents"

    def ensure(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.agents.mkdir(exist_ok=True, mode=0o700)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _web_app(host: VaultHost, auth: Authenticator) -> Any | None:
    """The web page's starlette app when ``tiervault.web`` provides one."""
    try:
        from tiervault import web
    except ImportError:
        return None
    factory = getattr(web, "create_web_app", None)
    if factory is None:
        return None

    def authenticate(request: Any) -> Any:
        # A browser carries the token in the page's cookie (or ?token= once), not a header.
        token = web.request_token(request)
        return auth.principal({"authorization": f"Bearer {token}"}) if token else None
    return factory(host.locked_brain_for, authenticate)


def create_app(settings: Any, paths: ServerPaths, *, limits: Limits | None = None,
               bind_host: str = "127.0.0.1", web: bool = True) -> Any:
    """The starlette application serving ``settings``' shared tiers and the agents' tiers."""
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Mount, Route

    from tiervault import __version__
    from tiervault.server.tier_api import tier_routes

    limits = limits or Limits()
    paths.ensure()
    tokens = TokenStore(paths.tokens)
    auth = Authenticator(tokens, RateLimiter(limits.rate_per_s, limits.burst))
    host = VaultHost(settings, paths.state_dir, lock_timeout_s=limits.lock_timeout_s)
    ctx = ApiContext(host, auth, limits)
    mcp = McpEndpoint(host, auth, limits, loopback=is_loopback(bind_host))

    async def healthz(request: Request) -> JSONResponse:
        problems = host.shared.problems
        return JSONResponse({"status": "ok" if not problems else "degraded",
                             "version": __version__, "tiers": host.tier_names(),
                             "unavailable": sorted(problems)})

    async def not_found(request: Request, exc: Exception) -> JSONResponse:
        status = getattr(exc, "status_code", 500)
        if status == 405:
            return error_response(405, f"method {request.method} is not allowed on "
                                       f"{request.url.path}; see docs/server.md")
        if status == 404:
            return error_response(404, f"no such endpoint {request.url.path!r}; the API lives "
                                       "under /api/v1 (see docs/server.md)", field="path")
        return error_response(status, "request refused")

    async def internal(request: Request, exc: Exception) -> JSONResponse:
        log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        return ApiError(500, f"internal error ({type(exc).__name__}); the details are in the "
                             "server log").response()

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        async with mcp.running():
            log.info("tiervault serve: tiers %s; state in %s; %d active token(s)",
                     ", ".join(host.tier_names()), paths.state_dir, tokens.active_count())
            try:
                yield
            finally:
                host.close()

    routes: list[Any] = [Route("/healthz", healthz, methods=["GET"]),
                         *api_routes(ctx), *tier_routes(ctx), Route("/mcp", mcp)]
    web_app = _web_app(host, auth) if web else None
    if web_app is not None:
        routes.append(Mount("/", app=web_app))
    app = Starlette(routes=routes, lifespan=lifespan,
                    exception_handlers={HTTPException: not_found, Exception: internal})
    app.state.host = host
    app.state.tokens = tokens
    return app


def serve(settings: Any, *, host: str = "127.0.0.1", port: int = DEFAULT_PORT,
          state_dir: str | Path | None = None, limits: Limits | None = None,
          ssl_certfile: str | None = None, ssl_keyfile: str | None = None) -> None:
    """Run the server until interrupted (uvicorn; TLS when a certificate is given)."""
    import uvicorn

    paths = ServerPaths.resolve(settings, state_dir)
    paths.ensure()
    if not is_loopback(host) and TokenStore(paths.tokens).active_count() == 0:
        raise ConfigError(f"refusing to listen on {host}: no active token exists yet. Create "
                          "one first with `tiervault token create --agent ID --allow team:rw` "
                          "(same --config / --state-dir), or keep the default --host 127.0.0.1")
    if bool(ssl_certfile) != bool(ssl_keyfile):
        raise ConfigError("TLS needs both --ssl-certfile and --ssl-keyfile")
    app = create_app(settings, paths, limits=limits, bind_host=host)
    scheme = "https" if ssl_certfile else "http"
    log.warning("tiervault serve: listening on %s://%s:%d (state: %s)", scheme, host, port,
                paths.state_dir)
    uvicorn.run(app, host=host, port=port, ssl_certfile=ssl_certfile, ssl_keyfile=ssl_keyfile,
                timeout_keep_alive=5, log_level="warning", access_log=False,
                limit_concurrency=256, server_header=False)
