"""The light rows of a mirror's base kept beside it (vault/light_records.py): a search
reads no light row from SQL, and every row is the one SQL gives.

Exact for rows SQL treats apart (NUL in a text: SQLite's ``length``/``substr`` stop
there; a ``created_at`` that is not a number; timestamps ``SANE_TIMES`` refuses: those
are asked from SQL), for non-ASCII texts, in the mirror built in-process, loaded from its
cache file through the mapping or by ``pread``; never stale (another process's update,
delete and insert are seen by the next read scope); a damaged byte is a rebuild, never a
wrong row; a cache of the version before is rebuilt; a tier above ``RECORDS_MAX_ROWS``
keeps no records and reads SQL as before.
"""

from __future__ import annotations

import json
import logging
import shutil
import sqlite3
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from tiervault.vault import array_file, light_feed, mirror_cache
from tiervault.vault.entry import Entry
from tiervault.vault.read_scope import read_scope
from tiervault.vault.store import TierStore

from mirror_modes import MIRROR_MODES, read_mirror_as

LIGHT_READ = "substr(e.description, 1, "  # the light-row statement (vault/sqlite_sql.py)

#: rows rewritten by outside SQL before the first build: each one SQL treats apart
ODD = {
    "nul-title": "title = 'nul' || char(0) || 'title'",
    "nul-tags": "tags = 'red' || char(0) || 'blue'",
    "nul-late": "description = printf('%.200c', 'w') || char(0) || 'tail'",  # past the snippet
    "nul-context": "context = 'ctx' || char(0) || 'more'",
    "text-created": "created_at = 'yesterday'",
    "huge-created": "created_at = 1e300",
    "bad-valid": "valid_until = -1e300",
}
#: rows SQL answers alike, read from the records
PLAIN_ODD = {
    "unicode": "title = 'naïve café ☕', description = printf('%.130c', 'é'), tags = 'über ☕'",
    "extras": "example = 'an example', counter_example = 'not this', why = 'because ✓'",
    "no-tags": "tags = ''",
    "int-created": "created_at = 1700000000",
}


def _tier(path: Path) -> list[str]:
    ids = [f"e-{i}" for i in range(40)] + list(ODD) + list(PLAIN_ODD)
    with TierStore(path, name="t") as st:
        st.capture_many([Entry.create(id=eid, title=f"kafka consumer {eid}", tags=["ops", f"t{i % 3}"],
                                      description=f"consumer lag {eid} " * (i % 9 + 1),
                                      valid_from=1.6e9 if i % 4 == 0 else None)
                         for i, eid in enumerate(ids)])
    with sqlite3.connect(path) as conn:  # outside SQL (another writer of the file)
        for eid, change in {**ODD, **PLAIN_ODD}.items():
            conn.execute(f"UPDATE entries SET {change} WHERE id = ?", (eid,))
    return ids


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, list[str]]:
    folder = tmp_path_factory.mktemp("light")
    ids = _tier(folder / "t.db")
    return folder, ids


def _copy(built: tuple[Path, list[str]], to: Path) -> Path:
    shutil.copytree(built[0], to)
    return to / "t.db"


def _sql(st: TierStore, ids: list[str], snippet: int = 120) -> dict:
    return st.light_rows_texts(ids, None, snippet)


def _light_reads(st: TierStore) -> list[str]:
    seen: list[str] = []
    st.db.conn.set_trace_callback(lambda sql: seen.append(sql) if LIGHT_READ in sql else None)
    return seen


@pytest.mark.parametrize("mode", MIRROR_MODES)
def test_every_light_row_is_sqls_the_odd_ones_asked_there(built, tmp_path, monkeypatch, mode):
    db = _copy(built, tmp_path / "v")
    ids = built[1] + ["nowhere"]
    read_mirror_as(db, mode, monkeypatch)
    with TierStore(db, name="t") as st:
        m = st.postings()
        assert m.records is not None and m.records.n == m.base_rows
        assert m.records.read == (mode == "pread")
        with read_scope():
            got = st.light_rows(ids)
        want = _sql(st, ids)
        assert got == want
        assert {"text-created", "huge-created", "bad-valid", "nowhere"}.isdisjoint(got)  # SANE_TIMES
        assert got["extras"].chars == want["extras"].chars and got["unicode"].snippet == "é" * 120
        rows, ask = m.records.light_rows(m, ids, m.slots_of(ids))
        assert set(ask) == set(ODD) and set(rows) == set(built[1]) - set(ODD)
        with read_scope():
            seen = _light_reads(st)
            plain = st.light_rows([f"e-{i}" for i in range(12)])
        assert len(plain) == 12 and seen == []  # base rows: no statement


