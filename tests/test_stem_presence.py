"""Which rows may hold a pair of query stems, from a tier's mirror (vault/stem_presence.py).

Term proximity reads an entry's texts only when its tier's mirror cannot prove the row
holds at most one stem of every pair (``may_hold_pairs``, issue 16 session 21). Here every
row of a tier (ASCII, capitals, diacritics, a Kelvin sign, stop words, words in the id
and the tags) is checked against ``entry_proximity`` of its own texts for many pairs: a
row the mirror clears scores 0, the built, mapped and ``pread`` mirror alike; the clearing
is not vacuous. Rows written after the build (delta slots), ids the tier does not hold,
stems only the delta knows, another process's writes and a damaged cache block are
answered "may hold" (or seen in the next read scope), never a wrong "no".
"""

from __future__ import annotations

import gc
import json
import random
import shutil
import struct
import subprocess
import sys
import weakref
from pathlib import Path

import pytest

from tiervault.brain import Brain
from tiervault.brain.proximity import entry_proximity, query_pairs
from tiervault.vault import light_feed
from tiervault.vault.entry import Entry
from tiervault.vault.manager import VaultManager
from tiervault.vault.mirror_search import MirrorSearch
from tiervault.vault.read_scope import read_scope
from tiervault.vault.store import TierStore

from brain_vault import NOW, fixed_brain
from mirror_modes import MIRROR_MODES, read_mirror_as
from test_pool_rows import HashVectors
from tier_contract import open_tier  # noqa: F401  (a fixture: a tier of each registered backend)

#: words with shared stems (consumer / consumers / consuming), capitals, diacritics
#: (café / CAFÉS / cafe), a Kelvin sign, stop words, digits
WORDS = ("kafka Kafka consumer consumers consuming lag lagging partition partitions keys key "
         "broker brokers retention café CAFÉS cafe naïve naive über Über \u212aelvin kelvin the is "
         "of a to and flying fly flies v2 x86 sizing size").split()
WINDOW = 8
ROWS = 1_100  # above postings.SMALL_TIER_ROWS: a later write goes to the delta


def _text(rng: random.Random, lo: int, hi: int, words: list[str]) -> str:
    return " ".join(rng.choice(words) for _ in range(rng.randint(lo, hi)))


def _entry(rng: random.Random, eid: str, words: list[str] = WORDS) -> Entry:
    return Entry.create(id=eid, title=_text(rng, 1, 5, words),
                        description=_text(rng, 0, 24, words) or "none", context=_text(rng, 0, 8, words),
                        tags=rng.sample(["kafka", "lag", "ops", "cafe", "sizing"], rng.randint(0, 2)))


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("stems")
    rng = random.Random(21)
    with TierStore(folder / "t.db", name="t") as st:
        st.capture_many([_entry(rng, f"kafka-lag-{i}" if i % 7 == 0 else f"e-{i}") for i in range(ROWS)])
    return folder


def _copy(built: Path, to: Path) -> Path:
    shutil.copytree(built, to)
    return to / "t.db"


def _queries(n: int) -> list[list[tuple[str, str]]]:
    rng = random.Random(5)
    out = [query_pairs(" ".join(rng.choice(WORDS + ["zyzzyva"]) for _ in range(rng.randint(2, 4))))
           for _ in range(n)]
    return [p for p in out if p]


def _check(st: TierStore, ids: list[str], pairs_list: list[list[tuple[str, str]]]) -> tuple[int, int]:
    """Every row cleared scores 0; returns (rows cleared, rows scoring > 0)."""
    texts = st.field_texts(ids)
    cleared = scored = 0
    for pairs in pairs_list:
        with read_scope():
            may = st.may_hold_pairs(ids, pairs)
        assert len(may) == len(ids)
        for eid, ok in zip(ids, may):
            if eid not in texts:
                assert ok  # not held: "may hold" (the reader finds nothing)
                continue
            prox = entry_proximity(texts[eid], pairs, WINDOW)
            assert ok or prox == 0.0, (eid, pairs, texts[eid])
            cleared += not ok
            scored += prox > 0
    return cleared, scored


