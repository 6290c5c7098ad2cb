"""Vectors of a PostgreSQL tier: pgvector storage, provenance, HNSW and exact search.

Same operations as the SQLite tier's :class:`tiervault.vault.vectors.TierVectors`
(provenance per row: model, dimension, sha256 of the embedded input; an
``embedding_state`` per entry and model; generations for incremental loads),
plus :meth:`PgVectors.search`, answered by the server:

- below :data:`HNSW_MIN_ROWS` vectors of a (model, dim), an exact scan;
- from there on, an HNSW index made for that (model, dim) only: a partial
  expression index on ``vector::vector(dim)`` -- or ``halfvec(dim)`` beyond
  2,000 dimensions, pgvector's limit for indexing ``vector``;
- the ANN returns a pool (``max(5k, 50)``, ``ef_search`` = 2 x pool, 100..1000) that is
  re-scored exactly with the full-precision stored vectors before the top k is taken;
- filters are joined inside the SQL, before the limit (with pgvector's
  iterative index scan, so a selective filter still yields k rows).
"""

from __future__ import annotations

import hashlib
import time
from typing import Any, Iterable, Sequence

import numpy as np

from tiervault.errors import StorageError, ValidationError
from tiervault.vault.entry import Entry
from tiervault.vault.filters import Filters
from tiervault.vault.postgres.schema import BUILD_MEMORY
from tiervault.vault.postgres.store import pg_filter_sql
from tiervault.vault.entry_rows import SELECT_ENTRY, row_to_entry

__all__ = ["PgVectors", "VectorHit", "HNSW_MIN_ROWS", "HALFVEC_ABOVE_DIM", "EMBEDDING_STATES",
           "index_name", "vector_literal"]

EMBEDDING_STATES = ("pending", "ok", "error")
#: Below this many vectors of one (model, dim) an exact scan is both exact and fast enough.
HNSW_MIN_ROWS = 10_000
#: pgvector indexes ``vector`` up to 2,000 dimensions; beyond, the index is on ``halfvec``.
HALFVEC_ABOVE_DIM = 2_000
#: HNSW graph parameters (pgvector's defaults are m 16, ef_construction 64).
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 128
#: The ANN pool re-scored exactly: max(POOL_FACTOR * k, POOL_MIN) candidates, searched with
#: ``hnsw.ef_search`` = min(max(2 * pool, EF_SEARCH_MIN), 1000) -- 50 / 100 at k 10.
#: Chosen on REAL embeddings: 100K SciFact sentence units (all-MiniLM-L6-v2-int8, 384-d,
#: m 16, ef_construction 128), TUNE half = odd SciFact query ids (547), raw HNSW top-10
#: recall 0.978 / 0.992 / 0.998 / 0.999 at ef_search 40 / 100 / 200 / 400 (p50 1.5 / 2.9 /
#: 8.3 / 11.2 ms; bench/results/postgres-hybrid-real-100k.json): the smallest ef_search
#: >= 0.99. The even ids report it (bench/pg_hybrid_real.py, ...-100k-ef100.json: recall@10
#: 0.992, p50 6.2 ms vs 51.9 ms at 400 / 800). The former 400 / 800 was
#: chosen on near-random hash vectors (bench/corpus.py seed 7, queries 0-99: ef 200 / pool
#: 100 -> 0.65, ef 800 / pool 400 -> 0.80); on those this setting recalls less.
POOL_FACTOR = 5
POOL_MIN = 50
EF_SEARCH_MIN = 100
#: Seconds a "no HNSW index for (model, dim)" answer is trusted before the catalog is asked
#: again (it was asked on every exact search: one more round trip and a catalog query).
INDEX_RECHECK_S = 30.0
#: The exact path ranks this many nearest vectors (x k, at least the minimum) before it
#: joins them to the entries for the filters (see PgVectors._exact); not tuned on data:
#: any value gives the same answer, a small one only falls back to the full scan sooner.
EXACT_CANDIDATES_FACTOR = 10
EXACT_CANDIDATES_MIN = 100


