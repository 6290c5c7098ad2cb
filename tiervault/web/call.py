"""One page request as the page handlers see it: who asks, their Brain, rendering.

A :class:`Call` is built by the app for every authenticated request (see
:mod:`tiervault.web.app`) and handed to a synchronous handler running in a
worker thread. It knows the principal's readable and writable tiers (the
intersection of their rights with the tiers this vault has), renders templates
with the CSRF token and the principal filled in, and refuses what the
principal may not do with :class:`Forbidden`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping
from urllib.parse import urlencode

from starlette.responses import HTMLResponse, RedirectResponse

from tiervault.web.catalog import Catalog

__all__ = ["Call", "Forbidden", "url"]


class Forbidden(Exception):
    """The principal may not do this (answered with 403 and the reason)."""


def url(path: str, params: Mapping[str, Any] | None = None) -> str:
    """``path`` with the non-empty ``params`` as a query string."""
    clean = {k: v for k, v in (params or {}).items() if v not in (None, "")}
    return f"{path}?{urlencode(clean)}" if clean else path


@dataclass
class Call:
    """An authenticated request: principal, brain, catalog, form data, renderer."""

    request: Any
    principal: Any
    brain: Any
    catalog: Catalog
    env: Any  # jinja2.Environment
    csrf_token: str
    form: Mapping[str, Any] = field(default_factory=dict)

    @property
    def manager(self) -> Any:
        return self.brain.manager

    @property
    def params(self) -> Mapping[str, str]:
        return self.request.query_params

    def readable(self) -> list[str]:
        """Usable tiers the principal may read, highest priority first."""
        return [t.name for t in self.manager.ordered() if self.principal.can_read(t.name)]

    def can_write(self, tier: str) -> bool:
        t = self.manager.tiers.get(tier)
        return (t is not None and t.store is not None and not t.read_only
                and self.principal.can_write(tier))

    def can_feedback(self) -> bool:
        """Feedback is a write to the agent tier (the Brain records it there)."""
        return self.can_write("agent")

    def require_read(self, tier: str) -> None:
        if tier not in self.readable():
            raise Forbidden(f"you may not read tier {tier!r}")

    def require_write(self, tier: str) -> None:
        if not self.can_write(tier):
            raise Forbidden(f"you may not change tier {tier!r} (read-only for you or for this vault)")

    def render(self, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        page = self.env.get_template(template).render(
            principal=self.principal, csrf=self.csrf_token, readable=self.readable(),
            writable=[t for t in self.readable() if self.can_write(t)], url=url,
            nav=context.pop("nav", ""), **context)
        return HTMLResponse(page, status_code=status)

    @staticmethod
    def redirect(path: str, params: Mapping[str, Any] | None = None) -> RedirectResponse:
        return RedirectResponse(url(path, params), status_code=303)
