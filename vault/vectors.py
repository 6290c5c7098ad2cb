"""Vectors and embedding state of one tier — the SQL side of embeddings.

``entry_vectors`` holds one float32 vector per (entry, model) with the sha256
of the exact input that was embedded (``input_hash``), so unchanged entries are
never re-embedded and vectors of different models never mix.
``embedding_state`` tracks pending | ok | error per (entry, model) with the
last error and a retry count. Every write bumps the tier generation, and
vector rows carry it, so an in-memory index catches up incrementally.
"""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any, Iterable, Sequence

import numpy as np

from tiervault.errors import StorageError
from tiervault.vault.entry import Entry
from tiervault.vault.store import _SELECT, TierStore, rows_to_entries

__all__ = ["TierVectors", "EMBEDDING_STATES"]

EMBEDDING_STATES = ("pending", "ok", "error")


class TierVectors:
    """Vector storage of one :class:`TierStore` (shares its connection and lock)."""

    def __init__(self, store: TierStore) -> None:
        self.store = store

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        return self.store._query(sql, params)

    def input_hashes(self, model: str, ids: Sequence[str]) -> dict[str, str]:
        """{entry id: input hash} of the vectors stored for ``model``."""
        if not ids:
            return {}
        rows = self._query("SELECT entry_id, input_hash FROM entry_vectors WHERE model = ? AND "
                           "entry_id IN (SELECT value FROM json_each(?))", (model, json.dumps(list(ids))))
        return dict(rows)

    def put(self, model: str, rows: Iterable[tuple[str, str, np.ndarray]]) -> int:
        """Upsert (entry id, input hash, vector) rows and mark them ok; one transaction.

        Rows whose entry was deleted meanwhile are skipped (never resurrected).
        """
        now = time.time()
        rows = list(rows)
        if not rows:
            return 0
        try:
            with self.store._write() as gen:
                conn = self.store._conn
                assert conn is not None
                live = {r[0] for r in conn.execute(
                    "SELECT id FROM entries WHERE id IN (SELECT value FROM json_each(?))",
                    (json.dumps([r[0] for r in rows]),))}
                payload = [(eid, model, int(vec.shape[0]), h,
                            np.ascontiguousarray(vec, dtype=np.float32).tobytes(), now, gen)
                           for eid, h, vec in rows if eid in live]
                conn.executemany(
                    "INSERT INTO entry_vectors(entry_id, model, dim, input_hash, vector, updated_at, gen) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(entry_id, model) DO UPDATE SET "
                    "dim = excluded.dim, input_hash = excluded.input_hash, vector = excluded.vector, "
                    "updated_at = excluded.updated_at, gen = excluded.gen", payload)
                conn.executemany(
                    "INSERT INTO embedding_state(entry_id, model, state, input_hash, error, retries, updated_at) "
                    "VALUES (?, ?, 'ok', ?, '', 0, ?) ON CONFLICT(entry_id, model) DO UPDATE SET "
                    "state = 'ok', input_hash = excluded.input_hash, error = '', retries = 0, "
                    "updated_at = excluded.updated_at",
                    [(p[0], model, p[3], now) for p in payload])
        except sqlite3.Error as exc:
            raise StorageError(f"tier {self.store.name!r}: storing vectors failed: {exc}") from exc
        return len(payload)

    def mark(self, model: str, items: Iterable[tuple[str, str]], state: str, error: str = "") -> None:
        """Set (entry id, input hash) items to ``state``; an error increments ``retries``."""
        if state not in EMBEDDING_STATES:
            raise ValueError(f"state must be one of {EMBEDDING_STATES}")
        items = list(items)
        if not items:
            return
        now = time.time()
        bump = 1 if state == "error" else 0
        try:
            with self.store._write():
                self.store._conn.executemany(  # type: ignore[union-attr]
                    "INSERT INTO embedding_state(entry_id, model, state, input_hash, error, retries, updated_at) "
                    "SELECT ?, ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM entries WHERE id = ?) "
                    "ON CONFLICT(entry_id, model) DO UPDATE SET state = excluded.state, "
                    "input_hash = excluded.input_hash, error = excluded.error, "
                    "retries = embedding_state.retries + ?, updated_at = excluded.updated_at",
                    [(eid, model, state, h, error[:500], bump, now, eid, bump) for eid, h in items])
        except sqlite3.Error as exc:
            raise StorageError(f"tier {self.store.name!r}: recording embedding state failed: {exc}") from exc

    def backlog(self, model: str, limit: int, *, after: str = "") -> list[Entry]:
        """Entries (id > ``after``, id order) with no ok vector for ``model``.

        That is: never embedded, pending, or errored. Entries edited since their
        vector was made are found by comparing input hashes (see the pipeline).
        """
        rows = self._query(
            f"SELECT {_SELECT} FROM entries e LEFT JOIN embedding_state s "
            "ON s.entry_id = e.id AND s.model = ? WHERE e.id > ? AND (s.state IS NULL OR s.state != 'ok') "
            "ORDER BY e.id LIMIT ?", (model, after, limit))
        return rows_to_entries(rows, self.store.name)

    def page(self, limit: int, *, after: str = "") -> list[Entry]:
        """All entries in id order, a page at a time (for a full re-hash pass)."""
        rows = self._query(f"SELECT {_SELECT} FROM entries e WHERE e.id > ? ORDER BY e.id LIMIT ?",
                           (after, limit))
        return rows_to_entries(rows, self.store.name)

    def counts(self, model: str) -> dict[str, int]:
        """{pending, ok, error, missing} for ``model`` (missing: never tracked)."""
        out = dict.fromkeys((*EMBEDDING_STATES, "missing"), 0)
        out.update(dict(self._query(
            "SELECT state, count(*) FROM embedding_state WHERE model = ? GROUP BY state", (model,))))
        tracked = sum(out[s] for s in EMBEDDING_STATES)
        out["missing"] = max(self.store.count() - tracked, 0)
        return out

    def errors(self, model: str, ids: Sequence[str]) -> dict[str, tuple[str, str, int]]:
        """{id: (state, error, retries)} for the given ids."""
        rows = self._query("SELECT entry_id, state, error, retries FROM embedding_state WHERE model = ? "
                           "AND entry_id IN (SELECT value FROM json_each(?))", (model, json.dumps(list(ids))))
        return {r[0]: (r[1], r[2], r[3]) for r in rows}

    def load(self, model: str, since_gen: int = -1) -> tuple[int, list[str], np.ndarray, list[str]]:
        """(generation, ids, matrix (n, dim) float32, ids deleted since) written after ``since_gen``.

        One snapshot. ``since_gen = -1`` loads everything (and reports no deletions).
        """
        with self.store.snapshot() as conn:
            if conn is None:
                return 0, [], np.zeros((0, 0), dtype=np.float32), []
            gen = conn.execute("SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'gen'").fetchone()[0]
            # The (model, gen) index keeps a catch-up proportional to what changed.
            rows = conn.execute("SELECT entry_id, dim, vector FROM entry_vectors INDEXED BY "
                                "entry_vectors_gen WHERE model = ? AND gen > ? ORDER BY gen, entry_id",
                                (model, since_gen)).fetchall()
            dead = [r[0] for r in conn.execute(
                "SELECT entry_id FROM tombstones WHERE gen > ?", (since_gen,))] if since_gen >= 0 else []
        if not rows:
            return gen, [], np.zeros((0, 0), dtype=np.float32), dead
        dim = rows[0][1]
        if any(r[1] != dim for r in rows):
            raise StorageError(f"tier {self.store.name!r}: vectors of model {model!r} have mixed "
                               "dimensions; run `tiervault embed --rebuild`")
        matrix = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32).reshape(len(rows), dim)
        return gen, [r[0] for r in rows], matrix, dead
