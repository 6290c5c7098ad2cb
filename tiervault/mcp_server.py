"""The MCP server: tiervault's agent-facing calls as Model Context Protocol tools over stdio.

Built on the official ``mcp`` SDK, major version 2 (``MCPServer``; extra
``tiervault[mcp]``), imported only when the server starts. stdout carries the
protocol and nothing else: logging goes to stderr and is configured before the
SDK loads (the SDK's own ``basicConfig`` is then a no-op), and while serving
the SDK points file descriptor 1 at stderr, so a stray ``print`` cannot corrupt
the stream.

Tools (flat arguments; each parameter described, bounded and enumerated in the
JSON schema, see :mod:`tiervault.mcp_params`): ``search_intelligent``,
``load_entries``, ``list_entries``, ``vault_stats`` and, unless read-only,
``capture_knowledge``, ``update_entry``, ``delete_entry``, ``record_feedback``,
``link_entries``, ``capture_memory`` (:mod:`tiervault.mcp_write`). In read-only
mode the write tools are not registered at all. Every failure reaches the model
as a tool error (``isError``) saying what was wrong and how to call the tool
correctly; tracebacks stay in the server's stderr log. No tool takes a path,
and no reply carries one. A configuration that cannot be loaded still starts a
server, whose every call answers with the configuration error.
"""

import functools
import inspect
import json
import logging
import os
import re
import threading
from typing import Any, Callable, Literal

from tiervault.errors import ConfigError, EntryNotFound, TierVaultError, ValidationError
from tiervault.mcp_params import (
    MAX_CAPTURE,
    MAX_IDS,
    USAGE,
    Domains,
    ExcludeIds,
    Flag,
    Ids,
    Limit,
    ListLimit,
    Mode,
    NotDomains,
    NotTags,
    NotTypes,
    Offset,
    Query,
    Severities,
    Tags,
    Types,
    UpdatedAfter,
    UpdatedBefore,
    normalize_arguments,
    strings,
)

__all__ = ["build_server", "serve", "serve_config_error", "READ_TOOLS", "WRITE_TOOLS",
           "MAX_IDS", "MAX_CAPTURE"]

log = logging.getLogger("tiervault.mcp")

READ_TOOLS = ("search_intelligent", "load_entries", "list_entries", "vault_stats", "query_vault")
WRITE_TOOLS = ("capture_knowledge", "update_entry", "delete_entry", "record_feedback",
               "link_entries", "capture_memory")

INSTRUCTIONS = """\
tiervault is a knowledge vault of engineering patterns, anti-patterns, rules and decisions,
in tiers (agent > project > team). Work in two passes to save context:
1. search_intelligent(query) with mode="scan" (default): short rows (id, title, snippet,
   score, tokenEstimate). Decide which entries are worth reading.
2. load_entries(ids) for the few you need: complete entries with their links.
   Use mode="full" only when you will read most results.
vault_stats shows the domains, types and tags in use; list_entries browses by filter.
After applying (or rejecting) an entry, call record_feedback(query, entry_id, action) so
ranking learns. Save new lessons with capture_knowledge, fix one with update_entry, and
session notes with capture_memory.
"""


class _Guard:
    """Runs tool bodies one at a time, returns results as compact JSON text plus structured
    content, and turns every failure into an actionable ToolError."""

    def __init__(self, tool_error: type[Exception], result_type: Any, text_type: Any,
                 lock: Any = None) -> None:
        self.tool_error = tool_error
        self.result_type = result_type
        self.text_type = text_type
        self.lock = lock if lock is not None else threading.Lock()

    def result(self, value: dict[str, Any]) -> Any:
        # The SDK would indent the text copy; agents pay for every token of it.
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        return self.result_type(content=[self.text_type(type="text", text=text)],
                                structured_content=value)

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        name = fn.__name__

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                with self.lock:  # one SQLite writer, one Brain: calls are serialised
                    return self.result(fn(*args, **kwargs))
            except self.tool_error:
                raise
            except EntryNotFound as exc:
                raise self.tool_error(f"{exc}. Ids come from search_intelligent results; "
                                      "search first, then use an id from a row.") from exc
            except TierVaultError as exc:
                raise self.tool_error(f"{exc}. Example of a correct call: {USAGE[name]}") from exc
            except Exception as exc:  # a bug: log it fully on stderr, tell the model briefly
                log.exception("tool %s failed unexpectedly", name)
                raise self.tool_error(f"internal error ({type(exc).__name__}); the "
                                      "details are in the tiervault server log. The call may be "
                                      "fine: retry once, then continue without this tool.") from exc
        return wrapper


