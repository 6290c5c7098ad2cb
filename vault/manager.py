"""VaultManager: one search over every tier, weighted, deduplicated and merged.

Every tier is scored with the *federated* BM25 statistics of all searched tiers and
normalised by the query's bound, so scores compare across tiers (:mod:`candidates`).

Dedup: the same entry (by id, or by content hash under another id) found in
several tiers is kept once, from the highest-priority tier; the others are
listed in ``also_in`` (:mod:`dedup`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from operator import attrgetter, eq
from typing import Any, Callable, Iterable, Sequence

from tiervault.errors import EntryNotFound, QueryError, StorageError, TierUnavailable, ValidationError
from tiervault.vault.backend import TierBackend
from tiervault.vault.backoff import Backoff
from tiervault.vault.tier_open import due_for_retry, try_open
from tiervault.vault import dedup
from tiervault.vault.candidates import Candidates, LexicalQuery, candidates_of
from tiervault.vault.entry import Entry
from tiervault.vault.filters import Filters
from tiervault.vault.mirror_workers import build_missing
from tiervault.vault.query import query_terms
from tiervault.vault.read_scope import read_scope
from tiervault.vault.patch import UpdateResult, apply_patch
from tiervault.vault.rows import (CommittedBatch, KeyColumns, LexicalHit, Link, LinkEnds, Memory, MemoryHit,
                                  TermStats)
from tiervault.vault.scoring import bm25_upper_bound
from tiervault.vault.shared_keys import SharedKeys
from tiervault.vault.tokenizer import STEMMER

__all__ = ["VaultManager", "Tier", "Candidates", "LexicalQuery", "EntryPage", "DEFAULT_TIER_WEIGHTS"]

log = logging.getLogger(__name__)

DEFAULT_TIER_WEIGHTS = {"agent": 1.0, "project": 0.8, "team": 0.6}


@dataclass(slots=True)
class Tier:
    """A connected tier: its backend (None when unavailable), weight and status.

    ``path`` is where the tier lives, safe to print (a path or a redacted URL);
    ``config`` (a :class:`tiervault.config.TierConfig`) says how to open it; without
    one, ``path`` is an SQLite file.
    """

    name: str
    path: str
    weight: float
    read_only: bool = False
    store: TierBackend | None = None
    problem: str | None = None
    config: Any = None
    #: Paces re-opening a tier that could not be opened (see :meth:`VaultManager.ordered`).
    retry: Backoff = field(default_factory=Backoff)


@dataclass(slots=True)
class EntryPage:
    """One page of a listing: ``(entry, tier)`` rows and how many match in all."""

    rows: list[tuple[Entry, str]]
    total: int
    offset: int
    limit: int


class VaultManager:
    """Every configured tier behind one API. Writes go only to the tier named."""

    def __init__(self, tiers: Iterable[Tier]) -> None:
        self.tiers: dict[str, Tier] = {}
        self._write_hooks: list[Callable[[str, list[Entry]], None]] = []
        #: The embedding runtime serving this manager, once attached (see attach_embeddings).
        self.embeddings: Any = None
        #: The ids and hashes held by more than one tier: the dedup's look-ups skip the rest
        #: (vault/shared_keys.py). None: every tier is asked about every other tier's hits.
        self.shared_keys: SharedKeys | None = SharedKeys()
        for tier in tiers:
            if tier.name in self.tiers:
                raise ValidationError("tiers", f"tier {tier.name!r} is configured twice")
            if tier.store is None and tier.problem is None:
                tier.store, tier.problem = try_open(tier)
            self.tiers[tier.name] = tier

    def _reopen_failed(self, tiers: Iterable[Tier]) -> None:
        """Tiers that could not be opened are tried again when their backoff allows: a
        server down at start joins later searches once it is back, without a restart."""
        for tier in tiers:
            if tier.store is None and due_for_retry(tier):  # an open tier: no call
                tier.store, tier.problem = try_open(tier)

    @classmethod
    def from_settings(cls, settings: Any) -> "VaultManager":
        """Open the tiers of a :class:`tiervault.config.Settings`."""
        return cls(Tier(t.name, t.location, t.weight, t.read_only, config=t) for t in settings.tiers)

    def attach_embeddings(self, runtime: Any) -> None:
        """Record the embedding runtime that serves this manager's tiers."""
        self.embeddings = runtime

    @classmethod
    def at(cls, paths: dict[str, str], weights: dict[str, float] | None = None) -> "VaultManager":
        """Convenience: ``VaultManager.at({"agent": "a.db", "team": "t.db"})``."""
        weights = {**DEFAULT_TIER_WEIGHTS, **(weights or {})}
        return cls(Tier(name, path, weights.get(name, 0.5)) for name, path in paths.items())

    def close(self) -> None:
        for tier in self.tiers.values():
            if tier.store is not None:
                tier.store.close()

    def __enter__(self) -> "VaultManager":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- tiers ------------------------------------------------------------------------
    def ordered(self, names: Sequence[str] | None = None) -> list[Tier]:
        """Usable tiers, highest weight first (config order breaks ties)."""
        if names is not None:
            unknown = [n for n in names if n not in self.tiers]
            if unknown:
                raise ValidationError("tiers", f"unknown tier {unknown[0]!r}; configured: "
                                      f"{', '.join(self.tiers)}")
        self._reopen_failed(self.tiers.values())
        chosen = [t for t in self.tiers.values()
                  if t.store is not None and (names is None or t.name in names)]
        # highest weight first; reverse=True keeps the config order of equal weights
        return sorted(chosen, key=_WEIGHT, reverse=True)

    def store(self, name: str) -> TierBackend:
        """The store of tier ``name`` for writing; clear errors when it cannot be used."""
        tier = self.tiers.get(name)
        if tier is None:
            raise ValidationError("tier", f"{name!r} is not configured; configured tiers: "
                                  f"{', '.join(self.tiers) or 'none'}")
        self._reopen_failed([tier])
        if tier.store is None:
            raise TierUnavailable(name, tier.path, tier.problem or "unavailable")
        return tier.store

    @property
    def problems(self) -> dict[str, str]:
        return {t.name: t.problem for t in self.tiers.values() if t.problem}

    # -- writes -----------------------------------------------------------------------
    def add_write_hook(self, hook: Callable[[str, list[Entry]], None]) -> None:
        """Call ``hook(tier, entries)`` after entries are committed (e.g. embed on write).

        The write is already durable when a hook runs; a failing hook is logged
        as a warning and never undoes or fails the write.
        """
        self._write_hooks.append(hook)

    def _after_write(self, tier: str, entries: list[Entry]) -> None:
        for hook in self._write_hooks:
            try:
                hook(tier, entries)
            except Exception as exc:  # the write committed; report, do not fail it
                log.warning("after-write step %s failed for %d entries in tier %r: %s",
                            getattr(hook, "__qualname__", hook), len(entries), tier, exc)

    def capture(self, entry: Entry, tier: str = "agent") -> Entry:
        stored = self.store(tier).capture(entry)
        self._after_write(tier, [stored])
        return stored

    def capture_many(self, entries: Iterable[Entry], tier: str = "agent", *,
                     batch_size: int = 5_000,
                     on_batch: Callable[[CommittedBatch], None] | None = None) -> int:
        """Upsert entries into ``tier``: the whole iterable goes to the tier's store in ONE
        call (so a backend's bulk path applies to the whole load), read once; the write
        hooks run after each committed batch, then ``on_batch`` with that batch."""
        def committed(batch: CommittedBatch) -> None:
            if self._write_hooks:
                self._after_write(tier, batch.entries)
            if on_batch:
                on_batch(batch)

        return self.store(tier).capture_many(entries, batch_size=batch_size, on_batch=committed)

    def delete(self, entry_id: str, tier: str = "agent") -> bool:
        return self.store(tier).delete(entry_id)

    def update(self, entry_id: str, patch: dict[str, Any], *, tier: str | None = None) -> UpdateResult:
        """Change only the fields named in ``patch`` (see :mod:`tiervault.vault.patch`) of the
        entry in ``tier``, else in the highest-priority tier holding it. Unknown id:
        EntryNotFound. A patch that changes nothing writes nothing (``changed`` empty)."""
        name = tier if tier is not None else self.locate(entry_id)
        if name is None:
            raise EntryNotFound(entry_id)
        store = self.store(name)
        current = store.get(entry_id)
        if current is None:
            raise EntryNotFound(entry_id)
        edited, changed = apply_patch(current, patch)
        if not changed:
            return UpdateResult(current, name, ())
        return UpdateResult(self.capture(edited, name), name, changed)

    def link(self, source_id: str, target_id: str, link_type: str, note: str = "",
             tier: str | None = None) -> Link:
        """Link two entries; stored in ``tier`` or else the highest-priority tier holding the source."""
        if self.locate(target_id) is None:
            raise EntryNotFound(target_id)
        if tier is None:
            found = self.locate(source_id)
            if found is None:
                raise EntryNotFound(source_id)
            tier = found
        return self.store(tier).link(source_id, target_id, link_type, note)

    # -- reads ------------------------------------------------------------------------
    def _each(self, tiers: Sequence[Tier], read: Callable[[TierBackend], Any]) -> list[tuple[Tier, Any]]:
        """``(tier, read(store))`` per tier. A tier whose file fails underneath (corrupt
        pages, I/O errors: StorageError) is logged, listed in ``problems`` and left out
        of this answer, so one damaged file never takes the other tiers' answers down."""
        out = []
        for tier in tiers:
            try:
                out.append((tier, read(tier.store)))  # type: ignore[arg-type]
            except StorageError as exc:
                log.warning("left out of this answer: %s", exc)
                tier.problem = str(exc)
            else:
                tier.problem = None  # it reads again (the failure was transient)
        return out

    def locate(self, entry_id: str) -> str | None:
        """Name of the highest-priority tier holding ``entry_id``."""
        for tier in self.ordered():
            if any(found is not None for _, found in self._each([tier], lambda s: s.get(entry_id))):
                return tier.name
        return None

    def get(self, entry_id: str) -> tuple[Entry, str]:
        """(entry, tier) from the highest-priority tier holding it."""
        found = self.get_many([entry_id])
        if entry_id not in found:
            raise EntryNotFound(entry_id)
        return found[entry_id]

    def get_many(self, ids: Sequence[str], tiers: Sequence[str] | None = None) -> dict[str, tuple[Entry, str]]:
        out: dict[str, tuple[Entry, str]] = {}
        for tier in self.ordered(tiers):
            missing = [i for i in ids if i not in out]
            if not missing:
                break
            for _, found in self._each([tier], lambda s: s.get_many(missing)):
                for eid, entry in found.items():
                    out[eid] = (entry, tier.name)
        return out

    def list_entries(self, *, filters: Filters | None = None, tiers: Sequence[str] | None = None,
                     sort: str = "updated", since: float | None = None, limit: int = 50,
                     offset: int = 0) -> EntryPage:
        """A page of entries over ``tiers`` (default: all), newest first by ``sort``
        ("updated" | "created"; ties: higher-priority tier first). Every copy is listed:
        an id held by two tiers appears once per tier."""
        if sort not in ("updated", "created"):
            raise ValidationError("sort", f"{sort!r} is not one of updated, created")
        for name, value, low in (("limit", limit, 1), ("offset", offset, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValidationError(name, f"{value!r} must be an integer >= {low}")
        key = "updated_at" if sort == "updated" else "created_at"
        rows: list[tuple[Entry, str]] = []
        total = 0
        chosen = self.ordered(tiers)
        for tier, (count, page) in self._each(chosen, lambda s: (
                s.count_matching(filters, since),
                s.list_entries(offset=0, limit=offset + limit, filters=filters, sort=sort,
                               since=since))):
            total += count
            rows.extend((e, tier.name) for e in page)
        rank = {t.name: r for r, t in enumerate(chosen)}
        rows.sort(key=lambda r: (-(getattr(r[0], key) or 0.0), rank[r[1]]))
        return EntryPage(rows[offset:offset + limit], total, offset, limit)

    def vocabulary(self, tiers: Sequence[str] | None = None, top_tags: int = 30) -> dict[str, Any]:
        """Domains, types and severities with counts, and the ``top_tags`` most used tags,
        summed over ``tiers``: the words a model can filter by."""
        merged: dict[str, dict[str, int]] = {"domains": {}, "types": {}, "severities": {},
                                             "tags": {}}
        for _, vocab in self._each(self.ordered(tiers), lambda s: s.vocabulary()):
            for key, counts in vocab.items():
                for word, n in counts.items():
                    merged[key][word] = merged[key].get(word, 0) + n
        out: dict[str, Any] = {}
        for key, counts in merged.items():
            ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
            out[key] = dict(ranked[:top_tags] if key == "tags" else ranked)
        out["tagCount"] = len(merged["tags"])
        return out

    def get_memories(self, ids: Sequence[str]) -> dict[str, tuple[Memory, str]]:
        """Session memories by id, each from the highest-priority tier holding it."""
        out: dict[str, tuple[Memory, str]] = {}
        for tier, found in self._each(self.ordered(), lambda s: s.get_memories(ids)):
            for mid, memory in found.items():
                out.setdefault(mid, (memory, tier.name))
        return out

    def links_touching(self, ids: Sequence[str]) -> list[Link]:
        """Links in EVERY usable tier whose source or target is in ``ids``."""
        links: list[Link] = []
        for _, found in self._each(self.ordered(), lambda s: s.links_touching(ids)):
            links.extend(found)
        return links

    def link_ends(self, ids: Sequence[str]) -> list[LinkEnds]:
        """:meth:`links_touching` as (source, target, type) only: what graph hops need. A
        tier with a link graph (SQLite: ``link_ends``, memory-mapped) answers without SQL;
        another answers from its ``links_touching``."""
        ends: list[LinkEnds] = []
        if not ids:
            return ends
        for _, found in self._each(self.ordered(), lambda s: _ends_of(s, ids)):
            ends.extend(found)
        return ends

    def links_of(self, ids: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
        """Each id's links in every tier, both directions: ``{"direction": "out" | "in",
        "type", "id" (the other end), "note", "tier" (where the link is stored)}``."""
        out: dict[str, list[dict[str, Any]]] = {i: [] for i in ids}
        for link in self.links_touching(ids):
            for eid, direction, other in ((link.source_id, "out", link.target_id),
                                          (link.target_id, "in", link.source_id)):
                if eid in out:
                    out[eid].append({"direction": direction, "type": link.link_type,
                                     "id": other, "note": link.note, "tier": link.tier})
        for views in out.values():
            views.sort(key=lambda v: (v["direction"] != "out", v["type"], v["id"], v["tier"]))
        return out

    def search_memories(self, query: str, limit: int) -> list[tuple[MemoryHit, str]]:
        terms = query_terms(query)
        hits: list[tuple[MemoryHit, str]] = []
        for tier, found in self._each(self.ordered(), lambda s: s.search_memories(terms, limit)):
            hits.extend((h, tier.name) for h in found)
        hits.sort(key=lambda h: -h[0].score)
        return hits[:limit]

    # -- search -----------------------------------------------------------------------
    def lexical_query(self, query: str, tiers: Sequence[str] | None = None) -> LexicalQuery:
        """The query's terms and the federated BM25 statistics of every usable tier."""
        words = query_terms(query)
        stem_of = STEMMER.stems(words)
        stems = list(dict.fromkeys(stem_of[w] for w in words if stem_of[w]))
        chosen = self.ordered(tiers)
        # tiers without a mirror or a cache that fits: built at once in worker processes
        build_missing(t.store for t in chosen)
        answered = self._each(chosen, lambda s: s.term_stats(stems))
        stats = sum((st for _, st in answered), TermStats.empty(len(stems)))
        bound = bm25_upper_bound(stats.idf()) if stems else 0.0
        return LexicalQuery(query, words, stems, bound, stats, [t.name for t, _ in answered])

    def lexical_scores(self, lq: LexicalQuery, tier: str, ids: Sequence[str]) -> dict[str, tuple[float, float]]:
        """{id: (normalised BM25, TF-IDF cosine)} of entries of ``tier`` under ``lq``
        (ids not held there are absent; a tier that fails is left out)."""
        t = self.tiers.get(tier)
        if t is None or t.store is None or tier not in lq.tiers or not ids:
            return {}
        bound = lq.bound if lq.bound > 0 else 1.0
        out: dict[str, tuple[float, float]] = {}
        # the content hashes are not read here: not asked for
        for _, hits in self._each([t], lambda s: s.lexical_scores(
                lq.stems, lq.stats, ids=ids, words=lq.words, content_hashes=False)):
            for h in hits:
                out[h.id] = (h.score / bound if lq.bound > 0 else 0.0, h.tfidf)
        return out

    def count_matches(self, lq: LexicalQuery, filters: Filters, cap: int) -> int:
        """Entries matching the query and the filters over ``lq``'s tiers (duplicates
        included), exact below ``cap`` (any answer >= cap means "many")."""
        total = 0
        for tier in self.ordered(lq.tiers):
            for _, n in self._each([tier], lambda s: s.lexical_count(lq.stems, filters, cap - total)):
                total += n
            if total >= cap:
                break
        return total

    def search(self, query: str, *, filters: Filters | None = None, limit: int = 30,
               tiers: Sequence[str] | None = None) -> Candidates:
        """Top ``limit`` entries over all tiers by tier-weighted, normalised BM25.

        Every tier is asked for the same ``limit`` with the same filters (applied
        before the limit), then results are deduplicated and merged.
        """
        if not isinstance(limit, int) or limit < 1 or limit > 10_000:
            raise ValidationError("limit", f"{limit!r} must be an integer from 1 to 10000")
        if not isinstance(query, str):
            raise QueryError("query", f"expected a string, got {type(query).__name__}")
        with read_scope():  # statistics and top k from one generation of each tier
            return self._search(query, filters or Filters(), limit, tiers)

    def _search(self, query: str, filters: Filters, limit: int,
                tiers: Sequence[str] | None) -> Candidates:
        index = self.shared_keys
        before = index.before() if index is not None else None  # its builds before the top k
        lq = self.lexical_query(query, tiers)
        chosen = [t for t in self.ordered(tiers) if t.name in lq.tiers]  # a failed tier is out
        answered = self._each(chosen, lambda s: _top_k_of(s, lq, filters, limit))
        tops = [(tier, chosen.index(tier), answer) for tier, answer in answered]
        chosen = [t for t, _ in answered]
        # Dedup in priority order: the highest-priority tier holding the same id
        # (or the same content under another id) supplies the copy that is kept,
        # provided that copy passes the filters too.
        shared = None
        if index is not None:
            shared = index.shared({t.name: c for t, c in self._each(chosen, _key_columns) if c is not None},
                                  before)
        kept, pool, matched = dedup.kept_of_tops(self._each, tops, lq.stems, lq.stats, filters, shared,
                                                 self.tiers, limit)
        kept = self._with_tfidf(kept, pool, lq)
        return candidates_of(kept, lq, {t.name: t.weight for t in self.tiers.values()}, matched)

    def _with_tfidf(self, kept: list[dedup.Kept], pool: list[dedup.Pooled],
                    lq: LexicalQuery) -> list[dedup.Kept]:
        """``kept`` with each hit's TF-IDF: its tier's top-k hit's, or read for it."""
        # Nearly always every kept copy IS its tier's own top-k hit, which has its TF-IDF:
        # then ``kept`` is the answer as it is (no look-up, no hit rebuilt).
        pooled = dict(zip(map(id, map(_HIT, pool)), map(_TIER, pool)))  # the pool holds its hits alive
        if all(map(eq, map(pooled.get, map(id, map(_HIT, kept))), map(_TIER, kept))):
            return kept
        own = {(p.tier, p.hit.id): p.hit.tfidf for p in pool}
        need: dict[str, list[str]] = {}
        for k in kept:
            if (k.tier, k.hit.id) not in own:
                need.setdefault(k.tier, []).append(k.hit.id)
        for name, wanted in need.items():
            for _, held in self._each([self.tiers[name]], lambda s: s.lexical_scores(
                    lq.stems, lq.stats, ids=wanted, words=lq.words)):
                own.update(((name, h.id), h.tfidf) for h in held)
        return [k._replace(hit=LexicalHit(k.hit.id, k.hit.content_hash, k.hit.score,
                                          own.get((k.tier, k.hit.id), 0.0), k.hit.passes))
                for k in kept]

    # -- stats ------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, tier in self.tiers.items():
            if tier.store is None:
                out[name] = {"path": tier.path, "weight": tier.weight, "available": False,
                             "problem": tier.problem}
                continue
            try:
                st = tier.store.stats()
                out[name] = {"path": tier.path, "weight": tier.weight, "available": True,
                             "read_only": tier.read_only, "exists": st.exists, "entries": st.entries,
                             "links": st.links, "memories": st.memories, "bytes": st.bytes}
            except (StorageError, TierUnavailable) as exc:  # a damaged file: report it, keep the other tiers
                out[name] = {"path": tier.path, "weight": tier.weight, "available": False,
                             "problem": str(exc)}
        return out


_HIT, _TIER = attrgetter("hit"), attrgetter("tier")
_WEIGHT = attrgetter("weight")


def _top_k_of(store: Any, lq: LexicalQuery, filters: Filters, limit: int) -> Any:
    """A tier's top k: as slots whose hits are made when the dedup asks (``SlotHits``)
    from a tier with the optional ``lexical_top_k_slots`` (an in-process mirror:
    vault/mirror_search.py), else its hits (``lexical_top_k``)."""
    read = getattr(store, "lexical_top_k_slots", None)
    if read is None:
        return store.lexical_top_k(lq.stems, lq.stats, filters, limit, words=lq.words)
    return read(lq.stems, lq.stats, filters, limit, words=lq.words)


def _key_columns(store: Any) -> KeyColumns | None:
    """A tier's key columns for the dedup's index; None from a backend without them."""
    read = getattr(store, "key_columns", None)
    return None if read is None else read()


def _ends_of(store: Any, ids: Sequence[str]) -> list[LinkEnds]:
    """A tier's links touching ``ids`` as ends: its link graph when it has one."""
    read = getattr(store, "link_ends", None)
    if read is not None:
        return read(ids)
    return LinkEnds.of(store.links_touching(ids))
