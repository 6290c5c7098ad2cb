"""The mapped cache file of the search mirror (``<tier>.postings.mirror``, issue 16):
opening it reads no postings block, a query checks exactly the blocks it reads, and
each kind of damage -- a flipped bit in the header or in a block, a truncated file,
a file from another tier or another history, the ``.npz`` of an older version --
costs at most one warning and a rebuild, never a wrong answer."""

from __future__ import annotations

import json
import logging
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from tiervault.vault import array_file
from tiervault.vault.checked_array import BLOCK_BYTES, CacheDamaged, CheckedArray, block_crcs
from tiervault.vault.entry import Entry
from tiervault.vault.manager import VaultManager
from tiervault.vault.string_table import StringTable, _py_fingerprint, fingerprints
from tiervault.vault.tokenizer import STEMMER

WORDS = [f"w{i:03d}x" for i in range(400)]


def entries(n: int, prefix: str = "e") -> list[Entry]:
    """Entries over a vocabulary wide enough that the postings span many blocks."""
    rng = np.random.default_rng(len(prefix) * 1000 + n)
    out = []
    for i in range(n):
        words = " ".join(WORDS[j] for j in rng.integers(0, len(WORDS), 12))
        out.append(Entry.create(id=f"{prefix}-{i}", title=f"{prefix}word{i} {words[:40]}",
                                description=words, tags=[f"t{i % 4}"]))
    return out


def search(m: VaultManager, word: str) -> list[str]:
    return m.search(word, limit=20).ids


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, dict[str, list[str]]]:
    """A tier of 6,000 entries, its cache file, and the answers of a fresh build."""
    d = tmp_path_factory.mktemp("mapped")
    db = d / "agent.db"
    with VaultManager.at({"agent": str(db)}) as m:
        m.store("agent").capture_many(entries(6000))
        m.store("agent").postings()
        expected = {w: search(m, w) for w in (*WORDS[:40], "eword17", "eword5999")}
    shutil.copy(Path(f"{db}.postings.mirror"), d / "pristine.mirror")
    return db, expected


def fresh(built, tmp_path: Path) -> Path:
    """A private copy of the built tier and its pristine cache file."""
    src, _ = built
    for f in src.parent.iterdir():
        if f.name.startswith("agent.db") and not f.name.endswith(".mirror"):
            shutil.copy(f, tmp_path / f.name)
    shutil.copy(src.parent / "pristine.mirror", tmp_path / "agent.db.postings.mirror")
    return tmp_path / "agent.db"


def _offset(cache: Path, name: str) -> int:
    head = cache.read_bytes()[:24]
    _, _, _, length = struct.unpack("<8sIIQ", head)
    doc = json.loads(cache.read_bytes()[24:24 + length])
    return int(doc["arrays"][name]["offset"])


def _flip(cache: Path, at: int) -> None:
    data = bytearray(cache.read_bytes())
    data[at] ^= 0x10
    cache.write_bytes(bytes(data))


def _warnings(caplog) -> int:
    return sum("search cache" in r.message for r in caplog.records)


def test_opening_reads_no_postings_block_and_a_query_checks_only_what_it_reads(built, tmp_path):
    db = fresh(built, tmp_path)
    with VaultManager.at({"agent": str(db)}) as m:
        p = m.store("agent").postings()
        arrays = [p.W.indices, p.W.data, p.W.counts, p.T.indices, p.T.counts, p.T.norms]
        assert all(a.blocks > 4 for a in arrays[:2])
        assert sum(a.blocks_checked for a in arrays) == 0  # the open touched none of them
        assert search(m, WORDS[3]) == built[1][WORDS[3]]
        checked = p.W.indices.blocks_checked
        assert 0 < checked < p.W.indices.blocks  # the blocks of the query's columns only
        p.verify_all()
        assert all(a.blocks_checked == a.blocks for a in arrays)


@pytest.mark.parametrize("array", ["W_indices", "W_data", "W_counts", "T_norms", "ids_blob",
                                   "hashes_raw", "terms_keys"])