def _register(server: Any, tools: list[tuple[Callable[..., Any], bool]], annotations: Any) -> None:
    for fn, read_only in tools:
        name = fn.__name__
        server.add_tool(fn, name=name, description=inspect.cleandoc(fn.__doc__ or ""),
                        annotations=annotations(
                            read_only_hint=read_only, destructive_hint=name == "delete_entry",
                            open_world_hint=False,
                            idempotent_hint=name in READ_TOOLS or name in ("link_entries",
                                                                           "update_entry",
                                                                           "delete_entry")))


def _tier_literal(names: list[str]) -> Any:
    """``Literal["agent", "project", ...]`` of the configured tier names (an enum in the schema)."""
    return Literal[tuple(names)]  # type: ignore[valid-type]


def public_stats(stats: dict[str, Any]) -> dict[str, Any]:
    """``Brain.stats()`` without file system paths: a tier is described by its name,
    weight, counts and problem (with any path in it cut to the file name)."""
    out = dict(stats)
    tiers = {}
    for name, info in stats["tiers"].items():
        info = {k: v for k, v in info.items() if k != "path"}
        if info.get("problem") and stats["tiers"][name].get("path"):
            path = str(stats["tiers"][name]["path"])
            info["problem"] = info["problem"].replace(path, os.path.basename(path))
        tiers[name] = info
    out["tiers"] = tiers
    return out


