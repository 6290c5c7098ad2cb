"""Search and the entry page: results with scores, one entry with its score breakdown,
its links drawn as a graph, and the accept / dismiss buttons that record feedback.

The entry page reached from a result carries the search (query and filters) in
its URL; the page runs it again in ``full`` mode with ``explain`` and draws
that entry's row: the seven signals, the weights in force, the tier weight and
the feedback nudge — exactly what ranked it.
"""

from __future__ import annotations

from typing import Any, Mapping

from starlette.responses import Response

from tiervault.brain import SIGNALS
from tiervault.errors import EntryNotFound, ValidationError
from tiervault.vault.entry import ENTRY_TYPES, SEVERITIES, format_timestamp
from tiervault.web.call import Call, Forbidden
from tiervault.web.charts import breakdown_chart, link_graph

__all__ = ["search", "entry", "feedback", "SEARCH_KEYS", "search_args", "carried", "carried_args",
           "BREAKDOWN_DEPTH"]

#: Query-string keys of a search (carried from a result to its entry page).
SEARCH_KEYS = ("q", "tier", "domain", "type", "severity", "tags", "not_domain", "not_type",
               "not_tags", "exclude_ids", "updated_after", "updated_before")
RESULTS = 20
#: The entry page looks for the entry among this many results of the search: the
#: results page's own depth, so the rank shown is the rank the person clicked.
BREAKDOWN_DEPTH = RESULTS
_FEEDBACK_BUTTONS = ("accepted", "dismissed")
_NOTICES = {"accepted": "Feedback recorded: accepted.", "dismissed": "Feedback recorded: dismissed.",
            "saved": "Saved.", "unchanged": "Nothing changed; nothing was saved."}


def search_args(params: Mapping[str, Any]) -> dict[str, str]:
    """The search of a search page's query string (or a form)."""
    return {k: str(params.get(k) or "").strip() for k in SEARCH_KEYS}


def carried(args: Mapping[str, str]) -> dict[str, str]:
    """A search as carried to an entry page, whose own ``tier`` is the entry's: the
    search's tier filter travels as ``st``."""
    out = {k: v for k, v in args.items() if v and k != "tier"}
    if args.get("tier"):
        out["st"] = args["tier"]
    return out


def carried_args(params: Mapping[str, Any]) -> dict[str, str]:
    """The search carried by an entry page's query string or its feedback form."""
    args = search_args(params)
    args["tier"] = str(params.get("st") or "").strip()
    return args


def _run(call: Call, args: Mapping[str, str], *, mode: str, limit: int) -> list[dict[str, Any]]:
    readable = call.readable()
    if args["tier"]:
        call.require_read(args["tier"])
        tiers = [args["tier"]]
    else:
        tiers = readable
    if not tiers:
        return []
    return call.brain.search_intelligent(
        args["q"], mode=mode, limit=limit, explain=True, tiers=tiers,
        domain=args["domain"] or None, type=args["type"] or None,
        severity=args["severity"] or None, tags=args["tags"] or None,
        not_domain=args["not_domain"] or None, not_type=args["not_type"] or None,
        not_tags=args["not_tags"] or None, exclude_ids=args["exclude_ids"] or None,
        updated_after=args["updated_after"] or None, updated_before=args["updated_before"] or None)


def search(call: Call) -> Response:
    args = search_args(call.params)
    rows: list[dict[str, Any]] = []
    error = ""
    if args["q"]:
        try:
            rows = _run(call, args, mode="scan", limit=RESULTS)
        except ValidationError as exc:  # a bad filter value: say so next to the form
            error = str(exc)
    top = max((r["score"] for r in rows), default=0.0) or 1.0
    return call.render("search.html", nav="search", args=args, rows=rows, top=top, error=error,
                       types=ENTRY_TYPES, severities=SEVERITIES, searched=bool(args["q"]),
                       carry=carried(args),
                       status=400 if error else 200)


