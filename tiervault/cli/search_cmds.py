"""CLI commands over the Brain: search, load, feedback, stats.

``--json`` prints exactly the Brain's row shapes (a JSON array of rows for
search and load, one object for feedback and stats); without it a compact
table. Exit codes follow :mod:`tiervault.cli`: 0 ok, 1 when an id is not found
(``load`` prints what it found first), 2 for usage and validation errors.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from typing import Any, Sequence

from tiervault.cli.common import add_json, print_json, settings_from, split_list
from tiervault.cli.vault_cmds import print_links, print_memory
from tiervault.errors import QueryError, ValidationError

MAX_LIMIT = 1000  # tiervault.brain.MAX_LIMIT, without importing the Brain at parse time

__all__ = ["register", "table"]


def register(sub: Any) -> None:
    p = sub.add_parser("search", help="search every tier, ranked by the Brain")
    p.add_argument("query", nargs="?", default="",
                   help="natural-language query; #tag words count as query tags. Empty (\"\") "
                   "with a filter lists the newest matching entries")
    p.add_argument("--mode", choices=("scan", "full"), default="scan",
                   help="scan: light rows (default); full: complete entries with score breakdown")
    p.add_argument("--limit", type=_limit, default=None,
                   help="at most this many rows, 1-1000 (default 10 scan / 20 full)")
    p.add_argument("--domain", help="only entries of this domain (also the domain-match signal)")
    p.add_argument("--type", dest="entry_type", help="only entries of this type (comma list)")
    p.add_argument("--severity", help="only entries of this severity (comma list)")
    p.add_argument("--tags", help="comma-separated tags: entries with any of them; feeds tag overlap")
    add_exclusion_flags(p)
    p.add_argument("--tier", help="comma-separated tiers to search (default: all)")
    p.add_argument("--memories", action="store_true", help="also search session memories")
    p.add_argument("--modulate", metavar="TOKENS",
                   help="steer the ranking, e.g. 'suppress:deprecated decay:30 diverse'; tokens: "
                   "suppress:TEXT|@ID, centroid:ID,ID[:ALPHA], trajectory:A->B, "
                   "decay:DAYS[:exp], diverse[:LAMBDA], pool:N (the query text is never changed)")
    p.add_argument("--explain", action="store_true",
                   help="show how each score was made (per-signal breakdown)")
    add_json(p)
    p.set_defaults(handler=cmd_search)

    p = sub.add_parser("load", help="load complete entries by id (the second pass after a scan)")
    p.add_argument("ids", nargs="+", metavar="ID")
    add_json(p)
    p.set_defaults(handler=cmd_load)

    p = sub.add_parser("feedback", help="record feedback on a search result (agent tier)")
    p.add_argument("id", help="entry id")
    p.add_argument("action", help="accepted | modified | dismissed | failed")
    p.add_argument("--query", "-q", required=True, help="the query the entry was found for")
    add_json(p)
    p.set_defaults(handler=cmd_feedback)

    p = sub.add_parser("stats", help="entries per tier, weights in force, feedback counts")
    add_json(p)
    p.set_defaults(handler=cmd_stats)


def _limit(text: str) -> int:
    """argparse type: an integer 1..1000."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not 1 <= value <= MAX_LIMIT:
        raise argparse.ArgumentTypeError(f"{value} is not between 1 and {MAX_LIMIT}")
    return value


def _brain(args: argparse.Namespace) -> Any:
    from tiervault.brain import Brain

    return Brain.open(settings_from(args))


#: search_intelligent argument -> the flag that gives it (errors name the flag).
FILTER_FLAGS = {"domain": "--domain", "type": "--type", "severity": "--severity",
                "tags": "--tags", "not_domain": "--not-domain", "not_type": "--not-type",
                "not_tags": "--not-tags", "exclude_ids": "--exclude-ids",
                "updated_after": "--updated-after", "updated_before": "--updated-before"}


def named_by_flag(exc: QueryError) -> QueryError:
    """``exc`` with its field named as the command-line flag that gave the value."""
    flag = FILTER_FLAGS.get(exc.field)
    if flag is None:
        return exc
    return QueryError(flag, str(exc).removeprefix(f"{exc.field}: "))


def add_exclusion_flags(p: argparse.ArgumentParser) -> None:
    """The exclusion and date flags, the same for ``search`` and ``list``."""
    p.add_argument("--not-domain", help="leave out entries of these domains (comma list)")
    p.add_argument("--not-type", help="leave out entries of these types (comma list)")
    p.add_argument("--not-tags", help="leave out entries having any of these tags (comma list)")
    p.add_argument("--exclude-ids", metavar="IDS", help="leave out these entry ids (comma list)")
    p.add_argument("--updated-after", metavar="WHEN",
                   help="only entries updated at or after WHEN (ISO 8601, e.g. 2026-01-31 or "
                   "2026-01-31T12:00:00Z)")
    p.add_argument("--updated-before", metavar="WHEN",
                   help="only entries updated before WHEN (ISO 8601)")


