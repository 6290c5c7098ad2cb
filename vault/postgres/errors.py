"""psycopg errors -> the tiervault error tree, at the boundary of the PostgreSQL backend.

One context manager, :func:`mapped`, wraps every driver call. What a caller sees:

- the server cannot be reached (refused, timed out, connection lost mid-query):
  :class:`StorageError` -- transient; the manager leaves the tier out of this
  answer, lists it in ``problems`` and retries it on the next search;
- wrong password, unknown role, missing database, missing pgvector, a schema
  written by a newer tiervault: :class:`TierUnavailable` naming the tier and
  what to do (they do not heal by retrying);
- a write refused by the server (read-only role or transaction):
  :class:`ReadOnlyTier`;
- anything else from the driver: :class:`StorageError`.

Messages are scrubbed of the password (:func:`url.scrub`). Connection errors
are raised ``from None``: psycopg attaches the connection's parameters,
password included, to those exceptions, so they must not travel as a cause.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from tiervault.errors import ReadOnlyTier, StorageError, TierError, TierUnavailable, ValidationError
from tiervault.vault.postgres.url import PgAddress, scrub

__all__ = ["mapped", "classify_connect_error"]

_AUTH = ("password authentication failed", "no password supplied", "role \"",
         "authentication failed", "no pg_hba.conf entry", "fe_sendauth")


def classify_connect_error(tier: str, address: PgAddress, exc: BaseException) -> TierError | StorageError:
    """A failed connect -> TierUnavailable (needs a fix) or StorageError (retry later)."""
    text = scrub(str(exc), address)
    where = address.display
    lower = text.lower()
    if "does not exist" in lower and "database" in lower:
        return TierUnavailable(tier, where, f"the database does not exist ({_first_line(text)}); "
                               "create it (createdb NAME) or fix the database name in the URL")
    if any(marker in lower for marker in _AUTH):
        return TierUnavailable(tier, where, f"the server refused the login ({_first_line(text)}); "
                               "check the user and the password (in the URL, its ${VAR}, "
                               "PGPASSWORD or ~/.pgpass)")
    return StorageError(f"tier {tier!r} ({where}): cannot reach the PostgreSQL server "
                        f"({_first_line(text)}); check that it is running and reachable; "
                        "the tier is retried on the next search")


def _first_line(text: str) -> str:
    text = text.removeprefix("connection failed: ")
    return " ".join(line.strip() for line in text.strip().splitlines() if line.strip())[:300]


@contextmanager
def mapped(tier: str, address: PgAddress, action: str, *, writing: bool = False) -> Iterator[None]:
    """Run driver calls; re-raise any psycopg error as a tiervault error naming ``tier``."""
    import psycopg
    from psycopg import errors as pg

    try:
        yield
    except (pg.ReadOnlySqlTransaction, pg.InsufficientPrivilege) as exc:
        message = scrub(str(exc), address).splitlines()[0]
        if writing:
            raise ReadOnlyTier(tier, address.display,
                               f"the server refused to {action} ({message}); this role may only "
                               "read: write to another tier or grant the role INSERT/UPDATE/DELETE "
                               "on the tier's schema") from exc
        raise TierUnavailable(tier, address.display,
                              f"permission denied to {action} ({message}); grant this role USAGE "
                              "on the schema and SELECT on its tables") from exc
    except (pg.UndefinedTable, pg.InvalidSchemaName) as exc:
        raise TierUnavailable(tier, address.display,
                              f"its tables are missing ({scrub(str(exc), address).splitlines()[0]}); "
                              "open the tier once with a role allowed to create them") from exc
    except (pg.CharacterNotInRepertoire, pg.UntranslatableCharacter) as exc:
        raise ValidationError("value", f"cannot be stored: {scrub(str(exc), address)}") from exc
    except psycopg.OperationalError as exc:
        raise StorageError(f"tier {tier!r} ({address.display}): lost the PostgreSQL server while "
                           f"trying to {action} ({_first_line(scrub(str(exc), address))}); the tier "
                           "is retried on the next search") from None
    except psycopg.Error as exc:
        raise StorageError(f"tier {tier!r} ({address.display}): could not {action}: "
                           f"{_first_line(scrub(str(exc), address))}") from exc
