"""The PostgreSQL tier backend (extra ``[postgres]``: psycopg 3, pgvector).

Imported lazily by :func:`tiervault.vault.backend.open_tier`, only when a tier
is configured with ``url: postgresql://...``. Design and configuration:
docs/postgres.md (lexical search through the same BM25 mirror as SQLite,
pgvector for vectors, one schema per tier).
"""

from __future__ import annotations

from tiervault.vault.postgres.schema import SCHEMA_VERSION
from tiervault.vault.postgres.tier import PgTierStore, open_backend
from tiervault.vault.postgres.url import DEFAULT_SCHEMA, PgAddress, parse_address
from tiervault.vault.postgres.vectors import HNSW_MIN_ROWS, PgVectors

__all__ = ["PgTierStore", "PgVectors", "PgAddress", "open_backend", "parse_address",
           "DEFAULT_SCHEMA", "SCHEMA_VERSION", "HNSW_MIN_ROWS"]
