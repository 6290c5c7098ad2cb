"""One PostgreSQL connection per tier store: opening, checks, migration, reconnects.

The store keeps a single connection guarded by its lock (like the SQLite
store), opened lazily and re-opened after the server went away, so a tier
whose server is down is *left out* of an answer (StorageError -> ``problems``)
and simply works again on a later call once the server is back.
"""

from __future__ import annotations

import logging
from typing import Any

from tiervault.errors import ReadOnlyTier, StorageError, TierUnavailable
from tiervault.vault.boundary import map_errors
from tiervault.vault.postgres.errors import classify_connect_error
from tiervault.vault.postgres.schema import SCHEMA_VERSION, installed_version, migrate_schema
from tiervault.vault.postgres.url import PgAddress, scrub

__all__ = ["open_connection", "CONNECT_TIMEOUT_S"]

log = logging.getLogger(__name__)

#: How long a connection attempt may take before the tier is reported unreachable.
CONNECT_TIMEOUT_S = 5


def _ensure_pgvector(conn: Any, tier: str, address: PgAddress) -> None:
    """pgvector must be installed in the database; install it when this role may."""
    import psycopg

    if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone():
        return
    try:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.errors.InsufficientPrivilege:
        db, role = conn.execute("SELECT current_database(), current_user").fetchone()
        raise TierUnavailable(
            tier, address.display,
            f"the pgvector extension is not installed in database {db!r} and role {role!r} may "
            f"not install it; ask a superuser to run: CREATE EXTENSION vector; in database {db!r}"
        ) from None
    except psycopg.Error as exc:
        raise TierUnavailable(
            tier, address.display,
            f"the server has no pgvector extension ({scrub(str(exc)).splitlines()[0]}); "
            "install pgvector on the server (e.g. the postgresql-NN-pgvector package)") from None


def open_connection(tier: str, address: PgAddress, *, read_only: bool) -> Any:
    """Connect, check pgvector and the schema version, migrate; returns the connection.

    Raises TierUnavailable for what needs a fix (login, database, pgvector,
    newer schema) and StorageError for an unreachable server (retry later).
    """
    import psycopg

    try:
        conn = psycopg.connect(address.dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S,
                               application_name="tiervault",
                               options=f"-c search_path={address.schema},public")
    except psycopg.Error as exc:
        raise classify_connect_error(tier, address, exc) from None
    try:
        with map_errors(tier, address.display, "open the tier"):
            current = installed_version(conn.cursor(), address.schema)
            if current > SCHEMA_VERSION:
                raise TierUnavailable(
                    tier, address.display,
                    f"was written by a newer tiervault (schema v{current}, this version reads up "
                    f"to v{SCHEMA_VERSION}); upgrade tiervault to open it")
            if current < SCHEMA_VERSION:
                if read_only:
                    if current == 0:
                        raise TierUnavailable(tier, address.display,
                                              "holds no tier yet; create it once without read-only")
                    raise TierUnavailable(tier, address.display,
                                          f"uses schema v{current} and needs a migration to "
                                          f"v{SCHEMA_VERSION}; open it once without read-only")
                _ensure_pgvector(conn, tier, address)
                migrate_schema(conn, address.schema)
            else:
                _ensure_pgvector(conn, tier, address)
    except ReadOnlyTier as exc:  # a role that may not create the schema or the tables
        conn.close()
        raise TierUnavailable(tier, address.display,
                              f"cannot be created or migrated by this role ({exc.reason}); open it "
                              "once with a role allowed to create tables in the schema, or set "
                              "read_only: true") from None
    except (TierUnavailable, StorageError):
        conn.close()
        raise
    return conn
