"""The MCP server: tiervault's agent-facing calls as Model Context Protocol tools over stdio.

Built on the official ``mcp`` SDK, major version 2 (``MCPServer``; extra
``tiervault[mcp]``), imported only when the server starts. stdout carries the
protocol and nothing else: logging goes to stderr and is configured before the
SDK loads (the SDK's own ``basicConfig`` is then a no-op), and while serving
the SDK points file descriptor 1 at stderr, so a stray ``print`` cannot corrupt
the stream.

Tools (flat arguments, JSON schemas from the type hints; arrays may also come
as JSON strings or comma lists): ``search_intelligent``, ``load_entries``,
``vault_stats`` and, unless read-only, ``capture_knowledge``,
``record_feedback``, ``link_entries``, ``capture_memory``. In read-only mode
the write tools are not registered at all. Every failure reaches the model as
a tool error (``isError``) saying what was wrong and how to call the tool
correctly; tracebacks stay in the server's stderr log. No tool takes a path.
"""

import functools
import json
import logging
import threading
from typing import Any, Callable, Literal

from tiervault.errors import ConfigError, EntryNotFound, TierVaultError, ValidationError

__all__ = ["build_server", "serve", "READ_TOOLS", "WRITE_TOOLS", "MAX_IDS", "MAX_CAPTURE"]

log = logging.getLogger("tiervault.mcp")

READ_TOOLS = ("search_intelligent", "load_entries", "vault_stats")
WRITE_TOOLS = ("capture_knowledge", "record_feedback", "link_entries", "capture_memory")
MAX_IDS = 100
MAX_CAPTURE = 500

INSTRUCTIONS = """\
tiervault is a knowledge vault of engineering patterns, anti-patterns, rules and decisions,
in tiers (agent > project > team). Work in two passes to save context:
1. search_intelligent(query) with mode="scan" (default): short rows (id, title, snippet,
   score, tokenEstimate). Decide which entries are worth reading.
2. load_entries(ids) for the few you need: complete entries (description, context, example,
   counter-example, why, links' tier). Use mode="full" only when you will read most results.
After applying (or rejecting) an entry, call record_feedback(query, entry_id, action) so
ranking learns. Save new lessons with capture_knowledge and session notes with capture_memory.
"""

#: How to call each tool correctly, appended to its error messages.
USAGE = {
    "search_intelligent": 'search_intelligent(query="retry policy for HTTP calls", mode="scan", '
                          'limit=10, domain="reliability", tags=["http"])',
    "load_entries": 'load_entries(ids=["id-from-a-scan-row", "another-id"])',
    "capture_knowledge": 'capture_knowledge(entries=[{"title": "...", "description": "...", '
                         '"type": "pattern", "severity": "warning", "tags": ["x"]}], tier="agent")',
    "record_feedback": 'record_feedback(query="the query you searched", entry_id="an-id", '
                       'action="accepted")',
    "link_entries": 'link_entries(source_id="an-id", target_id="other-id", '
                    'link_type="supports", note="why they relate")',
    "vault_stats": "vault_stats()",
    "capture_memory": 'capture_memory(summary="what happened", context="details", '
                      'topics=["deploy"], project="my-project")',
}


