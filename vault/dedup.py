"""The federated search's dedup look-ups: which tiers hold a copy of each top-k hit.

:meth:`~tiervault.vault.manager.VaultManager.search` asks every tier for its top k,
then keeps one copy of each entry: the highest-priority tier holding the same id,
or the same content (hash) under another id. :func:`holders` finds those copies,
:func:`keep` chooses the copy kept of each pooled hit.

A tier is not asked about its own top-k hits: it holds each at the slot it
returned, with the same score (BM25 at that slot under the same statistics) and
passing the filters (the top k is taken among passing slots); their hashes are
then held through those ids. It is asked only about the other tiers' ids and
hashes: a third of the look-ups of a three-tier search fewer (issue 16: the id
and hash look-ups were ~1.1 ms of a 5 ms FTS-only scan at 100K).
"""

from __future__ import annotations

from itertools import compress, filterfalse, groupby, repeat
from operator import add, attrgetter, itemgetter, mul, or_
from typing import Any, Callable, Mapping, NamedTuple, Sequence

from tiervault.vault.filters import Filters
from tiervault.vault.lexicon import SlotHits
from tiervault.vault.hash_table import digest_keys
from tiervault.vault.rows import LexicalHit, TermStats
from tiervault.vault.shared_keys import Shared
from tiervault.vault.string_table import lookup_fingerprints

__all__ = ["holders", "keep", "kept", "kept_of_tops", "Pooled", "Kept"]

#: ``VaultManager._each``: (tier, answer) for each tier that answered.
Each = Callable[[Sequence[Any], Callable[[Any], Any]], list[tuple[Any, Any]]]


class Pooled(NamedTuple):
    """One tier's top-k hit in the federated pool."""

    neg_score: float  # -(raw BM25 * tier weight): ascending = best first
    rank: int  # the tier's priority (0 = highest weight)
    tier: str
    hit: LexicalHit


_ID, _HASH, _SCORE = attrgetter("id"), attrgetter("content_hash"), attrgetter("score")
_HIT, _PASSES = attrgetter("hit"), attrgetter("passes")
_NEW, _ALONE = tuple.__new__, ((),)  # a Kept made in C from its fields; no also_in


class Kept(NamedTuple):
    """The copy kept of one entry: from the highest-priority tier holding it."""

    neg_score: float  # -(the kept copy's raw BM25 * its tier's weight)
    rank: int  # the priority of the tier whose top k brought the entry in
    tier: str  # the tier the kept copy is from
    hit: LexicalHit
    also_in: tuple[str, ...]  # the other tiers holding a copy, in priority order


_PRIORITY = itemgetter(1, 0)  # a Pooled's (rank, neg_score)
_Row = tuple  # a Kept's fields, as a plain tuple
_ORDER = itemgetter(0, 1)  # a Kept's (neg_score, rank)


