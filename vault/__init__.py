"""tiervault.vault: storage — entries, one SQLite file per tier, and their federation."""

from tiervault.vault.backend import TierBackend, open_tier
from tiervault.vault.entry import ENTRY_TYPES, FEEDBACK_ACTIONS, LINK_TYPES, ORIGINS, SEVERITIES, Entry
from tiervault.vault.filters import Filters
from tiervault.vault.manager import Candidates, LexicalQuery, Tier, VaultManager
from tiervault.vault.rows import Link, MemoryHit, TierHits
from tiervault.vault.store import TierStore

__all__ = [
    "Entry",
    "ENTRY_TYPES",
    "SEVERITIES",
    "ORIGINS",
    "LINK_TYPES",
    "FEEDBACK_ACTIONS",
    "Filters",
    "TierBackend",
    "open_tier",
    "TierStore",
    "TierHits",
    "Link",
    "MemoryHit",
    "VaultManager",
    "Tier",
    "Candidates",
    "LexicalQuery",
]
