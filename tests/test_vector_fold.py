"""The fold of a persisted vector index: a new base file, written atomically, verified.

A real child process (fork: its own SQLite connections) catches up with writes
another process made, outgrows the delta bound and folds; it is killed with
SIGKILL at a chosen point of the fold. Whatever the point, a fresh process then
answers exactly as a brute force over the tier, and the files left behind are
either the previous cache or the new one.
"""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path

import numpy as np
import pytest

from test_recall import MODEL, check_same, fill, reference, unit
from tiervault.embeddings import index as index_module
from tiervault.embeddings.recall import VectorRecall, cache_paths, read_cache
from tiervault.vault.manager import VaultManager


@pytest.fixture
def small_bound(monkeypatch):
    """A delta bound of 8 rows, so a test of a few hundred rows folds."""
    monkeypatch.setattr(index_module, "FOLD_MIN_ROWS", 8)
    monkeypatch.setattr(index_module, "FOLD_FRACTION", 0.0)


def tiers(tmp_path: Path) -> dict[str, str]:
    return {"agent": str(tmp_path / "agent.db")}


def matrices(ids_path: Path) -> set[str]:
    """The float32 matrix files of the cache (not the ids' index, int8 codes, bounds, row CRCs)."""
    return {p.name for p in ids_path.parent.glob(ids_path.name.replace(".ids", "") + "-*.npy")
            if p.name.count(".") == ids_path.name.count(".")}


def named_matrix(ids_path: Path) -> str:
    return ids_path.read_text(encoding="utf-8").split("\n", 1)[0].split('"matrix": "')[1].split('"')[0]


def write_more(store, rng, vecs: dict[str, np.ndarray]) -> None:
    """New entries, deleted ones and rewritten vectors: 30 changes past the bound."""
    vecs.update(fill(store, rng, 20, "b"))
    for e in list(vecs)[:100:20]:
        assert store.delete(e)
        del vecs[e]
    for e in ("a00001", "a00002", "b00003"):
        v = unit(rng, 1)[0]
        store.put_vectors(MODEL, [(e, "h2", v)])
        vecs[e] = v


def fold_in_child(tmp_path: Path, point: str, dtype: str) -> int:
    """Fork a process that opens the vault, searches (catch-up + fold) and is killed
    at ``point``: 'matrix' (new files written, before the first rename), 'ids' (new
    files in place, before the ids file's rename), 'stale' (all renamed, the old
    files not yet removed). Returns the wait status."""
    pid = os.fork()
    if pid == 0:  # child: never returns into pytest
        code = 1
        try:
            real_replace = os.replace

            def crashing_replace(src, dst, *a, **kw):  # the crash, at the chosen point
                if point == "matrix" and str(dst).endswith(".npy"):
                    os.kill(os.getpid(), signal.SIGKILL)
                if point == "ids" and str(dst).endswith(".ids"):
                    os.kill(os.getpid(), signal.SIGKILL)
                real_replace(src, dst, *a, **kw)
                if point == "stale" and str(dst).endswith(".ids"):
                    os.kill(os.getpid(), signal.SIGKILL)

            os.replace = crashing_replace
            with VaultManager.at(tiers(tmp_path)) as vm:
                VectorRecall(vm, MODEL, dtype=dtype).search(np.ones(24, dtype=np.float32), 3)
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return status