def test_a_flipped_bit_in_a_block_is_found_by_the_query_that_reads_it(built, tmp_path, caplog, array):
    """The flip is in the block a query reads: the open succeeds (no byte read), the
    query finds the damage, warns once and answers from a rebuilt mirror."""
    db = fresh(built, tmp_path)
    cache = Path(f"{db}.postings.mirror")
    word = WORDS[7]
    with VaultManager.at({"agent": str(db)}) as m:
        p = m.store("agent").postings()
        tid = p.vocab.get(STEMMER.stems([word])[word])
        if array.startswith("W"):  # int32 slots, float32 weights, uint8 TF-IDF counts
            at = int(p.W.indptr[tid]) * (1 if array == "W_counts" else 4)
        elif array == "T_norms":  # the TF-IDF row norm of the query's best hit
            at = p.slot(built[1][word][0]) * 8
        elif array == "hashes_raw":  # the content hash (32 raw bytes) of the best hit
            at = p.slot(built[1][word][0]) * 32
        else:
            at = 0  # look-ups read the whole key index, and hits read ids
    _flip(cache, _offset(cache, array) + at)
    with caplog.at_level(logging.WARNING), VaultManager.at({"agent": str(db)}) as m:
        assert search(m, word) == built[1][word]
        assert search(m, "eword17") == built[1]["eword17"]
    assert _warnings(caplog) == 1, caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING), VaultManager.at({"agent": str(db)}) as m:
        assert search(m, word) == built[1][word]  # the rebuilt cache was saved
    assert _warnings(caplog) == 0


