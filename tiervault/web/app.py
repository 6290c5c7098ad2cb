"""The curator web app: ``create_web_app(brain_for, authenticate)`` -> a Starlette app.

``authenticate(request) -> Principal | None`` decides who is asking (use
:func:`tiervault.web.request_token` to read the credential the way the page
sends it); ``brain_for(principal) -> Brain`` gives that principal's Brain.
``tiervault serve`` mounts this app at ``/`` with its tokens; ``tiervault ui``
runs it alone on 127.0.0.1 (:mod:`tiervault.web.local`).

Every page request goes through :func:`_endpoint`: authenticate (else the login
page, 401), move a ``?token=`` into the cookie, check the CSRF token of a POST
(403), then run the synchronous handler in a worker thread. Errors become a
page: a bad value 400, an unknown entry 404, a refused action 403, an
unavailable tier 503, anything else 500 with the details in the server log
only (no traceback ever reaches the browser). Every response carries the
security headers of :mod:`tiervault.web.security`.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any, Awaitable, Callable

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from tiervault.errors import EntryNotFound, StorageError, TierError, TierVaultError, ValidationError
from tiervault.vault.entry import format_timestamp
from tiervault.web import browse_page, edit_page, health_page, search_page
from tiervault.web.call import Call, Forbidden, url
from tiervault.web.catalog import Catalog, CatalogCache
from tiervault.web.security import (BROWSER_COOKIE, SECURITY_HEADERS, TOKEN_COOKIE, CsrfGuard,
                                    cookie_options)

__all__ = ["create_web_app", "MAX_FORM_BYTES"]

log = logging.getLogger(__name__)

HERE = Path(__file__).resolve().parent
MAX_FORM_BYTES = 1_000_000
Handler = Callable[[Call], Response]


class _SecurityHeaders:
    """ASGI middleware adding the security headers to every HTTP response."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for key, value in SECURITY_HEADERS.items():
                    if key not in headers:
                        headers[key] = value
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _environment() -> Any:
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(HERE / "templates")),
                             autoescape=True,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters["num"] = lambda v, d=3: f"{float(v):.{d}f}"
    env.filters["timestamp"] = lambda ts: (format_timestamp(ts) or "")[:19].replace("T", " ")
    return env


class _Web:
    """Shared state of one app: callbacks, templates, CSRF secret, catalog caches per principal."""

    def __init__(self, brain_for: Callable[[Any], Any], authenticate: Callable[[Any], Any]) -> None:
        self.brain_for = brain_for
        self.authenticate = authenticate
        self.env = _environment()
        self.csrf = CsrfGuard()
        self._caches: dict[tuple[Any, ...], CatalogCache] = {}
        self._lock = threading.Lock()

    def catalog(self, principal: Any, brain: Any) -> Catalog:
        """A catalog over this request's manager, with the principal's caches.

        The caches are kept per principal, not per Brain object: ``tiervault serve``
        hands out a new lock proxy around the same Brain on every call.
        """
        key = (principal.agent_id, tuple(sorted(principal.rights.items())))
        with self._lock:
            cache = self._caches.setdefault(key, CatalogCache())
        return Catalog(brain.manager, cache)

    def plain(self, template: str, status: int, **context: Any) -> HTMLResponse:
        """A page outside a session (login, errors before authentication)."""
        page = self.env.get_template(template).render(principal=None, csrf="", readable=[],
                                                      writable=[], nav="", url=url, **context)
        return HTMLResponse(page, status_code=status)


def _error_page(web: _Web, call: Call | None, status: int, message: str) -> Response:
    if call is not None:
        return call.render("error.html", status=status, message=message, status_code=status)
    return web.plain("error.html", status, message=message, status_code=status)


