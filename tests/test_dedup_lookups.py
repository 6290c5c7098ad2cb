"""The dedup's look-ups decided in bulk (issue 16, session 10) answer exactly what the
per-string paths answer: ``StringTable.held`` / ``HashTable.held`` against ``find``,
``Postings.slots_of`` / ``slots_by_hash`` against the per-string definition (the last /
first live slot), and ``dedup.keep`` (the pool's simple hits taken without the walk,
``limit``) against the full walk over every tier. Randomized: hits, misses, strings
held at several slots (one fingerprint), digests sharing their 8-byte key, non-hex
strings, deleted slots, appended (delta) slots; real SQLite tiers for the mirror."""

from __future__ import annotations

import random
from typing import Any, NamedTuple

import numpy as np

from tiervault.vault import dedup
from tiervault.vault.entry import Entry
from tiervault.vault.hash_table import HashTable, table_of
from tiervault.vault.rows import LexicalHit
from tiervault.vault.store import TierStore
from tiervault.vault.string_table import StringColumn, StringTable


def _word(rng: random.Random) -> str:
    alphabet = "abcdefgh-0123\u00e9\u4e2d\U0001f600"
    return "".join(rng.choice(alphabet) for _ in range(rng.choice([0, 1, 3, 8, 18, 40])))


def _digest(rng: random.Random) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(64))


def _asks(rng: random.Random, held: list[str], other: list[str], n: int) -> list[str]:
    return [rng.choice(held) if rng.random() < 0.3 else rng.choice(other) for _ in range(n)]


def _as_held(found: list[list[int]]) -> dict[int, list[int]]:
    return {i: f for i, f in enumerate(found) if f}


def test_string_table_held_is_find_for_the_strings_held():
    rng = random.Random(16)
    for trial in range(60):
        strings = [_word(rng) for _ in range(rng.randint(1, 300))]
        strings += rng.sample(strings, k=min(len(strings), rng.randint(0, 20)))  # several slots each
        table, fresh = StringTable.build(strings), StringTable.build(strings)
        others = [_word(rng) + "~" for _ in range(50)]
        for _ in range(4):  # the same table again: its memo answers the second time
            asked = _asks(rng, strings, others, rng.randint(0, 90))
            assert table.held(asked) == _as_held(fresh.find(asked)), trial
    assert StringTable.build([]).held(["a"]) == {}


def test_hash_table_held_is_find_with_shared_keys_and_non_hex_strings():
    rng = random.Random(17)
    for trial in range(60):
        digests = [_digest(rng) for _ in range(rng.randint(1, 200))]
        twins = [d[:16] + _digest(rng)[16:] for d in rng.sample(digests, k=min(5, len(digests)))]
        digests += twins + rng.sample(digests, k=min(3, len(digests)))  # shared 8-byte keys, repeats
        table, fresh = table_of(digests), table_of(digests)
        assert isinstance(table, HashTable)
        others = [d[:16] + _digest(rng)[16:] for d in digests[:10]] + [_digest(rng) for _ in range(30)]
        odd = ["", "xyz", digests[0].upper(), digests[0][:63], digests[0] + "0", " " + digests[0][1:],
               "  " + digests[0][2:]]  # 64 characters, 31 bytes once fromhex skips the spaces
        for _ in range(4):
            asked = _asks(rng, digests, others, rng.randint(0, 90))
            if rng.random() < 0.3:
                asked.insert(rng.randint(0, len(asked)), rng.choice(odd))  # the per-string path
            assert table.held(asked) == _as_held(fresh.find(asked)), trial
        assert table.find(odd) == [[]] * len(odd)


def test_a_column_with_appended_strings_answers_base_and_delta():
    rng = random.Random(18)
    base = [f"id-{i}" for i in range(400)]
    col = StringColumn(StringTable.build(base))
    col.extend(["id-7", "new-1", "id-9", "new-1"])
    asked = [rng.choice(base + ["new-1", "nope", "id-7"]) for _ in range(200)]
    assert col.held(asked) == _as_held(col.slots_many(asked))
    assert col.held(["id-7", "x", "new-1"]) == {0: [7, 400], 2: [401, 403]}


def _slots_of(p: Any, ids: list[str]) -> list[int | None]:
    """The per-string definition: each id's last live slot."""
    return [next((s for s in reversed(found) if p.alive[s]), None) for found in p.ids.slots_many(ids)]


def _slots_by_hash(p: Any, hashes: list[str]) -> list[int | None]:
    """The per-string definition: each hash's first live slot."""
    return [next((s for s in found if p.alive[s]), None) for found in p.hashes.slots_many(hashes)]


