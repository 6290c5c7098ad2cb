"""Crash safety: SIGKILL a bulk import at random points, 20 times (seeded).

Round r re-imports all N entries with content "version r" (so every round
rewrites rows and their FTS index entries, the harder case: an update has to
delete the old FTS row and insert the new one in the same transaction) in
batches of BATCH (odd rounds) or BULK_BATCH (even rounds: bulk writes, whose
transaction switches FTS5's merging off and back on), in a subprocess that prints ``ack <id> <count>`` after each
committed batch. The test kills it with SIGKILL after a random 0.05-0.8 s and
then checks, as the next process to open the tier:

- ``PRAGMA integrity_check`` and the FTS5 integrity check pass, and FTS5's
  ``automerge`` setting is the default (a bulk batch never leaves it off);
- every acknowledged entry holds exactly this round's content;
- the batch in flight is all-or-nothing (all version r, or all as before);
- every other entry is exactly as the previous check left it.

Finally the real CLI is killed once mid-import, and re-running
``tiervault import`` completes the import: N entries, each once, all current.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tiervault.vault.entry import Entry
from tiervault.vault.store import TierStore

N = 20_000
BATCH = 500
BULK_BATCH = 1_000  # >= store.BULK_ROWS: FTS5 merging is switched off inside the transaction
ROUNDS = 20
CLI_BATCH = 5_000  # tiervault import's batch size (jsonl.import_lines default)
SEED = 20_260_611


def record(i: int, version: int) -> dict:
    return {
        "id": f"imp-{i:05d}", "title": f"bulk entry {i} version {version}",
        "description": f"Entry {i} as written by import round {version}. " + "padding words " * (i % 5),
        "context": f"ctx{i}", "tags": ["bulk", f"group{i % 40}", f"v{version}"],
        "type": ("pattern", "rule", "decision")[i % 3], "domain": f"area{i % 7}",
        "created_at": 1_700_000_000 + i, "updated_at": 1_700_000_000 + i + version,
    }


_COMPARED = ("title", "description", "context", "tags", "type", "domain", "created_at", "updated_at")


def write_source(path: Path, version: int) -> Path:
    with path.open("w", encoding="utf-8") as fh:
        for i in range(N):
            fh.write(json.dumps(record(i, version)) + "\n")
    return path


def version_of(entry: Entry) -> int:
    return int(entry.title.rsplit(" ", 1)[1])


def check_tier(db: Path, allowed: list[set[int | None]], batch: int, new: int) -> list[int | None]:
    """Verify the tier against ``allowed`` versions per entry; return the actual versions.

    ``new`` is the version the killed import was writing, in transactions of ``batch``.
    """
    with TierStore(db, name="project") as store:
        assert store.integrity_problems() == []
        found = {e.id: e for e in store.iter_entries()}
        # a bulk batch restores FTS5's merge setting in its own transaction: never left off
        assert store.db.query("SELECT v FROM entries_fts_config WHERE k = 'automerge'") in ([], [(4,)])
        assert store.db.query("SELECT v FROM entries_fts_config WHERE k = 'hashsize'") in ([], [(1 << 20,)])
    actual: list[int | None] = []
    for i in range(N):
        entry = found.pop(f"imp-{i:05d}", None)
        version = None if entry is None else version_of(entry)
        assert version in allowed[i], f"imp-{i:05d} is version {version}, allowed {allowed[i]}"
        if entry is not None:
            want = record(i, version)
            got = (entry.title, entry.description, entry.context, list(entry.tags), entry.type,
                   entry.domain, entry.created_at, entry.updated_at)
            assert got == tuple(want[k] for k in _COMPARED), f"{entry.id} differs from its source"
            assert entry.content_hash == entry.compute_hash(), f"{entry.id}: hash != content"
        actual.append(version)
    assert not found, f"unexpected entries: {sorted(found)[:5]}"
    for start in range(0, N, batch):  # a batch is one transaction: never half applied
        assert len({v == new for v in actual[start:start + batch]}) == 1, f"batch at {start} is half applied"
    return actual


def kill_after(proc: subprocess.Popen, delay: float) -> None:
    time.sleep(delay)  # where to kill, not a timing assertion
    proc.send_signal(signal.SIGKILL)


def _import_child(db: Path, source: Path, ack_fd: int, batch: int) -> None:
    """The forked importer: the real JSONL import path, one ack line per committed batch."""
    from tiervault.vault.jsonl import import_lines
    from tiervault.vault.manager import Tier, VaultManager

    def ack(read: int) -> None:  # import_lines calls this after each batch's COMMIT
        os.write(ack_fd, f"ack {read}\n".encode())

    with VaultManager([Tier("project", str(db), 0.8)]) as vm, source.open(encoding="utf-8") as fh:
        os.write(ack_fd, b"start\n")
        report = import_lines(vm, "project", fh, batch_size=batch, on_progress=ack)
    os.write(ack_fd, f"done {report.read} {len(report.errors)}\n".encode())


def run_and_kill(db: Path, source: Path, delay: float, batch: int) -> tuple[list[str], int]:
    """Fork an importer (a real process: its own SQLite connection, killed by SIGKILL),
    kill it ``delay`` seconds after it starts writing; return its lines and wait status."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns into pytest
        code = 1
        try:
            os.close(read_fd)
            _import_child(db, source, write_fd, batch)
            code = 0
        except BaseException as exc:  # noqa: BLE001 - reported through the pipe
            os.write(write_fd, f"error {type(exc).__name__}: {exc}\n".encode())
        finally:
            os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd, encoding="utf-8") as pipe:
        first = pipe.readline()
        time.sleep(delay)  # where to kill, not a timing assertion
        os.kill(pid, signal.SIGKILL)
        lines = [first.strip(), *(line.strip() for line in pipe)]
    _, status = os.waitpid(pid, 0)
    return lines, status


