"""Driver errors mapped to the tiervault error tree at the storage boundary.

Each backend registers how its driver's exceptions translate (the SQLite
backend registers ``sqlite3.Error``; the PostgreSQL backend registers
``psycopg.Error``), and wraps every driver call in :func:`map_errors`::

    with map_errors(self.name, self.location, "write"):
        conn.execute(...)

so no raw driver exception reaches a caller: it becomes a
:class:`~tiervault.errors.TierVaultError` (``raise ... from exc`` keeps the cause).
As httpx's ``map_exceptions``: one context manager, one table.
A :class:`TierVaultError` raised inside passes through untouched.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

from tiervault.errors import StorageError, TierVaultError, ValidationError

__all__ = ["ErrorContext", "Translator", "register_errors", "map_errors", "translate", "storage_error"]


@dataclass(frozen=True, slots=True)
class ErrorContext:
    """Where an error happened: the tier, its redacted location and the operation."""

    tier: str
    location: str
    action: str

    def prefix(self) -> str:
        """``tier 'team' (path): action failed`` — the head of every mapped message."""
        return f"tier {self.tier!r} ({self.location}): {self.action} failed"


#: A translator turns a driver exception into the tiervault error to raise.
Translator = Callable[[BaseException, ErrorContext], TierVaultError]

_TABLE: list[tuple[type[BaseException], Translator]] = []


def _value_error(exc: BaseException, ctx: ErrorContext) -> TierVaultError:
    return ValidationError("value", f"{ctx.action}: a value cannot be stored or looked up ({exc})")


def register_errors(exc_type: type[BaseException], translator: Translator) -> None:
    """Map ``exc_type`` (and its subclasses) with ``translator`` from now on.

    The most specific registered type wins (a later registration of a subclass
    takes precedence over its base), so a backend may register its driver's
    base error and refine a few subclasses.
    """
    _TABLE[:] = [(t, f) for t, f in _TABLE if t is not exc_type]
    _TABLE.append((exc_type, translator))


def translate(exc: BaseException, ctx: ErrorContext) -> BaseException:
    """The tiervault error for ``exc`` (``exc`` itself when nothing maps it)."""
    if isinstance(exc, TierVaultError):
        return exc
    best: tuple[int, Translator] | None = None
    for exc_type, translator in _TABLE:
        if isinstance(exc, exc_type):
            depth = type(exc).__mro__.index(exc_type)  # 0 = exact type: most specific
            if best is None or depth < best[0]:
                best = (depth, translator)
    if best is None:
        return exc
    return best[1](exc, ctx)


@contextmanager
def map_errors(tier: str, location: str, action: str) -> Iterator[ErrorContext]:
    """Run the block; a registered driver error leaves it as a TierVaultError."""
    ctx = ErrorContext(tier, location, action)
    try:
        yield ctx
    except TierVaultError:
        raise
    except Exception as exc:
        mapped = translate(exc, ctx)
        if mapped is exc:
            raise
        raise mapped from exc


# A value the driver cannot bind (a lone surrogate, an integer beyond 64 bits) is
# the caller's bad input, whatever the backend.
register_errors(UnicodeEncodeError, _value_error)
register_errors(OverflowError, _value_error)


def storage_error(exc: BaseException, ctx: ErrorContext) -> TierVaultError:
    """The default mapping: the operation failed underneath (disk, server, driver)."""
    return StorageError(f"{ctx.prefix()}: {exc}")
