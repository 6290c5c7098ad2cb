"""Feedback: recording it, and the entry-level nudge it gives later searches.

Recording: ``accepted | modified | dismissed | failed`` for (query, entry) goes
to the agent tier (the agent's own judgement), whichever tier holds the entry,
with the context the learner needs (:class:`~tiervault.brain.learning.FeedbackContext`:
the entry's signal values and the query's relevance profile). With
``brain.feedbackPool: team`` it is also recorded in the team tier, with the
agent's id, where every agent of the team learns from it.

Entry nudge (beyond the seed): an entry accepted for queries like this one
ranks a little higher next time, one dismissed a little lower::

    value(action) = accepted +1, modified +0.5, dismissed -1, failed 0
    similarity    = max(cosine(profile(this query), profile(feedback query)),
                        Jaccard(stems(this query), stems(feedback query)))
                    (for a dismissal of e, e's own term is left out of the cosine)
    counted       = similarity if similarity >= SIMILARITY_THRESHOLD else 0
    age_decay     = exp(-ln 2 * age_days / FEEDBACK_HALF_LIFE_DAYS)
    shared        = sum(value * counted * age_decay)     over every counted action
    own           = the same sum over actions on the same query (stem Jaccard >= 0.8)
    nudge         = trust * (MAX_NUDGE * tanh(shared) + MAX_SAME_NUDGE * tanh(own))
    trust         = clip(text agreement of the agent's pairs / 0.5, 0, 1)
                    (:func:`~tiervault.brain.learning.nudge_trust`); with fewer than
                    10 pairs to check: nudge = MAX_NUDGE * tanh(shared) (a verdict moves
                    its own query only as much as it moves a similar one)

A query's profile is its best entries by text relevance
(:func:`~tiervault.brain.learning.query_profile`): a paraphrase with no word in
common still retrieves the same entries, so it shares the nudges, while an
entry dismissed for one topic keeps its standing for another: the other
topic's queries retrieve other entries, and the dismissed entry itself is left
out of the cosine, so being retrieved by both queries does not make them alike
(an accepted entry is not left out: both queries finding it by text is what
makes an acceptance worth sharing). The agent's verdict on the very query it
asks again counts more (``own``, up to +/-MAX_SAME_NUDGE) than what similar
queries share (up to +/-MAX_NUDGE), in proportion to ``trust``: how far the
agent's preferences, taken together, agree with text relevance: accepting random
entries below dismissed top hits disagrees with it (trust 0), so such an agent's
verdicts move no query, its own or a similar one (a guard rail, docs/feedback.md).
Bounded by +/-(MAX_NUDGE + MAX_SAME_NUDGE), fades with a 90-day half-life, saturates rather than growing without bound. The
score is multiplied by ``1 + nudge``; it is shown under ``explain.feedback``.
"""

from __future__ import annotations

import math
import time
from typing import Iterable, Sequence

import numpy as np

from tiervault.brain.learning import (ACTION_VALUES, FeedbackContext, event_source,
                                       profile_similarity)
from tiervault.errors import EntryNotFound, ValidationError
from tiervault.vault.entry import FEEDBACK_ACTIONS
from tiervault.vault.rows import FeedbackEvent
from tiervault.vault.query import query_terms
from tiervault.vault.tokenizer import STEMMER, STOP_WORDS

__all__ = ["ACTION_VALUES", "MAX_NUDGE", "FEEDBACK_HALF_LIFE_DAYS", "SIMILARITY_THRESHOLD",
           "MAX_SAME_NUDGE", "SAME_QUERY_WORDS", "MAX_NUDGE_EVENTS", "check_feedback",
           "record_feedback", "query_stems", "entry_nudges"]

