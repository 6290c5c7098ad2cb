"""The pipelined bulk write (vault/write_pipeline.py): a writer thread indexes and commits
batch N while the caller's thread reads batch N+1.

What must not change against batches written one after the other in the caller's
thread: the rows, rowids, content hashes and FTS5 answers of the tier; ``on_batch``
after each commit (the batch visible to another connection, the next one not yet),
in order, with the running total; a failing input, a failing callback and a failing
write each stop the load with exactly the batches before them committed. (SIGKILL
mid-import: tests/test_crash.py, whose 500- and 1,000-row batches take this path.)
Whether the thread writes a batch is chosen per batch by the spare cores measured
(vault/spare_cores.py): these tests pin the choice (always the thread, or alternating)
so each path is covered whatever the machine's load.
"""

from __future__ import annotations

import sqlite3
import threading

import pytest

from tiervault.errors import TierVaultError
from tiervault.vault import write_pipeline
from tiervault.vault.entry import Entry
from tiervault.vault.jsonl import import_lines
from tiervault.vault.manager import VaultManager
from tiervault.vault.store import TierStore

BATCH = 500
assert BATCH >= write_pipeline.MIN_PIPELINED_BATCH


class Pinned:
    """A chooser that answers from a fixed cycle (``[True]``: always the writer thread)."""

    def __init__(self, cycle: list[bool]) -> None:
        self.cycle, self.calls = cycle, 0

    def threaded(self) -> bool:
        self.calls += 1
        return self.cycle[(self.calls - 1) % len(self.cycle)]


@pytest.fixture(autouse=True)
def always_threaded(monkeypatch):
    monkeypatch.setattr(write_pipeline, "new_chooser", lambda: Pinned([True]))


def record(i: int, version: int = 0) -> dict:
    return {"id": f"pipe-{i:05d}", "title": f"pipeline entry {i} v{version}",
            "description": f"Entry number {i} of the pipelined load, words {i % 13} and {i % 7}.",
            "context": f"ctx{i % 11}", "tags": [f"t{i % 5}", "bulk"],
            "type": ("pattern", "rule", "decision")[i % 3], "domain": f"area{i % 4}",
            "created_at": 1_700_000_000 + i, "updated_at": 1_700_000_000 + i + version}


def entries(n: int, version: int = 0, start: int = 0) -> list[Entry]:
    return [Entry.from_dict(record(i, version)) for i in range(start, start + n)]