_VEC_STAGE = ("CREATE TEMP TABLE IF NOT EXISTS tv_vec_stage (entry_id text, dim integer, "
              "input_hash text, vector vector) ON COMMIT DELETE ROWS")


def _register_vector(conn: Any) -> None:
    """Teach this connection pgvector's binary format (once per connection)."""
    if conn.adapters.types.get("vector") is not None:
        return
    from pgvector.psycopg.vector import register_vector_info
    from psycopg.types import TypeInfo

    register_vector_info(conn, TypeInfo.fetch(conn, "vector"))


def vector_literal(vec: np.ndarray) -> str:
    """pgvector's text form of ``vec``, ``[x1,x2,...]``, of its float32 values (``repr``:
    each value reads back as the same float32)."""
    return "[" + ",".join(repr(float(x)) for x in np.asarray(vec, dtype=np.float32)) + "]"


def index_name(model: str, dim: int) -> str:
    """The name of the partial HNSW index of one (model, dim): ``vec_hnsw_`` and 12 hex
    digits of SHA-1 over both (a model name may hold any character)."""
    return "vec_hnsw_" + hashlib.sha1(f"{model}\0{dim}".encode()).hexdigest()[:12]


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


class VectorHit(tuple):
    """(entry id, cosine similarity)."""

    __slots__ = ()

    def __new__(cls, entry_id: str, score: float) -> "VectorHit":
        return super().__new__(cls, (entry_id, score))

    @property
    def id(self) -> str:
        return self[0]

    @property
    def score(self) -> float:
        return self[1]