def test_slots_of_and_by_hash_follow_deleted_and_appended_slots(tmp_path):
    rng = random.Random(19)
    store = TierStore(tmp_path / "a.db")
    store.capture_many([Entry.create(id=f"e{i}", title=f"note {i % 40} retry", description=f"text {i % 25}")
                        for i in range(2000)])
    p = store.postings()
    ids, hashes = p.ids.tolist(), p.hashes.tolist()
    # after the base: deletes (dead slots), updates and new entries (delta slots), one
    # content twice under two ids (a hash at two live slots)
    for i in rng.sample(range(2000), 5):
        store.delete(f"e{i}")
    store.capture_many([Entry.create(id=f"e{i}", title=f"changed {i}", description="new words")
                        for i in rng.sample(range(2000), 5)])
    store.capture_many([Entry.create(id=f"n{i}", title=f"note {i % 40} retry", description=f"text {i % 25}")
                        for i in range(5)])
    p = store.postings()
    assert len(p.ids) > 2000 and p.delta_W and not p.alive.all()
    all_ids, all_hashes = p.ids.tolist(), p.hashes.tolist()
    misses_i = [f"x{i}" for i in range(50)] + ["", "e 1", "\u00e9"]
    misses_h = [h[:-1] + ("0" if h[-1] != "0" else "1") for h in hashes[:30]] + ["zz", "", hashes[0].upper()]
    for _ in range(30):
        asked_i = _asks(rng, all_ids + ids, misses_i, rng.randint(0, 80))
        asked_h = _asks(rng, all_hashes + hashes, misses_h, rng.randint(0, 80))
        assert p.slots_of(asked_i) == _slots_of(p, asked_i)
        assert p.slots_by_hash(asked_h) == _slots_by_hash(p, asked_h)
    store.close()


# -- keep: the walk over every tier, as it was before session 10 ------------------------------
class _Tier(NamedTuple):
    name: str
    weight: float


def _walk(pool, chosen, by_id, by_hash, tiers) -> list[dedup.Kept]:
    """Every pooled hit walks every tier (no fast path): the definition of keep()."""
    kept: list[dedup.Kept] = []
    taken: set[tuple[str, str]] = set()
    for p in sorted(pool, key=lambda x: (x.rank, x.neg_score)):
        hit = p.hit
        found_in = []
        for other in chosen:
            found = by_id[other.name].get(hit.id) or by_hash[other.name].get(hit.content_hash)
            if found is not None:
                found_in.append((other, found))
        winner, w_hit = found_in[0] if found_in else (tiers[p.tier], hit)
        if (winner.name, w_hit.id) in taken or not w_hit.passes:
            continue
        taken.update((t.name, h.id) for t, h in found_in)
        kept.append(dedup.Kept(-w_hit.score * winner.weight, p.rank, winner.name, w_hit,
                               tuple(t.name for t, _ in found_in[1:])))
    kept.sort(key=lambda k: (k.neg_score, k.rank))
    return kept


def _random_case(rng: random.Random) -> tuple[list[dedup.Pooled], list[_Tier], dict, dict, dict]:
    """A pool of 3 tiers' top hits as holders() would see it: ids and contents shared
    across and within tiers, equal scores, hits failing the filters, and sometimes a
    tier that failed (its hits pooled, the tier not chosen) or a hit pooled twice."""
    tiers = {n: _Tier(n, w) for n, w in (("agent", 1.0), ("project", 0.8), ("team", 0.8))}
    names = list(tiers)
    n_ids = rng.randint(1, 40)
    content = {f"i{k}": f"h{rng.randint(0, n_ids)}" for k in range(n_ids)}
    held: dict[str, dict[str, LexicalHit]] = {}
    for n in names:  # what each tier holds: (id -> hit); scores from a few values (ties)
        held[n] = {}
        for k in rng.sample(sorted(content), k=rng.randint(0, n_ids)):
            h = content[k] if rng.random() < 0.9 else f"h{rng.randint(0, n_ids)}"
            held[n][k] = LexicalHit(k, h, float(rng.choice([0.5, 1.0, 1.5, 2.0, 2.5])), 0.0,
                                    rng.random() < 0.9)
    pool: list[dedup.Pooled] = []
    for rank, n in enumerate(names):
        top = sorted(held[n].values(), key=lambda h: -h.score)[:rng.randint(0, 12)]
        top = [h if h.passes else LexicalHit(h.id, h.content_hash, h.score, 0.0, True) for h in top]
        if top and rng.random() < 0.1:
            top.append(top[0])  # pooled twice
        pool.extend(dedup.Pooled(-h.score * tiers[n].weight, rank, n, h) for h in top)
    chosen = [tiers[n] for n in names if rng.random() < 0.9 or n == "agent"]
    by_id: dict[str, dict[str, LexicalHit]] = {}
    by_hash: dict[str, dict[str, LexicalHit]] = {}
    for t in chosen:  # what holders() builds: the tier's own top hits, then its copies of the others
        own = {}
        for p in pool:
            if p.tier == t.name:
                own.setdefault(p.hit.id, p.hit)
        ids = list(dict.fromkeys(p.hit.id for p in pool))
        hashes = {p.hit.content_hash for p in pool}
        found = {h.id: h for h in held[t.name].values() if h.id in ids or h.content_hash in hashes}
        found.update(own)
        by_id[t.name] = found
        first: dict[str, LexicalHit] = {}
        for i in ids:
            if i in found:
                first.setdefault(found[i].content_hash, found[i])
        for h in found.values():
            first.setdefault(h.content_hash, h)
        by_hash[t.name] = first
    return pool, chosen, by_id, by_hash, tiers


