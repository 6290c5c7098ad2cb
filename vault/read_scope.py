"""One search, one view of every tier: a scope a backend may use to read its version once.

A search asks each tier several things (term statistics, top k, scores, filter
masks, light rows). A backend whose in-memory mirror catches up by reading a
version from a server (the PostgreSQL tier: one round trip to ``meta.gen``)
would otherwise pay that round trip on every one of them. Inside
:func:`read_scope` a backend catches up once, on the first read, and answers
the rest of the scope from that state: the whole search sees one consistent
generation of the tier, and the next search (a new scope) sees every write
committed before it began. Outside a scope nothing changes (each read catches
up). Backends without a server-fed mirror ignore it.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Iterator

__all__ = ["read_scope", "current_scope", "ScopeMemo"]

_SCOPE: ContextVar[object | None] = ContextVar("tiervault_read_scope", default=None)


@contextmanager
def read_scope() -> Iterator[object]:
    """Open a scope (nested scopes join the outer one); yields its token."""
    outer = _SCOPE.get()
    if outer is not None:
        yield outer
        return
    token = object()
    reset = _SCOPE.set(token)
    try:
        yield token
    finally:
        _SCOPE.reset(reset)


def current_scope() -> object | None:
    """The open scope's token, or None."""
    return _SCOPE.get()


class ScopeMemo:
    """One value kept for the open scope while a count stands (a connection's writes):
    the SQLite tier's mirror, caught up once a scope (a scan asks a tier ~5 times for
    it, each a catch-up that only found the generation unchanged; issue 16, session
    18). Outside a scope nothing is kept. Replaced whole: safe across threads."""

    __slots__ = ("_kept",)

    def __init__(self) -> None:
        self._kept: tuple[object, int, Any] = (None, -1, None)

    def get(self, count: int) -> Any:
        """The value kept in this scope at ``count``, else None."""
        kept, scope = self._kept, _SCOPE.get()
        return kept[2] if scope is not None and kept[0] is scope and kept[1] == count else None

    def keep(self, value: Any, count: int) -> None:
        """Keep ``value`` for the open scope (none open: nothing) at ``count``."""
        scope = _SCOPE.get()
        self._kept = (scope, count, value) if scope is not None else (None, -1, None)

    def forget(self) -> None:
        self._kept = (None, -1, None)