class PgVectors:
    """Vector storage of one PostgreSQL tier (shares its connection and lock)."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        return self.store.query(sql, params, "read vectors")

    def input_hashes(self, model: str, ids: Sequence[str]) -> dict[str, str]:
        if not ids:
            return {}
        return dict(self._query("SELECT entry_id, input_hash FROM entry_vectors WHERE model = %s "
                                "AND entry_id = ANY(%s)", (model, list(ids))))

    def put(self, model: str, rows: Iterable[tuple[str, str, np.ndarray]]) -> int:
        """Upsert (entry id, input hash, vector) rows, mark them ok; one transaction.

        The vectors go in by binary COPY into a staging table, then one INSERT ...
        ON CONFLICT for the vectors and one for their state. Rows whose entry was
        deleted meanwhile are skipped (never resurrected).
        """
        latest = {r[0]: r for r in rows}  # one row per entry: ON CONFLICT may touch a row once
        if not latest:
            return 0
        now = time.time()
        with self.store.write("store vectors") as (conn, gen):
            _register_vector(conn)
            conn.execute(_VEC_STAGE)
            with conn.cursor().copy("COPY tv_vec_stage (entry_id, dim, input_hash, vector) "
                                    "FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types(["text", "int4", "text", "vector"])
                for eid, h, vec in latest.values():
                    v = np.asarray(vec, dtype=np.float32).ravel()
                    copy.write_row((eid, int(v.shape[0]), h, v))
            written = conn.execute(
                "INSERT INTO entry_vectors (entry_id, model, dim, input_hash, vector, updated_at, gen) "
                "SELECT s.entry_id, %s, s.dim, s.input_hash, s.vector, %s, %s FROM tv_vec_stage s "
                "JOIN entries e ON e.id = s.entry_id ON CONFLICT (entry_id, model) DO UPDATE "
                "SET dim = excluded.dim, input_hash = excluded.input_hash, vector = excluded.vector, "
                "updated_at = excluded.updated_at, gen = excluded.gen "
                "RETURNING dim", (model, now, gen)).fetchall()
            conn.execute(
                "INSERT INTO embedding_state (entry_id, model, state, input_hash, error, retries, "
                "updated_at) SELECT s.entry_id, %s, 'ok', s.input_hash, '', 0, %s FROM tv_vec_stage s "
                "JOIN entries e ON e.id = s.entry_id ON CONFLICT (entry_id, model) "
                "DO UPDATE SET state = 'ok', input_hash = excluded.input_hash, error = '', "
                "retries = 0, updated_at = excluded.updated_at", (model, now))
        if not self.store.vector_index_deferred:  # a bulk copy builds them once at its end
            for dim in {r[0] for r in written}:
                self.ensure_index(model, dim)
        return len(written)

    def ensure_indexes(self) -> list[str]:
        """:meth:`ensure_index` for every (model, dim) stored; the names of the indexes built.

        Called at the end of a bulk copy: one HNSW build over all the rows costs a
        fraction of maintaining the graph row by row while they are inserted (a
        100K x 384 copy into an empty tier: see docs/postgres.md, "Moving a tier").
        """
        built = []
        for model, dim in self._query("SELECT DISTINCT model, dim FROM entry_vectors ORDER BY 1, 2"):
            if self.ensure_index(model, dim):
                built.append(index_name(model, dim))
        return built

    def ensure_index(self, model: str, dim: int) -> bool:
        """Create the HNSW index of (model, dim) once it holds HNSW_MIN_ROWS vectors."""
        name = index_name(model, dim)
        n = self._query("SELECT count(*) FROM entry_vectors WHERE model = %s AND dim = %s", (model, dim))[0][0]
        if n < HNSW_MIN_ROWS or self.has_index(name):
            return False
        kind = "halfvec" if dim > HALFVEC_ABOVE_DIM else "vector"
        with self.store.mapped("create a vector index") as conn, conn.transaction():
            # The graph is built in memory when it fits (far faster than spilling to disk).
            conn.execute(f"SET LOCAL maintenance_work_mem = '{BUILD_MEMORY}'")
            conn.execute(f"CREATE INDEX IF NOT EXISTS {name} ON entry_vectors USING hnsw "
                         f"((vector::{kind}({int(dim)})) {kind}_cosine_ops) "
                         f"WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION}) "
                         f"WHERE model = {_quote(model)} AND dim = {int(dim)}")
        self.store.vector_indexes.add(name)
        self.store.vector_index_misses.pop(name, None)
        return True

    def has_index(self, name: str) -> bool:
        """Whether the HNSW index ``name`` exists. A positive answer is remembered by the
        store; a negative one for :data:`INDEX_RECHECK_S` (an index another process builds is
        used from then on; until then the search is exact, so only slower, never wrong)."""
        known = self.store.vector_indexes
        if name in known:
            return True
        absent = self.store.vector_index_misses
        now = time.monotonic()
        if now - absent.get(name, -INDEX_RECHECK_S) < INDEX_RECHECK_S:
            return False
        if self._query("SELECT 1 FROM pg_indexes WHERE schemaname = %s AND indexname = %s",
                       (self.store.address.schema, name)):
            known.add(name)
            absent.pop(name, None)
            return True
        absent[name] = now
        return False

    def search(self, model: str, query: np.ndarray, k: int, *, filters: Filters | None = None,
               pool: int | None = None) -> list[VectorHit]:
        """Top ``k`` entries by cosine similarity to ``query`` among those passing ``filters``."""
        q = np.asarray(query, dtype=np.float32).ravel()
        dim = int(q.shape[0])
        if k <= 0 or dim == 0:
            return []
        if not np.all(np.isfinite(q)):
            raise ValidationError("query vector", "contains NaN or infinity")
        where, params = pg_filter_sql(filters or Filters())
        lit = vector_literal(q)
        name = index_name(model, dim)
        # Literals, not parameters: the planner must see the partial index's predicate.
        pred = f"v.model = {_quote(model)} AND v.dim = {dim}"
        if self.has_index(name):
            kind = "halfvec" if dim > HALFVEC_ABOVE_DIM else "vector"
            size = pool or max(POOL_FACTOR * k, POOL_MIN)
            sql = (f"SELECT id, 1 - (vector <=> %s::vector) AS s FROM ("
                   f"SELECT e.id, v.vector FROM entry_vectors v JOIN entries e ON e.id = v.entry_id "
                   f"WHERE {pred}{where} ORDER BY v.vector::{kind}({dim}) <=> %s::{kind}({dim}) "
                   f"LIMIT %s) pool ORDER BY s DESC, id LIMIT %s")
            args = [lit, *params, lit, size, k]
            with self.store.mapped("search vectors") as conn:
                with conn.transaction():
                    conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
                    conn.execute(f"SET LOCAL hnsw.ef_search = {min(max(2 * size, EF_SEARCH_MIN), 1000)}")
                    rows = conn.execute(sql, args).fetchall()
        else:
            return self._exact(pred, where, params, lit, k)
        return [VectorHit(r[0], float(r[1])) for r in rows]

    def _exact(self, pred: str, where: str, params: list[Any], lit: str, k: int) -> list[VectorHit]:
        """Exact top ``k`` (below the HNSW threshold), ties by id, filters before the limit.

        The nearest ``max(EXACT_CANDIDATES_FACTOR * k, EXACT_CANDIDATES_MIN)`` vectors are
        ranked first, from ``entry_vectors`` alone, and only they are joined to ``entries``
        for the filters: joining every vector to the entries table first cost a hash or
        index join over the whole tier (5K vectors in a 100K tier: 5.7 ms vs 0.9 ms for the
        plain ``ORDER BY <=>``). When fewer than ``k`` of those candidates pass the filters,
        the whole filtered scan runs instead, so the answer is the same either way (the
        first ``k`` passing rows in (distance, id) order). The distance is computed once per
        row (ordered by its alias).
        """
        pool = max(EXACT_CANDIDATES_FACTOR * k, EXACT_CANDIDATES_MIN)
        rows = self._query(
            f"SELECT e.id, c.d FROM (SELECT v.entry_id, v.vector <=> %s::vector AS d "
            f"FROM entry_vectors v WHERE {pred} ORDER BY d, v.entry_id LIMIT %s) c "
            f"JOIN entries e ON e.id = c.entry_id WHERE true{where} ORDER BY c.d, e.id LIMIT %s",
            [lit, pool, *params, k])
        if len(rows) < k:
            rows = self._query(
                f"SELECT e.id, v.vector <=> %s::vector AS d FROM entry_vectors v "
                f"JOIN entries e ON e.id = v.entry_id WHERE {pred}{where} "
                f"ORDER BY d, e.id LIMIT %s", [lit, *params, k])
        return [VectorHit(r[0], 1.0 - float(r[1])) for r in rows]

    def mark(self, model: str, items: Iterable[tuple[str, str]], state: str, error: str = "") -> None:
        if state not in EMBEDDING_STATES:
            raise ValidationError("state", f"{state!r} is not one of {', '.join(EMBEDDING_STATES)}")
        items = list(items)
        if not items:
            return
        now = time.time()
        bump = 1 if state == "error" else 0
        with self.store.write("record embedding state") as (conn, _gen):
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO embedding_state (entry_id, model, state, input_hash, error, retries, updated_at) "
                    "SELECT %s, %s, %s, %s, %s, %s, %s WHERE EXISTS (SELECT 1 FROM entries WHERE id = %s) "
                    "ON CONFLICT (entry_id, model) DO UPDATE SET state = excluded.state, "
                    "input_hash = excluded.input_hash, error = excluded.error, "
                    "retries = embedding_state.retries + %s, updated_at = excluded.updated_at",
                    [(eid, model, state, h, error[:500], bump, now, eid, bump) for eid, h in items])

    def backlog(self, model: str, limit: int, *, after: str = "") -> list[Entry]:
        rows = self._query(
            f"SELECT {SELECT_ENTRY} FROM entries e LEFT JOIN embedding_state s ON s.entry_id = e.id "
            "AND s.model = %s WHERE e.id > %s AND (s.state IS NULL OR s.state <> 'ok') "
            "ORDER BY e.id COLLATE \"C\" LIMIT %s", (model, after, limit))
        return [row_to_entry(r) for r in rows]

    def page(self, limit: int, *, after: str = "") -> list[Entry]:
        rows = self._query(f"SELECT {SELECT_ENTRY} FROM entries e WHERE e.id > %s "
                           "ORDER BY e.id COLLATE \"C\" LIMIT %s", (after, limit))
        return [row_to_entry(r) for r in rows]

    def counts(self, model: str) -> dict[str, int]:
        out = dict.fromkeys((*EMBEDDING_STATES, "missing"), 0)
        out.update(dict(self._query(
            "SELECT state, count(*) FROM embedding_state WHERE model = %s GROUP BY state", (model,))))
        tracked = sum(out[s] for s in EMBEDDING_STATES)
        out["missing"] = max(self.store.count() - tracked, 0)
        return out

    def errors(self, model: str, ids: Sequence[str]) -> dict[str, tuple[str, str, int]]:
        rows = self._query("SELECT entry_id, state, error, retries FROM embedding_state "
                           "WHERE model = %s AND entry_id = ANY(%s)", (model, list(ids)))
        return {r[0]: (r[1], r[2], r[3]) for r in rows}

    def load(self, model: str, since_gen: int = -1) -> tuple[int, list[str], np.ndarray, list[str]]:
        """(generation, ids, matrix (n, dim) float32, ids deleted since) written after ``since_gen``."""
        with self.store.snapshot() as conn:
            gen = conn.execute("SELECT value::bigint FROM meta WHERE key = 'gen'").fetchone()[0]
            rows = conn.execute("SELECT entry_id, dim, vector::text FROM entry_vectors WHERE model = %s "
                                "AND gen > %s ORDER BY gen, entry_id", (model, since_gen)).fetchall()
            dead = [r[0] for r in conn.execute("SELECT entry_id FROM tombstones WHERE gen > %s",
                                               (since_gen,))] if since_gen >= 0 else []
        if not rows:
            return gen, [], np.zeros((0, 0), dtype=np.float32), dead
        dim = rows[0][1]
        if any(r[1] != dim for r in rows):
            raise StorageError(f"tier {self.store.name!r}: vectors of model {model!r} have mixed "
                               "dimensions; run `tiervault embed --rebuild`")
        matrix = np.array([np.fromstring(r[2][1:-1], sep=",", dtype=np.float32) for r in rows],
                          dtype=np.float32).reshape(len(rows), dim)
        return gen, [r[0] for r in rows], matrix, dead


class PgVectorMethods:
    """Contract methods for vectors and embedding state; mixed into the PostgreSQL tier."""

    query: Any

    @property
    def vectors(self) -> PgVectors:
        return PgVectors(self)

    def put_vectors(self, model: str, rows: Iterable[Any]) -> int:
        return self.vectors.put(model, ((r[0], r[1], r[2]) for r in rows))

    def vectors_for(self, model: str, ids: Sequence[str]) -> dict[str, np.ndarray]:
        if not ids:
            return {}
        rows = self.query("SELECT entry_id, vector::text FROM entry_vectors WHERE model = %s "
                           "AND entry_id = ANY(%s)", (model, list(ids)))
        return {r[0]: np.fromstring(r[1][1:-1], sep=",", dtype=np.float32) for r in rows}

    def vector_input_hashes(self, model: str, ids: Sequence[str]) -> dict[str, str]:
        return self.vectors.input_hashes(model, ids)

    def vector_changes_since(self, model: str, since: int) -> Any:
        from tiervault.vault.rows import VectorChanges

        gen, ids, matrix, dead = self.vectors.load(model, since)
        return VectorChanges(gen, ids, matrix, dead)

    def vector_search(self, model: str, query: np.ndarray, k: int,
                      filters: Filters | None = None) -> list[Any]:
        from tiervault.vault.rows import VectorHit as Hit

        return [Hit(h.id, h.score) for h in self.vectors.search(model, query, k, filters=filters)]

    def mark_embedding(self, model: str, items: Iterable[tuple[str, str]], state: str,
                       error: str = "") -> None:
        self.vectors.mark(model, items, state, error)

    def embedding_backlog(self, model: str, limit: int, *, after: str = "") -> list[Entry]:
        return self.vectors.backlog(model, limit, after=after)

    def embedding_counts(self, model: str) -> dict[str, int]:
        return self.vectors.counts(model)

    def embedding_status(self, model: str, ids: Sequence[str]) -> dict[str, Any]:
        from tiervault.vault.rows import EmbeddingStatus

        return {k: EmbeddingStatus(*v) for k, v in self.vectors.errors(model, ids).items()}