def holders(each: Each, chosen: Sequence[Any], hits: Sequence[tuple[str, LexicalHit]],
            stems: Sequence[str], stats: TermStats, filters: Filters, shared: Shared | None = None
            ) -> tuple[dict[str, dict[str, LexicalHit]], dict[str, dict[str, LexicalHit]]]:
    """(by_id, by_hash), per tier of ``chosen`` that answered: the copies it holds of
    the top-k ``hits`` ((tier name, hit), in pool order), by id and by content hash.

    For each hash, by_hash prefers the copy held under the first pool id (pool order)
    with that hash, then a copy found by the hash alone (what asking for every id
    and hash at once answered). No TF-IDF: a kept hit is nearly always its tier's own
    top-k hit, which has it.

    ``shared`` (:mod:`shared_keys`, per tier name: its ids and hashes another tier
    holds too): a tier named there is asked only about the pooled ids and hashes in
    its sets, or pooled from a tier not named there -- usually nothing, then it is
    not asked (a string outside its sets is held by one tier only: the same answer)."""
    own: dict[str, dict[str, LexicalHit]] = {t.name: {} for t in chosen}
    names, pooled = zip(*hits) if hits else ((), ())
    at = 0
    for name, run in groupby(names):  # one tier's hits at a time (the pool's usual order)
        n = len(list(run))
        part = pooled[at:at + n][::-1]
        at += n
        mine = own.setdefault(name, {})
        if mine:  # the tier's hits in two runs: an id's first hit stays
            mine.update({k: v for k, v in zip(map(_ID, part), part) if k not in mine})
        else:  # each id's first hit in pool order (reversed: the first one is written last)
            mine.update(zip(map(_ID, part), part))
    ids = list(dict.fromkeys(map(_ID, pooled)))
    hashes = list(dict.fromkeys(map(_HASH, pooled)))
    by_id: dict[str, dict[str, LexicalHit]] = {}
    by_hash: dict[str, dict[str, LexicalHit]] = {}
    if shared is None:
        shared = {}
        # every id and hash is asked of one tier or two: its key computed once, not per tier
        lookup_fingerprints(ids)
        digest_keys(hashes)
    # the ids and hashes pooled from a tier outside ``shared``: asked of every other tier
    loose_ids: set[str] = set()
    loose_hashes: set[str] = set()
    for name, mine in own.items():
        if name not in shared:
            loose_ids.update(mine)
            loose_hashes.update(map(_HASH, mine.values()))
    for tier in chosen:
        mine = own[tier.name]
        mine_hashes = set(map(_HASH, mine.values()))
        sets = shared.get(tier.name)
        if sets is None:
            ask_ids = list(filterfalse(mine.__contains__, ids))
            ask_hashes = list(filterfalse(mine_hashes.__contains__, hashes))
        else:
            maybe_ids = (sets[0].intersection(ids) | loose_ids).difference(mine)
            maybe_hashes = (sets[1].intersection(hashes) | loose_hashes) - mine_hashes
            if not maybe_ids and not maybe_hashes:  # held by this tier only: no copy here
                by_id[tier.name] = mine
                in_pool = list(map(mine.__getitem__, filter(mine.__contains__, ids)))
                in_pool.reverse()
                by_hash[tier.name] = dict(zip(map(_HASH, in_pool), in_pool))
                continue
            ask_ids = [x for x in ids if x in maybe_ids]
            ask_hashes = [x for x in hashes if x in maybe_hashes]
        for _, held in each([tier], lambda s: s.lexical_scores(
                stems, stats, ids=ask_ids, hashes=ask_hashes, filters=filters)):
            found = {h.id: h for h in held}
            found.update(mine)
            by_id[tier.name] = found
            # the copies held under pool ids, in pool order; the first of each hash wins
            in_pool = list(map(found.__getitem__, filter(found.__contains__, ids)))
            in_pool.reverse()
            first = dict(zip(map(_HASH, in_pool), in_pool))  # reversed: the first one stays
            for h in held:
                first.setdefault(h.content_hash, h)
            by_hash[tier.name] = first
    return by_id, by_hash


def keep(pool: Sequence[Pooled], chosen: Sequence[Any], by_id: Mapping[str, Mapping[str, LexicalHit]],
         by_hash: Mapping[str, Mapping[str, LexicalHit]], tiers: Mapping[str, Any],
         limit: int | None = None) -> list[Kept]:
    """One copy of each pooled entry, best first (by ``neg_score``, then ``rank``); the
    first ``limit`` of them (all when None).

    Pooled hits are taken in priority order (tier rank, then score); each one's
    holders are the tiers of ``chosen`` (priority order) holding its id, or else
    its content hash (:func:`holders`); the first holder supplies the copy, which
    must pass the filters. A copy already kept (same tier and id) is not kept
    twice. ``tiers`` maps a name to its tier (``.name``, ``.weight``)."""
    rows = [row for row, _ in _walk(sorted(pool, key=_PRIORITY), chosen, by_id, by_hash, tiers)]
    rows.sort(key=_ORDER)  # stable: ties stay in priority order
    # plain tuples until here: only the rows returned are made Kept
    return list(map(Kept._make, rows if limit is None else rows[:limit]))


