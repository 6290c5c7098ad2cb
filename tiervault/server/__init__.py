"""The team vault server: ``tiervault serve`` (JSON API, MCP over streamable HTTP, web page)."""

from tiervault.server.principal import RIGHTS, Principal

__all__ = ["Principal", "RIGHTS"]
