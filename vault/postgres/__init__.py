"""The PostgreSQL tier backend (extra ``[postgres]``: psycopg 3, psycopg-pool, pgvector).

Imported lazily, only when a tier is configured with ``url: postgresql://...``.
See docs/postgres.md for the design (lexical search through the same BM25
mirror as SQLite, pgvector for vectors) and how to configure a team tier.
"""

from __future__ import annotations

from tiervault.vault.postgres.schema import SCHEMA_VERSION
from tiervault.vault.postgres.store import PgTierStore
from tiervault.vault.postgres.url import DEFAULT_SCHEMA, PgAddress, parse_address
from tiervault.vault.postgres.vectors import HNSW_MIN_ROWS, PgVectors, VectorHit

__all__ = ["PgTierStore", "PgVectors", "VectorHit", "PgAddress", "parse_address",
           "DEFAULT_SCHEMA", "SCHEMA_VERSION", "HNSW_MIN_ROWS"]
