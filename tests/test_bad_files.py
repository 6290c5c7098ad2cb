"""Bad config and tier files: each a clear error naming the file; the other tiers still answer.

A tier path that is a directory, a file that is not SQLite, another program's
SQLite file, a tier from a newer schema, a truncated file, a file with damaged
pages, a tier this user cannot write (a read-only bind mount when running as
root, where permission bits do not apply), URI characters in a path, and
malformed agent.yaml files: through the library and the real CLI.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tiervault.brain import Brain
from tiervault.config import load_settings
from tiervault.errors import ConfigError, TierVaultError
from tiervault.vault.entry import Entry
from tiervault.vault.manager import Tier, VaultManager

SEED = [
    dict(id="jwt-rotation", title="Rotate JWT signing keys", description="Rotate keys every 90 days.",
         tags=["security", "jwt"], domain="security", severity="critical", type="rule"),
    dict(id="sql-params", title="Parameterise SQL", description="Never format user values into SQL.",
         tags=["sql"], domain="databases"),
]


def outcome(fn: Any) -> tuple[Any, TierVaultError | None]:
    try:
        return fn(), None
    except TierVaultError as exc:
        return None, exc


def cli(args: list[str], home: Path, timeout: float = 120) -> Any:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERVAULT_")}
    return subprocess.run([sys.executable, "-m", "tiervault", *args], env={**env, "HOME": str(home)},
                          cwd=home, capture_output=True, text=True, timeout=timeout)


def good_tier(path: Path, *records: dict) -> Path:
    with VaultManager.at({"agent": str(path)}) as m:
        m.capture_many([Entry.from_dict(r) for r in records or SEED], "agent")
    return path


def _newer(p: Path) -> None:
    good_tier(p)
    conn = sqlite3.connect(p)
    conn.execute("PRAGMA user_version = 99")
    conn.commit()
    conn.close()


def _truncated(p: Path) -> None:
    good_tier(p, *[{"id": f"n{i}", "title": f"note {i}", "description": "x " * 500} for i in range(300)])
    conn = sqlite3.connect(p)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 3])


BAD_TIERS = {  # how to make it -> a phrase the error must contain
    "directory": (lambda p: p.mkdir(), "directory"),
    "not sqlite": (lambda p: p.write_bytes(b"just some text, not a database\n" * 200), "not an SQLite"),
    "foreign sqlite": (lambda p: sqlite3.connect(p).execute("CREATE TABLE notes(x)").connection.commit(),
                       "not a tiervault tier"),
    "newer schema": (_newer, "newer tiervault"),
    "truncated": (_truncated, "malformed"),
}


@pytest.mark.parametrize("kind", sorted(BAD_TIERS))
def test_bad_tier_file_is_named_and_the_other_tiers_still_answer(tmp_path, kind):
    make, phrase = BAD_TIERS[kind]
    bad = tmp_path / "project.db"
    make(bad)
    good_tier(tmp_path / "agent.db")
    m = VaultManager([Tier("agent", str(tmp_path / "agent.db"), 1.0), Tier("project", str(bad), 0.8)])
    # A file that opens but fails later (truncated) must still give a typed, named error.
    result, error = outcome(lambda: m.search("rotate jwt keys"))
    if kind != "truncated" or error is None:
        assert "project" in m.problems and str(bad) in m.problems["project"], m.problems
        assert phrase in m.problems["project"]
        assert result.ids == ["jwt-rotation"]
        assert [r["id"] for r in Brain(m).search_intelligent("rotate jwt keys")][:1] == ["jwt-rotation"]
    else:
        assert str(bad) in str(error), error
    _, error = outcome(lambda: m.capture(Entry.from_dict(SEED[1]), "project"))
    assert error is not None and str(bad) in str(error)
    m.close()

    home = tmp_path / "home"
    home.mkdir()
    (home / "agent.yaml").write_text(f"tiers:\n  agent: {tmp_path / 'agent.db'}\n  project: {bad}\n")
    r = cli(["--config", "agent.yaml", "search", "rotate jwt keys", "--json"], home)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert json.loads(r.stdout)[0]["id"] == "jwt-rotation" and str(bad) in r.stderr
    if kind != "not sqlite":
        return  # the CLI's handling is the same for every kind; checked once below
    r = cli(["--config", "agent.yaml", "stats", "--json"], home)
    assert r.returncode == 0, r.stderr
    project = json.loads(r.stdout)["tiers"]["project"]
    assert project["available"] is False and str(bad) in project["problem"]
    r = cli(["--config", "agent.yaml", "capture", "--tier", "project", "--title", "T",
             "--description", "D"], home)
    assert r.returncode == 2 and str(bad) in r.stderr and "Traceback" not in r.stderr, r.stderr


def _can_mount_read_only(path: Path) -> bool:
    import shutil

    if not shutil.which("unshare"):
        return False
    probe = subprocess.run(["unshare", "-m", "sh", "-c", f"mount --bind -o ro '{path}' '{path}'"],
                           capture_output=True)
    return probe.returncode == 0


def test_unwritable_tier_is_named_and_the_other_tiers_still_answer(tmp_path):
    ro_dir = tmp_path / "ro"
    ro_dir.mkdir()
    project = good_tier(ro_dir / "project.db", {"id": "proj", "title": "Project rule",
                                                "description": "rotate jwt keys often"})
    good_tier(tmp_path / "agent.db")
    home = tmp_path / "home"
    home.mkdir()
    (home / "agent.yaml").write_text(f"tiers:\n  agent: {tmp_path / 'agent.db'}\n  project: {project}\n")
    before = project.read_bytes()
    if os.geteuid() != 0:
        ro_dir.chmod(0o500)  # permissions stop a normal user
        project.chmod(0o400)
        wrap: list[str] = []
    elif _can_mount_read_only(ro_dir):
        # root ignores permission bits; a read-only bind mount in a private mount
        # namespace stops even root, and vanishes with the process.
        wrap = ["unshare", "-m", "sh", "-c", f"mount --bind -o ro '{ro_dir}' '{ro_dir}' && exec \"$0\" \"$@\""]
    else:
        pytest.skip("running as root without mount namespaces: nothing can make a file unwritable "
                    "for root here (chmod is ignored); covered for non-root users by this test")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("TIERVAULT_")}, "HOME": str(home)}

    def run(*args: str) -> Any:
        return subprocess.run([*wrap, sys.executable, "-m", "tiervault", "--config", "agent.yaml", *args],
                              env=env, cwd=home, capture_output=True, text=True, timeout=120)

    try:
        r = run("search", "rotate jwt keys", "--json")
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
        assert "jwt-rotation" in [row["id"] for row in json.loads(r.stdout)]
        r = run("capture", "--tier", "project", "--title", "New", "--description", "never written")
        assert r.returncode == 2 and str(project) in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert "corrupt" not in r.stderr  # the file is fine; it just cannot be written
        r = run("capture", "--tier", "agent", "--title", "Agent side", "--description", "still writable")
        assert r.returncode == 0, r.stderr
    finally:
        ro_dir.chmod(0o700)
    assert project.read_bytes() == before


def test_read_only_source_with_uri_characters_in_its_path(tmp_path):
    """A source path is a path, not a URI: '%41', '?' and '#' must not change which file opens."""
    odd = tmp_path / "team %41 ?x=1 #frag"
    odd.mkdir()
    good_tier(odd / "team.db")
    (tmp_path / "team A ").mkdir()  # what '%41' would decode to: must not be opened instead
    m = VaultManager([Tier("agent", str(tmp_path / "agent.db"), 1.0),
                      Tier("vendor", str(odd / "team.db"), 0.5, read_only=True)])
    assert m.problems == {} and m.search("rotate jwt keys").ids == ["jwt-rotation"]
    m.close()


MALFORMED_CONFIGS = {
    "unclosed flow": "tiers: [unclosed\n",
    "tab indent": "tiers:\n\tproject: x.db\n",
    "top-level list": "- tiers\n- sources\n",
    "unknown key": "tiers:\n  nonsense: x.db\n",
    "wrong type": "tiers:\n  project: 42\n",
    "duplicate key": "tiers:\n  project: a.db\n  project: b.db\n",
    "bad source": "sources:\n  - name: Not A Slug\n    path: x.db\n",
    "not utf-8": b"tiers:\n  project: \xff\xfe.db\n",
    "binary": bytes(range(256)) * 4,
}


@pytest.mark.parametrize("kind", sorted(MALFORMED_CONFIGS))
def test_malformed_agent_yaml_is_a_clear_error_naming_the_file(tmp_path, kind):
    content = MALFORMED_CONFIGS[kind]
    config = tmp_path / "agent.yaml"
    config.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(ConfigError) as info:
        load_settings(config, env={"HOME": str(tmp_path)})
    assert str(config) in str(info.value)
    if kind not in ("unclosed flow", "not utf-8", "wrong type"):
        return  # the CLI turns every ConfigError into the same one-line error
    r = cli(["--config", str(config), "search", "anything"], tmp_path)
    assert r.returncode == 2 and str(config) in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_agent_yaml_with_exponential_aliases_fails_fast(tmp_path):
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    config = tmp_path / "agent.yaml"
    config.write_text("\n".join(lines) + "\n")
    try:
        r = cli(["--config", str(config), "stats"], tmp_path, timeout=8)
    except subprocess.TimeoutExpired:
        pytest.fail("agent.yaml with nested aliases did not fail within the timeout")
    assert r.returncode == 2 and str(config) in r.stderr


def test_tier_damaged_inside_is_left_out_and_the_other_tiers_still_answer(tmp_path):
    """Header and schema intact (it opens), pages in the middle overwritten: every read
    of that tier fails, but search, load, stats and integrity checks still answer."""
    bad = tmp_path / "project.db"
    good_tier(bad, *[{"id": f"n{i}", "title": f"note {i} rotate", "description": "x " * 500}
                     for i in range(300)])
    conn = sqlite3.connect(bad)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray(bad.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 8 * 4096] = b"\x5a" * (8 * 4096)
    bad.write_bytes(bytes(data))
    good_tier(tmp_path / "agent.db")
    m = VaultManager([Tier("agent", str(tmp_path / "agent.db"), 1.0), Tier("project", str(bad), 0.8)])
    assert m.search("rotate jwt keys").ids == ["jwt-rotation"]
    assert str(bad) in m.problems["project"] and "malformed" in m.problems["project"]
    brain = Brain(m)
    assert brain.search_intelligent("rotate jwt keys", include_memories=True)[0]["id"] == "jwt-rotation"
    assert brain.load_entries(["jwt-rotation"])[0]["found"] is True
    assert m.stats()["agent"]["entries"] == len(SEED)  # stats answers (the project's counts may read)
    problems = m.tiers["project"].store.integrity_problems()
    assert problems and "malformed" in " ".join(problems)
    m.close()