def build_server(brain: Any, *, read_only: bool = False, lock: Any = None) -> Any:
    """An ``MCPServer`` exposing ``brain`` (write tools left out when ``read_only``).

    ``lock`` serialises the tool bodies (default: a lock of this server's own); the
    HTTP server passes the one lock it shares with its JSON API.
    """
    try:
        from mcp.server.mcpserver import MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
        from mcp.types import CallToolResult, TextContent, ToolAnnotations
        from pydantic import ValidationError as PydanticValidationError
    except ImportError as exc:
        raise ConfigError("`tiervault mcp` needs the MCP SDK 2.x: pip install 'tiervault[mcp]' "
                          f"({exc})") from exc
    from pydantic import Field
    from typing import Annotated

    from tiervault import __version__
    from tiervault.mcp_write import write_tools

    guard = _Guard(ToolError, CallToolResult, TextContent, lock)
    manager = brain.manager
    Tiers = Annotated[list[_tier_literal(list(manager.tiers))] | None, Field(  # type: ignore[misc]
        description="Only these tiers (default: all), e.g. [\"agent\", \"project\"].")]

    @guard
    def search_intelligent(
        query: Query,
        mode: Annotated[Mode, Field(description='"scan": short rows (default); "full": whole '
                                                "entries with a score breakdown.")] = "scan",
        limit: Limit = None,
        domain: Domains = None,
        type: Types = None,  # noqa: A002 - the public argument name
        severity: Severities = None,
        tags: Tags = None,
        tiers: Tiers = None,
        include_memories: Annotated[Flag, Field(description="Also search saved session memories "
                                                "(their rows have type \"memory\").")] = False,
        modulate: Annotated[str | None, Field(max_length=2_000, description=(
            "Steer the ranking (the query text is never changed). Space-separated tokens, "
            "applied in this fixed order: pool:N (candidates, 1-5000); centroid:ID,ID[:ALPHA] "
            "(pull toward these entries); suppress:TEXT or suppress:@ID (demote what "
            "resembles it; repeatable; quote TEXT with spaces: suppress:\"legacy orm\"); "
            "trajectory:A->B (favour the direction from A to B, each TEXT or @ID); "
            "decay:DAYS[:exp] (prefer recent entries, half weight at DAYS); diverse[:LAMBDA] "
            "(spread results over sub-topics, default 0.7). Example: "
            "\"suppress:deprecated decay:30 diverse\". All but decay and pool need "
            "embeddings."))] = None,
        not_domain: NotDomains = None,
        not_type: NotTypes = None,
        not_tags: NotTags = None,
        exclude_ids: ExcludeIds = None,
        updated_after: UpdatedAfter = None,
        updated_before: UpdatedBefore = None,
    ) -> dict[str, Any]:
        """Search the knowledge vault (all tiers) for entries relevant to a task or question.

        Start with mode="scan" (the default): short rows (id, title, score, type, domain,
        severity, tags, a 120-character snippet, tokenEstimate, tier) that cost little
        context. Pick the ids worth reading and call load_entries(ids) for the complete text.
        Use mode="full" only when you expect to read most results: each row then carries the
        whole entry and a score breakdown (semantic, vector, severity, temporalDecay,
        tagOverlap, domainMatch, graphProximity, total), which is much longer.
        `limit` is a hard ceiling: never more rows than asked. With an empty query and at
        least one filter, the newest matching entries are listed (score 0).
        Exclusions (not_domain, not_type, not_tags, exclude_ids) and dates (updated_after,
        updated_before) narrow the search before the limit; "filters" in the answer
        echoes the filters in force.
        """
        rows = brain.search_intelligent(
            query, mode=mode, limit=limit, domain=domain, type=type, severity=severity,
            tags=tags, tiers=tiers, include_memories=include_memories, modulate=modulate,
            not_domain=not_domain, not_type=not_type, not_tags=not_tags,
            exclude_ids=exclude_ids, updated_after=updated_after,
            updated_before=updated_before)
        out: dict[str, Any] = {"mode": mode, "count": len(rows), "results": rows}
        if getattr(rows, "filters", None):
            out["filters"] = rows.filters
        widened = getattr(rows, "widened", False)
        if widened:
            out["widened"] = True
        if mode == "scan" and rows:
            out["next"] = "call load_entries with the ids you want to read in full"
        elif not rows:
            out["next"] = "no match: try fewer filters or other words"
        return out

    @guard
    def load_entries(ids: Ids) -> dict[str, Any]:
        """Load complete entries by id: the second pass after a scan-mode search_intelligent.

        Returns one result per id, in the order asked: {"id", "found": true, "entry": {...all
        fields...}, "tier", "links": [{"direction": "out"|"in", "type", "id", "note",
        "tier"}]} or {"id", "found": false, "error"} for an unknown id. A memory id (rows
        of type "memory") loads the memory.
        """
        wanted = strings(ids, "ids")
        if not wanted:
            raise ValidationError("ids", "is empty; pass the ids of scan rows you want to read")
        if len(wanted) > MAX_IDS:
            raise ValidationError("ids", f"has {len(wanted)} ids; load at most {MAX_IDS} per call")
        rows = brain.load_entries(wanted)
        return {"count": len(rows), "found": sum(1 for r in rows if r.get("found")),
                "entries": rows}

    @guard
    def list_entries(
        domain: Domains = None,
        type: Types = None,  # noqa: A002 - the public argument name
        severity: Severities = None,
        tags: Tags = None,
        tiers: Tiers = None,
        since: Annotated[str | None, Field(description="Only entries updated at or after this "
                                           "ISO 8601 date/time, e.g. \"2026-01-31\".")] = None,
        sort: Annotated[Literal["updated", "created"], Field(
            description="Newest first by last update (default) or by creation.")] = "updated",
        limit: ListLimit = 20,
        offset: Offset = 0,
        not_domain: NotDomains = None,
        not_type: NotTypes = None,
        not_tags: NotTags = None,
        exclude_ids: ExcludeIds = None,
        updated_before: UpdatedBefore = None,
    ) -> dict[str, Any]:
        """Browse entries by filter, newest first, one page at a time (no ranking).

        Rows are short: id, title, type, domain, severity, tags, tier, created_at,
        updated_at, valid_until. Every stored entry is listed, expired ones included.
        "total" is the number of matches; pass "nextOffset" as offset for the next page.
        Exclusions (not_domain, not_type, not_tags, exclude_ids) and dates (since,
        updated_before) work as in search_intelligent; "filters" echoes those in force.
        Use search_intelligent to rank by relevance, load_entries to read entries.
        """
        from tiervault.vault.listing import list_page

        return list_page(manager, domain=domain, type=type, severity=severity, tags=tags,
                         tiers=tiers, since=since, sort=sort, limit=limit, offset=offset,
                         not_domain=not_domain, not_type=not_type, not_tags=not_tags,
                         exclude_ids=exclude_ids, updated_before=updated_before)

    @guard
    def vault_stats() -> dict[str, Any]:
        """Vault overview: entries, links and memories per tier; the vocabulary in use
        (domains, types and severities with counts, the most used tags with counts) to
        choose filters from; the ranking weights in force and feedback counts."""
        return public_stats(dict(brain.stats()))

    from tiervault.brain.sql_surface import SqlSurface

    sql_surface = SqlSurface(brain, row_limit=200, time_limit=5.0)

    @guard
    def query_vault(
        sql: Annotated[str, Field(min_length=1, max_length=20_000, description=(
            "ONE read-only SELECT over tables entries(tier, id, title, description, context, "
            "type, domain, severity, tags, origin, created_at, updated_at, valid_from, "
            "valid_until, content_hash), links(tier, source_id, target_id, link_type, note, "
            "created_at), feedback(tier, entry_id, query, action, created_at), and the calls "
            "keyword('text' [, k]) and vec_search('text' [, 'modulate tokens' [, k]]) -> "
            "(tier, id, score, rank), usable wherever a table is. Call arguments must be "
            "literals. At most 200 rows and 5 seconds."))],
    ) -> dict[str, Any]:
        """Answer a question the search alone cannot: join, group, count or filter the vault
        with read-only SQL (e.g. which critical security rules contradict something; the
        best vec_search hits per domain). Writes, ATTACH and PRAGMA are refused. Returns
        {"columns", "rows", "truncated"}. Prefer search_intelligent for plain lookups."""
        # One snapshot per server, refreshed when a tier's generation moves (tool bodies
        # run one at a time under the guard's lock).
        return sql_surface.run(sql).as_dict()

    tools = [(search_intelligent, True), (load_entries, True), (list_entries, True),
             (vault_stats, True), (query_vault, True)]
    writable = [n for n, t in manager.tiers.items() if not t.read_only]
    locked = {n for n, t in manager.tiers.items() if t.read_only}
    if not read_only:
        tools += [(guard(fn), False) for fn in write_tools(brain, _tier_literal(writable))]
    names = [fn.__name__ for fn, _ in tools]
    params = {fn.__name__: tuple(inspect.signature(fn).parameters) for fn, _ in tools}

    class TierVaultServer(MCPServer):
        """Checks argument names and list forms, and rewrites the SDK's argument-validation
        and unknown-tool errors for a model."""

        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
            if name not in names:
                why = (" (this server is read-only: write tools are disabled)"
                       if read_only and name in WRITE_TOOLS else "")
                raise ToolError(f"unknown tool {name!r}{why}; available tools: {', '.join(names)}")
            try:
                arguments = normalize_arguments(name, arguments, params[name])
            except TierVaultError as exc:
                raise ToolError(f"{exc}. Example of a correct call: {USAGE[name]}") from exc
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as exc:
                if isinstance(exc.__cause__, PydanticValidationError):
                    tier = arguments.get("tier")
                    if isinstance(tier, str) and tier in locked:
                        raise ToolError(f"tier: {tier!r} is read-only; write to one of: "
                                        f"{', '.join(writable)}. Example of a correct call: "
                                        f"{USAGE[name]}") from exc.__cause__
                    raise ToolError(_argument_error(name, exc.__cause__)) from exc.__cause__
                raise

    server = TierVaultServer(name="tiervault", version=__version__, instructions=INSTRUCTIONS)
    _register(server, tools, ToolAnnotations)
    return server


