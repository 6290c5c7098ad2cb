"""What a memory or a feedback action must be before any backend stores it.

One validation for every backend (SQLite, PostgreSQL; a remote tier forwards to
a server that runs one of them), so the same input fails the same way everywhere.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Iterable, Sequence

from tiervault.errors import ValidationError
from tiervault.vault.entry import FEEDBACK_ACTIONS, MAX_ID_CHARS, check_text
from tiervault.vault.query import MAX_QUERY_CHARS
from tiervault.vault.rows import FeedbackCounts

__all__ = ["NewMemory", "new_memory", "check_feedback_input", "feedback_counts_from"]


@dataclass(frozen=True, slots=True)
class NewMemory:
    """A validated memory with its generated id; ``topics`` joined into one text."""

    id: str
    summary: str
    context: str
    topics: str
    project: str


def new_memory(summary: str, context: str, topics: Sequence[str] | str, project: str) -> NewMemory:
    """Validate a memory's fields (summary required; text limits) and give it an id."""
    if not isinstance(summary, str) or not summary.strip():
        raise ValidationError("summary", "is required and must not be blank")
    for field_name, value in (("summary", summary), ("context", context), ("project", project)):
        check_text(field_name, value)
    if isinstance(topics, (list, tuple)) and all(isinstance(t, str) for t in topics):
        topics = " ".join(topics)
    topic_text = check_text("topics", topics)  # a string, or a list of strings
    return NewMemory("mem-" + uuid.uuid4().hex[:16], summary, context, topic_text, project)


def check_feedback_input(query: str, entry_id: str, action: str, agent: str, context: str) -> None:
    """Refuse a feedback action a backend must not store (naming the field)."""
    if action not in FEEDBACK_ACTIONS:
        raise ValidationError("action", f"{action!r} is not one of {', '.join(FEEDBACK_ACTIONS)}")
    check_text("query", query, MAX_QUERY_CHARS)
    if not check_text("entry_id", entry_id, MAX_ID_CHARS):
        raise ValidationError("entry_id", "is required")
    check_text("agent", agent)
    check_text("context", context)


def feedback_counts_from(rows: Iterable[tuple[str, str]]) -> FeedbackCounts:
    """FeedbackCounts from the ``meta`` counter rows (``("feedback:<action>", "<n>")``)."""
    counts = {a: 0 for a in FEEDBACK_ACTIONS}
    counts.update({k.split(":", 1)[1]: int(v) for k, v in rows})
    return FeedbackCounts(accepted=counts["accepted"], modified=counts["modified"],
                          dismissed=counts["dismissed"], failed=counts["failed"])
