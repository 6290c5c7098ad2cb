"""vault/sqlite_bulk.py: a bulk load runs with a bigger page cache and fewer WAL
checkpoints, and the connection's own settings are back after it, whatever the outcome."""

from __future__ import annotations

import pytest

from tiervault.vault.entry import Entry
from tiervault.vault.sqlite_bulk import BULK_CACHE_KIB, BULK_WAL_PAGES
from tiervault.vault.store import BULK_ROWS, TierStore


def entries(n: int, start: int = 0) -> list[Entry]:
    return [Entry.from_dict({"id": f"bulk-{i:05d}", "title": f"bulk entry {i}",
                             "description": f"Entry {i} of a bulk load, word {i % 9}."})
            for i in range(start, start + n)]


def settings(store: TierStore) -> tuple[int, int]:
    conn = store.db.conn
    assert conn is not None
    return (conn.execute("PRAGMA cache_size").fetchone()[0],
            conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0])


def test_a_bulk_load_runs_with_the_bulk_settings_and_restores_the_connections(tmp_path):
    during = []
    with TierStore(tmp_path / "t.db", name="agent") as store:
        store.capture_many(entries(10))  # a small write: the tier exists, settings untouched
        own = settings(store)
        assert own == (-65_536, 1_000)
        store.capture_many(entries(3 * BULK_ROWS, start=100), batch_size=BULK_ROWS,
                           on_batch=lambda b: during.append(settings(store)))
        assert during == [(-BULK_CACHE_KIB, BULK_WAL_PAGES)] * 3
        assert settings(store) == own
        small = []
        store.capture_many(entries(900, start=9_000), batch_size=300,
                           on_batch=lambda b: small.append(settings(store)))
        assert small == [own] * 3  # batches under BULK_ROWS: not a bulk load
        assert store.count() == 10 + 3 * BULK_ROWS + 900
        assert store.integrity_problems() == []


def test_a_failing_bulk_load_restores_the_settings_too(tmp_path):
    def failing():
        yield from entries(2 * BULK_ROWS + 10)
        raise OSError("the input broke")

    with TierStore(tmp_path / "t.db", name="agent") as store:
        store.create()
        own = settings(store)
        with pytest.raises(OSError, match="the input broke"):
            store.capture_many(failing(), batch_size=BULK_ROWS)
        assert settings(store) == own
        assert store.count() == 2 * BULK_ROWS