def _argument_error(name: str, exc: Any) -> str:
    """A pydantic argument error as one line per field (input values are not echoed,
    except a short string given for an enum)."""
    problems: dict[str, list[str]] = {}
    for err in exc.errors():
        loc = err.get("loc", ())
        field = str(loc[0]) if loc else "arguments"
        # Union branches repeat a field's problem once per accepted form; keep each once.
        msg = re.sub(r"\s+", " ", err.get("msg", "invalid"))
        if err.get("type") in ("int_type", "bool_type"):  # strict: "5" and true are refused
            kind = "an integer" if err["type"] == "int_type" else "true or false"
            msg = f"must be {kind} in JSON (not a string{' or a boolean' if 'int' in err['type'] else ''})"
        given = err.get("input")
        if err.get("type") == "literal_error" and isinstance(given, str) and len(given) <= 40:
            msg += f", not {given!r}"  # a short enum value is safe to echo
        if msg not in problems.setdefault(field, []):
            problems[field].append(msg)
    text = "; ".join(f"{field}: {' or '.join(msgs)}" for field, msgs in problems.items())
    return f"invalid arguments for {name}: {text}. Example of a correct call: {USAGE[name]}"


def serve(settings: Any, *, read_only: bool = False) -> None:
    """Open the vault of ``settings`` and serve MCP over stdio until stdin closes."""
    from tiervault.brain import Brain

    if read_only:
        # Read-only means the tier files stay byte-identical: every tier is opened
        # read-only (mode=ro, immutable on read-only media), so no uid, generation,
        # embedding or cache is ever written; mirrors live in memory only.
        from dataclasses import replace

        settings = replace(settings, tiers=tuple(replace(t, read_only=True) for t in settings.tiers))
    # Brain.open attaches the embedding runtime when embeddings are enabled:
    # captures are embedded on write and the vector signal joins the ranking.
    with Brain.open(settings) as brain:
        runtime = brain.vectors
        server = build_server(brain, read_only=read_only)
        tiers = ", ".join(f"{t.name}={t.location}" for t in settings.tiers)
        log.info("tiervault mcp: serving %s tools over stdio%s; tiers: %s; vectors: %s",
                 len(READ_TOOLS) + (0 if read_only else len(WRITE_TOOLS)),
                 " (read-only)" if read_only else "", tiers,
                 getattr(runtime, "model_key", "off") if runtime is not None else "off")
        server.run("stdio")
        log.info("tiervault mcp: stdin closed, shutting down")


def serve_config_error(message: str) -> None:
    """Serve MCP over stdio with no vault: the initialize reply's instructions and every
    tool call carry ``message``, so the client shows why tiervault cannot work (instead
    of "Connection closed"). Returns when stdin closes."""
    try:
        from mcp.server.mcpserver import MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
    except ImportError as exc:
        raise ConfigError("`tiervault mcp` needs the MCP SDK 2.x: pip install 'tiervault[mcp]' "
                          f"({exc})") from exc
    from tiervault import __version__

    text = (f"tiervault cannot open its vault: {message}. Fix the configuration and restart "
            "the server (the client's MCP settings name the config file with --config).")

    class BrokenServer(MCPServer):
        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
            raise ToolError(text)

    def vault_stats() -> dict[str, Any]:
        """Reports why the vault could not be opened (a configuration error)."""
        raise ToolError(text)

    server = BrokenServer(name="tiervault", version=__version__, instructions=text)
    server.add_tool(vault_stats, name="vault_stats")
    log.error("tiervault mcp: %s; serving only this error until stdin closes", message)
    server.run("stdio")
