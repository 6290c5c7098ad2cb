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
import time
from typing import Iterable, Sequence

import numpy as np

from tiervault.errors import StorageError, ValidationError
from tiervault.vault.entry import Entry
from tiervault.vault.rows import EmbeddingStatus, VectorChanges, VectorRow
from tiervault.vault.sqlite_db import SqliteDb
from tiervault.vault.entry_rows import SELECT_ENTRY, rows_to_entries

__all__ = ["TierVectors", "EMBEDDING_STATES"]

EMBEDDING_STATES = ("pending", "ok", "error")


class TierVectors:
    """Vector storage of one tier file (on the tier's :class:`SqliteDb`)."""

    def __init__(self, db: SqliteDb) -> None:
        self.db = db
        self._query = db.query

    def input_hashes(self, model: str, ids: Sequence[str]) -> dict[str, str]:
        """{entry id: input hash} of the vectors stored for ``model``."""
        if not ids:
            return {}
        rows = self._query("SELECT entry_id, input_hash FROM entry_vectors WHERE model = ? AND "
                           "entry_id IN (SELECT value FROM json_each(?))", (model, json.dumps(list(ids))))
        return dict(rows)

    def put(self, model: str, rows: Iterable[VectorRow]) -> int:
        """Upsert (entry id, input hash, vector) rows and mark them ok; one transaction.

        Rows whose entry was deleted meanwhile are skipped (never resurrected).
        """
        now = time.time()
        rows = [VectorRow(*r) for r in rows]
        if not rows:
            return 0
        with self.db.write("put_vectors") as txn:
            conn, gen = txn.conn, txn.gen
            live = {r[0] for r in conn.execute(
                "SELECT id FROM entries WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps([r.entry_id for r in rows]),))}
            payload = [(r.entry_id, model, int(np.shape(r.vector)[0]), r.input_hash,
                        np.ascontiguousarray(r.vector, dtype=np.float32).tobytes(), now, gen)
                       for r in rows if r.entry_id in live]
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
        return len(payload)

    def mark(self, model: str, items: Iterable[tuple[str, str]], state: str, error: str = "") -> None:
        """Set (entry id, input hash) items to ``state``; an error increments ``retries``."""
        if state not in EMBEDDING_STATES:
            raise ValidationError("state", f"{state!r} is not one of {', '.join(EMBEDDING_STATES)}")
        items = list(items)
        if not items:
            return
        now = time.time()
        bump = 1 if state == "error" else 0
        with self.db.write("mark_embedding") as txn:
            txn.conn.executemany(
                "INSERT INTO embedding_state(entry_id, model, state, input_hash, error, retries, updated_at) "
                "SELECT ?, ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM entries WHERE id = ?) "
                "ON CONFLICT(entry_id, model) DO UPDATE SET state = excluded.state, "
                "input_hash = excluded.input_hash, error = excluded.error, "
                "retries = embedding_state.retries + ?, updated_at = excluded.updated_at",
                [(eid, model, state, h, error[:500], bump, now, eid, bump) for eid, h in items])

    def backlog(self, model: str, limit: int, *, after: str = "") -> list[Entry]:
        """Entries (id > ``after``, id order) with no ok vector for ``model``.

        That is: never embedded, pending, or errored. Entries edited since their
        vector was made are found by comparing input hashes (see the pipeline).
        """
        rows = self._query(
            f"SELECT {SELECT_ENTRY} FROM entries e LEFT JOIN embedding_state s "
            "ON s.entry_id = e.id AND s.model = ? WHERE e.id > ? AND (s.state IS NULL OR s.state != 'ok') "
            "ORDER BY e.id LIMIT ?", (model, after, limit))
        return rows_to_entries(rows, self.db.name)

    def page(self, limit: int, *, after: str = "") -> list[Entry]:
        """All entries in id order, a page at a time (for a full re-hash pass)."""
        rows = self._query(f"SELECT {SELECT_ENTRY} FROM entries e WHERE e.id > ? ORDER BY e.id LIMIT ?",
                           (after, limit))
        return rows_to_entries(rows, self.db.name)

    def counts(self, model: str, total: int) -> dict[str, int]:
        """{pending, ok, error, missing} for ``model`` (missing: never tracked)."""
        out = dict.fromkeys((*EMBEDDING_STATES, "missing"), 0)
        out.update(dict(self._query(
            "SELECT state, count(*) FROM embedding_state WHERE model = ? GROUP BY state", (model,))))
        tracked = sum(out[s] for s in EMBEDDING_STATES)
        out["missing"] = max(total - tracked, 0)
        return out

    def status(self, model: str, ids: Sequence[str]) -> dict[str, EmbeddingStatus]:
        """Embedding state of the given ids (ids never tracked are absent)."""
        rows = self._query("SELECT entry_id, state, error, retries FROM embedding_state WHERE model = ? "
                           "AND entry_id IN (SELECT value FROM json_each(?))", (model, json.dumps(list(ids))))
        return {r[0]: EmbeddingStatus(r[1], r[2], r[3]) for r in rows}

    def changes_since(self, model: str, since_gen: int = -1) -> VectorChanges:
        """Vectors written after ``since_gen`` and ids deleted since, in one snapshot.

        ``since_gen = -1`` loads everything (and reports no deletions).
        """
        with self.db.snapshot("read vectors") as conn:
            if conn is None:
                return VectorChanges(0, [], np.zeros((0, 0), dtype=np.float32), [])
            gen = conn.execute("SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'gen'").fetchone()[0]
            # The (model, gen) index keeps a catch-up proportional to what changed.
            rows = conn.execute("SELECT entry_id, dim, vector FROM entry_vectors INDEXED BY "
                                "entry_vectors_gen WHERE model = ? AND gen > ? ORDER BY gen, entry_id",
                                (model, since_gen)).fetchall()
            dead = [r[0] for r in conn.execute(
                "SELECT entry_id FROM tombstones WHERE gen > ?", (since_gen,))] if since_gen >= 0 else []
        if not rows:
            return VectorChanges(gen, [], np.zeros((0, 0), dtype=np.float32), dead)
        dim = rows[0][1]
        if any(r[1] != dim for r in rows):
            raise StorageError(f"tier {self.db.name!r}: vectors of model {model!r} have mixed "
                               "dimensions; run `tiervault embed --rebuild`")
        matrix = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32).reshape(len(rows), dim)
        return VectorChanges(gen, [r[0] for r in rows], matrix, dead)

    def vectors_for(self, model: str, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored vectors of ``model`` by entry id."""
        if not ids:
            return {}
        rows = self._query("SELECT entry_id, vector FROM entry_vectors WHERE model = ? AND "
                           "entry_id IN (SELECT value FROM json_each(?))", (model, json.dumps(list(ids))))
        return {eid: np.frombuffer(blob, dtype=np.float32).copy() for eid, blob in rows}

    def search(self, model: str, query: np.ndarray, k: int,
               allowed: set[str] | None) -> list[tuple[str, float]]:
        """Exact top ``k`` (id, cosine) among ``allowed`` ids (None: all), best first.

        Reads every vector of the model: the reference path. Searches at scale go
        through the in-memory index of :mod:`tiervault.embeddings.recall`.
        """
        q = np.asarray(query, dtype=np.float32).ravel()
        rows = self._query("SELECT entry_id, dim, vector FROM entry_vectors WHERE model = ? "
                           "ORDER BY rowid", (model,))
        rows = [r for r in rows if allowed is None or r[0] in allowed]
        if not rows or k <= 0:
            return []
        if any(r[1] != q.size for r in rows):
            raise ValidationError("query", f"has dimension {q.size} but the vectors of {model!r} "
                                  f"in tier {self.db.name!r} have {rows[0][1]}")
        matrix = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32).reshape(len(rows), q.size)
        scores = matrix @ q
        order = np.lexsort((np.arange(len(rows)), -scores))[:k]
        return [(rows[i][0], float(scores[i])) for i in order]