@pytest.mark.slow
def test_sigkill_during_bulk_import_loses_no_acknowledged_batch(tmp_path):
    rng = random.Random(SEED)
    db = tmp_path / "tiers" / "project.db"
    actual: list[int | None] = [None] * N
    interrupted = 0
    acked_total = 0
    for version in range(1, ROUNDS + 1):
        source = write_source(tmp_path / "source.jsonl", version)
        batch = BULK_BATCH if version % 2 == 0 else BATCH
        lines, status = run_and_kill(db, source, rng.uniform(0.05, 0.8), batch)
        assert lines[0] == "start" and not any(l.startswith("error") for l in lines), lines
        acks = [int(line.split()[1]) for line in lines if line.startswith("ack ")]
        assert acks == [min(batch * (k + 1), N) for k in range(len(acks))], acks
        acked = acks[-1] if acks else 0
        finished = any(line.startswith("done") for line in lines)
        assert finished or (os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL)
        interrupted += not finished
        acked_total += acked
        allowed: list[set[int | None]] = []
        for i in range(N):
            if i < acked:
                allowed.append({version})  # acknowledged: must be there, exactly as sent
            elif not finished and i < acked + batch:
                allowed.append({actual[i], version})  # the batch in flight: all or nothing
            else:
                allowed.append({actual[i]})  # not reached: untouched
        actual = check_tier(db, allowed, batch, version)
    # Most kills must land inside a running import, or the test proves little.
    assert interrupted >= ROUNDS * 3 // 4, f"only {interrupted} of {ROUNDS} kills interrupted an import"

    # The real CLI: kill it once mid-import, then re-run it to completion.
    home = tmp_path / "home"
    home.mkdir()
    config = tmp_path / "agent.yaml"
    config.write_text(f"tiers:\n  project: {db}\n")
    final = ROUNDS + 1
    source = write_source(tmp_path / "final.jsonl", final)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("TIERVAULT_")}, "HOME": str(home)}
    cli = [sys.executable, "-m", "tiervault", "--config", str(config), "import", str(source),
           "--tier", "project", "--json"]
    with TierStore(db, name="project") as store:
        start_gen = store.generation()
    proc = subprocess.Popen(cli, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watcher = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    while proc.poll() is None:  # kill once the CLI has committed its first batch
        gen = watcher.execute("SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'gen'").fetchone()[0]
        if gen > start_gen:
            break
        time.sleep(0.01)
    watcher.close()
    kill_after(proc, rng.uniform(0.0, 0.3))
    proc.communicate(timeout=60)
    actual = check_tier(db, [{a, final} for a in actual], CLI_BATCH, final)
    done = subprocess.run(cli, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["read"] == N and report["written"] + report["unchanged"] == N and not report["errors"]
    assert check_tier(db, [{final}] * N, CLI_BATCH, final) == [final] * N
    with TierStore(db, name="project") as store:
        assert store.count() == N
        hashes = {h for (h,) in store.db.query("SELECT content_hash FROM entries")}
        assert len(hashes) == N  # no entry stored twice under any id
    print(f"\ncrash: {ROUNDS} SIGKILLs of a {N}-entry import (batches of {BATCH}), "
          f"{interrupted} mid-import, {acked_total} acknowledged entry writes verified; "
          f"CLI killed {'mid-import' if proc.returncode == -9 else 'after finishing'} and re-run")