@pytest.mark.parametrize("mode", MIRROR_MODES)
def test_a_row_the_mirror_clears_holds_no_pair(built, tmp_path, monkeypatch, mode):
    db = _copy(built, tmp_path / "v")
    read_mirror_as(db, mode, monkeypatch)
    with TierStore(db, name="t") as st:
        ids = [f"kafka-lag-{i}" if i % 7 == 0 else f"e-{i}" for i in range(0, ROWS, 3)] + ["nowhere"]
        cleared, scored = _check(st, ids, _queries(60))
        assert cleared > 1_000 and scored > 100  # both answers occur
        assert st.may_hold_pairs(ids, []) == [False] * len(ids)
        assert st.may_hold_pairs([], [("kafka", "lag")]) == []
        assert st.may_hold_pairs(["nowhere"], [("kafka", "lag")]) == [True]
        assert st.may_hold_pairs(ids[:5], [("zyzzyva", "kafka")]) == [False] * 5  # a stem no row holds


@pytest.mark.parametrize("mode", MIRROR_MODES)
def test_the_columns_the_querys_bm25_read_answer_as_the_vocabulary_and_w(built, tmp_path,
                                                                         monkeypatch, mode):
    # the stems' base columns come from the last Postings.matches (the query's BM25) when
    # it read every stem of the pairs, else from the vocabulary and W: the same answers
    db = _copy(built, tmp_path / "v")
    read_mirror_as(db, mode, monkeypatch)
    with TierStore(db, name="t") as st:
        ids = [f"kafka-lag-{i}" if i % 7 == 0 else f"e-{i}" for i in range(0, ROWS, 3)] + ["nowhere"]
        texts = st.field_texts(ids)
        cleared = 0
        for pairs in _queries(40):
            stems = list(dict.fromkeys(st_ for pair in pairs for st_ in pair))
            with read_scope():
                p = st.postings()
                p.matches(["sizing"] if "size" in stems else ["size"])  # another query's terms
                assert not set(stems) <= set(p.read_terms()[0])
                looked_up = st.may_hold_pairs(ids, pairs)
                p.matches([*reversed(stems), "zyzzyva"])  # the query's BM25: every stem read
                assert set(stems) <= set(p.read_terms()[0])
                read = st.may_hold_pairs(ids, pairs)
            assert read == looked_up
            for eid, ok in zip(ids, read):
                assert ok or entry_proximity(texts[eid], pairs, WINDOW) == 0.0
                cleared += not ok
        assert cleared > 1_000


def test_rows_written_later_and_another_processs_writes(built, tmp_path):
    db = _copy(built, tmp_path / "v")
    pairs = [("zebra", "quagga")]  # stems of words no row held when the mirror was built
    with TierStore(db, name="t") as st:
        st.postings()  # built (its own writes: link graph, cache) before the scope
        with read_scope():
            assert st.may_hold_pairs(["e-1", "e-2", "e-4"], pairs) == [False] * 3
            script = ("import sys\nfrom tiervault.vault.store import TierStore\n"
                      "from tiervault.vault.entry import Entry\n"
                      "with TierStore(sys.argv[1], name='x') as st:\n"
                      "    e = st.get('e-1')\n"
                      "    st.capture(Entry.from_dict({**e.to_dict(), 'context': 'a zebra and a quagga'}))\n"
                      "    st.delete('e-2')\n"
                      "    st.capture(Entry.create(id='late', title='Zebras and quaggas', description='grazing'))\n")
            subprocess.run([sys.executable, "-c", script, str(db)], check=True, timeout=120)
            # the open scope keeps the mirror its search ranked (vault/read_scope.py)
            assert st.may_hold_pairs(["e-1", "e-2", "e-4"], pairs) == [False] * 3
        with read_scope():
            got = st.may_hold_pairs(["e-1", "e-2", "e-4", "late"], pairs)
            slots = st.postings().slots_of(["e-1", "late"])
            base = st.postings().base_rows
            # the stems' columns as the query's BM25 reads them: delta-only terms, no base column
            st.postings().matches(["zebra", "quagga"])
            assert st.may_hold_pairs(["e-1", "e-2", "e-4", "late"], pairs) == got
        assert all(s is not None and s >= base for s in slots)  # delta slots: not cleared
        assert got == [True, True, False, True]  # e-2 is gone: "may hold", read finds nothing
        texts = st.field_texts(["e-1", "late"])
        assert entry_proximity(texts["e-1"], pairs, WINDOW) == 1.0
        assert entry_proximity(texts["late"], [("zebra", "quagga")], WINDOW) == 1.0
        _check(st, ["e-1", "e-4", "late", "kafka-lag-7", "e-5"], _queries(20))