def test_another_processs_writes_are_seen_by_the_next_read_scope(built, tmp_path):
    db = _copy(built, tmp_path / "v")
    with TierStore(db, name="t") as st:
        st.postings()
        ids = ["e-1", "e-2", "e-3", "late"]
        with read_scope():
            before = st.light_rows(ids)
            script = ("import sys\nfrom tiervault.vault.store import TierStore\n"
                      "from tiervault.vault.entry import Entry\n"
                      "with TierStore(sys.argv[1], name='x') as st:\n"
                      "    e = st.get('e-1')\n"
                      "    st.capture(Entry.from_dict({**e.to_dict(), 'title': 'rewritten', 'severity': 'critical'}))\n"
                      "    st.delete('e-2')\n"
                      "    st.capture(Entry.create(id='late', title='written later', description='new row'))\n")
            subprocess.run([sys.executable, "-c", script, str(db)], check=True, timeout=120)
            # the open scope keeps the generation its search ranked (vault/read_scope.py)
            assert st.light_rows(ids) == before and "late" not in before
        with read_scope():
            after = st.light_rows(ids)
        assert after == _sql(st, ids)
        assert after["e-1"].title == "rewritten" and after["e-1"].severity == "critical"
        assert "e-2" not in after and after["late"].title == "written later"
        assert st.light_rows(ids) == after  # outside a scope: caught up first


def _offset(cache: Path, name: str) -> int:
    head = cache.read_bytes()[:24]
    _, _, _, length = struct.unpack("<8sIIQ", head)
    return int(json.loads(cache.read_bytes()[24:24 + length])["arrays"][name]["offset"])


@pytest.mark.parametrize("array", ["light_index", "light_blob"])
def test_a_damaged_byte_is_a_rebuild_never_a_wrong_row(built, tmp_path, caplog, array):
    db = _copy(built, tmp_path / "v")
    with TierStore(db, name="t") as st:
        st.postings()
    cache = Path(f"{db}.postings.mirror")
    data = bytearray(cache.read_bytes())
    data[_offset(cache, array) + 3] ^= 0x10  # the first row's record or title
    cache.write_bytes(bytes(data))
    ids = built[1]
    with caplog.at_level(logging.WARNING), TierStore(db, name="t") as st:
        st.postings()  # the cache mapped (as a search would): no record block read yet
        with read_scope():
            got = st.light_rows(ids)
        assert got == _sql(st, ids)
        with read_scope():
            assert st.light_rows(ids) == got  # from the rebuilt mirror
        assert st.postings().records is not None
    assert sum("search cache" in r.message for r in caplog.records) == 1, caplog.text


def test_a_cache_of_the_version_before_is_rebuilt_with_records(built, tmp_path):
    db = _copy(built, tmp_path / "v")
    with TierStore(db, name="t") as st:
        st.postings()
    cache = Path(f"{db}.postings.mirror")
    f = array_file.read(cache)
    arrays = {n: (f.checked(n).all() if n in f.lazy_names() else f.array(n)).copy()
              for n in f.names() if not n.startswith("light_")}
    meta = {**f.meta, "version": 8}
    meta.pop("light_snippet")
    del f
    array_file.write(cache, meta, arrays, {n for n in arrays if n.startswith(("W_", "T_", "ids_"))})
    with TierStore(db, name="t") as st:
        m = st.postings()
        assert m.records is not None
        assert st.light_rows(built[1]) == _sql(st, built[1])
    assert array_file.read_meta(cache)["version"] == mirror_cache.CACHE_VERSION == 9
    assert "light_blob" in array_file.read(cache).names()


