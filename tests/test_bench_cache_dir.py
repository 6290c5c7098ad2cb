"""bench/cache_dir.py: a bench run's own cache directory is made, used and removed; a
directory the caller named is used and kept. Real directories, real environment."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.cache_dir import VARIABLE, run_cache_dir  # noqa: E402


def test_an_own_directory_is_set_for_the_run_and_removed_after(monkeypatch) -> None:
    monkeypatch.delenv(VARIABLE, raising=False)
    with run_cache_dir("tv-test-cache-") as cache:
        assert os.environ[VARIABLE] == str(cache)
        assert cache.is_dir() and cache.name.startswith("tv-test-cache-")
        (cache / "mirror").write_bytes(b"x" * 10)  # what a run leaves there goes with it
    assert not cache.exists()
    assert VARIABLE not in os.environ


def test_an_own_directory_is_removed_when_the_run_fails(monkeypatch) -> None:
    monkeypatch.delenv(VARIABLE, raising=False)
    with pytest.raises(RuntimeError, match="phase failed"):
        with run_cache_dir("tv-test-cache-") as cache:
            raise RuntimeError("phase failed")
    assert not cache.exists()
    assert VARIABLE not in os.environ


def test_the_callers_directory_is_used_and_kept(monkeypatch, tmp_path: Path) -> None:
    given = tmp_path / "caches"
    given.mkdir()
    monkeypatch.setenv(VARIABLE, str(given))
    with run_cache_dir("tv-test-cache-") as cache:
        assert cache == given
        (cache / "mirror").write_bytes(b"x")
    assert (given / "mirror").exists()
    assert os.environ[VARIABLE] == str(given)