MAX_NUDGE = 0.1
#: Feedback on the same query (Jaccard of the content-word stems >= SAME_QUERY_WORDS)
#: is the agent's own verdict on this very list and nudges up to +/-MAX_SAME_NUDGE
#: (times the trust in the agent's verdicts), on top of the +/-MAX_NUDGE similar
#: queries share. Chosen on the agent set's tune halving (eval/feedback_sim.py --split
#: tune, learned, FTS-only; fed-half nDCG@10 after 200 / 400 judged events from 0.894,
#: with the trust guard; `docs/feedback.md`): 0.3 -> 0.927 / 0.927, 0.5 -> 0.928 /
#: 0.934, 0.7 -> 0.933 / 0.952, 1.0 -> 0.938 / 0.953; the unseen half after 400: 0.928 /
#: 0.922 / 0.929 / 0.922; random feedback costs 0.000 in each (trust 0). 1.0 would let a
#: dismissal zero a score (1 - 1.0 - 0.1 < 0); with 0.7 a score moves by at most
#: x1.8 / x0.2. (Before the trust guard, 0.3 was chosen: random feedback then cost
#: the fed queries 0.044 after 200, 1.0 cost 0.304.)
MAX_SAME_NUDGE = 0.7
SAME_QUERY_WORDS = 0.8
#: Feedback on a query less similar than this to the current one counts for nothing.
#: Chosen on the agent set's tune half (eval/feedback_sim.py --split tune): at 0.3 and
#: 0.5 random feedback cost the unseen half 0.023 / 0.015 nDCG@10 after 200 events
#: (measured before the nudged entry was left out of the cosine); at 0.7 it costs 0.000
#: while judged feedback gains as much (unseen 0.840 -> 0.929).
SIMILARITY_THRESHOLD = 0.7
#: A search reads at most this many (newest) feedback events on its candidates.
MAX_NUDGE_EVENTS = 5_000
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


def check_feedback(manager, query: str, entry_id: str, action: str) -> str:
    """Validate one feedback action; returns the tier holding the entry.

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
    return holder


def record_feedback(manager, query: str, entry_id: str, action: str, *,
                    context: FeedbackContext | None = None, agent: str = "",
                    tiers: Sequence[str] = ("agent",)) -> str:
    """Validate and store one feedback action in each of ``tiers``; returns the tier
    holding the entry (see :func:`check_feedback` for the errors)."""
    holder = check_feedback(manager, query, entry_id, action)
    text = (context or FeedbackContext()).to_json()
    for tier in tiers:
        manager.store(tier).add_feedback(query, entry_id, action, agent=agent, context=text)
    return holder


def entry_nudges(query: str, entry_ids: Sequence[str], events: Iterable[FeedbackEvent],
                 profile: dict[str, float] | None = None, now: float | None = None,
                 threshold: float | None = None, trust: float | None = 1.0) -> np.ndarray:
    """The nudge of each entry in ``entry_ids`` from feedback ``events``, for a query
    with relevance ``profile``; see the module docstring for the formula
    (``threshold`` defaults to SIMILARITY_THRESHOLD; ``trust`` in [0, 1] scales the
    nudge, None = unchecked: the same query counts only as a similar one)."""
    now = time.time() if now is None else now
    threshold = SIMILARITY_THRESHOLD if threshold is None else threshold
    current = query_stems(query)
    index = {eid: i for i, eid in enumerate(entry_ids)}
    raw = np.zeros(len(entry_ids), dtype=np.float64)
    same = np.zeros(len(entry_ids), dtype=np.float64)
    sims: dict[tuple[str, str, str], tuple[float, bool]] = {}
    for ev in events:
        i = index.get(ev.entry_id)
        value = ACTION_VALUES.get(ev.action, 0.0)
        if i is None or value == 0.0:
            continue
        key = (ev.query, ev.context, ev.entry_id)
        cached = sims.get(key)
        if cached is None:
            words = _jaccard(current, query_stems(ev.query))
            sim = words
            if profile and sim < 1.0:
                past = FeedbackContext.from_json(ev.context, source=event_source(ev)).profile
                # a dismissal counts only through the *other* entries both queries
                # retrieve (see the module docstring); an acceptance through all
                sim = max(sim, profile_similarity(profile, past,
                                                  leave_out=ev.entry_id if value < 0 else None))
            sims[key] = cached = (sim, words >= SAME_QUERY_WORDS)
        sim, same_query = cached
        if sim < threshold:
            continue
        age_days = max(now - float(ev.created_at), 0.0) / 86_400.0
        term = value * sim * math.exp(-math.log(2.0) * age_days / FEEDBACK_HALF_LIFE_DAYS)
        if same_query:
            same[i] += term
        else:
            raw[i] += term
    if trust is None:  # no pairs to check the verdicts against: the shared bound only
        return MAX_NUDGE * np.tanh(raw + same)
    t = min(max(float(trust), 0.0), 1.0)
    return t * (MAX_SAME_NUDGE * np.tanh(same) + MAX_NUDGE * np.tanh(raw + same))
