"""tiervault: a tiered knowledge vault for AI agents.

Entries live in SQLite tiers (agent, project, team); :class:`VaultManager`
searches them all with federated BM25 over FTS5, and the Brain
(:mod:`tiervault.brain`) rescores candidates with seven signals behind one call,
``search_intelligent``. See README.md for the CLI and the Python API.
"""

import typing

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

if typing.TYPE_CHECKING:
    from tiervault.brain import Brain
    from tiervault.config import Settings, load_settings
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

# The classes below are imported on first use (PEP 562), not with the package: a command
# that needs no search (``tiervault status``, ``--help``, a server's restart on huge pages
# in tiervault/huge_pages.py) would otherwise import the Brain, NumPy and scikit-learn
# first (~0.4 s a process: ``python -X importtime -c "import tiervault.cli"``).
_LAZY = {
    "Brain": "tiervault.brain",
    "Settings": "tiervault.config",
    "load_settings": "tiervault.config",
    "Entry": "tiervault.vault",
    "Filters": "tiervault.vault",
    "TierStore": "tiervault.vault",
    "VaultManager": "tiervault.vault",
}


def __getattr__(name: str) -> typing.Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tiervault' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module), name)
    globals()[name] = value  # later look-ups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
