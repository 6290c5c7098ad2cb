"""A tier's feedback as one search reads it, kept per generation of the tier file.

Each FTS-only search asked the agent tier three statements about feedback: its
counters (``meta``), the schema version (``PRAGMA user_version``, which columns a
feedback row has) and the feedback on its candidates (for the nudges): issue 16
counted ~17 SQL statements a scan, these three of them on every query, mostly to
learn that there is no feedback at all.

Every write transaction bumps the tier's generation (``meta.gen``, by any process),
and a search reads the generation once (:func:`~tiervault.vault.read_scope.read_scope`).
So the counters and, for a table of at most :data:`MAX_ROWS` rows, every feedback
row are read once per generation and answered from memory until it moves: nothing
is served stale (another process's write is seen by the next search, this process's
at once), and a large table is still read per query by its index, as before.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Callable, Sequence

from tiervault.vault.rows import FeedbackCounts, FeedbackEvent

__all__ = ["FeedbackMemo", "MAX_ROWS"]

#: A feedback table of at most this many rows is held in memory (about 0.5 KB a row
#: with its context JSON); a larger one is read per query (by ``feedback_entry``).
MAX_ROWS = 2_000


class FeedbackMemo:
    """Feedback counters and rows of one tier, answered per generation.

    ``generation``: the tier's ``meta.gen`` (read once per search scope);
    ``read_counts``: the counters; ``read_all(limit)``: every row, oldest first,
    at most ``limit``; ``read_for(ids, limit)``: the per-query read (the fallback).
    """

    def __init__(self, generation: Callable[[], int], read_counts: Callable[[], FeedbackCounts],
                 read_all: Callable[[int], list[FeedbackEvent]],
                 read_for: Callable[[Sequence[str], int], list[FeedbackEvent]]) -> None:
        self._generation = generation
        self._read_counts = read_counts
        self._read_all = read_all
        self._read_for = read_for
        self._lock = threading.Lock()
        self._counts: tuple[int, FeedbackCounts] | None = None
        # (gen, {entry id: its events, oldest first} or None: too many rows to hold)
        self._rows: tuple[int, dict[str, list[FeedbackEvent]] | None] | None = None

    def counts(self) -> FeedbackCounts:
        """The running counters at the current generation (a copy)."""
        gen = self._generation()
        memo = self._counts
        if memo is None or memo[0] != gen:
            memo = (gen, self._read_counts())
            with self._lock:
                self._counts = memo
        return FeedbackCounts(**memo[1])

    def events_for(self, entry_ids: Sequence[str], limit: int) -> list[FeedbackEvent]:
        """The newest ``limit`` feedback actions on these entries, oldest first (what
        ``feedback_events_for`` reads)."""
        if not entry_ids or limit <= 0:
            return []
        gen = self._generation()
        memo = self._rows
        if memo is None or memo[0] != gen:
            memo = (gen, self._load())
            with self._lock:
                self._rows = memo
        by_entry = memo[1]
        if by_entry is None:
            return self._read_for(entry_ids, limit)
        found = [e for i in dict.fromkeys(entry_ids) for e in by_entry.get(i, ())]
        found.sort(key=lambda e: e.seq)
        return found[-limit:]

    def _load(self) -> dict[str, list[FeedbackEvent]] | None:
        """Every row by entry, or None when the table holds more than MAX_ROWS."""
        if sum(self.counts().values()) > MAX_ROWS:  # the counters say too many: no read
            return None
        rows = self._read_all(MAX_ROWS + 1)  # rows without counters (an old file) still bound it
        if len(rows) > MAX_ROWS:
            return None
        out: dict[str, list[FeedbackEvent]] = defaultdict(list)
        for e in rows:
            out[e.entry_id].append(e)
        return dict(out)