def kept(each: Each, chosen: Sequence[Any], pool: Sequence[Pooled], stems: Sequence[str],
         stats: TermStats, filters: Filters, shared: Shared | None, tiers: Mapping[str, Any],
         limit: int | None = None) -> list[Kept]:
    """:func:`holders` then :func:`keep` over ``chosen`` (the tiers that answered, priority
    order; each pooled hit's ``neg_score`` is -its score * its tier's weight, as the
    manager makes them): the same rows.

    With ``shared`` naming every tier of ``chosen`` (:mod:`shared_keys`), the pooled hits
    whose id and hash no two tiers hold (``shared.ids`` / ``shared.hashes``; ~96% of a
    bench pool) are kept as they are -- no other tier holds a copy, and no copy found for
    another hit is one of them (its id or hash would be held twice) -- and only the others
    go through holders and keep's walk; the rows are merged back in priority order
    before keep's stable sort (issue 16, session 12: the dedup was ~0.5 ms a query)."""
    if shared is None or len(shared) != len(chosen) or any(t.name not in shared for t in chosen):
        by_id, by_hash = holders(each, chosen, [(p.tier, p.hit) for p in pool], stems, stats, filters,
                                 shared)
        return keep(pool, [t for t in chosen if t.name in by_id], by_id, by_hash, tiers, limit)
    ordered = sorted(pool, key=_PRIORITY)
    hits = list(map(_HIT, ordered))
    hit_ids, hit_hashes = list(map(_ID, hits)), list(map(_HASH, hits))
    ids, hashes = shared.ids, shared.hashes
    passing = all(map(_PASSES, hits))
    if ids.isdisjoint(hit_ids) and hashes.isdisjoint(hit_hashes):  # ~6% of bench searches
        rows = sorted(ordered if passing else compress(ordered, map(_PASSES, hits)), key=_ORDER)
        # each row a Pooled until here: only those returned are made Kept (no also_in), in C
        return list(map(_NEW, repeat(Kept), map(add, rows if limit is None else rows[:limit],
                                                repeat(_ALONE))))
    # a few hits with an id or hash held twice: through holders and keep's walk
    twice = list(compress(range(len(hits)), map(or_, map(ids.__contains__, hit_ids),
                                                 map(hashes.__contains__, hit_hashes))))
    sub = [ordered[i] for i in twice]
    by_id, by_hash = holders(each, chosen, [(p.tier, p.hit) for p in sub], stems, stats, filters, shared)
    # the simple hits' rows (Kept's fields; None: fails the filters) at their priority positions
    at: list[Any] = (list(map(add, ordered, repeat(_ALONE))) if passing
                     else [p + _ALONE if p.hit.passes else None for p in ordered])
    for i in twice:
        at[i] = None
    for row, j in _walk(sub, [t for t in chosen if t.name in by_id], by_id, by_hash, tiers):
        at[twice[j]] = row
    rows = sorted(filter(None, at), key=_ORDER)  # stable: ties stay in priority order
    return list(map(_NEW, repeat(Kept), rows if limit is None else rows[:limit]))


def kept_of_tops(each: Each, tops: Sequence[tuple[Any, int, Any]], stems: Sequence[str],
                 stats: TermStats, filters: Filters, shared: Shared | None, tiers: Mapping[str, Any],
                 limit: int) -> tuple[list[Kept], list[Pooled], int]:
    """(:func:`kept`'s rows, the pooled hits made, how many hits were pooled) of the tiers'
    top k ``tops``: (tier, its priority, its answer) in priority order, an answer being a
    list of hits or a ``SlotHits`` (vault/lexicon.py: slots and BM25, hits made when
    asked). Each pooled hit's ``neg_score`` is -its score * its tier's weight.

    With every answer a ``SlotHits`` and ``shared`` naming each tier with its slots
    (:class:`~tiervault.vault.shared_keys.Shared`), only the hits that can be kept are
    made: a hit at a slot outside its tier's shared slots is held by its own tier only
    and is kept as it is (:func:`kept`'s fast path), so its row is known from its score;
    the others (~4 % of a bench pool) go through :func:`holders` and :func:`_walk` as in
    :func:`kept`; the rows are sorted as there and cut at ``limit``, and only then are
    the kept hits' ids, hashes and TF-IDF read. The same rows as :func:`kept` over every
    hit (issue 16, session 19: ~60 of ~90 pooled hits a bench scan were read and
    dropped)."""
    matched = sum(len(a) for _, _, a in tops)
    chosen = [t for t, _, _ in tops]
    lazy = (shared is not None and len(shared) == len(tops) and all(
        t.name in shared and t.name in shared.slots and isinstance(a, SlotHits) for t, _, a in tops))
    if not lazy:
        pool: list[Pooled] = []
        for tier, rank, answer in tops:
            hits = answer.hits() if isinstance(answer, SlotHits) else answer
            # each Pooled made in C (-score * weight as score * -weight: the same float)
            pool.extend(map(_NEW, repeat(Pooled), zip(
                map(mul, map(_SCORE, hits), repeat(-tier.weight)), repeat(rank), repeat(tier.name), hits)))
        return kept(each, chosen, pool, stems, stats, filters, shared, tiers, limit), pool, matched
    assert shared is not None
    negs: list[float] = []  # by position in the pool (priority order), -score * weight
    ranks: list[int] = []
    owner: list[int] = []  # the index in ``tops`` of each position's tier
    starts: list[int] = []
    twice_at: list[int] = []  # the positions whose slot another tier may hold a copy of
    for i, (tier, r, answer) in enumerate(tops):
        n, start = len(answer), len(negs)
        starts.append(start)
        negs += map(mul, answer.scores.tolist(), repeat(-tier.weight))  # as Pooled's
        ranks += [r] * n
        owner += [i] * n
        flags = list(map(shared.slots[tier.name].__contains__, answer.slots.tolist()))
        if True in flags:
            twice_at += [start + j for j in compress(range(n), flags)]
    entries: list[Any] = list(zip(negs, ranks, range(len(negs))))  # keep's sort key, ties by position
    for at in twice_at:
        entries[at] = None
    if twice_at:
        entries = list(filter(None, entries))
    entries.sort()
    # the hits made, one call a tier: the first ``limit`` held by their tier alone (the walk's
    # rows can only push some out) and every one the walk reads
    made: dict[int, LexicalHit] = {}
    wanted: list[list[int]] = [[] for _ in tops]
    for at in [e[2] for e in entries[:limit]] + twice_at:
        wanted[owner[at]].append(at)
    for i, ats in enumerate(wanted):
        if ats:
            made.update(zip(ats, tops[i][2].hits([at - starts[i] for at in ats])))
    pool = [Pooled(negs[at], ranks[at], tops[owner[at]][0].name, made[at]) for at in twice_at]
    rows: dict[int, tuple] = {}  # position -> its row from the walk
    if pool:
        by_id, by_hash = holders(each, chosen, [(p.tier, p.hit) for p in pool], stems, stats, filters,
                                 shared)
        for row, j in _walk(pool, [t for t in chosen if t.name in by_id], by_id, by_hash, tiers):
            rows[twice_at[j]] = row
        entries += [(row[0], ranks[at], at) for at, row in rows.items()]
        entries.sort()
    out: list[Kept] = []
    for neg, r, at in entries[:limit]:
        row = rows.get(at)
        if row is None:
            p = Pooled(neg, r, tops[owner[at]][0].name, made[at])
            pool.append(p)
            row = p + _ALONE
        out.append(Kept._make(row))
    return out, pool, matched