@pytest.mark.parametrize("dtype", ["float32", "int8"])
@pytest.mark.parametrize("point", ["matrix", "ids", "stale"])
def test_a_fold_killed_at_any_point_leaves_a_usable_index(tmp_path, small_bound, point, dtype):
    rng = np.random.default_rng(31)
    with VaultManager.at(tiers(tmp_path)) as vm:
        store = vm.store("agent")
        vecs = fill(store, rng, 300, "a")
        VectorRecall(vm, MODEL, dtype=dtype).search(unit(rng, 1)[0], 1)  # builds and saves the cache
        ids_path, _ = cache_paths(store, MODEL)
        files = len(list(ids_path.parent.glob("*.npy")))
        assert files == (6 if dtype == "int8" else 3)  # matrix, ids' index (+ int8 codes, bounds, row CRCs)
        before = matrices(ids_path)
        assert len(before) == 1
        write_more(store, rng, vecs)

        status = fold_in_child(tmp_path, point, dtype)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL

        after = matrices(ids_path)
        temps = [p for p in ids_path.parent.iterdir() if p.name.endswith(".tv-tmp")]
        if point == "matrix":  # nothing renamed: the old pair, the temporary file was left
            assert after == before and named_matrix(ids_path) in before and len(temps) >= 1
        elif point == "ids":  # the new matrix published, the ids file still names the old one
            assert len(after) == 2 and named_matrix(ids_path) in before
        else:  # the new pair in place, the old matrix not removed yet
            assert len(after) == 2 and named_matrix(ids_path) not in before

        fresh = VectorRecall(vm, MODEL, dtype=dtype)
        for _ in range(3):
            q = unit(rng, 1)[0]
            check_same(fresh.search(q, 25), reference(q, [("agent", 1.0, vecs)], 25))
        index = fresh.index("agent")
        assert index.mapped and len(index) == len(vecs)
        if point != "stale":  # the reopened cache was older: caught up, then folded again
            assert named_matrix(ids_path) not in before and index.delta_rows == 0
        cached = read_cache(store, ids_path, MODEL)
        assert sorted(cached.ids) == sorted(vecs) and (cached.codes is not None) == (dtype == "int8")


@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_a_fold_in_process_remaps_the_new_file(tmp_path, small_bound, dtype):
    rng = np.random.default_rng(5)
    with VaultManager.at(tiers(tmp_path)) as vm:
        store = vm.store("agent")
        vecs = fill(store, rng, 200, "a")
        recall = VectorRecall(vm, MODEL, dtype=dtype)
        recall.search(unit(rng, 1)[0], 1)
        ids_path, _ = cache_paths(store, MODEL)
        first = matrices(ids_path)
        small = fill(store, rng, 5, "c")  # under the bound: stays in the delta
        vecs.update(small)
        q = unit(rng, 1)[0]
        check_same(recall.search(q, 10), reference(q, [("agent", 1.0, vecs)], 10))
        assert recall.index("agent").delta_rows == 5 and matrices(ids_path) == first
        write_more(store, rng, vecs)
        q = unit(rng, 1)[0]
        check_same(recall.search(q, 10), reference(q, [("agent", 1.0, vecs)], 10))
        index = recall.index("agent")
        assert index.mapped and index.delta_rows == 0 and len(index) == len(vecs)
        assert matrices(ids_path) == {named_matrix(ids_path)} != first  # the old files went
        assert len(list(ids_path.parent.glob("*.npy"))) == (6 if dtype == "int8" else 3)


@pytest.mark.parametrize("damage", ["flip", "truncate", "extend", "ids"])
def test_a_damaged_cache_fails_its_check_and_is_rebuilt(tmp_path, damage, caplog):
    rng = np.random.default_rng(9)
    with VaultManager.at(tiers(tmp_path)) as vm:
        store = vm.store("agent")
        vecs = fill(store, rng, 300, "a")
        VectorRecall(vm, MODEL).search(unit(rng, 1)[0], 1)
        ids_path, _ = cache_paths(store, MODEL)
        npy = ids_path.parent / named_matrix(ids_path)
        data = bytearray(npy.read_bytes())
        if damage == "flip":  # one bit of one vector: only the CRC can see it
            data[len(data) // 2] ^= 0x01
            npy.write_bytes(bytes(data))
        elif damage == "truncate":
            npy.write_bytes(bytes(data[:-3]))
        elif damage == "extend":
            npy.write_bytes(bytes(data) + b"\0")
        else:
            text = ids_path.read_text(encoding="utf-8")
            ids_path.write_text(text.replace("a00007", "a00008", 1), encoding="utf-8")
        q = unit(rng, 1)[0]
        with caplog.at_level(logging.WARNING):
            check_same(VectorRecall(vm, MODEL).search(q, 25), reference(q, [("agent", 1.0, vecs)], 25))
        assert "ignoring the vector cache" in caplog.text
