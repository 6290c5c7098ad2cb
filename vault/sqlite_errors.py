"""How ``sqlite3`` errors map to the tiervault error tree (see :mod:`boundary`).

Imported by the SQLite backend; registering is idempotent.
"""

from __future__ import annotations

import sqlite3

from tiervault.errors import ReadOnlyTier, StorageError, TierVaultError
from tiervault.vault.boundary import ErrorContext, register_errors
from tiervault.vault.connection import is_busy

__all__ = ["translate_sqlite"]


def translate_sqlite(exc: BaseException, ctx: ErrorContext) -> TierVaultError:
    """sqlite3.Error -> ReadOnlyTier (read-only file/filesystem) or StorageError."""
    text = str(exc)
    if "readonly" in text.lower() or "read-only" in text.lower():
        return ReadOnlyTier(ctx.tier, ctx.location,
                            f"{ctx.action} refused: the file is read-only ({text}); make the file "
                            "and its directory writable, or write to another tier")
    if is_busy(exc):
        return StorageError(f"{ctx.prefix()}: the file stayed locked by another process ({text}); "
                            "try again")
    return StorageError(f"{ctx.prefix()}: {text}")


register_errors(sqlite3.Error, translate_sqlite)