def _breakdown(call: Call, args: Mapping[str, str], entry_id: str, tier: str) -> dict[str, Any]:
    rows = _run(call, args, mode="full", limit=BREAKDOWN_DEPTH)
    for rank, row in enumerate(rows, 1):
        if row["entry"].get("id") == entry_id and row["tier"] == tier:
            ex = row["explain"]
            chart = breakdown_chart(row["breakdown"], ex["weights"], SIGNALS, ex["tierWeight"],
                                    ex["relevance"], ex["feedback"], row["score"])
            return {"found": True, "rank": rank, "chart": chart, "explain": ex}
    return {"found": False, "depth": BREAKDOWN_DEPTH}


def _links(call: Call, entry_id: str) -> dict[str, Any]:
    readable = set(call.readable())
    links = [ln for ln in call.manager.links_touching([entry_id]) if ln.tier in readable]
    edges = []
    for ln in links:
        outgoing = ln.source_id == entry_id
        other = ln.target_id if outgoing else ln.source_id
        edges.append((other, ln.link_type, ln.note, outgoing))
    others = list({e[0] for e in edges})
    found = call.manager.get_many(others, call.readable()) if others else {}
    titles = {eid: e.title for eid, (e, _) in found.items()}
    tier_of = {eid: tier for eid, (_, tier) in found.items()}
    rows = [{"other": o, "type": t, "note": n, "outgoing": out, "title": titles.get(o),
             "tier": tier_of.get(o)} for o, t, n, out in edges]
    return {"rows": rows, "titles": titles, "edges": edges}


def entry(call: Call) -> Response:
    entry_id = call.request.path_params["entry_id"]
    readable = call.readable()
    tier = call.params.get("tier") or ""
    if tier:
        call.require_read(tier)
        found = call.manager.get_many([entry_id], [tier])
    else:
        found = call.manager.get_many([entry_id], readable) if readable else {}
    if entry_id not in found:
        raise EntryNotFound(entry_id)
    item, tier = found[entry_id]
    args = carried_args(call.params)
    breakdown = _breakdown(call, args, entry_id, tier) if args["q"] else None
    links = _links(call, entry_id)
    graph = link_graph(item.id, item.title, links["edges"], links["titles"]) if links["edges"] else None
    now = call.brain.clock()
    validity = "valid"
    if item.valid_until is not None and item.valid_until <= now:
        validity = "expired"
    elif item.valid_from is not None and item.valid_from > now:
        validity = "not yet valid"
    notice = _NOTICES.get(call.params.get("done", ""), "")
    return call.render(
        "entry.html", entry=item, tier=tier, times={k: format_timestamp(getattr(item, k)) for k in
                                                     ("valid_from", "valid_until", "created_at",
                                                      "updated_at")},
        validity=validity, holders=call.catalog.holders(item, readable), links=links["rows"],
        graph=graph, breakdown=breakdown, args=args, notice=notice,
        search_params=carried(args),
        can_edit=call.can_write(tier), can_feedback=call.can_feedback() and bool(args["q"]),
        feedback_actions=_FEEDBACK_BUTTONS)


def feedback(call: Call) -> Response:
    if not call.can_feedback():
        raise Forbidden("you may not record feedback (it is written to the agent tier)")
    action = str(call.form.get("action", ""))
    if action not in _FEEDBACK_BUTTONS:
        raise ValidationError("action", f"{action[:40]!r} is not one of {', '.join(_FEEDBACK_BUTTONS)}")
    entry_id = str(call.form.get("entry_id", ""))
    tier = str(call.form.get("tier", ""))
    args = carried_args(call.form)
    if not args["q"]:
        raise ValidationError("q", "feedback needs the query the entry was found for")
    if tier:
        call.require_read(tier)
    if not call.manager.get_many([entry_id], call.readable()):
        raise EntryNotFound(entry_id)
    call.brain.feedback(args["q"], entry_id, action)
    return call.redirect(f"/entry/{entry_id}", {**carried(args), "tier": tier, "done": action})