def test_a_tier_past_the_limit_keeps_no_records_and_reads_sql(built, tmp_path, monkeypatch):
    monkeypatch.setattr(light_feed, "RECORDS_MAX_ROWS", 10)
    db = _copy(built, tmp_path / "v")
    with TierStore(db, name="t") as st:
        m = st.postings()
        assert m.records is None and m.base_rows == len(built[1])
        seen = _light_reads(st)
        got = st.light_rows(built[1])
        assert len(seen) == 1 and got == _sql(st, built[1])
    assert "light_blob" not in array_file.read(Path(f"{db}.postings.mirror")).names()


def test_another_snippet_length_is_read_from_sql(built, tmp_path):
    db = _copy(built, tmp_path / "v")
    with TierStore(db, name="t") as st:
        st.postings()
        seen = _light_reads(st)
        got = st.light_rows(["e-8", "unicode"], 50)
        assert len(seen) == 1 and got == _sql(st, ["e-8", "unicode"], 50)
        assert got["unicode"].snippet == "é" * 50


def test_the_records_feed_is_one_snapshot_of_the_rows_it_yields(built, tmp_path):
    db = _copy(built, tmp_path / "v")
    with TierStore(db, name="t") as st, TierStore(db, name="t") as other:
        gen_before = st.generation()
        with light_feed.rows_with_records(st, 20) as (gen, chunks, records):
            first = next(chunks)
            other.capture(Entry.create(id="between", title="written between two chunks",
                                       description="a row the snapshot does not hold"))
            rest = list(chunks)
        assert gen == gen_before < st.generation() and records is not None
        rows = [i for c in [first, *rest] for i in c.id]
        assert len(first) == 20 and "between" not in rows and len(rows) == len(built[1])
        assert rows == [r.id for r in st.changes_since(-1).rows if r.id != "between"]
        # one record a row read, in the rows' order (the mirror's slots)
        assert records.finish(st.postings()).n == len(rows)


def test_a_tier_grown_past_the_limit_is_rebuilt_without_records(built, tmp_path, monkeypatch):
    """A tier with records that grows past ``RECORDS_MAX_ROWS`` (its next rebuild: a
    small tier's at every write, a large one's past 5% of delta) behaves as one built
    large: no records, every light row from SQL, none in its cache file."""
    monkeypatch.setattr(light_feed, "RECORDS_MAX_ROWS", len(built[1]) + 5)
    db = _copy(built, tmp_path / "v")
    with TierStore(db, name="t") as st:
        assert st.postings().records is not None
        st.capture_many([Entry.create(id=f"more-{i}", title=f"grown {i}", description="past the limit")
                         for i in range(10)])
        m = st.postings()
        assert m.records is None and m.base_rows == len(built[1]) + 10  # rebuilt, grown past it
        ids = built[1] + ["more-3"]
        seen = _light_reads(st)
        with read_scope():
            got = st.light_rows(ids)
        assert len(seen) == 1 and got == _sql(st, ids)
    assert "light_blob" not in array_file.read(Path(f"{db}.postings.mirror")).names()
    monkeypatch.setenv("TIERVAULT_LIGHT_RECORDS_MAX_ROWS", "1000")  # the override: records again
    Path(f"{db}.postings.mirror").unlink()
    with TierStore(db, name="t") as st:
        assert st.postings().records is not None


@pytest.mark.parametrize("value, expected", [("", 150_000), ("2000", 2000), ("0", 0), ("lots", 150_000)])
def test_the_row_limit_from_the_environment(monkeypatch, caplog, value, expected):
    monkeypatch.setenv("TIERVAULT_LIGHT_RECORDS_MAX_ROWS", value)
    with caplog.at_level(logging.WARNING):
        assert light_feed.records_max_rows() == expected
    warned = [r.message for r in caplog.records if "TIERVAULT_LIGHT_RECORDS_MAX_ROWS" in r.message]
    assert warned == (["TIERVAULT_LIGHT_RECORDS_MAX_ROWS='lots' is not a whole number; light records for "
                       "tiers of up to 150000 rows"] if value == "lots" else [])
