"""``/mcp``: the tools of ``tiervault mcp`` over the SDK's streamable HTTP transport.

The tools are not redefined here: each caller gets the server that
:func:`tiervault.mcp_server.build_server` builds over that caller's Brain (its
own agent tier plus the shared tiers its token may read), read-only when the
token may write nothing. Those servers are cached per (agent, rights) and run
*stateless* with JSON responses (every POST is self-contained: no session to
hijack, nothing held between requests); they share the host's vault lock with
the JSON API.

Before a request reaches the SDK this endpoint authenticates it (401) and
applies the token's rate limit (429), in the JSON error shape of the API.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any, AsyncIterator

import anyio
from anyio.abc import TaskGroup

from tiervault.server.auth import Authenticator
from tiervault.server.errors import ApiError, api_error_from
from tiervault.server.host import VaultHost
from tiervault.server.limits import Limits
from tiervault.server.principal import Principal

__all__ = ["McpEndpoint"]

log = logging.getLogger("tiervault.server")


class McpEndpoint:
    """An ASGI app serving MCP for every authenticated caller."""

    def __init__(self, host: VaultHost, auth: Authenticator, limits: Limits, *,
                 loopback: bool) -> None:
        self.host = host
        self.auth = auth
        self.limits = limits
        self.loopback = loopback
        self._managers: dict[Any, Any] = {}
        self._tg: TaskGroup | None = None
        self._create = anyio.Lock()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Keep the per-caller session managers alive for the app's lifetime."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                yield
            finally:
                self._tg = None
                tg.cancel_scope.cancel()
                self._managers.clear()

    def _security(self) -> Any:
        from mcp.server.transport_security import TransportSecuritySettings

        if self.loopback:  # the SDK's DNS-rebinding guard, as it sets it up for localhost
            return TransportSecuritySettings(
                enable_dns_rebinding_protection=True,
                allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
                allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"])
        # Off a loopback address the public host name is not known here; every request
        # needs a bearer token, which a rebinding page cannot send.
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)

    async def _manager_for(self, principal: Principal) -> Any:
        from tiervault.mcp_server import build_server

        key = (principal.agent_id, tuple(sorted(principal.rights.items())))
        async with self._create:
            manager = self._managers.get(key)
            if manager is not None:
                return manager
            if self._tg is None:
                raise ApiError(503, "the server is starting or stopping; retry")
            brain = self.host.brain_for(principal)
            server = build_server(brain, read_only=not principal.writable(), lock=self.host.lock)
            server.streamable_http_app(
                stateless_http=True, json_response=True,
                max_request_body_size=self.limits.max_body_bytes,
                transport_security=self._security())
            manager = server.session_manager

            async def run(*, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
                async with manager.run():
                    task_status.started()
                    await anyio.sleep_forever()

            await self._tg.start(run)
            self._managers[key] = manager
            return manager

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        from starlette.datastructures import Headers

        try:
            caller = self.auth.require(Headers(scope=scope))
            manager = await self._manager_for(caller.principal)
        except Exception as exc:  # the API's error shape, never a traceback
            await api_error_from(exc).response()(scope, receive, send)
            return
        await manager.handle_request(scope, receive, send)