def tier_rows(path) -> tuple[list[tuple], list[tuple]]:
    """Every entry row (gen aside: it counts transactions) and FTS5's answers for a few words."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT rowid, id, type, domain, title, description, context, tags, "
                            "applies_to, severity, origin, valid_from, valid_until, created_at, "
                            "updated_at, content_hash FROM entries ORDER BY rowid").fetchall()
        hits = [tuple(r) for word in ("pipelined", "words", "t3", "area2", "v1", "ctx7")
                for r in conn.execute("SELECT rowid, round(bm25(entries_fts), 9) FROM entries_fts "
                                      "WHERE entries_fts MATCH ? ORDER BY rowid", (word,))]
        return rows, hits
    finally:
        conn.close()


def tier_refusing(path, entry_id: str):
    """An empty tier at ``path`` whose insert of ``entry_id`` fails inside its batch's
    transaction (a real SQLite error, raised by a trigger)."""
    with TierStore(path, name="agent") as store:
        store.create()
    conn = sqlite3.connect(path)
    conn.execute(f"CREATE TRIGGER refuse BEFORE INSERT ON entries WHEN new.id = '{entry_id}' "
                 "BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END")
    conn.commit()
    conn.close()
    return path


def load(path, batches: list[list[Entry]]) -> list[tuple[int, int, int]]:
    """Write each list in one capture_many call; the (len, written, total) of every batch."""
    seen = []
    with TierStore(path, name="agent") as store:
        for items in batches:
            store.capture_many(items, batch_size=BATCH,
                               on_batch=lambda b: seen.append((len(b.entries), b.written, b.total)))
        assert store.integrity_problems() == []
    return seen


def test_pipelined_load_writes_the_rows_a_serial_load_writes(tmp_path, monkeypatch):
    # New rows, then a reload with a third of them changed and a repeated id in a batch.
    first = entries(2_300)
    second = entries(2_300)
    for i in range(0, 2_300, 3):
        second[i] = Entry.from_dict(record(i, version=1))
    second.insert(10, Entry.from_dict(record(4, version=2)))  # id 4 twice in one batch: last wins
    second.insert(700, Entry.from_dict(record(5, version=2)))  # id 5 again, a batch later
    plan = [first, second, entries(BATCH * 2, start=5_000)]
    threads = threading.active_count()
    piped = load(tmp_path / "piped.db", plan)
    assert threading.active_count() == threads  # the writer thread is gone
    monkeypatch.setattr(write_pipeline, "MIN_PIPELINED_BATCH", 10**9)  # one after the other
    serial = load(tmp_path / "serial.db", plan)
    assert piped == serial
    assert [s[2] for s in piped[:5]] == [500, 1_000, 1_500, 2_000, 2_300]
    assert [s[0] for s in piped[5:10]] == [500, 500, 500, 500, 302]
    assert tier_rows(tmp_path / "piped.db") == tier_rows(tmp_path / "serial.db")
    rows, hits = tier_rows(tmp_path / "piped.db")
    assert len(rows) == 3_300 and len(hits) > 1_000


def test_batches_alternating_between_the_threads_write_what_a_serial_load_writes(
        tmp_path, monkeypatch):
    plan = [entries(2_300), entries(1_700, version=1, start=1_000)]
    seen: list[tuple[str, int]] = []
    seen_by = lambda b: seen.append((threading.current_thread().name, b.total))  # noqa: E731
    monkeypatch.setattr(write_pipeline, "new_chooser", lambda: Pinned([False, True, True, False]))
    with TierStore(tmp_path / "mixed.db", name="agent") as store:
        mixed = [store.capture_many(items, batch_size=BATCH, on_batch=seen_by) for items in plan]
    monkeypatch.setattr(write_pipeline, "MIN_PIPELINED_BATCH", 10**9)
    serial = load(tmp_path / "serial.db", plan)
    assert mixed == [2_300, 1_700] and sum(s[1] for s in serial) == 4_000
    caller = threading.current_thread().name
    assert seen == [(caller, t) for t in (500, 1_000, 1_500, 2_000, 2_300,
                                         500, 1_000, 1_500, 1_700)]  # in order, caller's thread
    assert tier_rows(tmp_path / "mixed.db") == tier_rows(tmp_path / "serial.db")


def test_a_failing_write_of_the_callers_thread_stops_the_load_as_the_writers_does(
        tmp_path, monkeypatch):
    monkeypatch.setattr(write_pipeline, "new_chooser", lambda: Pinned([True, False]))
    path = tier_refusing(tmp_path / "t.db", "pipe-01734")  # the 4th batch (caller's thread)
    seen = []
    with TierStore(path, name="agent") as store:
        with pytest.raises(TierVaultError, match="refused by a trigger"):
            store.capture_many(entries(3_000), batch_size=BATCH,
                               on_batch=lambda b: seen.append(b.total))
        assert seen == [500, 1_000, 1_500]
        assert store.count() == 1_500
        assert store.integrity_problems() == []


def test_on_batch_runs_after_its_commit_and_before_the_next(tmp_path):
    path = tmp_path / "t.db"
    seen: list[int] = []

    def committed(batch) -> None:
        conn = sqlite3.connect(path)  # another connection sees only committed rows
        try:
            count = conn.execute("SELECT count(*) FROM entries").fetchone()[0]
        finally:
            conn.close()
        assert count == batch.total
        seen.append(count)

    with TierStore(path, name="agent") as store:
        store.capture_many(entries(4 * BATCH + 7), batch_size=BATCH, on_batch=committed)
    assert seen == [500, 1_000, 1_500, 2_000, 2_007]


def failing(items: list[Entry], after: int):
    for i, entry in enumerate(items):
        if i == after:
            raise OSError("the input broke")
        yield entry


def test_a_failing_input_keeps_the_batches_before_it_acknowledged(tmp_path):
    seen = []
    with TierStore(tmp_path / "t.db", name="agent") as store:
        with pytest.raises(OSError, match="the input broke"):
            store.capture_many(failing(entries(3_000), 1_300), batch_size=BATCH,
                               on_batch=lambda b: seen.append(b.total))
        assert seen == [500, 1_000]  # batch 2 committed while batch 3 was read: acknowledged
        assert store.count() == 1_000


def test_a_failing_callback_stops_the_load_after_its_batch(tmp_path):
    calls = []

    def committed(batch) -> None:
        calls.append(batch.total)
        if batch.total == 1_000:
            raise RuntimeError("stop here")

    with TierStore(tmp_path / "t.db", name="agent") as store:
        with pytest.raises(RuntimeError, match="stop here"):
            store.capture_many(entries(3_000), batch_size=BATCH, on_batch=committed)
        assert calls == [500, 1_000]
        assert store.count() == 1_000  # batch 3 was read but never handed to the writer


def test_a_failing_write_stops_the_load_with_the_batches_before_it(tmp_path):
    path = tier_refusing(tmp_path / "t.db", "pipe-01234")  # inside the third batch
    seen = []
    with TierStore(path, name="agent") as store:
        with pytest.raises(TierVaultError, match="refused by a trigger"):
            store.capture_many(entries(3_000), batch_size=BATCH,
                               on_batch=lambda b: seen.append(b.total))
        assert seen == [500, 1_000]
        assert store.count() == 1_000
        assert store.integrity_problems() == []
        store.capture_many(entries(600, start=4_000), batch_size=BATCH)  # the store still works
        assert store.count() == 1_600


def test_jsonl_import_reports_what_a_serial_import_reports(tmp_path, monkeypatch):
    """Bad lines between good ones (line numbers), repeated ids, links: same report, same tier."""
    import json

    lines = []
    for i in range(1_800):
        rec = record(i % 1_700)  # ids 0..99 come twice: the last line wins
        if i % 97 == 0:
            rec["links"] = [{"target": f"pipe-{(i + 1) % 1_700:05d}", "type": "supports"}]
        lines.append(json.dumps(rec))
    lines[10] = "{not json"
    lines[1_201] = json.dumps({**record(1), "type": "nope"})
    lines.insert(600, "")

    def run(name: str) -> tuple:
        with VaultManager.at({"team": str(tmp_path / f"{name}.db")}) as vm:
            progress = []
            report = import_lines(vm, "team", iter(lines), batch_size=BATCH,
                                  on_progress=progress.append)
        return report.as_dict(), progress, tier_rows(tmp_path / f"{name}.db")

    piped = run("piped")
    monkeypatch.setattr(write_pipeline, "MIN_PIPELINED_BATCH", 10**9)
    serial = run("serial")
    assert piped[0] == serial[0]
    assert piped[0]["errors"][0].startswith("line 11: invalid JSON")
    assert any(e.startswith("line 1203: type:") for e in piped[0]["errors"])
    assert piped[1][-1] == serial[1][-1] == 1_800
    assert piped[2] == serial[2]
