"""Fault and property tests of the derived caches (issue 12: 6, 7, 12).

- a restored older tier file is never served from a newer cache (mirror or vectors),
  whatever the generations line up to (6);
- any damage to a cache file means one warning and a rebuild, never a failed search;
  a `.ids` file cannot point outside its folder (7);
- a full disk (file-size limit) during a search neither writes to the tier nor leaves
  temporary files; a write fails with a clear error (12).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tiervault.vault import array_file
from tiervault.vault.entry import Entry
from tiervault.vault.manager import VaultManager

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
         "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo"]


def entry(i: int, tag: str) -> Entry:
    return Entry.create(id=f"{tag}-{i}", title=f"{tag}word{i} {WORDS[i % len(WORDS)]}",
                        description=f"about {tag}word{i}")


def found(manager: VaultManager, word: str) -> list[str]:
    return manager.search(word, limit=50).ids


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(before=st.integers(1, 6), after=st.integers(1, 8), extra=st.integers(-2, 3))
def test_a_restored_tier_is_never_served_from_a_newer_mirror_cache(tmp_path_factory, before, after, extra):
    """Backup at generation g0, more writes up to g1 (cache saved there), restore the
    backup, write again until the generation is g1 + extra: every entry written after
    the restore is found, none of the lost ones is."""
    d = tmp_path_factory.mktemp("restore")
    db = d / "agent.db"
    with VaultManager.at({"agent": str(db)}) as m:
        for i in range(before):
            m.capture(entry(i, "old"), "agent")
    shutil.copy(db, d / "backup.db")
    with VaultManager.at({"agent": str(db)}) as m:
        for i in range(after):
            m.capture(entry(i, "lost"), "agent")
        m.store("agent").postings()  # the cache is written at g1
        g1 = m.store("agent").generation()
    shutil.copy(d / "backup.db", db)
    with VaultManager.at({"agent": str(db)}) as m:
        i = 0
        while m.store("agent").generation() < g1 + extra or i == 0:
            m.capture(entry(i, "new"), "agent")
            i += 1
    with VaultManager.at({"agent": str(db)}) as m:  # a new process: the cache file is read
        for k in range(i):
            assert found(m, f"newword{k}") == [f"new-{k}"]
        for k in range(after):
            assert found(m, f"lostword{k}") == []
        store = m.store("agent")
        assert store.postings().n_alive == store.count() == before + i


# -- damaged caches -----------------------------------------------------------------------------
def _arrays(path: Path) -> dict:
    f = array_file.read(path)
    return {name: np.array(f.checked(name).a if name in f.lazy_names() else f.array(name))
            for name in f.names()}


def _rewrite(path: Path, keep: set[str] | None = None, **changes) -> None:
    """Rewrite the cache with some arrays changed, its CRCs recomputed: a damage the
    checksums cannot see, which the structural checks must."""
    f = array_file.read(path)
    arrays = _arrays(path)
    arrays.update(changes)
    if keep is not None:
        arrays = {k: v for k, v in arrays.items() if k in keep}
    path.unlink()
    array_file.write(path, f.meta, arrays, f.lazy_names() & set(arrays))


DAMAGE = {
    "empty": lambda p: p.write_bytes(b""),
    "truncated": lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]),
    "garbage": lambda p: p.write_bytes(os.urandom(4096)),
    "short alive": lambda p: _rewrite(p, alive=_arrays(p)["alive"][:-1]),
    "W indices out of range": lambda p: _rewrite(p, W_indices=_arrays(p)["W_indices"] + 10**6),
    "tag slots out of range": lambda p: _rewrite(p, tag_slots=_arrays(p)["tag_slots"] + 10**6),
    "bad codes": lambda p: _rewrite(p, type_code=_arrays(p)["type_code"] + 50),
    "missing array": lambda p: _rewrite(p, keep={"rowids"}),
    "2-D doclen": lambda p: _rewrite(p, doclen=_arrays(p)["doclen"].reshape(1, -1)),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_mirror_cache_is_rebuilt_with_one_warning(tmp_path, caplog, damage):
    db = tmp_path / "agent.db"
    with VaultManager.at({"agent": str(db)}) as m:
        m.store("agent").capture_many([Entry.create(id=f"e{i}", title=f"entry{i} {WORDS[i % 18]}",
                                                    description="x", tags=[f"t{i % 3}"])
                                       for i in range(40)])
        m.store("agent").postings()
    cache = Path(f"{db}.postings.mirror")
    DAMAGE[damage](cache)
    with caplog.at_level(logging.WARNING), VaultManager.at({"agent": str(db)}) as m:
        assert found(m, "entry7") == ["e7"]
        assert sorted(m.store("agent").postings().tags) == ["t0", "t1", "t2"]
    assert sum("search cache" in r.message for r in caplog.records) == 1, caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING), VaultManager.at({"agent": str(db)}) as m:
        assert found(m, "entry8") == ["e8"]
    assert "cache" not in caplog.text  # rebuilt and saved: read cleanly next time
    assert [p.name for p in tmp_path.iterdir() if "tmp" in p.name] == []


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.floats(0, 1), flips=st.lists(st.tuples(st.floats(0, 1), st.integers(0, 255)), max_size=6))
def test_any_byte_damage_to_the_mirror_cache_never_breaks_search(tmp_path_factory, cut, flips):
    d = tmp_path_factory.mktemp("flip")
    db = d / "agent.db"
    with VaultManager.at({"agent": str(db)}) as m:
        m.store("agent").capture_many([entry(i, "e") for i in range(30)])
        m.store("agent").postings()
    cache = Path(f"{db}.postings.mirror")
    data = bytearray(cache.read_bytes())
    for where, value in flips:
        data[int(where * (len(data) - 1))] = value
    cache.write_bytes(bytes(data[: max(1, int(cut * len(data)))] if cut < 0.5 else data))
    with VaultManager.at({"agent": str(db)}) as m:
        for k in (0, 11, 29):
            assert found(m, f"eword{k}") == [f"e-{k}"]


# -- what an OS crash can leave of an unsynced cache write (atomic_file: durable=False) ----------
def test_a_cache_write_skips_fsync_and_other_atomic_writes_keep_it(tmp_path, monkeypatch):
    from tiervault.vault.atomic_file import atomic_write

    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd))[1])
    array_file.write(tmp_path / "c.arrays", {"v": 1}, {"a": np.arange(10)})
    assert synced == [] and array_file.read(tmp_path / "c.arrays").meta == {"v": 1}
    with atomic_write(tmp_path / "export.jsonl") as fh:
        fh.write("{}\n")
    assert len(synced) >= 1  # the file (and its folder where the OS allows it)


def _array_spans(path: Path) -> tuple[int, dict[str, tuple[int, int]]]:
    """The header's end and each array's (offset, nbytes), read from the file's layout
    (array_file.py's module docstring)."""
    raw = path.read_bytes()
    length = int.from_bytes(raw[16:24], "little")
    doc = json.loads(raw[24:24 + length])
    return 24 + length, {k: (v["offset"], v["nbytes"]) for k, v in doc["arrays"].items()}


def _zero(path: Path, lo: int, hi: int) -> None:
    data = bytearray(path.read_bytes())
    data[lo:hi] = bytes(hi - lo)
    path.write_bytes(bytes(data))


def test_a_cache_file_zeroed_or_cut_after_its_write_is_rebuilt_never_served(tmp_path, caplog):
    """An unsynced file after a power cut may keep its size with zeroed blocks (the data
    never reached the disk), be cut short, or be all zeros: every such file answers every
    query exactly (zeroed bytes are refused before use, never read as slots, weights or
    strings), with at most one warning, and the rebuilt cache reads cleanly after."""
    src = tmp_path / "src"
    src.mkdir()
    db = src / "agent.db"
    with VaultManager.at({"agent": str(db)}) as m:
        m.store("agent").capture_many([Entry.create(id=f"e{i}", title=f"entry{i} {WORDS[i % 18]}",
                                                    description=f"about {WORDS[(i * 7) % 18]}",
                                                    tags=[f"t{i % 3}"]) for i in range(60)])
        m.store("agent").postings()
    cache = Path(f"{db}.postings.mirror")
    size = cache.stat().st_size
    header_end, spans = _array_spans(cache)
    damages = {"all zeros": (0, size), "zeros after the header": (header_end, size),
               "cut after the header": None}
    for name, (offset, nbytes) in spans.items():
        if nbytes and any(cache.read_bytes()[offset:offset + nbytes]):  # zeros over zeros: no damage
            damages[f"array {name} zeroed"] = (offset, offset + nbytes)
    assert len(damages) > 20
    warned = 0
    for label, span in damages.items():
        case = tmp_path / label.replace(" ", "-")
        shutil.copytree(src, case)
        copy = case / cache.name
        if span is None:
            copy.write_bytes(copy.read_bytes()[:header_end])
        else:
            _zero(copy, *span)
        caplog.clear()
        with caplog.at_level(logging.WARNING), VaultManager.at({"agent": str(case / "agent.db")}) as m:
            for i in range(60):
                assert found(m, f"entry{i}") == [f"e{i}"], label
            assert sorted(m.store("agent").postings().tags) == ["t0", "t1", "t2"], label
            assert set(m.search("about", limit=100).ids) == {f"e{i}" for i in range(60)}, label
        n = sum("search cache" in r.message for r in caplog.records)
        assert n <= 1, (label, caplog.text)
        warned += n
        if span is None or span[0] <= header_end:
            assert n == 1, label  # every array damaged: refused on open
        if n:
            caplog.clear()
            with caplog.at_level(logging.WARNING), VaultManager.at({"agent": str(case / "agent.db")}) as m:
                assert found(m, "entry8") == ["e8"]
            assert "cache" not in caplog.text, label  # rebuilt and saved: read cleanly
    assert warned >= len(damages) // 2  # most zeroed arrays are read by these searches


# -- through the CLI, with vectors ------------------------------------------------------------
def cli(args, root: Path, preexec=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERVAULT_")}
    env["HOME"] = str(root / "home")
    return subprocess.run([sys.executable, "-m", "tiervault", *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120, preexec_fn=preexec)


@pytest.fixture
def vec_vault(tmp_path) -> Path:
    (tmp_path / "home").mkdir()
    (tmp_path / "agent.yaml").write_text(
        f"tiers:\n  agent: {tmp_path / 'agent.db'}\n  project: {tmp_path / 'project.db'}\n"
        f"  team: {tmp_path / 'team.db'}\nembedding: {{provider: hash, dim: 32}}\n"
        "features:\n  embedding-enabled: true\n")
    return tmp_path


def _import(root: Path, tag: str, n: int, start: int = 0) -> None:
    lines = "\n".join(json.dumps({"id": f"{tag}-{i}", "title": f"{tag}word{i} sqlite",
                                  "description": "x"}) for i in range(start, start + n))
    r = subprocess.run([sys.executable, "-m", "tiervault", "import", "-"], cwd=root, input=lines,
                       env={**{k: v for k, v in os.environ.items() if not k.startswith("TIERVAULT_")},
                            "HOME": str(root / "home")},
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def _search(root: Path, query: str) -> list[str]:
    r = cli(["search", query, "--json", "--limit", "50"], root)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    return [row["id"] for row in json.loads(r.stdout)]


def test_cli_restore_with_vector_caches(vec_vault):
    root = vec_vault
    _import(root, "old", 2)
    shutil.copy(root / "agent.db", root / "backup.db")
    _import(root, "lost", 6)
    assert "lost-3" in _search(root, "lostword3")
    g1 = _gen(root / "agent.db")
    assert list(root.glob("agent.db.vec-*.ids")) and (root / "agent.db.postings.mirror").exists()
    shutil.copy(root / "backup.db", root / "agent.db")
    i = 0
    while _gen(root / "agent.db") < g1:
        _import(root, "new", 1, start=i)
        i += 1
    hits = _search(root, "sqlite")
    assert not [h for h in hits if h.startswith("lost")], hits
    assert {f"new-{k}" for k in range(i)} <= set(hits)


def _gen(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT value FROM meta WHERE key = 'gen'").fetchone()[0])


VECTOR_DAMAGE = {
    "empty npy": lambda ids, npy: npy.write_bytes(b""),
    "bad header": lambda ids, npy: ids.write_text("{not json\n" + ids.read_text().split("\n", 1)[1]),
    "absolute matrix path": lambda ids, npy: _retarget(ids, str(npy.parent.parent / "outside.npy")),
    "relative escape": lambda ids, npy: _retarget(ids, "../outside.npy"),
    "wrong shape": lambda ids, npy: np.save(npy, np.zeros((3, 5), dtype=np.float32)),
}


def _retarget(ids: Path, name: str) -> None:
    header, body = ids.read_text().split("\n", 1)
    h = json.loads(header)
    h["matrix"] = name
    ids.write_text(json.dumps(h) + "\n" + body)


@pytest.mark.parametrize("damage", sorted(VECTOR_DAMAGE))
def test_a_damaged_vector_cache_is_rebuilt_with_one_warning(vec_vault, damage):
    root = vec_vault
    _import(root, "e", 8)
    before = _search(root, "eword3 sqlite")
    (ids_path,) = root.glob("agent.db.vec-*.ids")
    header = json.loads(ids_path.read_text().split("\n", 1)[0])
    npy = root / header["matrix"]
    # A file outside the folder the header may try to name: must never be loaded.
    outside = root.parent / "outside.npy"
    np.save(outside, np.ones((header["n"], header["dim"]), dtype=np.float32))
    VECTOR_DAMAGE[damage](ids_path, npy)
    r = cli(["search", "eword3 sqlite", "--json", "--limit", "50"], root)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert [row["id"] for row in json.loads(r.stdout)] == before
    assert r.stderr.count("ignoring the vector cache") == 1, r.stderr
    r = cli(["search", "eword3 sqlite", "--json", "--limit", "50"], root)
    assert "ignoring" not in r.stderr  # rebuilt and saved
    assert [p.name for p in root.iterdir() if "tmp" in p.name] == []


def _file_size_limit(limit: int):
    def apply() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def test_a_full_disk_never_touches_the_tier_on_search_and_is_a_clear_error_on_write(tmp_path):
    (tmp_path / "home").mkdir()
    (tmp_path / "agent.yaml").write_text(f"tiers:\n  agent: {tmp_path / 'agent.db'}\n"
                                         f"  project: {tmp_path / 'p.db'}\n  team: {tmp_path / 't.db'}\n")
    lines = "\n".join(json.dumps({"id": f"e{i}", "title": f"entry{i} {WORDS[i % 18]}",
                                  "description": " ".join(WORDS) * 5}) for i in range(150))
    r = subprocess.run([sys.executable, "-m", "tiervault", "import", "-"], cwd=tmp_path, input=lines,
                       env={**os.environ, "HOME": str(tmp_path / "home")}, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    db = tmp_path / "agent.db"
    with sqlite3.connect(db) as conn:  # a tier written by an older version: no uid yet
        conn.execute("DELETE FROM meta WHERE key = 'uid'")
    Path(f"{db}.postings.mirror").unlink(missing_ok=True)
    before = db.read_bytes()
    limit = _file_size_limit(40_000)
    r = cli(["search", "entry7", "--json"], tmp_path, preexec=limit)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert json.loads(r.stdout)[0]["id"] == "e7"
    assert "could not cache" in r.stderr
    assert db.read_bytes() == before  # a read never writes to the tier
    assert [p.name for p in tmp_path.iterdir() if "tmp" in p.name] == []
    r = subprocess.run([sys.executable, "-m", "tiervault", "import", "-"], cwd=tmp_path,
                       input=lines.replace('"e', '"f'), env={**os.environ, "HOME": str(tmp_path / "home")},
                       capture_output=True, text=True, timeout=120, preexec_fn=limit)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "agent" in r.stderr, r.stderr
    assert [p.name for p in tmp_path.iterdir() if "tmp" in p.name] == []
    r = cli(["search", "entry7", "--json"], tmp_path)
    assert r.returncode == 0 and json.loads(r.stdout)[0]["id"] == "e7"
