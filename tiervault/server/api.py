"""The JSON API, ``/api/v1/...``: the MCP tools' operations as plain HTTP + JSON.

=========  ===========================  ==========================================
method     path                         operation
=========  ===========================  ==========================================
POST       /api/v1/search               search_intelligent (scan | full)
POST       /api/v1/load                 load complete entries by id
GET        /api/v1/entries              list a tier's entries, newest first (tier, offset, limit, sort,
                                        the search filters and exclusions)
POST       /api/v1/entries              capture entries into a tier
GET        /api/v1/entries/{id}         one entry (404 when no readable tier holds it)
PATCH      /api/v1/entries/{id}         update fields of an entry (tier: where it lives)
DELETE     /api/v1/entries/{id}         delete an entry from a tier
POST       /api/v1/links                link two entries
POST       /api/v1/feedback             record feedback (in the caller's agent tier)
GET        /api/v1/stats                tiers, weights, feedback counts
GET/POST   /api/v1/memories             search / capture session memories
=========  ===========================  ==========================================

Every handler authenticates first (401/429), checks the caller's rights on the
tiers it names (403), reads and checks its arguments (400/413), then runs the
vault call under the host lock. Answers are JSON; failures are
``{"error": {"code", "message", "field"}}``.
"""

from __future__ import annotations

import functools
from typing import Any, Awaitable, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tiervault.server.auth import Authenticator, Caller
from tiervault.server.errors import ApiError, api_error_from
from tiervault.server.rights import require_read, require_write
from tiervault.server.host import VaultHost
from tiervault.server.limits import Limits
from tiervault.server.requests import Args, read_json
from tiervault.vault.filters import Filters

__all__ = ["api_routes", "ApiContext", "FEEDBACK_ACTIONS", "LINK_TYPES"]

FEEDBACK_ACTIONS = ("accepted", "modified", "dismissed", "failed")
LINK_TYPES = ("supports", "contradicts", "extends", "sequences")
Handler = Callable[["ApiContext", Request, Caller], Awaitable[Any]]


class ApiContext:
    """What every handler needs: the vaults, the authenticator, the limits."""

    def __init__(self, host: VaultHost, auth: Authenticator, limits: Limits) -> None:
        self.host = host
        self.auth = auth
        self.limits = limits

    async def body(self, request: Request) -> Args:
        return Args(await read_json(request, self.limits), self.limits)

    def query_args(self, request: Request) -> Args:
        return Args(dict(request.query_params), self.limits, from_query=True)


def endpoint(fn: Handler) -> Callable[[ApiContext], Callable[[Request], Awaitable[Response]]]:
    """Bind ``fn`` to a context: authenticate, run, map every failure to the error shape."""
    def bind(ctx: ApiContext) -> Callable[[Request], Awaitable[Response]]:
        @functools.wraps(fn)
        async def handler(request: Request) -> Response:
            try:
                caller = ctx.auth.require(request.headers)
                result = await fn(ctx, request, caller)
            except Exception as exc:  # every failure leaves as the JSON error shape
                return api_error_from(exc).response()
            return result if isinstance(result, Response) else JSONResponse(result)
        return handler
    return bind


# -- rights --------------------------------------------------------------------------------
def readable(caller: Caller, tiers: list[str] | None) -> None:
    require_read(caller.principal, tiers)


def writable(caller: Caller, tier: str, host: VaultHost) -> None:
    if tier not in host.tier_names():
        raise ApiError(400, f"tier {tier!r} is not served here; tiers: "
                            f"{', '.join(host.tier_names())}", field="tier")
    require_write(caller.principal, tier)


def _public_stats(stats: dict[str, Any]) -> dict[str, Any]:
    """Brain stats without server file paths."""
    tiers = {name: {k: v for k, v in info.items() if k != "path"}
             for name, info in stats.get("tiers", {}).items()}
    return {**stats, "tiers": tiers}


# -- handlers ------------------------------------------------------------------------------
@endpoint
async def search(ctx: ApiContext, request: Request, caller: Caller) -> Any:
    a = await ctx.body(request)
    query = a.query()
    mode = a.choice("mode", ("scan", "full"), default="scan")
    limit = a.integer("limit", minimum=1, maximum=ctx.limits.max_limit)
    tiers = a.strings("tiers", max_items=16)
    readable(caller, tiers)
    kwargs = dict(mode=mode, limit=limit, domain=a.strings("domain"), type=a.strings("type"),
                  severity=a.strings("severity"), tags=a.strings("tags"), tiers=tiers,
                  include_memories=a.boolean("include_memories"),
                  modulate=a.string("modulate", max_chars=2_000),
                  not_domain=a.strings("not_domain"), not_type=a.strings("not_type"),
                  not_tags=a.strings("not_tags"),
                  exclude_ids=a.strings("exclude_ids", max_items=ctx.limits.max_ids),
                  updated_after=a.string("updated_after", max_chars=64),
                  updated_before=a.string("updated_before", max_chars=64))
    brain = ctx.host.brain_for(caller.principal)

    def run() -> dict[str, Any]:
        rows = brain.search_intelligent(query, **kwargs)
        return {"mode": mode, "count": len(rows), "results": rows, "filters": rows.filters,
                "problems": sorted(brain.manager.problems)}
    return await ctx.host.call(run)


