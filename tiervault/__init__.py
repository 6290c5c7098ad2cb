"""tiervault: a tiered knowledge vault for AI agents.

Entries live in SQLite tiers (agent, project, team); :class:`VaultManager`
searches them all with federated BM25 over FTS5, and the Brain
(:mod:`tiervault.brain`) rescores candidates with seven signals behind one call,
``search_intelligent``. See README.md for the CLI and the Python API.
"""

from tiervault.brain import Brain
from tiervault.config import Settings, load_settings
from tiervault.errors import (
    ConfigError,
    EmbeddingError,
    EntryNotFound,
    QueryError,
    ReadOnlyTier,
    StorageError,
    TierError,
    TierUnavailable,
    TierVaultError,
    ValidationError,
)
from tiervault.vault import Entry, Filters, TierStore, VaultManager

__version__ = "0.1.0"

__all__ = [
    "Brain",
    "Entry",
    "Filters",
    "TierStore",
    "VaultManager",
    "Settings",
    "load_settings",
    "TierVaultError",
    "ConfigError",
    "ValidationError",
    "QueryError",
    "EntryNotFound",
    "TierError",
    "TierUnavailable",
    "ReadOnlyTier",
    "StorageError",
    "EmbeddingError",
]
