"""Fault and property tests of JSONL import/export through the real CLI (issue 12: 3, 4, 5, 10, 14).

Each test is about a class of fault, with inputs varied by hypothesis where they vary:
- a bad line costs only itself, wherever it is and whatever it holds (3, 10);
- a timestamp is stored only if it can be written back, and a bad one on disk is skipped (4);
- `export -o FILE` never damages FILE when it fails; bad targets are clear errors (5, 14);
- a repeated id: the last line wins with its own links, and the repeat is reported (14).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import uuid
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st


def run(args, cwd: Path, stdin: str | None = None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERVAULT_")}
    env["HOME"] = str(cwd / "home")
    return subprocess.run([sys.executable, "-m", "tiervault", *args], cwd=cwd, env=env,
                          input=stdin, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def proj(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("proj")
    (root / "home").mkdir()
    assert run(["init", "--agent-id", "bot"], root).returncode == 0
    return root


def fresh(proj: Path, name: str) -> Path:
    """A project of its own (a new agent tier) under ``proj``."""
    root = proj / name
    (root / "home").mkdir(parents=True)
    r = run(["init", "--agent-id", "bot"], root)
    assert r.returncode == 0, r.stderr
    return root


def good_line(i: int, **extra) -> str:
    return json.dumps({"id": f"good-{i}", "title": f"Good entry {i}", "description": "fine",
                       **extra})


def exported_ids(root: Path) -> list[str]:
    r = run(["export"], root)
    assert r.returncode == 0, r.stderr
    return sorted(json.loads(line)["id"] for line in r.stdout.splitlines())


BAD_LINES = st.one_of(
    st.just("{"), st.just("{not json"), st.just("[1, 2"), st.just("{\"id\": \"x\", }"),
    st.just("[" * 5_000 + "]" * 5_000), st.just("[" * 100_000),
    st.just(json.dumps({"title": "no description"})),
    st.text(alphabet="{}[]\":,ab ", min_size=1, max_size=20).filter(lambda t: t.strip()),
)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bad=st.lists(BAD_LINES, min_size=1, max_size=3), where=st.integers(0, 20), n=st.integers(3, 20))
def test_a_bad_line_costs_only_itself_wherever_it_is(proj, bad, where, n):
    """Bad lines (invalid JSON, 100,000-deep nesting, invalid entries) anywhere in the
    file, the first line included, are reported by number; every good line is imported."""
    root = fresh(proj, f"bad{abs(hash((tuple(bad), where, n)))}")
    lines = [good_line(i) for i in range(n)]
    pos = min(where, n)
    lines[pos:pos] = bad
    r = run(["import", "-"], root, stdin="\n".join(lines) + "\n")
    assert "Traceback" not in r.stderr
    assert exported_ids(root) == sorted(f"good-{i}" for i in range(n))
    if any(not _valid_entry(b) for b in bad):
        assert r.returncode == 2 and f"line {pos + 1}:" in r.stderr, r.stderr


def _valid_entry(text: str) -> bool:
    try:
        record = json.loads(text)
    except (ValueError, RecursionError):
        return False
    return isinstance(record, dict) and "description" in record


def test_a_single_json_document_over_several_lines_is_still_one_entry(proj):
    root = fresh(proj, "doc")
    doc = json.dumps({"id": "one", "title": "One", "description": "spread"}, indent=2)
    r = run(["import", "-"], root, stdin=doc)
    assert r.returncode == 0, r.stderr
    assert exported_ids(root) == ["one"]


UTC = timezone.utc
BAD_TIMES = st.one_of(
    st.sampled_from([1e20, -1e20, "inf", "-inf", "nan", "Infinity", 1e300, 10**30,
                     "9999-12-31T23:59:59-01:00", "0001-01-01T00:30:00+01:00", "1e20"]),
    st.floats(min_value=253402300800.0, allow_infinity=True, allow_nan=False),
    st.floats(max_value=-62135596801.0, allow_infinity=True, allow_nan=False),
    st.integers(min_value=1, max_value=23).map(
        lambda h: f"9999-12-31T23:59:59-{h:02d}:00"),
)
GOOD_TIMES = st.one_of(
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30),
                 timezones=st.just(UTC)).map(lambda d: d.isoformat()),
    st.floats(min_value=-62135596800.0, max_value=253402300799.0),
)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bad=st.lists(BAD_TIMES, min_size=1, max_size=4), good=st.lists(GOOD_TIMES, min_size=1, max_size=4),
       field=st.sampled_from(["created_at", "updated_at", "valid_from", "valid_until"]))
def test_only_writable_timestamps_are_stored_and_every_read_keeps_working(proj, bad, good, field):
    """Out-of-range / non-finite timestamps are refused per line naming the field; the
    good ones are stored, and export, get, search --mode full all answer afterwards."""
    # A new folder per example: hypothesis replays an example when it shrinks a failure.
    root = fresh(proj, f"ts-{uuid.uuid4().hex}")
    lines = [json.dumps({"id": f"bad-{i}", "title": "Bad time", "description": "x", field: v})
             for i, v in enumerate(bad)]
    lines += [good_line(i, **({field: v} if field != "valid_until" else {})) for i, v in enumerate(good)]
    r = run(["import", "-"], root, stdin="\n".join(lines) + "\n")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.count(f"{field}:") >= len(bad), r.stderr
    assert exported_ids(root) == sorted(f"good-{i}" for i in range(len(good)))
    for cmd in (["search", "good entry", "--mode", "full", "--json"], ["get", "good-0", "--json"],
                ["export-md", "md", "--tier", "agent"]):
        r = run(cmd, root)
        assert r.returncode == 0 and "Traceback" not in r.stderr, (cmd, r.stderr)
    # Round trip: what export wrote imports back unchanged.
    exported = run(["export"], root).stdout
    r = run(["import", "-", "--json"], root, stdin=exported)
    assert r.returncode == 0 and json.loads(r.stdout)["written"] == 0, r.stdout


def test_a_bad_timestamp_already_on_disk_is_skipped_and_reported(proj):
    """Rows written by older code (1e20, +-inf, year 10000) do not take reads down."""
    root = fresh(proj, "disk")
    lines = [good_line(i) for i in range(5)]
    assert run(["import", "-"], root, stdin="\n".join(lines)).returncode == 0
    db = root / "home" / ".tiervault" / "agents" / "bot.db"
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE entries SET created_at = 1e20 WHERE id = 'good-0'")
        conn.execute("UPDATE entries SET updated_at = ? WHERE id = 'good-1'", (float("inf"),))
        conn.execute("UPDATE entries SET valid_from = ? WHERE id = 'good-2'", (float("-inf"),))
        conn.execute("UPDATE entries SET valid_until = 253402304399.0 WHERE id = 'good-3'")
    r = run(["export"], root)
    assert r.returncode == 0 and "good-0" in r.stderr and "Traceback" not in r.stderr
    assert [json.loads(line)["id"] for line in r.stdout.splitlines()] == ["good-4"]
    for cmd in (["search", "good entry", "--mode", "full", "--json"], ["get", "good-4"],
                ["export-md", "md", "--tier", "agent"], ["load", "good-4", "good-0"]):
        r = run(cmd, root)
        assert "Traceback" not in r.stderr, (cmd, r.stderr)
        assert r.returncode in (0, 1), (cmd, r.stderr)
    r = run(["search", "good entry", "--mode", "full", "--json"], root)
    assert [row["entry"]["id"] for row in json.loads(r.stdout)] == ["good-4"]


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(junk=st.binary(min_size=0, max_size=200))
def test_export_to_a_file_replaces_it_only_on_success(proj, junk):
    """A failing export (unusable tier) leaves the previous backup byte for byte; a
    successful one replaces it whole; no temporary file is left either way."""
    root = proj / "backup"
    if not root.exists():
        root = fresh(proj, "backup")
        assert run(["import", "-"], root, stdin=good_line(1)).returncode == 0
    target = root / "backup.jsonl"
    target.write_bytes(junk)
    r = run(["export", "--tier", "no-such-tier", "-o", str(target)], root)
    assert r.returncode == 2 and target.read_bytes() == junk
    r = run(["export", "-o", str(target)], root)
    assert r.returncode == 0, r.stderr
    assert [json.loads(x)["id"] for x in target.read_text().splitlines()] == ["good-1"]
    assert sorted(p.name for p in root.iterdir() if "tmp" in p.name) == []


def _file_size_limit(limit: int):
    def apply() -> None:  # runs in the child: writes past `limit` bytes fail with EFBIG
        import resource

        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def test_export_that_fails_midway_keeps_the_old_backup(proj):
    """A real write failure in the middle of the export (the file-size limit stands in
    for a full disk): exit 2 naming the file, old backup intact, no temporary file."""
    root = fresh(proj, "midway")
    long = "x" * 2_000
    lines = "\n".join(good_line(i, context=long) for i in range(60))
    assert run(["import", "-"], root, stdin=lines).returncode == 0
    target = root / "backup.jsonl"
    target.write_text("previous backup\n")
    os.chmod(target, 0o640)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERVAULT_")}
    env["HOME"] = str(root / "home")
    r = subprocess.run([sys.executable, "-m", "tiervault", "export", "-o", str(target)],
                       cwd=root, env=env, capture_output=True, text=True, timeout=120,
                       preexec_fn=_file_size_limit(60_000))
    assert r.returncode == 2 and "backup.jsonl" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert target.read_text() == "previous backup\n"
    assert [p.name for p in root.iterdir() if p.name.endswith("tmp")] == []
    # Targets that cannot be files: a missing folder, a directory, a file used as a folder.
    for bad in (root / "missing" / "out.jsonl", root, target / "x.jsonl"):
        r = run(["export", "-o", str(bad)], root)
        assert r.returncode == 2 and "Traceback" not in r.stderr and "output" in r.stderr, r.stderr
    r = run(["export", "-o", str(target)], root)
    assert r.returncode == 0 and len(target.read_text().splitlines()) == 60
    assert target.stat().st_mode & 0o777 == 0o640  # the backup keeps its permissions


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=st.lists(st.tuples(st.sampled_from(["a", "b", "c"]),
                               st.lists(st.sampled_from(["t1", "t2"]), max_size=2, unique=True),
                               st.sampled_from(["supports", "contradicts"])),
                     min_size=1, max_size=6))
def test_a_repeated_id_keeps_the_last_line_and_only_its_links(proj, plan):
    root = fresh(proj, f"dup{abs(hash(str(plan)))}")
    targets = [json.dumps({"id": t, "title": t, "description": "target"}) for t in ("t1", "t2")]
    lines = [json.dumps({"id": eid, "title": f"{eid} v{i}", "description": "d",
                         "links": [{"target": t, "type": kind} for t in links]})
             for i, (eid, links, kind) in enumerate(plan)]
    r = run(["import", "-"], root, stdin="\n".join(targets + lines))
    last = {}
    for i, (eid, links, kind) in enumerate(plan):
        last[eid] = (i, links, kind)
    repeats = len(plan) - len(last)
    assert (r.returncode == 2) == (repeats > 0), r.stderr
    assert r.stderr.count("was already on line") == repeats
    out = {json.loads(x)["id"]: json.loads(x) for x in run(["export"], root).stdout.splitlines()}
    for eid, (i, links, kind) in last.items():
        assert out[eid]["title"] == f"{eid} v{i}"
        assert sorted((l["target"], l["type"]) for l in out[eid]["links"]) == \
            sorted((t, kind) for t in links)
