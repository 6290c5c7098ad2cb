"""Browse a tier newest or most recently updated first, and the review list:
contradictions and near-duplicates (:mod:`tiervault.web.catalog`).

Browse shows every entry, expired and not-yet-valid ones included (marked), so
a curator can find what search no longer returns.
"""

from __future__ import annotations

import time

from starlette.responses import Response

from tiervault.errors import ValidationError
from tiervault.vault.entry import ENTRY_TYPES, SEVERITIES
from tiervault.vault.filters import Filters
from tiervault.web.call import Call
from tiervault.web.catalog import ORDERS

__all__ = ["browse", "review", "PER_PAGE"]

PER_PAGE = 25
_FILTER_KEYS = ("domain", "type", "severity", "tags", "not_domain", "not_type", "not_tags",
                "exclude_ids", "updated_after", "updated_before")


def browse(call: Call) -> Response:
    readable = call.readable()
    p = call.params
    tier = p.get("tier") or (readable[0] if readable else "")
    order = p.get("order") if p.get("order") in ORDERS else "new"
    args = {k: (p.get(k) or "").strip() for k in _FILTER_KEYS}
    try:
        page_no = max(int(p.get("page") or 1), 1)
    except ValueError:
        raise ValidationError("page", f"{(p.get('page') or '')[:20]!r} is not a page number") from None
    page = None
    error = ""
    if tier:
        call.require_read(tier)
        try:
            filters = Filters.build(include_expired=True, include_future=True,
                                    **{k: v or None for k, v in args.items()})
        except ValidationError as exc:
            error = str(exc)
        else:
            page = call.catalog.page(tier, order=order, page=page_no, per_page=PER_PAGE,
                                     filters=filters)
    return call.render("browse.html", nav="browse", tier=tier, order=order, args=args, page=page,
                       error=error, types=ENTRY_TYPES, severities=SEVERITIES, now=time.time(),
                       deleted=p.get("deleted", ""), status=400 if error else 200)


def review(call: Call) -> Response:
    readable = call.readable()
    contradictions = call.catalog.contradictions(readable) if readable else []
    duplicates = call.catalog.duplicates(readable) if readable else []
    return call.render("review.html", nav="review", contradictions=contradictions,
                       duplicates=duplicates)
