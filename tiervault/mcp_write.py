"""The MCP write tools: capture, update, delete, feedback, link, memory.

:func:`write_tools` returns the plain tool functions (the server wraps each in
its error guard and registers it); they are left out entirely in read-only mode.
"""


from typing import Annotated, Any, Callable

from pydantic import Field

from tiervault.errors import ValidationError
from tiervault.mcp_params import Action, EntryType, LinkType, Severity, records, strings

__all__ = ["write_tools"]

_Text = Annotated[str | None, Field(description="New text; \"\" clears the field (not title "
                                                "or description).")]
_TagList = Annotated[list[str] | None, Field(description='Tags, e.g. ["http", "retry"].')]


def write_tools(brain: Any, tier_type: Any) -> list[Callable[..., Any]]:
    """The write tools over ``brain``; ``tier_type`` is the Literal of writable tiers."""
    manager = brain.manager
    Tier = Annotated[tier_type, Field(description="Tier to write to: \"agent\" (your own), "
                                                  "\"project\" or \"team\".")]
    TierOrFound = Annotated[tier_type | None, Field(
        description="Tier holding the entry (default: the highest-priority tier holding it).")]
    EntryId = Annotated[str, Field(description="Id of an existing entry (from a search row).")]

    def capture_knowledge(
        entries: Annotated[list[dict[str, Any]], Field(
            description="Entry objects (1-500), e.g. [{\"title\": \"...\", \"description\": "
                        "\"...\", \"type\": \"rule\", \"severity\": \"warning\", \"tags\": "
                        "[\"x\"]}].")],
        tier: Tier = "agent",
    ) -> dict[str, Any]:
        """Save lessons worth reusing as vault entries (one object per lesson).

        Each entry object: "title" (required, states the rule), "description" (required),
        optional "id" (lowercase slug; default from the title), "type" (pattern |
        anti-pattern | rule | playbook | decision | reference), "severity" (critical |
        warning | suggestion; default suggestion), "domain" (one word), "tags" (list),
        "applies_to" (list), "context", "example", "counter_example", "why",
        "valid_from"/"valid_until" (ISO 8601), "links" ([{"target": id, "type": supports |
        contradicts | extends | sequences, "note": ...}]).
        An id that already exists in the tier is REPLACED as a whole: fields you leave out
        go back to their defaults. The reply lists such ids in "replaced" with the fields
        that changed. To change some fields of an existing entry, use update_entry.
        Entries are checked one by one: valid ones are written even if others fail; the
        reply lists "written" ids and "failed" items with the reason.
        """
        from tiervault.vault.edits import capture_batch

        items = records(entries)
        if manager.store(tier).read_only:
            raise ValidationError("tier", f"{tier!r} is read-only; write to \"agent\" or "
                                          "another writable tier")
        report = capture_batch(manager, items, tier)
        good, replaced, failed = report.written, report.replaced, report.failed
        out = report.as_dict()
        out["summary"] = (f"{len(good)} of {len(items)} entries written to {tier}"
                          + (f" ({len(replaced)} replaced an existing entry)" if replaced else "")
                          + (f"; {len(failed)} failed (see failed[].error, fix and resend "
                             "only those)" if failed else ""))
        return out

    def update_entry(
        id: EntryId,  # noqa: A002 - the public argument name
        title: Annotated[str | None, Field(description="New title.")] = None,
        description: Annotated[str | None, Field(description="New description.")] = None,
        type: Annotated[EntryType | None, Field(description="New type.")] = None,  # noqa: A002
        severity: Annotated[Severity | None, Field(description="New severity.")] = None,
        domain: Annotated[str | None, Field(description="New domain (one word).")] = None,
        context: _Text = None,
        example: _Text = None,
        counter_example: _Text = None,
        why: _Text = None,
        tags: Annotated[list[str] | None, Field(
            description="Replace all tags with these ([] removes every tag).")] = None,
        add_tags: Annotated[list[str] | None, Field(description="Tags to add.")] = None,
        remove_tags: Annotated[list[str] | None, Field(description="Tags to remove.")] = None,
        applies_to: Annotated[list[str] | None, Field(
            description="Replace the applies_to list.")] = None,
        valid_from: Annotated[str | None, Field(
            description="ISO 8601 start of validity; \"\" clears it.")] = None,
        valid_until: Annotated[str | None, Field(
            description="ISO 8601 end of validity; \"\" clears it.")] = None,
        tier: TierOrFound = None,
    ) -> dict[str, Any]:
        """Change some fields of an existing entry; the fields not given keep their values.

        Returns {"id", "tier", "changed": [field names], "entry": the entry as stored}.
        "changed" is empty when the values given were already stored (nothing written).
        An unknown id is an error: search first and use an id from a row.
        """
        given = {"title": title, "description": description, "type": type,
                 "severity": severity, "domain": domain, "context": context, "example": example,
                 "counter_example": counter_example, "why": why, "tags": tags,
                 "add_tags": add_tags, "remove_tags": remove_tags, "applies_to": applies_to,
                 "valid_from": valid_from, "valid_until": valid_until}
        patch = {k: v for k, v in given.items() if v is not None}
        if not patch:
            raise ValidationError("arguments", "name at least one field to change besides id")
        return manager.update(id, patch, tier=tier).as_dict()

    def delete_entry(id: EntryId, tier: TierOrFound = None) -> dict[str, Any]:  # noqa: A002
        """Delete an entry (and the links stored with it) for good.

        Without "tier", the copy in the highest-priority tier holding the id is deleted;
        copies in other tiers stay (the reply's "stillIn" lists them).
        """
        from tiervault.vault.edits import delete_entry as delete

        return delete(manager, id, tier).as_dict()

    def record_feedback(
        query: Annotated[str, Field(description="The query you searched with.")],
        entry_id: Annotated[str, Field(description="The id of the entry you are judging.")],
        action: Annotated[Action, Field(
            description="accepted: applied as is; modified: applied with changes; dismissed: "
                        "not relevant; failed: applied, but it did not work.")],
    ) -> dict[str, Any]:
        """Tell the vault how an entry worked out for a query, so ranking adapts.

        Call it after you used (or rejected) an entry found by search_intelligent.
        """
        return brain.feedback(query, entry_id, action)

    def link_entries(
        source_id: Annotated[str, Field(description="The entry the link starts from.")],
        target_id: Annotated[str, Field(description="The related entry (any tier).")],
        link_type: Annotated[LinkType, Field(
            description="supports | contradicts | extends | sequences (do target after "
                        "source).")],
        note: Annotated[str, Field(description="One sentence on how they relate.")] = "",
    ) -> dict[str, Any]:
        """Link two existing entries so related knowledge is found together.

        The link is stored in the highest-priority tier holding the source; load_entries
        shows it on both entries.
        """
        link = manager.link(source_id, target_id, link_type, note)
        return {"source_id": link.source_id, "target_id": link.target_id,
                "link_type": link.link_type, "note": link.note, "tier": link.tier}

    def capture_memory(
        summary: Annotated[str, Field(description="One or two sentences on what happened.")],
        context: Annotated[str, Field(description="Longer details (commands, errors, "
                                                  "decisions).")] = "",
        topics: Annotated[list[str] | None, Field(
            description='Keywords for finding it again, e.g. ["deploy", "postgres"].')] = None,
        project: Annotated[str, Field(description="The project this happened in.")] = "",
    ) -> dict[str, Any]:
        """Save a session memory (what happened, what was decided) to the agent tier.

        Memories are searched with search_intelligent(..., include_memories=True) and read
        with load_entries([memory id]). Use capture_knowledge instead for reusable rules.
        """
        memory_id = manager.store("agent").add_memory(
            summary, context=context, topics=strings(topics, "topics") or [], project=project)
        return {"id": memory_id, "tier": "agent"}

    return [capture_knowledge, update_entry, delete_entry, record_feedback, link_entries,
            capture_memory]