def _strings(value: Any, name: str) -> list[str] | None:
    """A list of strings from a list, a JSON array string or a comma-separated string."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValidationError(name, f"looks like a JSON array but does not parse "
                                            f"({exc.msg}); pass a list of strings") from None
        else:
            return [part.strip() for part in text.split(",") if part.strip()]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ValidationError(name, 'expected a list of strings, e.g. ["a", "b"]')
    return [v.strip() for v in value if v.strip()]


def _records(value: Any) -> list[Any]:
    """``entries`` as a list: a list, one object, or the same as a JSON string."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValidationError("entries", f"is a string that is not JSON ({exc.msg}); pass a "
                                             "list of entry objects") from None
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        raise ValidationError("entries", "expected a list of entry objects")
    if not value:
        raise ValidationError("entries", "is empty; pass at least one entry object")
    if len(value) > MAX_CAPTURE:
        raise ValidationError("entries", f"has {len(value)} items; send at most {MAX_CAPTURE} "
                                         "per call")
    return value


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
        server.add_tool(fn, name=fn.__name__, annotations=annotations(
            read_only_hint=read_only, destructive_hint=False, open_world_hint=False,
            idempotent_hint=fn.__name__ in READ_TOOLS or fn.__name__ == "link_entries"))


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
    from tiervault import __version__

    guard = _Guard(ToolError, CallToolResult, TextContent, lock)
    manager = brain.manager

    @guard
    def search_intelligent(
        query: str,
        mode: Literal["scan", "full"] = "scan",
        limit: int | None = None,
        domain: str | list[str] | None = None,
        type: str | list[str] | None = None,  # noqa: A002 - the public argument name
        severity: str | list[str] | None = None,
        tags: str | list[str] | None = None,
        tiers: str | list[str] | None = None,
        include_memories: bool = False,
    ) -> dict[str, Any]:
        """Search the knowledge vault (all tiers) for entries relevant to a task or question.

        Start with mode="scan" (the default): it returns short rows (id, title, score, type,
        domain, severity, tags, a 120-character snippet, tokenEstimate, tier) that cost little
        context. Pick the ids worth reading and call load_entries(ids) for the complete text.
        Use mode="full" only when you expect to read most results: each row then carries the
        whole entry and a score breakdown (semantic, vector, severity, temporalDecay,
        tagOverlap, domainMatch, graphProximity, total), which is much longer.

        Args:
            query: natural-language question or keywords; "#tag" words also match tags.
            mode: "scan" (light rows, default) or "full" (entries + breakdown).
            limit: rows wanted, 1-1000 (default 10 for scan, 20 for full).
            domain: only entries of this domain (e.g. "security", "python"), or a list.
            type: only these types: pattern, anti-pattern, rule, playbook, decision, reference.
            severity: only these severities: critical, warning, suggestion.
            tags: only entries with any of these tags (also boosts entries sharing them).
            tiers: only these tiers, e.g. ["agent", "project"] (default: all).
            include_memories: also search saved session memories (rows marked as memories).
        """
        rows = brain.search_intelligent(
            query, mode=mode, limit=limit, domain=_strings(domain, "domain"),
            type=_strings(type, "type"), severity=_strings(severity, "severity"),
            tags=_strings(tags, "tags"), tiers=_strings(tiers, "tiers"),
            include_memories=include_memories)
        out: dict[str, Any] = {"mode": mode, "count": len(rows), "results": rows}
        if mode == "scan" and rows:
            out["next"] = "call load_entries with the ids you want to read in full"
        elif not rows:
            out["next"] = "no match: try fewer filters or other words"
        return out

    @guard
    def load_entries(ids: list[str]) -> dict[str, Any]:
        """Load complete entries by id: the second pass after a scan-mode search_intelligent.

        Returns one result per id, in the order asked: {"id", "found": true, "entry": {...all
        fields...}, "tier"} or {"id", "found": false, "error"} for an unknown id.

        Args:
            ids: entry ids taken from search results (at most 100).
        """
        wanted = _strings(ids, "ids")
        if not wanted:
            raise ValidationError("ids", "is empty; pass the ids of scan rows you want to read")
        if len(wanted) > MAX_IDS:
            raise ValidationError("ids", f"has {len(wanted)} ids; load at most {MAX_IDS} per call")
        rows = brain.load_entries(wanted)
        return {"count": len(rows), "found": sum(1 for r in rows if r.get("found")),
                "entries": rows}

    @guard
    def vault_stats() -> dict[str, Any]:
        """Vault overview: entries, links and memories per tier, the ranking weights in force
        (semantic, vector, severity, temporalDecay, tagOverlap, domainMatch, graphProximity)
        and feedback counts. Use it to see which tiers and how much knowledge exist."""
        return dict(brain.stats())

    @guard
    def capture_knowledge(entries: list[dict[str, Any]], tier: str = "agent") -> dict[str, Any]:
        """Save lessons worth reusing as vault entries (one object per lesson).

        Each entry object: "title" (required, states the rule), "description" (required),
        optional "id" (lowercase slug; default from the title; an existing id is updated),
        "type" (pattern | anti-pattern | rule | playbook | decision | reference),
        "severity" (critical | warning | suggestion), "domain" (one word), "tags" (list),
        "applies_to" (list), "context", "example", "counter_example", "why",
        "valid_from"/"valid_until" (ISO 8601), "links" ([{"target": id, "type": supports |
        contradicts | extends | sequences, "note": ...}]).
        Entries are checked one by one: valid ones are written even if others fail; the
        reply lists "written" ids and "failed" items with the reason.

        Args:
            entries: list of entry objects as above (at most 500).
            tier: tier to write to: "agent" (default, your own), "project" or "team".
        """
        from tiervault.vault.jsonl import parse_record

        records = _records(entries)
        store = manager.store(tier)
        if store.read_only:
            raise ValidationError("tier", f"{tier!r} is read-only; write to \"agent\" or "
                                          "another writable tier")
        failed: list[dict[str, Any]] = []
        good: list[tuple[int, Any, Any]] = []
        seen: dict[str, int] = {}
        for i, record in enumerate(records):
            rid = record.get("id") if isinstance(record, dict) else None
            try:
                if isinstance(record, str):
                    record = json.loads(record)
                if isinstance(record, dict):
                    record = {"origin": "agent", **record}
                entry, links = parse_record(record)
            except (ValidationError, json.JSONDecodeError) as exc:
                failed.append({"index": i, "id": rid, "error": str(exc)})
                continue
            if entry.id in seen:
                failed.append({"index": i, "id": entry.id, "error": f"id {entry.id!r} is already "
                               f"used by entries[{seen[entry.id]}] in this call; give it another id"})
                continue
            seen[entry.id] = i
            good.append((i, entry, links))
        if good:  # through the manager, so write hooks (embed on write) run
            manager.capture_many([entry for _, entry, _ in good], tier)
        link_errors = []
        for i, entry, links in good:
            for spec in links:
                try:
                    manager.link(entry.id, spec.target, spec.type, spec.note, tier=tier)
                except TierVaultError as exc:
                    link_errors.append({"index": i, "id": entry.id, "target": spec.target,
                                        "error": str(exc)})
        out: dict[str, Any] = {"tier": tier, "written": [e.id for _, e, _ in good],
                               "failed": failed}
        if link_errors:
            out["linkErrors"] = link_errors
        out["summary"] = (f"{len(good)} of {len(records)} entries written to {tier}"
                          + (f"; {len(failed)} failed (see failed[].error, fix and resend "
                             "only those)" if failed else ""))
        return out

    @guard
    def record_feedback(query: str, entry_id: str,
                        action: Literal["accepted", "modified", "dismissed", "failed"]) -> dict[str, Any]:
        """Tell the vault how an entry worked out for a query, so ranking adapts.

        Call it after you used (or rejected) an entry found by search_intelligent.

        Args:
            query: the query you searched with.
            entry_id: the id of the entry you are judging.
            action: "accepted" (applied as is), "modified" (applied with changes),
                "dismissed" (not relevant), "failed" (applied, but it did not work).
        """
        return brain.feedback(query, entry_id, action)

    @guard
    def link_entries(source_id: str, target_id: str,
                     link_type: Literal["supports", "contradicts", "extends", "sequences"],
                     note: str = "") -> dict[str, Any]:
        """Link two existing entries so related knowledge is found together.

        Args:
            source_id: the entry the link starts from.
            target_id: the related entry (may live in another tier).
            link_type: "supports", "contradicts", "extends" or "sequences" (do target after source).
            note: one sentence on how they relate.
        """
        link = manager.link(source_id, target_id, link_type, note)
        return {"source_id": link.source_id, "target_id": link.target_id,
                "link_type": link.link_type, "note": link.note, "tier": link.tier}

    @guard
    def capture_memory(summary: str, context: str = "", topics: str | list[str] | None = None,
                       project: str = "") -> dict[str, Any]:
        """Save a session memory (what happened, what was decided) to the agent tier.

        Memories are searched with search_intelligent(..., include_memories=True). Use
        capture_knowledge instead for reusable rules and patterns.

        Args:
            summary: one or two sentences on what happened.
            context: longer details (commands, errors, decisions).
            topics: keywords for finding it again, e.g. ["deploy", "postgres"].
            project: the project this happened in.
        """
        store = manager.store("agent")
        memory_id = store.add_memory(summary, context=context,
                                     topics=_strings(topics, "topics") or [], project=project)
        return {"id": memory_id, "tier": "agent"}

    tools = [(search_intelligent, True), (load_entries, True), (vault_stats, True)]
    if not read_only:
        tools += [(capture_knowledge, False), (record_feedback, False), (link_entries, False),
                  (capture_memory, False)]
    names = [fn.__name__ for fn, _ in tools]

    class TierVaultServer(MCPServer):
        """Rewrites the SDK's argument-validation and unknown-tool errors for a model."""

        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
            if name not in names:
                why = (" (this server is read-only: write tools are disabled)"
                       if read_only and name in WRITE_TOOLS else "")
                raise ToolError(f"unknown tool {name!r}{why}; available tools: {', '.join(names)}")
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as exc:
                if isinstance(exc.__cause__, PydanticValidationError):
                    raise ToolError(_argument_error(name, exc.__cause__)) from exc.__cause__
                raise

    server = TierVaultServer(name="tiervault", version=__version__, instructions=INSTRUCTIONS)
    _register(server, tools, ToolAnnotations)
    return server


def _argument_error(name: str, exc: Any) -> str:
    """A pydantic argument error as one line per field (no input values echoed)."""
    problems = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err.get("loc", ())) or "arguments"
        problems.append(f"{field}: {err.get('msg', 'invalid')}")
    return (f"invalid arguments for {name}: {'; '.join(problems)}. Example of a correct call: "
            f"{USAGE[name]}")


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
        tiers = ", ".join(f"{t.name}={t.path}" for t in settings.tiers)
        log.info("tiervault mcp: serving %s tools over stdio%s; tiers: %s; vectors: %s",
                 len(READ_TOOLS) + (0 if read_only else len(WRITE_TOOLS)),
                 " (read-only)" if read_only else "", tiers,
                 getattr(runtime, "model_key", "off") if runtime is not None else "off")
        server.run("stdio")
        log.info("tiervault mcp: stdin closed, shutting down")
