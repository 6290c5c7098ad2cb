"""What the curator pages read from the tiers: pages of entries, counts, review lists.

Everything here is read-only and goes through public store APIs: one read
transaction per call (:meth:`TierStore.snapshot`), the in-memory FTS mirror
(:meth:`TierStore.postings`) for counts, and the embedding state table
(:class:`~tiervault.vault.vectors.TierVectors`) for coverage.

Orderings are index-backed so a page costs the same at 100K entries as at 100:
"newest" is rowid order (an upsert keeps its rowid), "recently updated" is the
write generation (``entries_gen`` index; every write bumps it). The SQLite and
PostgreSQL tiers share these columns; the storage contract
(:mod:`tiervault.vault.backend`) has no such ordering yet, so a backend this
module does not know is listed in insertion order (``EntryPage.ordered`` False).

Near-duplicates: entries of one tier sharing a content hash, the same content
held by several tiers, and entries whose titles have the same content-word
stems (``"Use JWT rotation"`` / ``"JWT rotation: use"``). The title groups need
every title of a tier, so they are computed once per tier generation and cached.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from tiervault.vault.entry import ENTRY_TYPES, SEVERITIES, Entry
from tiervault.vault.filters import Filters
from tiervault.vault.entry_rows import ENTRY_COLUMNS, row_to_entry
from tiervault.vault.rows import LightRow, Link
from tiervault.vault.sqlite_sql import filter_sql
from tiervault.vault.tokenizer import STEMMER, STOP_WORDS, split_words

__all__ = ["Catalog", "EntryPage", "Distribution", "Coverage", "DuplicateGroup", "Contradiction",
           "ORDERS", "title_key"]

ORDERS = ("new", "updated")
_SELECT = ", ".join(f"e.{c}" for c in ENTRY_COLUMNS)
_ORDER_SQL = {"new": "e.rowid DESC", "updated": "e.gen DESC, e.rowid DESC"}
MAX_REVIEW_ROWS = 200


@dataclass(frozen=True, slots=True)
class EntryPage:
    """One page of a tier's entries and whether more follow."""

    tier: str
    entries: list[Entry]
    page: int
    per_page: int
    has_more: bool
    ordered: bool = True  # False: this backend could only list in insertion order


@dataclass(frozen=True, slots=True)
class Distribution:
    """Live entries of one tier counted by type, severity and domain."""

    tier: str
    total: int
    by_type: dict[str, int]
    by_severity: dict[str, int]
    by_domain: dict[str, int]


@dataclass(frozen=True, slots=True)
class Coverage:
    """Embedding state counts of one tier for the active model."""

    tier: str
    model: str
    ok: int
    pending: int
    error: int
    missing: int


@dataclass(frozen=True, slots=True)
class DuplicateGroup:
    """Entries that look like the same knowledge; ``reason`` says why."""

    reason: str  # "same content" | "same content, several tiers" | "similar title"
    members: list[tuple[str, str, str]]  # (tier, id, title)


@dataclass(frozen=True, slots=True)
class Contradiction:
    """A ``contradicts`` link, with both titles when their entries are readable."""

    link: Link
    source_title: str | None
    target_title: str | None


def _dialect(conn: Any) -> tuple[str, Callable[[Filters], tuple[str, list[Any]]]] | None:
    """(placeholder, filter SQL builder) for a snapshot connection this module can speak to.

    Judged by the connection rather than the store: a server hands the pages its
    stores behind proxies (locks, read-only views) that are not TierStore instances.
    """
    if isinstance(conn, sqlite3.Connection):
        return "?", filter_sql
    if type(conn).__module__.startswith("psycopg"):
        from tiervault.vault.postgres.store import pg_filter_sql

        return "%s", pg_filter_sql
    return None


def _light_titles(store: Any, ids: Sequence[str]) -> dict[str, str]:
    """{id: title} of the ``ids`` a store holds, read without the entries' long text."""
    return {eid: LightRow(*row).title for eid, row in store.light_rows(ids, 1).items()}


def title_key(title: str) -> str:
    """Sorted distinct content-word stems of a title ('' when it has none)."""
    stop = STOP_WORDS.get()
    words = [w for w in split_words(title) if w not in stop]
    stems = STEMMER.stems(words)
    return " ".join(sorted({stems[w] for w in words if stems[w]}))


