"""The team vault server: ``tiervault serve`` (JSON API, MCP over streamable HTTP, web page).

Modules, one concept each: :mod:`~tiervault.server.app` (the application and
``serve``), :mod:`~tiervault.server.api` (JSON API routes),
:mod:`~tiervault.server.mcp_http` (MCP over streamable HTTP),
:mod:`~tiervault.server.tokens` and :mod:`~tiervault.server.auth` (who may
call), :mod:`~tiervault.server.host` (each caller's view of the vaults),
:mod:`~tiervault.server.limits`, :mod:`~tiervault.server.requests` and
:mod:`~tiervault.server.errors` (bounds, argument checks, error shape).
Importing this package does not import starlette; ``create_app`` does.
"""

from tiervault.server.principal import RIGHTS, Principal

__all__ = ["Principal", "RIGHTS"]