@pytest.mark.parametrize("array", ["T_indices", "T_counts"])
def test_a_flipped_bit_in_a_tfidf_row_is_found_by_the_latent_fit(built, tmp_path, caplog, array):
    """Queries never read the TF-IDF rows; the latent model's fit reads them all (in
    chunks): the damage is found there, warned once, and the scores come from a rebuilt
    mirror -- the same as from an intact one."""
    db = fresh(built, tmp_path)
    cache = Path(f"{db}.postings.mirror")
    ids = built[1][WORDS[7]][:5]
    with VaultManager.at({"agent": str(db)}) as m:
        want = m.store("agent").latent_scores([WORDS[7], WORDS[8]], ids, 4)
        p = m.store("agent").postings()
        at = int(p.T.indptr[p.base_rows // 2]) * (4 if array == "T_indices" else 1)
    _flip(cache, _offset(cache, array) + at)
    with caplog.at_level(logging.WARNING), VaultManager.at({"agent": str(db)}) as m:
        assert m.store("agent").latent_scores([WORDS[7], WORDS[8]], ids, 4) == want
    assert _warnings(caplog) == 1, caplog.text


@pytest.mark.parametrize("damage", ["header bit", "size field", "cut 3 bytes", "one byte more",
                                    "row array bit"])
def test_damage_found_on_open_costs_one_warning(built, tmp_path, caplog, damage):
    db = fresh(built, tmp_path)
    cache = Path(f"{db}.postings.mirror")
    data = cache.read_bytes()
    if damage == "header bit":
        _flip(cache, 40)
    elif damage == "size field":
        cache.write_bytes(data[:16] + struct.pack("<Q", 10**12) + data[24:])
    elif damage == "cut 3 bytes":
        cache.write_bytes(data[:-3])
    elif damage == "one byte more":
        cache.write_bytes(data + b"\0")
    else:
        _flip(cache, _offset(cache, "doclen") + 8)
    with caplog.at_level(logging.WARNING), VaultManager.at({"agent": str(db)}) as m:
        for w in WORDS[:10]:
            assert search(m, w) == built[1][w]
    assert _warnings(caplog) == 1, caplog.text


def test_a_cache_from_another_tier_or_another_history_is_never_used(built, tmp_path):
    """The cache of another tier (another uid), and of a copy of this tier that took
    other writes (same uid, other epochs), are refused: answers come from this tier."""
    db = fresh(built, tmp_path)
    other = tmp_path / "other.db"
    with VaultManager.at({"agent": str(other)}) as m:
        m.store("agent").capture_many(entries(50, prefix="zz"))
        m.store("agent").postings()
    twin = tmp_path / "twin.db"
    for suffix in ("", "-wal"):
        if Path(f"{db}{suffix}").exists():
            shutil.copy(f"{db}{suffix}", f"{twin}{suffix}")
    with VaultManager.at({"agent": str(twin)}) as m:  # same history until now, then its own
        m.store("agent").capture_many(entries(300, prefix="tw"))
        m.store("agent").postings()
    for source in (other, twin):
        shutil.copy(f"{source}.postings.mirror", f"{db}.postings.mirror")
        with VaultManager.at({"agent": str(db)}) as m:
            assert search(m, "zzword3") == [] and search(m, "twword3") == []
            assert search(m, "eword17") == built[1]["eword17"]
            assert m.store("agent").postings().n_alive == 6000


def test_the_cache_of_an_older_version_is_removed_and_never_read(built, tmp_path):
    db = fresh(built, tmp_path)
    legacy = Path(f"{db}.postings.npz")
    legacy.write_bytes(b"PK\x03\x04 an npz of cache version 4")
    Path(f"{db}.postings.mirror").unlink()
    with VaultManager.at({"agent": str(db)}) as m:
        assert search(m, "eword17") == built[1]["eword17"]
    assert not legacy.exists() and Path(f"{db}.postings.mirror").exists()


def test_a_cold_open_catches_up_with_writes_made_after_the_save(built, tmp_path):
    """Writes, updates and deletes after the cache was saved are applied on open (by
    generation), on top of the mapped base."""
    db = fresh(built, tmp_path)
    with VaultManager.at({"agent": str(db)}) as m:
        store = m.store("agent")
        store.capture(Entry.create(id="late", title="lateword arrives", description="x"))
        store.delete("e-17")
        store.capture(Entry.create(id="e-5", title="eword5 renamed quokka", description="y"))
    with VaultManager.at({"agent": str(db)}) as m:
        assert search(m, "lateword") == ["late"]
        assert search(m, "eword17") == []
        assert search(m, "quokka") == ["e-5"]
        p = m.store("agent").postings()
        assert p.n_alive == 6000 and p.slot("e-17") is None and p.slot("late") is not None


# -- the parts ---------------------------------------------------------------------------------
def test_string_table_finds_every_string_and_nothing_else():
    rng = np.random.default_rng(1)
    strings = [f"id-{i}" for i in range(3000)] + ["", "é-ü", "dup", "dup", "x" * 300]
    table = StringTable.build(strings)
    assert table.tolist() == strings and len(table) == len(strings)
    assert table[3001] == "é-ü" and table[3000] == ""
    probes = [strings[i] for i in rng.integers(0, len(strings), 200)] + ["nope", "id-3000", "dup"]
    for s, slots in zip(probes, table.find(probes)):
        assert slots == [i for i, t in enumerate(strings) if t == s]
    # fingerprints depend on the bytes only: NumPy's (many strings) equal plain Python's (few)
    keys = fingerprints(table.blob.a, table.offsets.a)
    assert [int(k) for k in keys] == [_py_fingerprint(s.encode()) for s in strings]
    assert len(set(keys.tolist())) == len(set(strings))  # no collision among these
    assert table.take(np.array([3002, 0, 3001])) == ["dup", "id-0", "é-ü"]


def test_hash_table_holds_digests_as_raw_bytes_and_finds_them():
    import hashlib

    from tiervault.vault.hash_table import HashTable, table_of

    digests = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(2000)] + ["0" * 64] * 2
    table = table_of(digests)
    assert isinstance(table, HashTable) and table.raw.a.nbytes == 32 * len(digests)
    assert table.tolist() == digests and table[1999] == digests[1999]
    assert table.take(np.array([5, 0, 2001])) == [digests[5], digests[0], "0" * 64]
    probes = digests[::97] + ["0" * 64, "f" * 64, digests[3].upper(), "xyz", digests[4][:-1]]
    for s, slots in zip(probes, table.find(probes)):
        assert slots == [i for i, d in enumerate(digests) if d == s]
    # a shared 8-byte prefix: found by the bytes, not the prefix
    twins = table_of(["ab" * 8 + "00" * 24, "ab" * 8 + "11" * 24])
    assert twins.find(["ab" * 8 + "11" * 24, "ab" * 8 + "22" * 24]) == [[1], []]
    # anything but lowercase 64-hex digests stays a string table
    assert isinstance(table_of(digests[:3] + ["not-a-hash"]), StringTable)
    assert isinstance(table_of([d.upper() for d in digests[:3]]), StringTable)


def test_a_look_up_of_digests_only_answers_as_one_mixing_other_strings():
    """Every string a digest: validated and decoded in one join (hash_table._find's
    fast path); the answers are those of the per-string path (a look-up with a
    non-digest among them), digest by digest."""
    import hashlib

    from tiervault.vault.hash_table import table_of

    digests = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(500)] + ["0" * 64] * 2
    probes = digests[::7] + ["0" * 64, "f" * 64, hashlib.sha256(b"x").hexdigest()]
    fast = table_of(digests).find(probes)
    mixed = table_of(digests).find(probes + ["not-a-hash"])
    assert fast == mixed[:-1] and mixed[-1] == []
    assert fast == [[i for i, d in enumerate(digests) if d == s] for s in probes]