def test_asking_keeps_no_mirror_alive(built, tmp_path):
    # a memo of the pairs' columns once kept every mirror's postings and vocabulary alive
    # (a server rebuilding mirrors would hold each old one): nothing outlives the store
    db = _copy(built, tmp_path / "v")
    st = TierStore(db, name="t")
    p = st.postings()
    refs = [weakref.ref(x) for x in (p, p.W, p.vocab)]
    with read_scope():
        assert st.may_hold_pairs(["e-1", "e-2"], query_pairs("kafka consumer lag")) is not None
    st.close()
    del st, p
    gc.collect()
    assert [r() for r in refs] == [None, None, None]


def _offset(cache: Path, name: str) -> int:
    head = cache.read_bytes()[:24]
    _, _, _, length = struct.unpack("<8sIIQ", head)
    return int(json.loads(cache.read_bytes()[24:24 + length])["arrays"][name]["offset"])


def test_a_damaged_postings_block_answers_may_hold_then_the_rebuilt_mirror(built, tmp_path, caplog):
    db = _copy(built, tmp_path / "v")
    with TierStore(db, name="t") as st:
        st.postings()
    cache = Path(f"{db}.postings.mirror")
    data = bytearray(cache.read_bytes())
    data[_offset(cache, "W_indices") + 5] ^= 0x10
    cache.write_bytes(bytes(data))
    ids = [f"e-{i}" for i in range(1, 60)]
    pairs = query_pairs("kafka consumer lag size")
    with TierStore(db, name="t") as st:
        with read_scope():
            first = st.may_hold_pairs(ids, pairs)
        with read_scope():
            second = st.may_hold_pairs(ids, pairs)
        assert first == [True] * len(ids)  # nothing proven from a damaged block
        assert not all(second)  # the rebuilt mirror clears rows again
        _check(st, ids, [pairs])
    assert sum("search cache" in r.message for r in caplog.records) == 1, caplog.text



TIERS = ("agent", "project", "team")
#: the query words among many others: a pair's two words meet in few rows
SPARSE = WORDS + [f"word{i}" for i in range(300)]
LIGHT_READ = "substr(e.description, 1, "  # the light-row statement (vault/sqlite_sql.py)
QUERIES = [("kafka consumer lag", {}), ("consuming kafka partitions", {"tags": ["ops"]}),
           ("café naïve kelvin", {}), ("broker retention sizing keys", {}),
           ("flying consumers lag brokers", {"not_type": "decision"})]


