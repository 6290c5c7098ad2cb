"""The real ``tiervault`` CLI with the PostgreSQL HNSW threshold lowered, for tests.

    python migrate_low_threshold.py MIN_ROWS <tiervault arguments...>

``HNSW_MIN_ROWS`` (10,000 in the product) is set to MIN_ROWS in this process only,
so a test crosses it with a few thousand small vectors instead of 10,000.
"""

from __future__ import annotations

import sys

import tiervault.vault.postgres.vectors as pg_vectors
from tiervault.cli import main

if __name__ == "__main__":
    pg_vectors.HNSW_MIN_ROWS = int(sys.argv[1])
    sys.exit(main(sys.argv[2:]))
