"""``tiervault ui``: the curator pages for one person on one machine.

Binds 127.0.0.1 only, on a free port unless one is given; nothing else is
opened to the network. A random token made for this run is printed inside the
URL; the first request moves it into an HttpOnly cookie (see
:mod:`tiervault.web.security`). The holder gets full rights on the tiers of the
local agent.yaml (read-only tiers and sources stay read-only). The token is
compared in constant time and never logged.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import socket
from typing import Any, Callable

from tiervault.server.principal import Principal
from tiervault.web.security import request_token

__all__ = ["LocalAccess", "local_principal", "bind_local", "serve_ui", "HOST"]

log = logging.getLogger(__name__)

HOST = "127.0.0.1"


def local_principal(settings: Any) -> Principal:
    """The local agent with read-write rights on every writable tier, read on the rest."""
    return Principal(settings.agent_id,
                     {t.name: ("r" if t.read_only else "rw") for t in settings.tiers})


class LocalAccess:
    """The per-run token check: ``authenticate(request)`` for :func:`create_web_app`."""

    def __init__(self, principal: Principal, token: str | None = None) -> None:
        self.principal = principal
        self.token = token or secrets.token_urlsafe(24)

    def __call__(self, request: Any) -> Principal | None:
        given = request_token(request)
        if given and hmac.compare_digest(given.encode(), self.token.encode()):
            return self.principal
        return None


def bind_local(port: int = 0) -> socket.socket:
    """A listening TCP socket on 127.0.0.1 (``port`` 0: a free one).

    ``IPPROTO_TCP`` is named on purpose: asyncio switches Nagle off (TCP_NODELAY)
    only on sockets whose ``proto`` says TCP, and accepted sockets inherit it;
    with proto 0 every keep-alive response stalled ~40 ms on delayed ACKs.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError:
        sock.close()
        raise
    sock.listen(128)
    return sock


def serve_ui(settings: Any, *, port: int = 0, announce: Callable[[str], None] = print,
             open_browser: bool = False) -> None:
    """Open the Brain of ``settings``, serve the pages until interrupted, close the Brain."""
    import uvicorn

    from tiervault.brain import Brain
    from tiervault.web.app import create_web_app

    brain = Brain.open(settings)
    try:
        access = LocalAccess(local_principal(settings))
        app = create_web_app(lambda principal: brain, access)
        sock = bind_local(port)
        address = f"http://{HOST}:{sock.getsockname()[1]}/?token={access.token}"
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                                server_header=False)
        announce(address)
        if open_browser:
            import webbrowser

            webbrowser.open(address)
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        brain.close()
