"""Lexical search of a PostgreSQL tier: the shared BM25 mirror, fed from the server.

The tier keeps the same in-memory mirror as an SQLite tier
(:class:`tiervault.vault.postings.Postings`: FTS5 stems, column-weighted term
frequencies, document lengths, TF-IDF model), fed by :meth:`changes_since`
and caught up before every search by reading the one-row version
``meta.gen`` (one round trip: a write by any process is visible to the next
search). The scores are therefore the SQLite tier's by construction -- same
terms, same statistics, same formula -- which keeps federation on one scale.
The mirror is cached on local disk under :meth:`cache_prefix` (keyed by the
tier's uid), so a process reopening a large tier only catches up.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any


from tiervault.vault.lexicon import MirrorLexicon
from tiervault.vault.mirror_search import MirrorSearch
from tiervault.vault.read_scope import current_scope
from tiervault.vault.rows import Changes, KeyColumns, MirrorRow

log = logging.getLogger(__name__)

__all__ = ["PgLexical", "cache_root"]


def cache_root() -> Path:
    """Local folder for caches of server tiers: $TIERVAULT_CACHE_DIR, else
    $XDG_CACHE_HOME/tiervault, else ~/.cache/tiervault."""
    explicit = os.environ.get("TIERVAULT_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tiervault"


class _MirrorFeed:
    """What :class:`Postings` reads from a store, with ``path`` at the local cache prefix."""

    def __init__(self, store: Any, prefix: str) -> None:
        self._store = store
        self.path = prefix
        self.name = store.name
        self.read_only = store.read_only
        self.exists = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


class PgLexical(MirrorSearch):
    """Contract methods for lexical search (:class:`MirrorSearch` over this tier's mirror);
    mixed into the PostgreSQL tier."""

    name: str
    read_only: bool
    _lock: threading.RLock
    _postings: Any
    mirror_rows: Any
    uid: Any
    _scope_seen: object | None = None
    _lexicon: MirrorLexicon | None = None

    def cache_prefix(self) -> str | None:
        """``<cache root>/pg-<uid>``: local caches of this tier (mirror, vector index)."""
        root = cache_root()
        try:
            root.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            log.warning("tier %r is not cached on disk: cannot create %s (%s)", self.name, root,
                        exc.strerror or exc)
            return None
        return str(root / f"pg-{self.uid()}")

    def changes_since(self, since: int) -> Changes:
        gen, rows, dead = self.mirror_rows(since)
        return Changes(gen, [MirrorRow(*r) for r in rows], list(dead))

    def postings(self, *, force: bool = False) -> Any:
        """The in-memory BM25 mirror of this tier, built on first use, then caught up.

        Inside a :func:`~tiervault.vault.read_scope.read_scope` (one search) it is
        caught up once, on the first call; ``force`` catches up regardless (after
        this store's own write).
        """
        from tiervault.vault.postings import Postings

        scope = current_scope()
        if (not force and scope is not None and self._postings is not None
                and self._scope_seen is scope and self._postings.damaged is None):
            return self._postings
        with self._lock:
            prefix = self.cache_prefix()
            feed = _MirrorFeed(self, prefix or "")
            if prefix is None:
                feed.read_only = True  # nowhere to cache: the mirror is not saved
            if self._postings is None:
                self._postings = Postings.build(feed)
            else:
                self._postings.catch_up(feed)
            self._scope_seen = scope
            return self._postings

    def _sync_postings(self) -> None:
        if self._postings is not None:
            self.postings(force=True)

    def mirror_lexicon(self) -> MirrorLexicon:
        """The shared lexical answers over this tier's mirror (the SQLite tier's class:
        BM25 arrays, matches and filter masks kept per query and mirror generation)."""
        lexicon = self._lexicon
        if lexicon is None:
            with self._lock:
                if self._lexicon is None:
                    self._lexicon = MirrorLexicon(self.postings)
                lexicon = self._lexicon
        return lexicon

    @property
    def lexicon(self) -> MirrorLexicon:
        """:meth:`mirror_lexicon`: what :class:`MirrorSearch`'s contract methods answer from."""
        return self.mirror_lexicon()

    def key_columns(self) -> KeyColumns:
        with self._lock:  # one build's columns and slot count (a catch-up appends under it)
            p = self.postings()
            return KeyColumns(p.build_id, p.ids, p.hashes, min(len(p.ids), len(p.hashes)))

    def create(self) -> bool:
        """Opening the tier created its schema already (unless read-only): False."""
        return False
