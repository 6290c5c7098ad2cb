"""The web page for the people who curate an agent's knowledge (``tiervault ui`` / ``serve``).

``create_web_app(brain_for, authenticate)`` returns a Starlette app: Search,
Entry (breakdown, links graph, edit, delete), Browse, Review and Health pages,
server-rendered with Jinja2 and SVG charts, no JavaScript. ``request_token``
reads the credential a browser sends (Bearer header, cookie, ``?token=``) for
an ``authenticate`` callback.
"""

from tiervault.web.app import create_web_app
from tiervault.web.local import LocalAccess, local_principal, serve_ui
from tiervault.web.security import CSP, request_token

__all__ = ["create_web_app", "request_token", "CSP", "LocalAccess", "local_principal", "serve_ui"]