def _endpoint(web: _Web, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        try:
            principal = await run_in_threadpool(web.authenticate, request)
        except Exception:  # an authenticator bug must not show a traceback either
            log.exception("authenticate failed")
            principal = None
        browser_id = request.cookies.get(BROWSER_COOKIE)
        new_browser = browser_id is None
        if new_browser:
            browser_id = CsrfGuard.new_browser_id()
        if principal is None:
            response = web.plain("login.html", 401, failed="token" in request.query_params
                                 or TOKEN_COOKIE in request.cookies,
                                 login_csrf=web.csrf.token(browser_id, ""))
            if new_browser:
                response.set_cookie(BROWSER_COOKIE, browser_id, **cookie_options(request))
            return response
        token = request.query_params.get("token")
        if token and request.method == "GET":
            params = {k: v for k, v in request.query_params.multi_items() if k != "token"}
            response: Response = RedirectResponse(url(request.url.path, params), status_code=303)
            response.set_cookie(TOKEN_COOKIE, token, **cookie_options(request))
            return response
        form: Any = {}
        if request.method == "POST":
            try:
                length = int(request.headers.get("content-length") or 0)
            except ValueError:
                return _error_page(web, None, 400, "The request's Content-Length is not a number.")
            if length > MAX_FORM_BYTES:
                return _error_page(web, None, 413, "The form is too large.")
            try:
                form = await request.form(max_files=0)
            except Exception as exc:  # starlette's multipart/urlencoded parser errors
                log.info("unreadable form: %s", exc)
                return _error_page(web, None, 400, "The form could not be read; submit it again "
                                   "from the page.")
            if not web.csrf.check(request, form.get("csrf"), principal.agent_id):
                return _error_page(web, None, 403, "This form has expired or did not come from "
                                   "this page. Reload the page and try again.")
        call: Call | None = None
        try:
            brain = await run_in_threadpool(web.brain_for, principal)
            call = Call(request, principal, brain, web.catalog(principal, brain), web.env,
                        web.csrf.token(browser_id, principal.agent_id), form)
            response = await run_in_threadpool(handler, call)
        except Forbidden as exc:
            response = _error_page(web, call, 403, str(exc))
        except EntryNotFound as exc:
            response = _error_page(web, call, 404, str(exc))
        except ValidationError as exc:
            response = _error_page(web, call, 400, str(exc))
        except (TierError, StorageError) as exc:
            response = _error_page(web, call, 503, str(exc))
        except TierVaultError as exc:
            response = _error_page(web, call, 400, str(exc))
        except Exception:
            log.exception("web page %s %s failed", request.method, request.url.path)
            response = _error_page(web, call, 500, "Something went wrong on the server; "
                                   "the details are in its log.")
        if new_browser:
            response.set_cookie(BROWSER_COOKIE, browser_id, **cookie_options(request))
        return response

    return endpoint


def create_web_app(brain_for: Callable[[Any], Any], authenticate: Callable[[Any], Any]) -> Starlette:
    """The curator pages as a Starlette app (see the module docstring)."""
    web = _Web(brain_for, authenticate)

    async def login(request: Request) -> Response:
        """POST a token from the login form: keep it in the cookie and go to the pages."""
        form = await request.form(max_files=0)
        if not web.csrf.check(request, form.get("csrf"), ""):
            return web.plain("error.html", 403, message="This login form has expired or did not "
                             "come from this page. Reload the page and try again.", status_code=403)
        response = RedirectResponse("/", status_code=303)
        token = str(form.get("token", "")).strip()
        if token:
            response.set_cookie(TOKEN_COOKIE, token, **cookie_options(request))
        return response

    def logout(call: Call) -> Response:
        response = call.redirect("/")
        response.delete_cookie(TOKEN_COOKIE, path="/")
        return response

    async def not_found(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 404)
        if "text/html" not in request.headers.get("accept", ""):
            # Not a browser (an API client under `tiervault serve`, which mounts these
            # pages at /): the server's JSON error shape rather than an HTML page.
            code = {404: "not_found", 405: "method_not_allowed"}.get(status, "bad_request")
            return JSONResponse({"error": {"code": code, "field": "path", "message":
                                           f"no such endpoint {request.method} {request.url.path!r}"}},
                                status_code=status)
        message = "No such page." if status == 404 else f"HTTP {status}"
        return web.plain("error.html", status, message=message, status_code=status)

    async def server_error(request: Request, exc: Exception) -> Response:
        log.error("web request %s failed", request.url.path, exc_info=exc)
        return web.plain("error.html", 500, message="Something went wrong on the server.",
                         status_code=500)

    def page(path: str, handler: Handler, methods: tuple[str, ...] = ("GET",)) -> Route:
        return Route(path, _endpoint(web, handler), methods=list(methods))

    routes = [
        page("/", search_page.search),
        page("/entry/{entry_id}", search_page.entry),
        page("/feedback", search_page.feedback, ("POST",)),
        page("/entry/{entry_id}/edit", edit_page.edit, ("GET", "POST")),
        page("/entry/{entry_id}/delete", edit_page.delete, ("GET", "POST")),
        page("/browse", browse_page.browse),
        page("/review", browse_page.review),
        page("/health", health_page.health),
        Route("/login", login, methods=["POST"]),
        page("/logout", logout, ("POST",)),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: not_found, 500: server_error})
    app.add_middleware(_SecurityHeaders)
    return app
