"""The one exception tree of tiervault.

Every error a user can see is a :class:`TierVaultError`; the CLI and the MCP
server turn it into a message (never a traceback). Lower-level errors
(``sqlite3``, ``httpx``, ``yaml``) are wrapped at the boundary with
``raise ... from exc`` so the cause stays inspectable.

    TierVaultError
    ├── ConfigError              agent.yaml / environment is wrong (file, line, key)
    ├── ValidationError          an entry, filter or argument has a bad value (field)
    │   └── QueryError           a search request is malformed
    ├── EntryNotFound            an id that no tier holds
    ├── TierError                a tier file cannot be used
    │   ├── TierUnavailable      missing, corrupt, not a tiervault database, newer schema
    │   └── ReadOnlyTier         a write was sent to a read-only source
    ├── StorageError             SQLite failed underneath an operation
    │   └── TermWorkerError      a PostgreSQL bulk load's stemming helper failed
    │                            (vault/postgres/term_workers.py; caught by the writer)
    └── EmbeddingError           an embedding provider failed
        ├── EmbeddingAuthError   401/403: the provider refused the key
        └── EmbeddingResponseError  malformed body, wrong dimension
"""

from __future__ import annotations

__all__ = [
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
    "EmbeddingAuthError",
    "EmbeddingResponseError",
]


class TierVaultError(Exception):
    """Base of every error tiervault raises on purpose."""


class ConfigError(TierVaultError):
    """The configuration (agent.yaml, environment, CLI flags) is invalid.

    The message names the file, the line, the key and what is allowed.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        key: str | None = None,
    ) -> None:
        self.file = file
        self.line = line
        self.key = key
        where = ""
        if file:
            where = f"{file}:{line}: " if line else f"{file}: "
        super().__init__(f"{where}{message}")


class ValidationError(TierVaultError, ValueError):
    """A value given by the caller is invalid; ``field`` names it."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


class QueryError(ValidationError):
    """A search request is malformed (bad filter, bad mode, bad limit)."""


class EntryNotFound(TierVaultError, KeyError):
    """No connected tier holds an entry with this id."""

    def __init__(self, entry_id: str) -> None:
        self.entry_id = entry_id
        super().__init__(entry_id)

    def __str__(self) -> str:
        return f"no entry with id {self.entry_id!r} in any connected tier"


class TierError(TierVaultError):
    """A tier cannot be used; ``tier`` and ``path`` name it."""

    def __init__(self, tier: str, path: str, message: str) -> None:
        self.tier = tier
        self.path = path
        prefix = f"tier {tier!r} ({path}): "
        # Re-raising a recorded problem must not repeat the prefix.
        self.reason = message[len(prefix):] if message.startswith(prefix) else message
        super().__init__(prefix + self.reason)


class TierUnavailable(TierError):
    """A tier file is missing, corrupt, not a tiervault database or too new."""


class ReadOnlyTier(TierError):
    """A write was sent to a tier opened read-only."""


class StorageError(TierVaultError):
    """SQLite failed underneath an operation (disk full, I/O error, ...)."""


class EmbeddingError(TierVaultError):
    """An embedding provider failed (transport, HTTP status, exhausted retries)."""


class EmbeddingAuthError(EmbeddingError):
    """The provider refused the API key (401/403). The key is never printed."""


class EmbeddingResponseError(EmbeddingError):
    """The provider answered with a malformed body or a wrong dimension."""
