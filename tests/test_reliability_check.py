"""Direct SQL changes and `tiervault check [--repair]` (issue 12, item 15).

- any direct SQL UPDATE of entries keeps FTS, the mirror and its cache right (the
  update trigger is back, guarded so the store's own set-based writes skip it);
- `check` finds each fault that bypasses it (rows inserted without FTS, timestamps the
  model refuses, bad vectors, damaged caches), `check --repair` rebuilds what is derived,
  and a second `check` is clean.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings, strategies as st

from tiervault.vault.entry import Entry
from tiervault.vault.filters import Filters
from tiervault.vault.manager import VaultManager

WORDS = ["amber", "basalt", "cobalt", "dune", "ember", "fjord", "granite", "harbor"]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(st.tuples(st.integers(0, 7), st.sampled_from(["title", "description", "context", "tags"]),
                                st.sampled_from(WORDS)), min_size=1, max_size=6))
def test_direct_sql_updates_keep_fts_mirror_and_cache_right(tmp_path_factory, edits):
    db = tmp_path_factory.mktemp("sql") / "agent.db"
    with VaultManager.at({"agent": str(db)}) as m:
        m.store("agent").capture_many([Entry.create(id=f"e{i}", title=f"entry {i}", description="plain")
                                       for i in range(8)])
        m.store("agent").postings()  # cache written
    expected: dict[str, set[str]] = {}
    with sqlite3.connect(db) as conn:
        for i, column, word in edits:
            conn.execute(f"UPDATE entries SET {column} = ? WHERE id = ?", (f"{word}x{i}", f"e{i}"))
            expected.setdefault(f"{word}x{i}", set()).add(f"e{i}")
    conn.close()
    with VaultManager.at({"agent": str(db)}) as m:
        store = m.store("agent")
        assert store.integrity_problems() == []
        live = {}
        for i, column, word in edits:  # the last edit of each (entry, column) holds
            live[(i, column)] = f"{word}x{i}"
        for (i, _), text in live.items():
            assert f"e{i}" in m.search(text, limit=20).ids
            assert f"e{i}" in store.search_fts([text], Filters(), 20).ids


def cli(args, root: Path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERVAULT_")}
    env["HOME"] = str(root / "home")
    return subprocess.run([sys.executable, "-m", "tiervault", *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)


def test_check_finds_each_fault_and_repair_rebuilds_what_is_derived(tmp_path):
    root = tmp_path
    (root / "home").mkdir()
    (root / "agent.yaml").write_text(
        f"tiers:\n  agent: {root / 'a.db'}\n  project: {root / 'p.db'}\n  team: {root / 't.db'}\n"
        "embedding: {provider: hash, dim: 16}\nfeatures:\n  embedding-enabled: true\n")
    lines = "\n".join(json.dumps({"id": f"e{i}", "title": f"entry {i} {WORDS[i]}", "description": "d"})
                      for i in range(8))
    assert subprocess.run([sys.executable, "-m", "tiervault", "import", "-"], cwd=root, input=lines,
                          env={**os.environ, "HOME": str(root / "home")}, capture_output=True,
                          text=True, timeout=120).returncode == 0
    for i in range(4):
        assert cli(["link", f"e{i}", f"e{i + 1}", "--type", "supports"], root).returncode == 0
    assert cli(["search", "entry"], root).returncode == 0  # caches written
    assert (root / "a.db.links.graph").exists()
    r = cli(["check", "--json"], root)
    assert r.returncode == 0 and json.loads(r.stdout)["ok"], r.stdout
    with sqlite3.connect(root / "a.db") as conn:
        conn.execute("INSERT INTO entries(id, type, domain, title, description, severity, origin, "
                     "created_at, updated_at, content_hash) VALUES ('sneaky', 'pattern', 'general', "
                     "'Quokka facts', 'd', 'suggestion', 'agent', 1e20, 1, 'h')")
        conn.execute("UPDATE entry_vectors SET vector = x'00' WHERE entry_id = 'e2'")
    conn.close()
    cache = root / "a.db.postings.mirror"
    cache.write_bytes(cache.read_bytes()[:100])
    (ids_path,) = root.glob("a.db.vec-*.ids")
    ids_path.write_text("{}\n")
    graph = root / "a.db.links.graph"
    data = bytearray(graph.read_bytes())
    data[-3] ^= 0xFF  # inside its last array: a block check fails
    graph.write_bytes(bytes(data))
    r = cli(["check", "--json"], root)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    agent = next(t for t in json.loads(r.stdout)["tiers"] if t["tier"] == "agent")
    text = "\n".join(agent["problems"])
    for needle in ("entries_fts", "'sneaky'", "vector of 'e2'", "search cache", "vector cache",
                   "link graph a.db.links.graph is damaged"):
        assert needle in text, (needle, text)
    r = cli(["check", "--repair", "--json"], root)
    assert r.returncode == 0, r.stdout + r.stderr
    r = cli(["check", "--json"], root)
    assert r.returncode == 0 and json.loads(r.stdout)["ok"], r.stdout
    r = cli(["search", "quokka", "--json"], root)
    assert r.returncode == 0 and json.loads(r.stdout)[0]["id"] == "sneaky", r.stdout
    assert cli(["get", "sneaky"], root).returncode == 0


def test_check_repair_leaves_a_read_only_source_untouched(tmp_path):
    root = tmp_path
    (root / "home").mkdir()
    (root / "agent.yaml").write_text(
        f"tiers:\n  agent: {root / 'a.db'}\n  project: {root / 'p.db'}\n  team: {root / 't.db'}\n")
    assert cli(["capture", "--id", "s", "--title", "Source entry", "--description", "d"], root).returncode == 0
    with sqlite3.connect(root / "a.db") as conn:
        conn.execute("UPDATE entries SET created_at = 1e20")
    conn.close()
    (root / "agent.yaml").write_text(
        f"tiers:\n  agent: {root / 'x.db'}\n  project: {root / 'p.db'}\n  team: {root / 't.db'}\n"
        f"sources:\n- name: src\n  path: {root / 'a.db'}\n  weight: 0.5\n")
    before = (root / "a.db").read_bytes()
    r = cli(["check", "--repair"], root)
    assert r.returncode == 1 and "read-only" in r.stdout and "Traceback" not in r.stderr
    assert (root / "a.db").read_bytes() == before
