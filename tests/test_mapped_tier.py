"""vault/connection.py: a tier file read through a memory mapping (``PRAGMA mmap_size``,
issue 16 session 16) while another process shrinks or grows it.

A mapped page past the end of a truncated file would be a SIGBUS, not an error: SQLite
maps at most the file's size as of each read transaction and maps again when the file
changed, so a reader must see every change and never touch a page that is gone. Here
another process (the sqlite3 module of a fresh interpreter: outside SQL, as a user's
shell would) deletes most rows and VACUUMs the file to a fraction of its size, then
writes it larger again, between this process's reads."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tiervault.vault import connection
from tiervault.vault.entry import Entry
from tiervault.vault.store import TierStore

_OUTSIDE = textwrap.dedent("""
    import sqlite3, sys
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    if sys.argv[2] == "shrink":
        conn.execute("DELETE FROM entries WHERE id NOT LIKE 'row-00%'")
        # FTS5 keeps the deleted rows' postings until its segments merge (a bulk write leaves
        # few, large ones): merged now, so the VACUUM below really shortens the file
        conn.execute("INSERT INTO entries_fts(entries_fts) VALUES ('optimize')")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
""")


def rows(n: int, start: int = 0) -> list[Entry]:
    pad = " ".join(f"word{j}" for j in range(200))
    return [Entry.from_dict({"id": f"row-{i:05d}", "title": f"row {i}", "description": f"{pad} {i}"})
            for i in range(start, start + n)]


def test_a_mapped_tier_shrunk_and_grown_by_another_process_answers_every_read(tmp_path):
    path = tmp_path / "t.db"
    with TierStore(path, name="agent") as store:
        store.capture_many(rows(3_000))
    big = path.stat().st_size
    with TierStore(path, name="agent") as store:
        assert store.db.conn.execute("PRAGMA mmap_size").fetchone()[0] == connection.TIER_MMAP_BYTES
        ids = [f"row-{i:05d}" for i in range(3_000)]
        assert len(store.light_rows(ids[-100:])) == 100  # pages near the end are mapped
        proc = subprocess.run([sys.executable, "-c", _OUTSIDE, str(path), "shrink"],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert path.stat().st_size < big // 2  # the file is much shorter now
        assert store.light_rows(ids[-100:]) == {}  # gone, and no page past the end touched
        assert sorted(store.light_rows(ids)) == ids[:1_000]  # row-00000 .. row-00999 kept
        assert store.count() == 1_000
        store.capture_many(rows(2_000, start=5_000))  # this process grows it again
        later = [f"row-{i:05d}" for i in range(5_000, 7_000)]
        assert sorted(store.light_rows(later)) == later
        assert store.count() == 3_000
        assert store.integrity_problems() == []