@pytest.fixture(scope="module")
def vault(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("stems-vault")
    rng = random.Random(8)
    manager = VaultManager.at({t: str(folder / f"{t}.db") for t in TIERS})
    try:
        for k, tier in enumerate(TIERS):  # "shared-*" ids in every tier
            manager.capture_many([_entry(rng, f"{tier}-{i}" if i % 5 else f"shared-{i}", SPARSE)
                                  for i in range(150 * (k + 1))], tier=tier)
    finally:
        manager.close()
    return folder


def _answers(folder: Path, reads: list[str], texts_read: list[tuple[list[str], list[bool], float]]) -> list:
    """Hybrid answers (scan and full, with ``explain``) of ``QUERIES``; the scans' light-row
    statements go to ``reads``, each ``field_texts`` call's ids (and whether the tier says
    they may hold one of the query's pairs) to ``texts_read``."""
    manager = VaultManager.at({t: str(folder / f"{t}.db") for t in TIERS})
    pairs: list[tuple[str, str]] = []
    field_texts = TierStore.field_texts

    def spy(store: TierStore, ids):
        may = getattr(store, "may_hold_pairs", None)
        got = field_texts(store, ids)
        texts_read.append((list(ids), may(ids, pairs) if may is not None else [True] * len(ids),
                           max(entry_proximity(t, pairs, WINDOW) for t in got.values())))
        return got

    try:
        b = Brain(manager, fixed_brain(manager).settings, vectors=HashVectors(manager), clock=lambda: NOW)
        assert b.config.hybrid_proximity_weight > 0
        b.search_intelligent("kafka consumer lag")  # mirrors built
        TierStore.field_texts = spy  # type: ignore[method-assign]
        for tier in manager.ordered():
            tier.store.db.conn.set_trace_callback(
                lambda sql, name=tier.name: reads.append(name) if LIGHT_READ in sql else None)
        out = []
        for mode in ("scan", "full"):
            for q, kw in QUERIES:
                pairs[:] = query_pairs(q)
                out.append(b.search_intelligent(q, mode=mode, explain=True, **kw))
            for tier in manager.ordered():
                tier.store.db.conn.set_trace_callback(None)
        return out
    finally:
        TierStore.field_texts = field_texts  # type: ignore[method-assign]
        manager.close()


def test_a_hybrid_scan_reads_light_records_and_only_the_texts_that_may_hold_a_pair(vault, tmp_path,
                                                                                    monkeypatch):
    reads: list[str] = []
    texts_read: list[tuple[list[str], list[bool], float]] = []
    cleared: list[bool] = []
    may_hold = MirrorSearch.may_hold_pairs

    def counted(store, ids, pairs):
        got = may_hold(store, ids, pairs)
        cleared.extend(not m for m in got)
        return got

    monkeypatch.setattr(MirrorSearch, "may_hold_pairs", counted)
    new = _answers(_copy(vault, tmp_path / "new").parent, reads, texts_read)
    assert reads == []  # every light row from the mirror's records, no statement
    assert texts_read and all(all(may) for _, may, _ in texts_read)  # only rows that may hold a pair
    # the read of before: every light row by SQL with its texts, every top match's texts read
    monkeypatch.setattr(light_feed, "RECORDS_MAX_ROWS", -1)
    monkeypatch.delattr(MirrorSearch, "may_hold_pairs")
    old_reads: list[str] = []
    old_texts: list[tuple[list[str], list[bool], float]] = []
    old = _answers(_copy(vault, tmp_path / "old").parent, old_reads, old_texts)
    assert old_reads and new == old
    assert any(r["explain"]["via"] == "vector" for rows in new for r in rows)
    assert max(p for _, _, p in texts_read) > 0  # some rows read hold a pair
    assert sum(cleared) > 50  # rows whose texts were never read (their proximity: 0)


def test_every_backend_with_a_mirror_clears_only_rows_without_a_pair(open_tier):
    """SQLite and PostgreSQL tiers answer ``may_hold_pairs`` from their mirror
    (``MirrorSearch``); a remote tier does not (its rows are all read, as before)."""
    store = open_tier("agent")
    rng = random.Random(3)
    store.capture_many([_entry(rng, f"e-{i}") for i in range(150)])
    may = getattr(store, "may_hold_pairs", None)
    assert (may is None) == (type(store).__name__ == "RemoteTier")
    if may is None:
        return
    ids = [f"e-{i}" for i in range(150)]
    entries = store.get_many(ids)
    cleared = 0
    for pairs in _queries(30):
        for eid, ok in zip(ids, may(ids + ["nowhere"], pairs)):
            assert ok or entry_proximity(entries[eid], pairs, WINDOW) == 0.0, (eid, pairs)
            cleared += not ok
        assert may(["nowhere"], pairs) == [True]
    assert cleared > 500
