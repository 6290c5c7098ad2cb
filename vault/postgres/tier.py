"""The PostgreSQL tier backend: :class:`PgTierStore` = entries + browsing + lexical + vectors.

Implements :class:`tiervault.vault.backend.TierBackend`; :func:`open_backend`
is the factory :func:`tiervault.vault.backend.open_tier` calls for a tier
configured with ``url: postgresql://...``.
"""

from __future__ import annotations

from typing import Any

from tiervault.vault.entry import Entry
from tiervault.vault.postgres.browse import PgBrowse
from tiervault.vault.postgres.search import PgLexical
from tiervault.vault.postgres.store import PgEntryStore
from tiervault.vault.postgres.vectors import PgVectorMethods
from tiervault.vault.rows import TierStats
from tiervault.vault.entry_rows import SELECT_ENTRY, row_to_entry

__all__ = ["PgTierStore", "open_backend"]


class PgTierStore(PgBrowse, PgLexical, PgVectorMethods, PgEntryStore):
    """A tier in one schema of a PostgreSQL database (see the package docstring)."""

    @property
    def location(self) -> str:
        """postgresql://user@host:port/db (schema s): never the password."""
        return self.path

    def entries_after(self, after: str, limit: int) -> list[Entry]:
        """Up to ``limit`` entries with id > ``after`` in id (byte) order."""
        rows = self.query(f"SELECT {SELECT_ENTRY} FROM entries e WHERE e.id COLLATE \"C\" > %s "
                           "ORDER BY e.id COLLATE \"C\" LIMIT %s", (after, limit))
        return [row_to_entry(r) for r in rows]

    def stats(self) -> TierStats:
        with self.snapshot() as conn:
            entries, links, memories = conn.execute(
                "SELECT (SELECT count(*) FROM entries), (SELECT count(*) FROM links), "
                "(SELECT count(*) FROM memories)").fetchone()
        return TierStats(self.location, True, entries, links, memories, self.file_size())


def open_backend(config: Any) -> PgTierStore:
    """The factory for ``open_tier``: a TierConfig with ``url: postgresql://...``."""
    return PgTierStore(config.url.reveal(), name=config.name, schema=getattr(config, "schema", None),
                       read_only=config.read_only)