def test_fingerprints_shared_between_tables_are_the_strings_own():
    """lookup_fingerprints (a memo shared by every table of the process) gives each
    string its fingerprint whichever strings were remembered before, and two tables
    finding the same strings answer each from its own slots."""
    from tiervault.vault import string_table as st

    strings = [f"entry-{i:05d}" for i in range(400)] + ["é-ü", "", "x" * 300]
    whole = StringTable.build(strings)
    expected = fingerprints(whole.blob.a, whole.offsets.a)
    st.lookup_fingerprints(strings[:5])  # a few remembered, most not
    assert st.lookup_fingerprints(strings).tolist() == expected.tolist()
    assert st.lookup_fingerprints(strings[::-1]).tolist() == expected[::-1].tolist()
    held = (strings[:200], strings[150:] + ["entry-00001"])
    tables = [StringTable.build(h) for h in held]
    probes = strings[140:160] + ["entry-00001", "nope"]
    for table, h in zip(tables, held):
        assert table.find(probes) == [[i for i, t in enumerate(h) if t == p] for p in probes]


def test_hash_table_find_survives_its_memo_being_cleared():
    """A look-up that mixes remembered and new digests right when the memo is full
    (it used to clear the memo, then read the remembered ones from it: KeyError)."""
    import hashlib

    from tiervault.vault.hash_table import table_of

    digests = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(10)]
    table = table_of(digests)
    assert table.find([digests[0]]) == [[0]]
    table.find([f"not-a-hash-{i}" for i in range(50_001)])  # fills the memo
    assert table.find([digests[0], digests[1]]) == [[0], [1]]


def test_checked_array_refuses_a_block_that_changed_and_values_out_of_bounds(tmp_path):
    a = np.arange(BLOCK_BYTES // 2, dtype=np.int32)  # two blocks
    path = tmp_path / "x.arrays"
    array_file.write(path, {}, {"a": a}, {"a"})
    ok = array_file.read(path).checked("a", bounds=(0, a.size))
    assert np.array_equal(ok.get(10, 20), a[10:20]) and ok.blocks_checked == 1
    _flip(path, _offset(path, "a") + BLOCK_BYTES + 5)
    bad = array_file.read(path).checked("a")
    assert np.array_equal(bad.get(0, 5), a[:5])  # the first block is intact
    with pytest.raises(CacheDamaged):
        bad.get(a.size - 2, a.size)
    with pytest.raises(CacheDamaged):
        CheckedArray(a, block_crcs(a), "b", bounds=(0, 10)).get(0, 1)  # CRC right, values not