@endpoint
async def load(ctx: ApiContext, request: Request, caller: Caller) -> Any:
    ids = (await ctx.body(request)).ids()
    brain = ctx.host.brain_for(caller.principal)

    def run() -> dict[str, Any]:
        rows = brain.load_entries(ids)
        return {"count": len(rows), "found": sum(1 for r in rows if r.get("found")), "entries": rows}
    return await ctx.host.call(run)


@endpoint
async def list_entries(ctx: ApiContext, request: Request, caller: Caller) -> Any:
    a = ctx.query_args(request)
    tier = a.string("tier", default="agent", max_chars=64) or "agent"
    readable(caller, [tier])
    offset = a.integer("offset", default=0, minimum=0)
    limit = a.integer("limit", default=100, minimum=1, maximum=ctx.limits.max_limit)
    filters = Filters.build(
        type=a.strings("type"), domain=a.strings("domain"), severity=a.strings("severity"),
        tags=a.strings("tags"), not_type=a.strings("not_type"),
        not_domain=a.strings("not_domain"), not_tags=a.strings("not_tags"),
        exclude_ids=a.strings("exclude_ids", max_items=ctx.limits.max_ids),
        updated_after=a.string("updated_after", max_chars=64),
        updated_before=a.string("updated_before", max_chars=64),
        include_expired=True, include_future=True)
    sort = a.string("sort", default="updated", max_chars=16) or "updated"
    brain = ctx.host.brain_for(caller.principal)

    def run() -> dict[str, Any]:
        page = brain.manager.list_entries(filters=filters, tiers=[tier], sort=sort,
                                          limit=limit, offset=offset)
        echo = {k: v for k, v in filters.describe().items()
                if k not in ("include_expired", "include_future")}
        return {"tier": tier, "offset": offset, "count": len(page.rows), "total": page.total,
                "entries": [e.to_dict() for e, _ in page.rows], "filters": echo}
    return await ctx.host.call(run)


@endpoint
async def get_entry(ctx: ApiContext, request: Request, caller: Caller) -> Any:
    entry_id = request.path_params["entry_id"]
    brain = ctx.host.brain_for(caller.principal)

    def run() -> dict[str, Any]:
        entry, tier = brain.manager.get(entry_id)
        return {"id": entry_id, "tier": tier, "entry": entry.to_dict()}
    return await ctx.host.call(run)


@endpoint
async def capture(ctx: ApiContext, request: Request, caller: Caller) -> Any:
    from tiervault.vault.edits import parse_batch, write_parsed

    a = await ctx.body(request)
    tier = a.string("tier", default="agent", max_chars=64) or "agent"
    writable(caller, tier, ctx.host)
    records = a.data.get("entries")
    if isinstance(records, dict):
        records = [records]
    if not isinstance(records, list) or not records:
        raise ApiError(400, "entries: expected a non-empty list of entry objects", field="entries")
    if len(records) > ctx.limits.max_capture:
        raise ApiError(413, f"entries: {len(records)} items; send at most "
                            f"{ctx.limits.max_capture} per call", field="entries")
    good, failed = parse_batch(records)
    if not good:
        first = failed[0]
        raise ApiError(400, f"no entry written; entries[{first['index']}]: {first['error']}"
                            + (f" (and {len(failed) - 1} more failed)" if len(failed) > 1 else ""),
                       field="entries")
    brain = ctx.host.brain_for(caller.principal)

    def run() -> dict[str, Any]:
        return write_parsed(brain.manager, good, failed, tier).as_dict()
    return JSONResponse(await ctx.host.call(run), status_code=201)


@endpoint
async def update(ctx: ApiContext, request: Request, caller: Caller) -> Any:
    entry_id = request.path_params["entry_id"]
    a = await ctx.body(request)
    tier = a.string("tier", default="agent", max_chars=64) or "agent"
    writable(caller, tier, ctx.host)
    fields = a.data.get("fields")
    if not isinstance(fields, dict) or not fields:
        raise ApiError(400, "fields: expected an object of the fields to change, e.g. "
                            '{"fields": {"severity": "critical"}}', field="fields")
    if "id" in fields and fields["id"] != entry_id:
        raise ApiError(400, "fields.id: an entry's id cannot change; capture a new entry instead",
                       field="fields.id")
    patch = {k: v for k, v in fields.items() if k != "id"}
    brain = ctx.host.brain_for(caller.principal)

    def run() -> dict[str, Any]:
        # The same partial-edit path as the CLI and MCP: only the named fields change,
        # add_tags/remove_tags work, and a patch that changes nothing writes nothing.
        return brain.manager.update(entry_id, patch, tier=tier).as_dict()
    return await ctx.host.call(run)


