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

from typing import Any, Callable, Mapping, NamedTuple, Sequence

from tiervault.vault.filters import Filters
from tiervault.vault.rows import LexicalHit, TermStats

__all__ = ["holders", "keep", "Pooled", "Kept"]

#: ``VaultManager._each``: (tier, answer) for each tier that answered.
Each = Callable[[Sequence[Any], Callable[[Any], Any]], list[tuple[Any, Any]]]


class Pooled(NamedTuple):
    """One tier's top-k hit in the federated pool."""

    neg_score: float  # -(raw BM25 * tier weight): ascending = best first
    rank: int  # the tier's priority (0 = highest weight)
    tier: str
    hit: LexicalHit


class Kept(NamedTuple):
    """The copy kept of one entry: from the highest-priority tier holding it."""

    neg_score: float  # -(the kept copy's raw BM25 * its tier's weight)
    rank: int  # the priority of the tier whose top k brought the entry in
    tier: str  # the tier the kept copy is from
    hit: LexicalHit
    also_in: tuple[str, ...]  # the other tiers holding a copy, in priority order


def holders(each: Each, chosen: Sequence[Any], hits: Sequence[tuple[str, LexicalHit]],
            stems: Sequence[str], stats: TermStats, filters: Filters
            ) -> tuple[dict[str, dict[str, LexicalHit]], dict[str, dict[str, LexicalHit]]]:
    """(by_id, by_hash), per tier of ``chosen`` that answered: the copies it holds of
    the top-k ``hits`` ((tier name, hit), in pool order), by id and by content hash.

    For each hash, by_hash prefers the copy held under the first pool id (pool order)
    with that hash, then a copy found by the hash alone (what asking for every id
    and hash at once answered). No TF-IDF: a kept hit is nearly always its tier's own
    top-k hit, which has it."""
    ids = list(dict.fromkeys(h.id for _, h in hits))
    hashes = list(dict.fromkeys(h.content_hash for _, h in hits))
    own: dict[str, dict[str, LexicalHit]] = {t.name: {} for t in chosen}
    for name, hit in hits:
        own.setdefault(name, {}).setdefault(hit.id, hit)
    by_id: dict[str, dict[str, LexicalHit]] = {}
    by_hash: dict[str, dict[str, LexicalHit]] = {}
    for tier in chosen:
        mine = own[tier.name]
        mine_hashes = {h.content_hash for h in mine.values()}
        ask_ids = [i for i in ids if i not in mine]
        ask_hashes = [h for h in hashes if h not in mine_hashes]
        for _, held in each([tier], lambda s: s.lexical_scores(
                stems, stats, ids=ask_ids, hashes=ask_hashes, filters=filters)):
            found = {h.id: h for h in held}
            found.update(mine)
            by_id[tier.name] = found
            first: dict[str, LexicalHit] = {}
            for i in ids:
                h = found.get(i)
                if h is not None:
                    first.setdefault(h.content_hash, h)
            for h in held:
                first.setdefault(h.content_hash, h)
            by_hash[tier.name] = first
    return by_id, by_hash


def keep(pool: Sequence[Pooled], chosen: Sequence[Any], by_id: Mapping[str, Mapping[str, LexicalHit]],
         by_hash: Mapping[str, Mapping[str, LexicalHit]], tiers: Mapping[str, Any]) -> list[Kept]:
    """One copy of each pooled entry, best first (by ``neg_score``, then ``rank``).

    Pooled hits are taken in priority order (tier rank, then score); each one's
    holders are the tiers of ``chosen`` (priority order) holding its id, or else
    its content hash (:func:`holders`); the first holder supplies the copy, which
    must pass the filters. A copy already kept (same tier and id) is not kept
    twice. ``tiers`` maps a name to its tier (``.name``, ``.weight``)."""
    kept: list[Kept] = []
    taken: set[tuple[str, str]] = set()
    # How many tiers hold each id / hash: a hit whose id and hash only its own tier
    # holds (~96% of a bench pool) skips the walk over every tier (same answer).
    id_holders: dict[str, int] = {}
    hash_holders: dict[str, int] = {}
    for t in chosen:
        for i in by_id[t.name]:
            id_holders[i] = id_holders.get(i, 0) + 1
        for h in by_hash[t.name]:
            hash_holders[h] = hash_holders.get(h, 0) + 1
    by_name = {t.name: t for t in chosen}
    for p in sorted(pool, key=lambda x: (x.rank, x.neg_score)):
        hit = p.hit
        mine = by_name.get(p.tier)
        if (mine is not None and id_holders.get(hit.id) == 1 and hash_holders.get(hit.content_hash) == 1
                and hit.id in by_id[p.tier]):
            w_hit = by_id[p.tier][hit.id]
            if (p.tier, w_hit.id) in taken or not w_hit.passes:
                continue
            taken.add((p.tier, w_hit.id))
            kept.append(Kept(-w_hit.score * mine.weight, p.rank, p.tier, w_hit, ()))
            continue
        found_in: list[tuple[Any, LexicalHit]] = []
        for other in chosen:
            found = by_id[other.name].get(hit.id) or by_hash[other.name].get(hit.content_hash)
            if found is not None:
                found_in.append((other, found))
        winner, w_hit = found_in[0] if found_in else (tiers[p.tier], hit)
        if (winner.name, w_hit.id) in taken or not w_hit.passes:
            continue
        taken.update((t.name, h.id) for t, h in found_in)
        kept.append(Kept(-w_hit.score * winner.weight, p.rank, winner.name, w_hit,
                         tuple(t.name for t, _ in found_in[1:])))
    kept.sort(key=lambda k: (k.neg_score, k.rank))
    return kept
