"""What the curator pages read from the tiers: pages of entries, counts, review lists.

Everything here is read-only and goes through the storage contract
(:class:`~tiervault.vault.backend.TierBackend`, docs/backend.md "Browsing"), so
the pages work the same on an SQLite file, a PostgreSQL schema and a remote
tier: ``light_page`` (a page in an order, filtered, with the total),
``facet_counts``, ``embedding_counts``, ``links_of_type``, ``title_rows`` (every
entry's id, title and content hash), ``light_rows`` and ``ids_by_hash``.

Orders are index-backed in the backends, so a page costs the same at 100K
entries as at 100: "new" is insertion order (an upsert keeps its place),
"recently updated" the write generation (every write bumps it).

Near-duplicates: entries of one tier sharing a content hash, the same content
held by several tiers, and entries whose titles have the same content-word
stems (``"Use JWT rotation"`` / ``"JWT rotation: use"``). They need every
hash of a tier, so each tier is swept (``title_rows``) once per generation and
digested: its sorted content hashes and the hashes it holds more than once; its
title groups (every title stemmed) are computed, once per generation too, only
when the hash groups leave room in the list. Both live in a
:class:`CatalogCache` that outlives one request (the web app keeps one per
principal).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Iterator, NamedTuple, Sequence

import numpy as np

from tiervault.vault.entry import Entry
from tiervault.vault.filters import Filters
from tiervault.vault.rows import LightRow, Link, TitleRow
from tiervault.vault.tokenizer import STEMMER, STOP_WORDS, split_words

__all__ = ["Catalog", "CatalogCache", "EntryPage", "Distribution", "Coverage", "DuplicateGroup",
           "Member", "Holder", "Contradiction", "ORDERS", "title_key"]

#: Page orders as the browse page names them -> the contract's orders.
ORDERS = {"new": "newest", "updated": "updated"}
MAX_REVIEW_ROWS = 200
#: The browse row's snippet: jinja's ``truncate(140)`` keeps up to 145 characters
#: (its leeway) and cuts anything longer to 139 + "…", so 146 characters of the
#: description render exactly as the whole description would.
SNIPPET_CHARS = 146
#: Rows per ``title_rows`` call of a sweep.
SWEEP_ROWS = 5_000


@dataclass(frozen=True, slots=True)
class EntryPage:
    """One page of a tier's entries (light rows), whether more follow, and how many
    entries pass the filters."""

    tier: str
    entries: list[LightRow]
    page: int
    per_page: int
    has_more: bool
    total: int

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.per_page))


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


class Member(NamedTuple):
    """One entry of a near-duplicate group."""

    tier: str
    id: str
    title: str


class Holder(NamedTuple):
    """A tier holding a copy of an entry, and the id it holds it under."""

    tier: str
    id: str


@dataclass(frozen=True, slots=True)
class DuplicateGroup:
    """Entries that look like the same knowledge; ``reason`` says why."""

    reason: str  # "same content" | "same content, several tiers" | "similar title"
    members: list[Member]


@dataclass(frozen=True, slots=True)
class Contradiction:
    """A ``contradicts`` link, with both titles when their entries are readable."""

    link: Link
    source_title: str | None
    target_title: str | None


def title_key(title: str) -> str:
    """Sorted distinct content-word stems of a title ('' when it has none)."""
    stop = STOP_WORDS.get()
    words = [w for w in split_words(title) if w not in stop]
    stems = STEMMER.stems(words)
    return " ".join(sorted({stems[w] for w in words if stems[w]}))


@dataclass(frozen=True, slots=True)
class _Digest:
    """One tier at one generation, for the near-duplicate review."""

    gen: int
    hashes: np.ndarray  # its distinct content hashes, sorted (bytes)
    same: dict[str, list[tuple[str, str]]]  # hash held by > 1 entry -> [(id, title)]


@dataclass
class CatalogCache:
    """Digests and title groups of tiers by name, kept across requests (thread-safe)."""

    digests: dict[str, _Digest] = field(default_factory=dict)
    titles: dict[str, tuple[int, dict[str, list[tuple[str, str]]]]] = field(default_factory=dict)
    groups: tuple[Any, list[DuplicateGroup]] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


def _sweep(store: Any) -> Iterator[TitleRow]:
    """Every entry of ``store`` as a TitleRow, ``SWEEP_ROWS`` per call."""
    after = 0
    while True:
        rows = store.title_rows(after, SWEEP_ROWS)
        yield from rows
        if len(rows) < SWEEP_ROWS:
            return
        after = rows[-1].key


def _digest(store: Any) -> _Digest:
    """Sweep ``store`` into a digest; the generation is read first, so a write during
    the sweep makes the next look-up sweep again."""
    gen = store.generation()
    rows = list(_sweep(store))
    held = np.array([r.content_hash.encode("utf-8", "surrogatepass") for r in rows], dtype=bytes)
    hashes, counts = np.unique(held, return_counts=True)  # sorted, distinct
    twice = set(hashes[counts > 1].tolist())
    same: dict[str, list[tuple[str, str]]] = {}
    for i in np.flatnonzero(np.isin(held, list(twice))).tolist() if twice else ():
        same.setdefault(rows[i].content_hash, []).append((rows[i].id, rows[i].title))
    return _Digest(gen, hashes, same)


def _title_groups(store: Any) -> dict[str, list[tuple[str, str]]]:
    """{title key: [(id, title)]} of the keys held by more than one entry of ``store``.
    Stemming every title is the review's dearest step (~1 s per 100K titles once the
    stemmer's cache is warm, several before), so it runs only when the hash groups
    leave room on the page."""
    keyed: dict[str, list[tuple[str, str]]] = {}
    for row in _sweep(store):
        key = title_key(row.title)
        if key:
            keyed.setdefault(key, []).append((row.id, row.title))
    return {k: v for k, v in keyed.items() if len(v) > 1}


class Catalog:
    """Read-only views over a manager's tiers for the curator pages (thread-safe)."""

    def __init__(self, manager: Any, cache: CatalogCache | None = None) -> None:
        self.manager = manager
        self.cache = cache or CatalogCache()

    # -- entries ----------------------------------------------------------------------
    def page(self, tier: str, *, order: str = "new", page: int = 1, per_page: int = 25,
             filters: Filters | None = None) -> EntryPage:
        """Page ``page`` (1-based) of ``tier`` newest or most recently updated first."""
        page = max(int(page), 1)
        filters = filters or Filters(include_expired=True, include_future=True)
        found = self.manager.store(tier).light_page(
            order=ORDERS.get(order, "newest"), filters=filters, offset=(page - 1) * per_page,
            limit=per_page, snippet_chars=SNIPPET_CHARS)
        return EntryPage(tier, found.rows, page, per_page, page * per_page < found.total,
                         found.total)

    def holders(self, entry: Entry, tiers: Sequence[str]) -> list[Holder]:
        """Every copy of ``entry`` in ``tiers``: same id or same content."""
        out: list[Holder] = []
        for t in self.manager.ordered(tiers):
            if t.store.light_rows([entry.id], 0):
                out.append(Holder(t.name, entry.id))
            elif entry.content_hash:
                same = t.store.ids_by_hash([entry.content_hash]).get(entry.content_hash)
                if same is not None:
                    out.append(Holder(t.name, same))
        return out

    # -- counts -----------------------------------------------------------------------
    def distribution(self, tier: str) -> Distribution:
        """Counts of every entry (the backend answers from its mirror: no table scan)."""
        c = self.manager.store(tier).facet_counts(None)
        return Distribution(tier, c.total, c.by_type, c.by_severity, c.by_domain)

    def coverage(self, tier: str, model: str) -> Coverage:
        counts = self.manager.store(tier).embedding_counts(model)
        return Coverage(tier, model, counts["ok"], counts["pending"], counts["error"],
                        counts["missing"])

    # -- review -----------------------------------------------------------------------
    def contradictions(self, tiers: Sequence[str], limit: int = MAX_REVIEW_ROWS) -> list[Contradiction]:
        """``contradicts`` links stored in ``tiers`` (both directions are one link)."""
        chosen = self.manager.ordered(tiers)
        links = [link for t in chosen for link in t.store.links_of_type("contradicts", limit)][:limit]
        titles: dict[str, str] = {}
        missing = list({i for ln in links for i in (ln.source_id, ln.target_id)})
        for t in chosen:  # the highest-priority copy names an id
            if not missing:
                break
            for eid, row in t.store.light_rows(missing, 0).items():
                titles.setdefault(eid, row.title)
            missing = [i for i in missing if i not in titles]
        return [Contradiction(ln, titles.get(ln.source_id), titles.get(ln.target_id)) for ln in links]

    def duplicates(self, tiers: Sequence[str], limit: int = MAX_REVIEW_ROWS) -> list[DuplicateGroup]:
        """Same content hash (across, then within tiers), then same title stems.

        Each tier is swept once per generation (its digest is cached); the groups
        are kept while no chosen tier is written: a review page after no write
        costs a generation read per tier.
        """
        chosen = self.manager.ordered(tiers)
        digests = [(t, self._digest_of(t)) for t in chosen]
        key = (tuple((t.name, d.gen) for t, d in digests), limit)
        with self.cache.lock:
            if self.cache.groups is not None and self.cache.groups[0] == key:
                return self.cache.groups[1]
        groups = self._groups(digests, limit)
        with self.cache.lock:
            self.cache.groups = (key, groups)
        return groups

    def _digest_of(self, tier: Any) -> _Digest:
        gen = tier.store.generation()
        with self.cache.lock:
            cached = self.cache.digests.get(tier.name)
        if cached is not None and cached.gen == gen:
            return cached
        fresh = _digest(tier.store)
        with self.cache.lock:
            self.cache.digests[tier.name] = fresh
        return fresh

    def _titles_of(self, tier: Any) -> dict[str, list[tuple[str, str]]]:
        gen = tier.store.generation()
        with self.cache.lock:
            cached = self.cache.titles.get(tier.name)
        if cached is not None and cached[0] == gen:
            return cached[1]
        groups = _title_groups(tier.store)
        with self.cache.lock:
            self.cache.titles[tier.name] = (gen, groups)
        return groups

    def _groups(self, digests: list[tuple[Any, _Digest]], limit: int) -> list[DuplicateGroup]:
        groups: list[DuplicateGroup] = []
        shared: list[str] = []
        if len(digests) > 1:
            held, counts = np.unique(np.concatenate([d.hashes for _, d in digests]),
                                     return_counts=True)
            shared = [h.decode("utf-8", "surrogatepass") for h in held[counts > 1][:limit]]
        members: dict[str, list[Member]] = {h: [] for h in shared}
        for t, d in digests:  # the same content in several tiers
            single = [h for h in shared if h not in d.same]
            found = t.store.ids_by_hash(single) if single else {}
            titles = {eid: row.title for eid, row in t.store.light_rows(list(found.values()), 0).items()}
            for h in shared:
                held_here = d.same.get(h) or ([(found[h], titles.get(found[h], found[h]))]
                                              if h in found else [])
                members[h].extend(Member(t.name, eid, title) for eid, title in held_here)
        for h in shared:
            if len({m.tier for m in members[h]}) > 1:
                groups.append(DuplicateGroup("same content, several tiers", members[h]))
        for t, d in digests:  # the same content twice in one tier
            for h, held_here in d.same.items():
                if len(groups) >= limit:
                    break
                if h not in members:
                    groups.append(DuplicateGroup("same content",
                                                 [Member(t.name, i, title) for i, title in held_here]))
        groups = groups[:limit]
        seen = {(m.tier, m.id) for g in groups for m in g.members}
        for t, _ in digests:  # similar titles
            if len(groups) >= limit:
                break
            for held_here in self._titles_of(t).values():
                if len(groups) >= limit:
                    return groups
                rest = [Member(t.name, i, title) for i, title in held_here if (t.name, i) not in seen]
                if len(rest) > 1:
                    groups.append(DuplicateGroup("similar title", rest))
        return groups