@endpoint
async def delete(ctx: ApiContext, request: Request, caller: Caller) -> Any:
    entry_id = request.path_params["entry_id"]
    tier = ctx.query_args(request).string("tier", default="agent", max_chars=64) or "agent"
    writable(caller, tier, ctx.host)
    brain = ctx.host.brain_for(caller.principal)

    def run() -> dict[str, Any]:
        if not brain.manager.delete(entry_id, tier):
            raise ApiError(404, f"no entry with id {entry_id!r} in tier {tier!r}", field="id")
        return {"id": entry_id, "tier": tier, "deleted": True}
    return await ctx.host.call(run)


@endpoint
async def link(ctx: ApiContext, request: Request, caller: Caller) -> Any:
    a = await ctx.body(request)
    source = a.string("source_id", required=True, max_chars=512)
    target = a.string("target_id", required=True, max_chars=512)
    link_type = a.choice("link_type", LINK_TYPES)
    note = a.string("note", default="", max_chars=2_000) or ""
    tier = a.string("tier", max_chars=64)
    brain = ctx.host.brain_for(caller.principal)

    def run() -> dict[str, Any]:
        where = tier or brain.manager.locate(source)
        if where is None:
            raise ApiError(404, f"no entry with id {source!r} in any tier this token may read",
                           field="source_id")
        writable(caller, where, ctx.host)
        made = brain.manager.link(source, target, link_type, note, tier=where)
        return {"source_id": made.source_id, "target_id": made.target_id,
                "link_type": made.link_type, "note": made.note, "tier": made.tier}
    return JSONResponse(await ctx.host.call(run), status_code=201)


@endpoint
async def feedback(ctx: ApiContext, request: Request, caller: Caller) -> Any:
    a = await ctx.body(request)
    query = a.query()
    entry_id = a.string("entry_id", required=True, max_chars=512) or ""
    action = a.choice("action", FEEDBACK_ACTIONS)
    writable(caller, "agent", ctx.host)
    brain = ctx.host.brain_for(caller.principal)
    return JSONResponse(await ctx.host.call(lambda: brain.feedback(query, entry_id, action)),
                        status_code=201)


@endpoint
async def stats(ctx: ApiContext, request: Request, caller: Caller) -> Any:
    brain = ctx.host.brain_for(caller.principal)
    out = await ctx.host.call(lambda: _public_stats(dict(brain.stats())))
    return {**out, "agent": caller.principal.agent_id, "rights": dict(caller.principal.rights)}


@endpoint
async def memories(ctx: ApiContext, request: Request, caller: Caller) -> Any:
    brain = ctx.host.brain_for(caller.principal)
    if request.method == "GET":
        a = ctx.query_args(request)
        query = a.query()
        limit = a.integer("limit", default=10, minimum=1, maximum=ctx.limits.max_limit) or 10

        def search_run() -> dict[str, Any]:
            hits = brain.manager.search_memories(query, limit)
            rows = [{"id": h.id, "summary": h.summary, "context": h.context,
                     "topics": h.topics.split(), "project": h.project, "created_at": h.created_at,
                     "score": h.score, "tier": tier} for h, tier in hits]
            return {"count": len(rows), "memories": rows}
        return await ctx.host.call(search_run)
    a = await ctx.body(request)
    summary = a.string("summary", required=True, max_chars=20_000) or ""
    context = a.string("context", default="", max_chars=100_000) or ""
    topics = a.strings("topics") or []
    project = a.string("project", default="", max_chars=256) or ""
    writable(caller, "agent", ctx.host)

    def add_run() -> dict[str, Any]:
        mid = brain.manager.store("agent").add_memory(summary, context=context, topics=topics,
                                                      project=project)
        return {"id": mid, "tier": "agent"}
    return JSONResponse(await ctx.host.call(add_run), status_code=201)


def api_routes(ctx: ApiContext) -> list[Route]:
    """The ``/api/v1`` routes bound to ``ctx``."""
    p = "/api/v1"
    return [
        Route(f"{p}/search", search(ctx), methods=["POST"]),
        Route(f"{p}/load", load(ctx), methods=["POST"]),
        Route(f"{p}/entries", list_entries(ctx), methods=["GET"]),
        Route(f"{p}/entries", capture(ctx), methods=["POST"]),
        Route(f"{p}/entries/{{entry_id:path}}", get_entry(ctx), methods=["GET"]),
        Route(f"{p}/entries/{{entry_id:path}}", update(ctx), methods=["PATCH"]),
        Route(f"{p}/entries/{{entry_id:path}}", delete(ctx), methods=["DELETE"]),
        Route(f"{p}/links", link(ctx), methods=["POST"]),
        Route(f"{p}/feedback", feedback(ctx), methods=["POST"]),
        Route(f"{p}/stats", stats(ctx), methods=["GET"]),
        Route(f"{p}/memories", memories(ctx), methods=["GET", "POST"]),
    ]
