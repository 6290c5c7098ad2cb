"""Feedback: recording it, and the entry-level nudge it gives later searches.

Recording: ``accepted | modified | dismissed | failed`` for (query, entry) goes
to the agent tier (the agent's own judgement), whichever tier holds the entry.
The tier's running counters feed the adaptive weights (:mod:`weights`).

Entry nudge (beyond the seed): an entry accepted for queries like this one
ranks a little higher next time, one dismissed a little lower::

    value(action) = accepted +1, modified +0.5, dismissed -1, failed 0
    similarity    = Jaccard(stems(this query), stems(feedback query)), stop words removed
    age_decay     = exp(-ln 2 * age_days / FEEDBACK_HALF_LIFE_DAYS)
    nudge         = MAX_NUDGE * tanh(sum(value * similarity * age_decay))

so it is bounded by +/-0.1 (``MAX_NUDGE``), needs similar queries (feedback
for an unrelated query counts for nothing), fades with a 90-day half-life, and
saturates rather than growing without bound. It is added to the final score
and shown under ``explain.feedback``.
"""

from __future__ import annotations

import math
import time
from typing import Iterable, Sequence

import numpy as np

from tiervault.errors import EntryNotFound, ValidationError
from tiervault.vault.entry import FEEDBACK_ACTIONS
from tiervault.vault.query import query_terms
from tiervault.vault.tokenizer import STEMMER, STOP_WORDS

__all__ = ["ACTION_VALUES", "MAX_NUDGE", "FEEDBACK_HALF_LIFE_DAYS", "record_feedback",
           "query_stems", "entry_nudges"]

ACTION_VALUES = {"accepted": 1.0, "modified": 0.5, "dismissed": -1.0, "failed": 0.0}
MAX_NUDGE = 0.1
FEEDBACK_HALF_LIFE_DAYS = 90.0
MAX_FEEDBACK_QUERY_CHARS = 4_096


def query_stems(text: str) -> frozenset[str]:
    """The content-word stems of a query (stop words removed), for similarity."""
    stop_words = STOP_WORDS.get()
    words = [w for w in query_terms(text) if w not in stop_words]
    stems = STEMMER.stems(words)
    return frozenset(s for s in stems.values() if s)


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def record_feedback(manager, query: str, entry_id: str, action: str, tier: str = "agent") -> str:
    """Validate and store one feedback action in ``tier``; returns the tier holding the entry.

    Raises ValidationError for a bad action or query, EntryNotFound for an id no
    connected tier holds.
    """
    if action not in FEEDBACK_ACTIONS:
        raise ValidationError("action", f"{action!r} is not one of {', '.join(FEEDBACK_ACTIONS)}")
    if not isinstance(query, str) or "\x00" in query or len(query) > MAX_FEEDBACK_QUERY_CHARS:
        raise ValidationError("query", f"must be a string without NUL bytes, at most "
                              f"{MAX_FEEDBACK_QUERY_CHARS} characters")
    if not isinstance(entry_id, str) or not entry_id:
        raise ValidationError("entry_id", "is required")
    holder = manager.locate(entry_id)
    if holder is None:
        raise EntryNotFound(entry_id)
    manager.store(tier).add_feedback(query, entry_id, action)
    return holder


def entry_nudges(query: str, entry_ids: Sequence[str],
                 rows: Iterable[tuple[str, str, str, float]], now: float | None = None) -> np.ndarray:
    """The nudge of each entry in ``entry_ids`` from feedback ``rows``
    (entry_id, query, action, created_at); see the module docstring for the formula."""
    now = time.time() if now is None else now
    current = query_stems(query)
    index = {eid: i for i, eid in enumerate(entry_ids)}
    raw = np.zeros(len(entry_ids), dtype=np.float64)
    stem_cache: dict[str, frozenset[str]] = {}
    for eid, fb_query, action, created_at in rows:
        i = index.get(eid)
        value = ACTION_VALUES.get(action, 0.0)
        if i is None or value == 0.0:
            continue
        stems = stem_cache.get(fb_query)
        if stems is None:
            stems = stem_cache[fb_query] = query_stems(fb_query)
        sim = _jaccard(current, stems)
        if sim == 0.0:
            continue
        age_days = max(now - float(created_at), 0.0) / 86_400.0
        raw[i] += value * sim * math.exp(-math.log(2.0) * age_days / FEEDBACK_HALF_LIFE_DAYS)
    return MAX_NUDGE * np.tanh(raw)
