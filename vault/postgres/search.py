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
from typing import Any, Sequence

import numpy as np

from tiervault.vault.filters import Filters
from tiervault.vault.read_scope import current_scope
from tiervault.vault.rows import Changes, IdMask, LexicalHit, MirrorRow, TermStats
from tiervault.vault.scoring import top_k

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


class PgLexical:
    """Contract methods for lexical search; mixed into the PostgreSQL tier."""

    name: str
    read_only: bool
    _lock: threading.RLock
    _postings: Any
    mirror_rows: Any
    uid: Any
    _scope_seen: object | None = None

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
                and self._scope_seen is scope):
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

    def term_stats(self, terms: Sequence[str]) -> TermStats:
        p = self.postings()
        m = p.matches(list(terms))
        return TermStats(p.n_alive, float(p.total_len), tuple(int(x) for x in m.df))

    def _scores(self, p: Any, terms: Sequence[str], stats: TermStats) -> np.ndarray:
        if not terms:
            return np.zeros(len(p.ids), dtype=np.float64)
        return p.bm25(p.matches(list(terms)), stats.idf(), stats.avg_len)

    def lexical_top_k(self, terms: Sequence[str], stats: TermStats, filters: Filters, k: int,
                      *, words: Sequence[str] = ()) -> list[LexicalHit]:
        p = self.postings()
        scores = self._scores(p, terms, stats)
        slots = top_k(scores, k, p.mask(filters) & (scores > 0))
        tfidf = p.tfidf_scores(list(words)) if words else None
        return [LexicalHit(p.ids[s], p.hashes[s], float(scores[s]),
                           float(tfidf[s]) if tfidf is not None else 0.0) for s in slots]

    def lexical_scores(self, terms: Sequence[str], stats: TermStats, *, ids: Sequence[str] = (),
                       hashes: Sequence[str] = (), filters: Filters | None = None,
                       words: Sequence[str] = ()) -> list[LexicalHit]:
        p = self.postings()
        slots: dict[int, None] = {}
        for eid in ids:
            s = p.slot(eid)
            if s is not None:
                slots[s] = None
        wanted = set(hashes)
        if wanted:
            for s in np.flatnonzero(p.alive):
                if p.hashes[s] in wanted:
                    slots[int(s)] = None
        if not slots:
            return []
        scores = self._scores(p, terms, stats)
        mask = p.mask(filters) if filters is not None else None
        tfidf = p.tfidf_scores(list(words)) if words else None
        return [LexicalHit(p.ids[s], p.hashes[s], float(scores[s]),
                           float(tfidf[s]) if tfidf is not None else 0.0,
                           bool(mask[s]) if mask is not None else True) for s in slots]

    def lexical_count(self, terms: Sequence[str], filters: Filters, cap: int) -> int:
        p = self.postings()
        hit = np.zeros(len(p.ids), dtype=bool)
        for slots in p.matches(list(terms)).slots:
            hit[slots] = True
        return int(np.count_nonzero(hit & p.mask(filters)))

    def text_similarity(self, words: Sequence[str], documents: Sequence[Sequence[str]]) -> list[float]:
        p = self.postings()
        q = p.tfidf_vector(list(words))
        if q is None:
            return [0.0] * len(documents)
        out = []
        for doc in documents:
            d = p.tfidf_vector(list(doc))
            out.append(float(q.multiply(d).sum()) if d is not None else 0.0)
        return out

    def filter_mask(self, filters: Filters) -> IdMask:
        p = self.postings()
        return IdMask(p.ids, p.mask(filters), (id(p), p.gen, len(p.ids), p.n_alive))

    def create(self) -> bool:
        """Opening the tier created its schema already (unless read-only): False."""
        return False
