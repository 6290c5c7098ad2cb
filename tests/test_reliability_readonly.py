"""Read-only means byte-identical, and only regular files are tiers (issue 12: 8, 11).

- `mcp --read-only` (through a real MCP client) leaves every tier file byte-identical and
  writes no cache, even on a tier written by an older version (no uid yet); only SQLite's
  -shm / empty -wal companions, which any reader of a WAL file makes, may appear;
- a tier or `sources:` entry on read-only media (a real read-only mount) opens and answers;
- a tier path that is a device, FIFO, folder, holds a NUL or a name over 255 bytes is a
  clear per-tier problem: the other tiers keep working and nothing is created beside it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import anyio

from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

PACK = Path(__file__).resolve().parents[1] / "vault" / "packs" / "starter.jsonl"


def cli(args, root: Path, stdin: str | None = None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERVAULT_")}
    env["HOME"] = str(root / "home")
    return subprocess.run([sys.executable, "-m", "tiervault", *args], cwd=root, env=env,
                          input=stdin, capture_output=True, text=True, timeout=120)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("embedding", [False, True])
def test_mcp_read_only_leaves_every_tier_file_byte_identical(tmp_path, embedding):
    root = tmp_path
    (root / "home").mkdir()
    config = ("tiers:\n  agent: .tv/agent.db\n  project: .tv/project.db\n  team: .tv/team.db\n")
    if embedding:
        config += "embedding: {provider: hash, dim: 32}\nfeatures:\n  embedding-enabled: true\n"
    (root / "agent.yaml").write_text(config)
    assert cli(["import", str(PACK), "--tier", "team"], root).returncode == 0
    r = cli(["capture", "--id", "mine", "--title", "SQL injection note", "--description", "x"], root)
    assert r.returncode == 0, r.stderr
    for db in ("agent.db", "team.db"):  # as written by an older version: no uid, no epochs
        with sqlite3.connect(root / ".tv" / db) as conn:
            conn.execute("DELETE FROM meta WHERE key = 'uid' OR key LIKE 'epoch.%'")
        conn.close()
    for cache in (root / ".tv").glob("*.postings.mirror"):
        cache.unlink()
    for cache in list((root / ".tv").glob("*.vec-*")):
        cache.unlink()
    before = snapshot(root / ".tv")
    params = StdioServerParameters(command=sys.executable, args=["-m", "tiervault", "mcp", "--read-only"],
                                   cwd=str(root), env={"HOME": str(root / "home")})

    async def main():
        async with stdio_client(params, errlog=open(os.devnull, "w")) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                out = []
                for args in ({"query": "sql injection"}, {"query": "sql injection", "mode": "full"},
                             {"query": "deploy", "tiers": ["team"]}):
                    out.append(await s.call_tool("search_intelligent", args))
                out.append(await s.call_tool("load_entries", {"ids": ["mine"]}))
                out.append(await s.call_tool("vault_stats", {}))
                return out

    results = anyio.run(main)
    assert all(not r.is_error for r in results), [r.content[0].text for r in results if r.is_error]
    assert json.loads(results[0].content[0].text)["count"] >= 1
    after = snapshot(root / ".tv")
    # SQLite's own companions of a WAL file (shared-memory index, empty log), which any
    # reader of a WAL tier makes, are the only new names; no data was written.
    extra = set(after) - set(before)
    assert all(name.endswith(("-shm", "-wal")) for name in extra), extra
    assert all(after[name] == b"" for name in extra if name.endswith("-wal"))
    assert {k: v for k, v in after.items() if k in before} == before


@pytest.fixture
def read_only_mount(tmp_path):
    """A real read-only bind mount of a folder holding a WAL-mode tier file."""
    src, ro = tmp_path / "src", tmp_path / "ro"
    src.mkdir()
    ro.mkdir()
    (tmp_path / "home").mkdir()
    (tmp_path / "agent.yaml").write_text(
        f"tiers:\n  agent: {src / 'team.db'}\n  project: {tmp_path / 'p.db'}\n  team: {tmp_path / 't.db'}\n")
    r = cli(["capture", "--id", "media-1", "--title", "Kept on read-only media",
             "--description", "x"], tmp_path)
    assert r.returncode == 0, r.stderr
    subprocess.run(["mount", "--bind", str(src), str(ro)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)], check=True)
        yield tmp_path, ro
    finally:
        subprocess.run(["umount", str(ro)], check=True)


def test_a_source_and_a_tier_on_read_only_media_open_and_answer(read_only_mount):
    root, ro = read_only_mount
    before = snapshot(ro)
    (root / "agent.yaml").write_text(
        f"tiers:\n  agent: {root / 'a.db'}\n  project: {root / 'p.db'}\n  team: {root / 't.db'}\n"
        f"sources:\n- name: media\n  path: {ro / 'team.db'}\n  weight: 0.5\n")
    r = cli(["search", "read-only media", "--json"], root)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert [(h["id"], h["tier"]) for h in json.loads(r.stdout)] == [("media-1", "media")]
    r = cli(["get", "media-1", "--json"], root)
    assert r.returncode == 0 and json.loads(r.stdout)["tier"] == "media"
    # The same file as a built-in tier under `mcp --read-only`-like use: search only.
    (root / "agent.yaml").write_text(
        f"tiers:\n  agent: {root / 'a.db'}\n  project: {root / 'p.db'}\n  team: {ro / 'team.db'}\n")
    r = cli(["search", "read-only media", "--json"], root)
    assert r.returncode == 0 and [h["id"] for h in json.loads(r.stdout)] == ["media-1"], r.stderr
    assert snapshot(ro) == before


def _fifo(root: Path) -> str:
    path = root / "fifo.db"
    os.mkfifo(path)
    return str(path)


BAD_PATHS = {
    "device": lambda root: "/dev/null",
    "fifo": _fifo,
    "folder": lambda root: str(root),
    "nul": lambda root: str(root / "a\x00b.db"),
    "long name": lambda root: str(root / ("x" * 300 + ".db")),
    "long folder": lambda root: str(root / ("y" * 256) / "agent.db"),
}


@pytest.mark.parametrize("kind", sorted(BAD_PATHS))
def test_only_regular_files_are_tiers(tmp_path, kind):
    root = tmp_path
    (root / "home").mkdir()
    journal = Path("/dev/null-journal")
    existed = journal.exists()
    bad = BAD_PATHS[kind](root)
    (root / "agent.yaml").write_text(
        f"tiers:\n  agent: {json.dumps(bad)}\n  project: {root / 'p.db'}\n  team: {root / 't.db'}\n")
    r = cli(["capture", "--id", "ok", "--title", "Project entry", "--description", "x",
             "--tier", "project"], root)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    r = cli(["search", "project entry", "--json"], root)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert [h["id"] for h in json.loads(r.stdout)] == ["ok"] and "agent" in r.stderr
    r = cli(["capture", "--title", "x", "--description", "y"], root)  # to the bad agent tier
    assert r.returncode == 2 and "Traceback" not in r.stderr and "agent" in r.stderr, r.stderr
    assert journal.exists() == existed
    if kind == "fifo":
        assert Path(bad).exists() and not Path(bad + "-journal").exists()


def test_mcp_bad_timestamps_fail_alone_and_a_damaged_row_never_breaks_load(tmp_path):
    """Over MCP: a NaN / 1e20 / year-10000 timestamp fails only its own entry (naming the
    field); a row damaged on disk is skipped by load_entries and search, the rest answer."""
    root = tmp_path
    (root / "home").mkdir()
    (root / "agent.yaml").write_text("tiers:\n  agent: .tv/agent.db\n  project: .tv/project.db\n"
                                     "  team: .tv/team.db\n")
    params = StdioServerParameters(command=sys.executable, args=["-m", "tiervault", "mcp"],
                                   cwd=str(root), env={"HOME": str(root / "home")})
    entries = [{"id": "good-1", "title": "Good walrus", "description": "d"},
               {"id": "bad-nan", "title": "Bad", "description": "d", "created_at": "nan"},
               {"id": "bad-big", "title": "Bad", "description": "d", "updated_at": 1e20},
               {"id": "bad-year", "title": "Bad", "description": "d",
                "valid_until": "9999-12-31T23:59:59-01:00"},
               {"id": "good-2", "title": "Good walrus two", "description": "d"}]

    async def call(*calls):
        async with stdio_client(params, errlog=open(os.devnull, "w")) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                return [await s.call_tool(name, args) for name, args in calls]

    (captured,) = anyio.run(call, ("capture_knowledge", {"entries": entries}))
    out = json.loads(captured.content[0].text)
    assert out["written"] == ["good-1", "good-2"], out
    assert sorted((f["id"], f["error"].split(":")[0]) for f in out["failed"]) == \
        [("bad-big", "updated_at"), ("bad-nan", "created_at"), ("bad-year", "valid_until")]
    with sqlite3.connect(root / ".tv" / "agent.db") as conn:
        conn.execute("UPDATE entries SET valid_until = 253402304399.0 WHERE id = 'good-2'")
    conn.close()
    loaded, found = anyio.run(call, ("load_entries", {"ids": ["good-1", "good-2"]}),
                              ("search_intelligent", {"query": "walrus", "mode": "full"}))
    assert not loaded.is_error and not found.is_error, loaded.content[0].text
    rows = json.loads(loaded.content[0].text)["entries"]
    assert [(r["id"], r["found"]) for r in rows] == [("good-1", True), ("good-2", False)]
    assert [r["entry"]["id"] for r in json.loads(found.content[0].text)["results"]] == ["good-1"]