def _walk(ordered: Sequence[Pooled], chosen: Sequence[Any], by_id: Mapping[str, Mapping[str, LexicalHit]],
          by_hash: Mapping[str, Mapping[str, LexicalHit]], tiers: Mapping[str, Any]
          ) -> list[tuple[_Row, int]]:
    """:func:`keep`'s rows before its sort, each with the position in ``ordered`` (the
    pool in priority order) of the pooled hit that brought it."""
    rows: list[tuple[_Row, int]] = []
    taken: set[tuple[str, str]] = set()
    # The ids and hashes more than one tier holds: a hit whose id and hash only its own
    # tier holds (~96% of a bench pool) skips the walk over every tier (same answer).
    # Built with set operations over the tiers' keys, no Python per key (session 10).
    shared_ids, _ = _shared([by_id[t.name] for t in chosen])
    shared_hashes, any_hash = _shared([by_hash[t.name] for t in chosen])
    own = {t.name: (by_id[t.name], t.weight) for t in chosen}
    for at, p in enumerate(ordered):
        _, rank, name, hit = p
        mine = own.get(name)
        if mine is not None:
            here = mine[0]
            hid, hh = hit.id, hit.content_hash
            if hid in here and hid not in shared_ids and hh not in shared_hashes and hh in any_hash:
                w_hit = here[hid]
                key = (name, w_hit.id)
                if key in taken or not w_hit.passes:
                    continue
                taken.add(key)
                rows.append(((-w_hit.score * mine[1], rank, name, w_hit, ()), at))
                continue
        found_in: list[tuple[Any, LexicalHit]] = []
        for other in chosen:
            found = by_id[other.name].get(hit.id) or by_hash[other.name].get(hit.content_hash)
            if found is not None:
                found_in.append((other, found))
        winner, w_hit = found_in[0] if found_in else (tiers[name], hit)
        if (winner.name, w_hit.id) in taken or not w_hit.passes:
            continue
        taken.update((t.name, h.id) for t, h in found_in)
        rows.append(((-w_hit.score * winner.weight, rank, winner.name, w_hit,
                      tuple(t.name for t, _ in found_in[1:])), at))
    return rows


def _shared(maps: Sequence[Mapping[str, Any]]) -> tuple[set[str], set[str]]:
    """(the keys of more than one of ``maps``, the keys of any)."""
    seen: set[str] = set()
    shared: set[str] = set()
    for m in maps:
        shared |= seen.intersection(m)
        seen.update(m)
    return shared, seen