def test_keep_is_the_full_walk_on_random_pools():
    rng = random.Random(20)
    shared = 0
    for trial in range(3000):
        pool, chosen, by_id, by_hash, tiers = _random_case(rng)
        rng.shuffle(pool) if rng.random() < 0.1 else None  # pool order is not priority order
        want = _walk(pool, chosen, by_id, by_hash, tiers)
        assert dedup.keep(pool, chosen, by_id, by_hash, tiers) == want, trial
        limit = rng.randint(1, 20)
        assert dedup.keep(pool, chosen, by_id, by_hash, tiers, limit) == want[:limit], trial
        shared += any(k.also_in for k in want)
    assert shared > 500  # the walk's cases were met, not only the fast path


def _holders_walk(each, chosen, hits, stems, stats, filters):
    """holders() as it was before session 10: every tier asked, ids walked in pool order."""
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


class _Store(NamedTuple):
    name: str
    store: Any
    weight: float


def _each(tiers, read):
    return [(t, read(t.store)) for t in tiers]


def test_holders_and_keep_answer_as_the_walk_on_real_tiers(tmp_path):
    """Three real tiers sharing ids and contents (copies, same content under other ids,
    deleted and updated entries in the delta): holders() and keep() give what the
    per-string walk gave, query by query, with and without filters."""
    from tiervault.vault.filters import Filters
    from tiervault.vault.tokenizer import STEMMER

    rng = random.Random(22)
    words = ["retry", "backoff", "cache", "pool", "lock", "queue", "index", "token", "timeout", "trace"]

    def make(i: int, tag: str) -> Entry:
        w = [words[(i * k) % len(words)] for k in (1, 3, 7)]
        return Entry.create(id=f"e{i}", title=" ".join(w), description=f"{tag} {words[i % 4]} note",
                            domain=rng.choice(["db", "http"]))
    tiers = []
    for n, (name, weight) in enumerate((("agent", 1.0), ("project", 0.8), ("team", 0.6))):
        store = TierStore(tmp_path / f"{name}.db")
        # ids 0..59 shared (same content in every tier), 60.. per tier; some ids with another content
        store.capture_many([make(i, "same") for i in range(60)]
                           + [make(i, name if i % 3 else "same") for i in range(60 + 40 * n, 100 + 40 * n)])
        store.postings()
        for i in rng.sample(range(60), 6):  # after the base: dead slots, delta slots
            store.delete(f"e{i}")
        store.capture_many([make(i, f"{name} changed") for i in rng.sample(range(60, 180), 8)])
        tiers.append(_Store(name, store, weight))
    by_name = {t.name: t for t in tiers}
    copies = failing = 0
    for trial in range(40):
        query = rng.sample(words, k=rng.randint(1, 3))
        stems = list(dict.fromkeys(s for s in STEMMER.stems(query).values() if s))
        stats = tiers[0].store.term_stats(stems)
        for t in tiers[1:]:
            stats = stats + t.store.term_stats(stems)
        filters = Filters(domains=("db",)) if trial % 3 == 0 else Filters()
        limit = rng.choice([3, 10, 30])
        pool = [dedup.Pooled(-h.score * t.weight, rank, t.name, h) for rank, t in enumerate(tiers)
                for h in t.store.lexical_top_k(stems, stats, filters, limit)]
        hits = [(p.tier, p.hit) for p in pool]
        want = _holders_walk(_each, tiers, hits, stems, stats, filters)
        got = dedup.holders(_each, tiers, hits, stems, stats, filters)
        assert got == want, trial
        kept = _walk(pool, tiers, *want, by_name)
        assert dedup.keep(pool, tiers, *got, by_name, limit) == kept[:limit], trial
        copies += sum(len(k.also_in) for k in kept)
        failing += sum(not h.passes for found in got[0].values() for h in found.values())
    assert copies > 100 and failing > 10, (copies, failing)  # the walk's cases were met
    for t in tiers:
        t.store.close()


def test_fingerprints_of_a_few_strings_are_the_chunked_ones():
    """The padded-matrix path (a look-up's few strings) against the chunked one (taken
    when the matrix would be too large: one long string in the batch)."""
    from tiervault.vault.string_table import fingerprints

    def encoded(strings: list[str]) -> tuple[np.ndarray, np.ndarray]:
        data = [s.encode() for s in strings]
        offsets = np.zeros(len(data) + 1, dtype=np.int64)
        np.cumsum([len(d) for d in data], out=offsets[1:])
        return np.frombuffer(b"".join(data), dtype=np.uint8), offsets

    rng = random.Random(21)
    for _ in range(200):
        strings = [_word(rng) for _ in range(rng.randint(1, 70))]
        if not any(strings):
            strings.append("x")
        small = fingerprints(*encoded(strings))
        chunked = fingerprints(*encoded(strings + ["y" * 70_000]))[:-1]
        assert small.tolist() == chunked.tolist()