def exclusion_args(args: argparse.Namespace) -> dict[str, Any]:
    """The values of :func:`add_exclusion_flags`' flags, as keyword arguments."""
    return {"not_domain": split_list(args.not_domain), "not_type": split_list(args.not_type),
            "not_tags": split_list(args.not_tags), "exclude_ids": split_list(args.exclude_ids),
            "updated_after": args.updated_after, "updated_before": args.updated_before}


def filter_args(args: argparse.Namespace) -> dict[str, Any]:
    """The search filters given on the command line, as search_intelligent arguments."""
    return {"domain": args.domain, "type": args.entry_type, "severity": args.severity,
            "tags": split_list(args.tags), **exclusion_args(args)}


def cmd_search(args: argparse.Namespace) -> int:
    # Human --explain shows each row's per-signal breakdown, which only full rows carry.
    mode = "full" if args.explain and not args.json else args.mode
    filters = filter_args(args)
    if not args.query.strip() and not any(filters.values()):
        raise ValidationError("query", "give words to search for, or a filter (--domain, "
                              "--type, --severity, --tags, --not-domain, --updated-after...) "
                              "to list the newest matching entries")
    with _brain(args) as brain:
        try:
            rows = brain.search_intelligent(
                args.query, mode=mode, limit=args.limit, tiers=split_list(args.tier),
                include_memories=args.memories, explain=args.explain, modulate=args.modulate,
                **filters)
        except QueryError as exc:
            raise named_by_flag(exc) from None
    if getattr(rows, "widened", False):
        print(f"tiervault: small vault: returning all {len(rows)} matches (more than the "
              "default limit); pass --limit N to cap the rows", file=sys.stderr)
    if args.json:
        print_json(rows)
    elif not rows:
        print("no results", file=sys.stderr)
    elif args.explain:
        for r in rows:
            if args.mode == "full":
                _print_full(r)
            else:
                e = r["entry"]
                print(f"{r['score']:.3f}  {e['id']}  [{r['tier']}]  {e['type']} / "
                      f"{e.get('severity', '')}  {e.get('title') or e.get('summary', '')}")
                b = r["breakdown"]
                print("  breakdown: " + " ".join(f"{k}={v:.3f}" for k, v in b.items()
                                                 if k != "total"))
            _print_explain(r.get("explain"))
            print()
    elif args.mode == "scan" and "mmr" in rows[0]:  # diverse: the MMR score picked the order
        table(["score", "mmr", "id", "tier", "type", "severity", "tokens", "title"],
              [[f"{r['score']:.3f}", f"{r['mmr']:.3f}", r["id"], r["tier"], r["type"],
                r["severity"], str(r["tokenEstimate"]), r["title"]] for r in rows])
    elif args.mode == "scan":
        table(["score", "id", "tier", "type", "severity", "tokens", "title"],
              [[f"{r['score']:.3f}", r["id"], r["tier"], r["type"], r["severity"],
                str(r["tokenEstimate"]), r["title"]] for r in rows])
    else:
        for r in rows:
            _print_full(r)
    return 0


def _print_explain(explain: dict[str, Any] | None) -> None:
    """The --explain lines of one row: how its score was made."""
    if not explain:
        return
    print(f"  score = relevance {explain.get('relevance', 0):.4f} x (1 + beta x prior "
          f"{explain.get('prior', 0):.4f}) x tierFactor {explain.get('tierFactor', 0):.2f} "
          f"(tierWeight {explain.get('tierWeight', 0):.2f}) x (1 + feedback "
          f"{explain.get('feedback', 0):+.4f})"
          f"  (lexical {explain.get('lexical', 0):.4f}, tfidf {explain.get('tfidf', 0):.4f}, "
          f"via {explain.get('via', '?')})"
          + (f"; also in {', '.join(explain['alsoIn'])}" if explain.get("alsoIn") else "")
          + (f"; contradicts {', '.join(explain['contradicts'])}"
             if explain.get("contradicts") else ""))
    weights = explain.get("weights") or {}
    if weights:
        print(f"  weights ({explain.get('weightSet', '?')}): "
              + " ".join(f"{k}={v:.3f}" for k, v in weights.items()))


def cmd_load(args: argparse.Namespace) -> int:
    with _brain(args) as brain:
        rows = brain.load_entries(args.ids)
    missing = [r for r in rows if not r["found"]]
    if args.json:
        print_json(rows)
    else:
        for r in rows:
            if r["found"] and r["entry"].get("type") == "memory":
                print_memory(r["entry"], r["tier"])
                print()
            elif r["found"]:
                _print_entry(r["entry"], r["tier"], r.get("links", []))
    for r in missing:
        print(f"tiervault: {r['error']}", file=sys.stderr)
    return 1 if missing else 0


