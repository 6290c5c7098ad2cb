"""psycopg errors -> the tiervault error tree, registered with the contract's boundary.

Every driver call of the PostgreSQL backend runs inside
:func:`tiervault.vault.boundary.map_errors`; this module registers how a
``psycopg.Error`` translates there:

- the server cannot be reached, or the connection dropped mid-query:
  :class:`StorageError` -- transient: the manager leaves the tier out of this
  answer, lists it in ``problems`` and retries it on the next search;
- a write the server refuses (read-only role, read-only transaction):
  :class:`ReadOnlyTier`;
- the tier's tables are missing: :class:`TierUnavailable`;
- a value the server cannot store: :class:`ValidationError`;
- anything else: :class:`StorageError`.

Connecting is classified separately (:func:`classify_connect_error`): wrong
password, unknown role and missing database need a fix, not a retry
(``TierUnavailable``); an unreachable server is transient (``StorageError``).
Messages pass through :func:`url.scrub`, and connection failures are raised
``from None``: psycopg attaches the connection's parameters, password
included, to those exceptions.
"""

from __future__ import annotations

from tiervault.errors import ReadOnlyTier, StorageError, TierError, TierUnavailable, TierVaultError, ValidationError
from tiervault.vault.boundary import ErrorContext, register_errors
from tiervault.vault.postgres.url import PgAddress, scrub

__all__ = ["classify_connect_error", "translate_psycopg", "register"]

_AUTH = ("password authentication failed", "no password supplied", "role \"",
         "authentication failed", "no pg_hba.conf entry", "fe_sendauth")


def _first_line(text: str) -> str:
    text = text.removeprefix("connection failed: ")
    return " ".join(line.strip() for line in text.strip().splitlines() if line.strip())[:300]


def classify_connect_error(tier: str, address: PgAddress, exc: BaseException) -> TierError | StorageError:
    """A failed connect -> TierUnavailable (needs a fix) or StorageError (retry later)."""
    text = _first_line(scrub(str(exc)))
    where = address.display
    lower = text.lower()
    if "does not exist" in lower and "database" in lower:
        return TierUnavailable(tier, where, f"the database does not exist ({text}); create it "
                               "(createdb NAME) or fix the database name in the URL")
    if any(marker in lower for marker in _AUTH):
        return TierUnavailable(tier, where, f"the server refused the login ({text}); check the user "
                               "and the password (in the URL, its ${VAR}, PGPASSWORD or ~/.pgpass)")
    return StorageError(f"tier {tier!r} ({where}): cannot reach the PostgreSQL server ({text}); "
                        "check that it is running and reachable; the tier is retried on the next search")


def translate_psycopg(exc: BaseException, ctx: ErrorContext) -> TierVaultError:
    """The tiervault error for a psycopg error raised while doing ``ctx.action``."""
    import psycopg
    from psycopg import errors as pg

    text = _first_line(scrub(str(exc)))
    if isinstance(exc, (pg.ReadOnlySqlTransaction, pg.InsufficientPrivilege)):
        return ReadOnlyTier(ctx.tier, ctx.location,
                            f"the server refused to {ctx.action} ({text}); this role may only read: "
                            "write to another tier, or grant the role INSERT/UPDATE/DELETE on the "
                            "tier's schema")
    if isinstance(exc, (pg.UndefinedTable, pg.InvalidSchemaName)):
        return TierUnavailable(ctx.tier, ctx.location,
                               f"its tables are missing ({text}); open the tier once with a role "
                               "allowed to create them")
    # psycopg.DataError: refused client-side (a NUL byte in a text value), like SQLite's
    # unbindable values: the caller's bad input, not a storage failure.
    if isinstance(exc, (pg.CharacterNotInRepertoire, pg.UntranslatableCharacter,
                        pg.NumericValueOutOfRange, pg.DataException, psycopg.DataError)):
        return ValidationError("value", f"{ctx.action}: the server cannot store a value ({text})")
    if isinstance(exc, psycopg.OperationalError):
        return StorageError(f"tier {ctx.tier!r} ({ctx.location}): lost the PostgreSQL server while "
                            f"trying to {ctx.action} ({text}); the tier is retried on the next search")
    return StorageError(f"tier {ctx.tier!r} ({ctx.location}): could not {ctx.action}: {text}")


def register() -> None:
    """Register the psycopg translation with the boundary (idempotent)."""
    import psycopg

    register_errors(psycopg.Error, translate_psycopg)