@dataclass
class _TitleCache:
    gen: int = -1
    groups: dict[str, list[tuple[str, str]]] = field(default_factory=dict)


class Catalog:
    """Read-only views over a manager's tiers for the curator pages (thread-safe)."""

    def __init__(self, manager: Any) -> None:
        self.manager = manager
        self._titles: dict[str, _TitleCache] = {}
        self._dups: tuple[Any, list[DuplicateGroup]] | None = None
        self._lock = threading.Lock()

    # -- entries ----------------------------------------------------------------------
    def page(self, tier: str, *, order: str = "new", page: int = 1, per_page: int = 25,
             filters: Filters | None = None) -> EntryPage:
        """Page ``page`` (1-based) of ``tier`` newest or most recently updated first."""
        if order not in ORDERS:
            order = "new"
        page = max(int(page), 1)
        filters = filters or Filters(include_expired=True, include_future=True)
        store = self.manager.store(tier)
        offset = (page - 1) * per_page
        if hasattr(store, "snapshot"):
            with store.snapshot() as conn:
                if conn is None:
                    return EntryPage(tier, [], page, per_page, False)
                dialect = _dialect(conn)
                if dialect is not None:
                    mark, build_filter = dialect
                    where, params = build_filter(filters)
                    rows = conn.execute(
                        f"SELECT {_SELECT} FROM entries e WHERE 1 = 1{where} "
                        f"ORDER BY {_ORDER_SQL[order]} LIMIT {mark} OFFSET {mark}",
                        [*params, per_page + 1, offset]).fetchall()
                    entries = [row_to_entry(r) for r in rows[:per_page]]
                    return EntryPage(tier, entries, page, per_page, len(rows) > per_page)
        found = store.list_entries(offset=offset, limit=per_page + 1, filters=filters)
        return EntryPage(tier, found[:per_page], page, per_page, len(found) > per_page, False)

    def holders(self, entry: Entry, tiers: Sequence[str]) -> list[tuple[str, str]]:
        """(tier, id) of every copy of ``entry`` in ``tiers``: same id or same content."""
        out: list[tuple[str, str]] = []
        for t in self.manager.ordered(tiers):
            p = t.store.postings()
            slot = p.slot(entry.id)
            if slot is None and entry.content_hash:
                slot = p.slot_by_hash(entry.content_hash)
            if slot is not None:
                out.append((t.name, p.ids[slot]))
        return out

    # -- counts -----------------------------------------------------------------------
    def distribution(self, tier: str) -> Distribution:
        """Counts from the in-memory mirror (no table scan)."""
        p = self.manager.store(tier).postings()
        alive = p.alive
        types = np.bincount(p.type_code[alive], minlength=len(ENTRY_TYPES))
        sev = np.bincount(p.severity_code[alive], minlength=len(SEVERITIES))
        dom = np.bincount(p.domain_code[alive], minlength=len(p.domains)) if p.domains else []
        by_domain = {p.domains[i]: int(n) for i, n in enumerate(dom) if n}
        by_domain = dict(sorted(by_domain.items(), key=lambda kv: (-kv[1], kv[0])))
        return Distribution(tier, int(alive.sum()), dict(zip(ENTRY_TYPES, map(int, types))),
                            dict(zip(SEVERITIES, map(int, sev))), by_domain)

    def coverage(self, tier: str, model: str) -> Coverage:
        store = self.manager.store(tier)
        if hasattr(store, "embedding_counts"):  # the storage contract's call
            counts = store.embedding_counts(model)
        else:
            from tiervault.vault.vectors import TierVectors

            counts = TierVectors(store).counts(model)
        return Coverage(tier, model, counts["ok"], counts["pending"], counts["error"],
                        counts["missing"])

    # -- review -----------------------------------------------------------------------
    def contradictions(self, tiers: Sequence[str], limit: int = MAX_REVIEW_ROWS) -> list[Contradiction]:
        """``contradicts`` links stored in ``tiers`` (both directions are one link)."""
        links: list[Link] = []
        for t in self.manager.ordered(tiers):
            if not hasattr(t.store, "snapshot"):
                continue  # no way to list links through the storage contract yet
            with t.store.snapshot() as conn:
                dialect = _dialect(conn) if conn is not None else None
                if dialect is None:
                    continue
                rows = conn.execute(
                    "SELECT source_id, target_id, link_type, note, created_at FROM links "
                    f"WHERE link_type = 'contradicts' ORDER BY created_at DESC LIMIT {dialect[0]}",
                    (limit,)).fetchall()
            links.extend(Link(*r, t.name) for r in rows)
        links = links[:limit]
        titles: dict[str, str] = {}
        missing = list({i for ln in links for i in (ln.source_id, ln.target_id)})
        for t in self.manager.ordered(tiers):  # the highest-priority copy names an id
            if not missing:
                break
            titles.update({eid: title for eid, title in _light_titles(t.store, missing).items()
                           if eid not in titles})
            missing = [i for i in missing if i not in titles]
        return [Contradiction(ln, titles.get(ln.source_id), titles.get(ln.target_id)) for ln in links]

    def duplicates(self, tiers: Sequence[str], limit: int = MAX_REVIEW_ROWS) -> list[DuplicateGroup]:
        """Same content hash (within or across tiers), then same title stems.

        Computed once per state of the tiers (their write generations) and cached:
        a review page after no write costs a dictionary look-up.
        """
        chosen = self.manager.ordered(tiers)
        key = (tuple((t.name, t.store.generation()) for t in chosen), limit)
        with self._lock:
            if self._dups is not None and self._dups[0] == key:
                return self._dups[1]
        groups = self._compute_duplicates(chosen, limit)
        with self._lock:
            self._dups = (key, groups)
        return groups

    def _compute_duplicates(self, chosen: list[Any], limit: int) -> list[DuplicateGroup]:
        per_tier: list[tuple[str, Any, np.ndarray, list[str]]] = []
        total: Counter[str] = Counter()
        for t in chosen:
            p = t.store.postings()
            live = np.flatnonzero(p.alive)
            hashes = [p.hashes[i] for i in live]
            total.update(hashes)
            per_tier.append((t.name, p, live, hashes))
        by_hash: dict[str, list[tuple[str, str]]] = {}
        for name, p, live, hashes in per_tier:
            for slot, h in zip(live, hashes):
                if total[h] > 1:
                    by_hash.setdefault(h, []).append((name, p.ids[slot]))
        hash_groups = [members for members in by_hash.values() if len(members) > 1][:limit]
        seen = {m for members in hash_groups for m in members}
        titles = self._titles_of(seen)
        groups = [DuplicateGroup("same content, several tiers" if len({t for t, _ in members}) > 1
                                 else "same content",
                                 [(t, eid, titles.get((t, eid), eid)) for t, eid in members])
                  for members in hash_groups]
        for t in chosen:
            if len(groups) >= limit:
                break
            for members in self._title_groups(t.name).values():
                rest = [m for m in members if (t.name, m[0]) not in seen]
                if len(rest) > 1:
                    groups.append(DuplicateGroup("similar title",
                                                 [(t.name, eid, title) for eid, title in rest]))
                    if len(groups) >= limit:
                        break
        return groups

    def _titles_of(self, members: set[tuple[str, str]]) -> dict[tuple[str, str], str]:
        """{(tier, id): title}, one read per tier."""
        by_tier: dict[str, list[str]] = {}
        for tier, eid in members:
            by_tier.setdefault(tier, []).append(eid)
        out: dict[tuple[str, str], str] = {}
        for tier, ids in by_tier.items():
            for eid, title in _light_titles(self.manager.store(tier), ids).items():
                out[(tier, eid)] = title
        return out

    def _title_groups(self, tier: str) -> dict[str, list[tuple[str, str]]]:
        """{title key: [(id, title)]} for keys held by more than one entry, per generation."""
        store = self.manager.store(tier)
        gen = store.generation()
        with self._lock:
            cached = self._titles.get(tier)
            if cached is not None and cached.gen == gen:
                return cached.groups
        rows: list[tuple[str, str]] | None = None
        if hasattr(store, "snapshot"):
            with store.snapshot() as conn:
                if conn is None:
                    rows = []
                elif _dialect(conn) is not None:
                    rows = conn.execute("SELECT id, title FROM entries").fetchall()
        if rows is None:
            rows = [(e.id, e.title) for e in store.iter_entries()]
        keyed: dict[str, list[tuple[str, str]]] = {}
        for eid, title in rows:
            key = title_key(title)
            if key:
                keyed.setdefault(key, []).append((eid, title))
        groups = {k: v for k, v in keyed.items() if len(v) > 1}
        with self._lock:
            self._titles[tier] = _TitleCache(gen, groups)
        return groups