def cmd_feedback(args: argparse.Namespace) -> int:
    with _brain(args) as brain:
        out = brain.feedback(args.query, args.id, args.action)
    if args.json:
        print_json(out)
    else:
        counts = ", ".join(f"{k} {v}" for k, v in out["feedback"].items())
        print(f"recorded {out['action']} for {out['entryId']} (feedback: {counts})")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    with _brain(args) as brain:
        out = brain.stats()
    if args.json:
        print_json(out)
        return 0
    rows = []
    for name, t in out["tiers"].items():
        if t.get("available"):
            rows.append([name, str(t["entries"]), str(t["links"]), str(t["memories"]),
                         f"{t['weight']:g}", t["path"]])
        else:
            rows.append([name, "-", "-", "-", f"{t['weight']:g}", f"{t['path']} ({t.get('problem')})"])
    table(["tier", "entries", "links", "memories", "weight", "path"], rows)
    vocab = out.get("vocabulary") or {}
    for key in ("domains", "types", "severities", "tags"):
        if vocab.get(key):
            more = (f" (top {len(vocab['tags'])} of {vocab['tagCount']})"
                    if key == "tags" and vocab.get("tagCount", 0) > len(vocab["tags"]) else "")
            print(f"\n{key}{more}: " + ", ".join(f"{w} {n}" for w, n in vocab[key].items()))
    if not out["adapted"]:
        state = "base"
    elif out["adaptation"] == "learned":
        state = f"learned from {out['weightEvents']} feedback actions"
    else:
        state = "seed rule (accept rate)"
    print(f"\nweights ({out['weightSet']}, {state}; brain.adaptation {out['adaptation']}, "
          f"feedback pool {out['feedbackPool']}):")
    table(["signal", "weight"], [[k, f"{v:.4f}"] for k, v in out["weights"].items()])
    counts = ", ".join(f"{k} {v}" for k, v in out["feedback"].items())
    if out["feedbackPool"] == "team":
        own = ", ".join(f"{k} {v}" for k, v in out["agentFeedback"].items())
        print(f"\nfeedback (team pool, what the weights rest on): {counts}\nthis agent's own: {own}")
    else:
        print(f"\nfeedback: {counts}")
    trust = out.get("nudgeTrust")
    print("same-query nudge trust: " + ("unchecked (fewer than 10 accept/dismiss pairs)"
                                        if trust is None else f"{trust:.2f}"))
    history = out["weightHistory"][-5:]
    if history:
        print("\nweight history (newest last):")
        short = {"semantic": "sem", "vector": "vec", "severity": "sev", "temporalDecay": "decay",
                 "tagOverlap": "tags", "domainMatch": "domain", "graphProximity": "graph"}
        table(["events", "pairs", "rule", *short.values()],
               [[str(h["events"]), str(h["pairs"]), h["adaptation"],
                 *(f"{h['weights'].get(out['weightSet'], {}).get(k, 0.0):.3f}" for k in short)]
                for h in history])
    return 0


# -- human output ------------------------------------------------------------------------
def table(headers: Sequence[str], rows: list[list[str]]) -> None:
    """A compact left-aligned table; the last column is cut to the terminal width."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(headers)]
    term = shutil.get_terminal_size((120, 20)).columns
    fixed = sum(w + 2 for w in widths[:-1])
    widths[-1] = max(10, min(widths[-1], term - fixed))
    for row in [list(headers), *rows]:
        cells = [c.ljust(w)[:w] if i < len(row) - 1 else c[:w] for i, (c, w) in enumerate(zip(row, widths))]
        print("  ".join(cells).rstrip())


def _print_entry(entry: dict[str, Any], tier: str, links: list[dict[str, Any]] = ()) -> None:  # type: ignore[assignment]
    print(f"{entry['id']}  [{tier}]  {entry.get('type', '')} / {entry.get('severity', '')} "
          f"/ {entry.get('domain', '')}")
    print(f"  {entry.get('title') or entry.get('summary', '')}")
    for key in ("description", "context", "example", "counter_example", "why"):
        if entry.get(key):
            print(f"  {key}: {entry[key]}")
    if entry.get("tags"):
        print(f"  tags: {', '.join(entry['tags'])}")
    print_links(list(links), indent="  ")
    print()


def _print_full(row: dict[str, Any]) -> None:
    b = row["breakdown"]
    parts = " ".join(f"{k}={v:.2f}" for k, v in b.items() if k != "total")
    mmr = f"  mmr={row['mmr']:.3f}" if "mmr" in row else ""
    print(f"{row['score']:.3f}{mmr}  {parts}")
    _print_entry(row["entry"], row["tier"])
