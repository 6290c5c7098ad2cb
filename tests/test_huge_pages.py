"""`tiervault serve` / `tiervault mcp` restart once with memory on 2 MiB pages.

The decision (opt-out, never twice, platforms without glibc >= 2.35 or THP, values the user
set) on its own, then real processes: the MCP stdio handshake through a raw pipe after the
re-exec, the serving process's environment read from /proc, the opt-out, a user's values
kept, and ``serve``. Where this machine cannot use huge pages the same processes must show
no re-exec.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tiervault import huge_pages as hp
from tiervault.huge_pages import huge_pages_env, long_lived_command, restart_undone

LINUX = {"platform": "linux", "glibc": (2, 36), "thp": "madvise"}
HUGE = "glibc.malloc.hugetlb=1"
LINE = "restarted once with memory on 2 MiB pages"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "test", "version": "1"}}}
# What this machine does: the processes below expect a re-exec only where it can happen.
MACHINE_CAN = huge_pages_env({}, platform=sys.platform, glibc=hp.glibc_version(),
                             thp=hp.thp_mode()) is not None


# -- the decision ---------------------------------------------------------------------------

def test_adds_both_settings_and_the_marker() -> None:
    env = huge_pages_env({"PATH": "/bin"}, **LINUX)
    assert env == {"PATH": "/bin", "GLIBC_TUNABLES": HUGE, "PYTHONMALLOC": "malloc",
                   hp.MARKER: "GLIBC_TUNABLES,PYTHONMALLOC"}
    assert huge_pages_env({}, platform="linux", glibc=(2, 35), thp="always") is not None


@pytest.mark.parametrize("value", ["0", "off", "OFF", "no", "false", " 0 "])
def test_opt_out(value: str) -> None:
    assert huge_pages_env({hp.OPT_OUT: value}, **LINUX) is None
    assert huge_pages_env({hp.OPT_OUT: "1"}, **LINUX) is not None  # only the off words


def test_never_twice() -> None:
    first = huge_pages_env({}, **LINUX)
    assert first is not None
    assert huge_pages_env(first, **LINUX) is None  # the re-executed process goes on
    # even if something stripped the settings on the way, the marker stops a loop
    assert huge_pages_env({hp.MARKER: "1"}, **LINUX) is None


@pytest.mark.parametrize("where", [
    {"platform": "darwin", "glibc": None, "thp": None},
    {"platform": "win32", "glibc": None, "thp": None},
    {"platform": "linux", "glibc": None, "thp": "madvise"},  # musl
    {"platform": "linux", "glibc": (2, 34), "thp": "madvise"},  # no hugetlb tunable yet
    {"platform": "linux", "glibc": (2, 36), "thp": "never"},
    {"platform": "linux", "glibc": (2, 36), "thp": None},  # a kernel without THP
])
def test_not_where_it_cannot_work(where: dict) -> None:
    assert huge_pages_env({}, **where) is None


def test_user_values_are_kept() -> None:
    env = huge_pages_env({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"}, **LINUX)
    assert env is not None and env["GLIBC_TUNABLES"] == f"glibc.malloc.arena_max=2:{HUGE}"
    env = huge_pages_env({"GLIBC_TUNABLES": "glibc.malloc.hugetlb=0"}, **LINUX)
    assert env is not None and env["GLIBC_TUNABLES"] == "glibc.malloc.hugetlb=0"
    assert env["PYTHONMALLOC"] == "malloc"
    env = huge_pages_env({"PYTHONMALLOC": "pymalloc"}, **LINUX)
    assert env is not None and env["PYTHONMALLOC"] == "pymalloc" and env["GLIBC_TUNABLES"] == HUGE
    # both set by the user: nothing to add, no restart
    assert huge_pages_env({"GLIBC_TUNABLES": "glibc.malloc.hugetlb=0",
                           "PYTHONMALLOC": "pymalloc"}, **LINUX) is None


@pytest.mark.parametrize("before", [
    {"PATH": "/bin"},
    {"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"},
    {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=0"},
    {"PYTHONMALLOC": "pymalloc", "GLIBC_TUNABLES": "glibc.malloc.arena_max=2:glibc.mem.tagging=0"},
])
def test_restart_undone_gives_the_environment_before(before: dict) -> None:
    after = huge_pages_env(before, **LINUX)
    assert after is not None and after != before
    assert restart_undone(after) == before
    assert restart_undone(before) == before  # no marker: the user's settings are theirs
    # the user's own hugetlb=1 (no restart happened) is not taken away
    own = {"GLIBC_TUNABLES": HUGE, "PYTHONMALLOC": "malloc"}
    assert restart_undone(own) == own


@pytest.mark.parametrize("argv,command", [
    (["mcp"], "mcp"), (["mcp", "--read-only"], "mcp"), (["serve", "--port", "1"], "serve"),
    (["--config", "mcp", "search", "q"], None),  # a config file named "mcp"
    (["-v", "--config", "a.yaml", "serve"], "serve"), (["search", "mcp"], None),
    (["mcp", "--help"], None), (["-h"], None), (["--version"], None), ([], None),
    (["ui"], None), (["import", "f.jsonl"], None),
])
def test_long_lived_command(argv: list[str], command: str | None) -> None:
    assert long_lived_command(argv) == command


def test_thp_mode_and_glibc_version(tmp_path: Path) -> None:
    f = tmp_path / "enabled"
    f.write_text("always [madvise] never\n")
    assert hp.thp_mode(str(f)) == "madvise"
    f.write_text("[always] madvise never\n")
    assert hp.thp_mode(str(f)) == "always"
    assert hp.thp_mode(str(tmp_path / "absent")) is None
    v = hp.glibc_version()
    assert v is None or (len(v) == 2 and v >= (2, 0))


# -- real processes -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def vault(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hp")
    (root / "home").mkdir()
    (root / "agent.yaml").write_text("tiers:\n  agent: .tiervault/agent.db\n")
    return root


def _env(root: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("TIERVAULT_") and k not in ("GLIBC_TUNABLES", "PYTHONMALLOC")}
    env["HOME"] = str(root / "home")
    env.update(extra)
    return env


def _environ_of(pid: int) -> dict[str, str]:
    """A process's environment from /proc. glibc's tunable parser writes a NUL over each
    ':' of GLIBC_TUNABLES in place, so a "glibc.*" item after it is joined back."""
    env: dict[str, str] = {}
    last = ""
    for kv in Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0"):
        if "=" not in kv:
            continue
        if kv.startswith("glibc.") and last == "GLIBC_TUNABLES":
            env[last] += ":" + kv
            continue
        last, value = kv.split("=", 1)
        env[last] = value
    return env


def _mcp(root: Path, **extra: str) -> tuple[dict, dict[str, str], str]:
    """Start `tiervault -v mcp`, do the initialize handshake over a raw pipe, read the
    serving process's environment, close stdin; the reply, the environment, stderr."""
    proc = subprocess.Popen([sys.executable, "-m", "tiervault", "-v", "mcp"], cwd=root,
                            env=_env(root, **extra), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write((json.dumps(INIT) + "\n").encode())
        proc.stdin.flush()
        reply = json.loads(proc.stdout.readline())
        environ = _environ_of(proc.pid)  # exec keeps the pid: this is the serving process
        proc.stdin.close()
        rest = proc.stdout.read()
        err = proc.stderr.read().decode() if proc.stderr else ""
        assert proc.wait(timeout=60) == 0, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert rest == b"", rest  # stdout carries JSON-RPC only
    return reply, environ, err


def test_mcp_restarts_once_and_the_handshake_works(vault: Path) -> None:
    reply, environ, err = _mcp(vault)
    assert reply["id"] == 1 and "serverInfo" in reply["result"]
    if MACHINE_CAN:
        assert err.count(LINE) == 1, err
        assert environ["GLIBC_TUNABLES"] == HUGE and environ["PYTHONMALLOC"] == "malloc"
        assert environ[hp.MARKER] == "GLIBC_TUNABLES,PYTHONMALLOC"
    else:
        assert LINE not in err and hp.MARKER not in environ


def test_mcp_opt_out(vault: Path) -> None:
    reply, environ, err = _mcp(vault, TIERVAULT_HUGE_PAGES="0")
    assert reply["id"] == 1
    assert LINE not in err
    assert "GLIBC_TUNABLES" not in environ and "PYTHONMALLOC" not in environ
    assert hp.MARKER not in environ


def test_mcp_keeps_user_values(vault: Path) -> None:
    _, environ, err = _mcp(vault, GLIBC_TUNABLES="glibc.malloc.arena_max=2",
                           PYTHONMALLOC="pymalloc")
    assert environ["PYTHONMALLOC"] == "pymalloc"
    if MACHINE_CAN:
        assert err.count(LINE) == 1, err
        assert environ["GLIBC_TUNABLES"] == f"glibc.malloc.arena_max=2:{HUGE}"
    else:
        assert environ["GLIBC_TUNABLES"] == "glibc.malloc.arena_max=2"
    # both set: nothing to add, no restart
    _, environ, err = _mcp(vault, GLIBC_TUNABLES="glibc.malloc.hugetlb=0",
                           PYTHONMALLOC="pymalloc")
    assert LINE not in err and hp.MARKER not in environ
    assert environ["GLIBC_TUNABLES"] == "glibc.malloc.hugetlb=0"


def test_serve_restarts_once(vault: Path) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    from serve_process import ServeProcess

    with ServeProcess(vault, "-v") as server:
        assert server.proc is not None
        environ = _environ_of(server.proc.pid)
    log = server.output()
    if MACHINE_CAN:
        assert log.count(LINE) == 1, log
        assert environ["GLIBC_TUNABLES"] == HUGE and environ["PYTHONMALLOC"] == "malloc"
    else:
        assert LINE not in log and hp.MARKER not in environ


def test_in_process_main_never_execs(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tiervault.cli import main

    calls: list[object] = []
    monkeypatch.setattr(os, "execve", lambda *a: calls.append(a))
    monkeypatch.chdir(vault)
    monkeypatch.setenv("HOME", str(vault / "home"))
    monkeypatch.setattr(sys, "argv", ["tiervault", "serve"])  # the process's own line
    # an explicit argv is a library call: `status` runs, no restart is even considered
    assert main(["status"]) == 0
    assert calls == []


def test_mirror_workers_start_without_the_restart_settings(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A server restarted on huge pages starts its mirror build's workers without them (their
    large temporary arrays cost more on fresh 2 MiB pages); a real program records the
    worker's environment. The user's own tunable stays."""
    from tiervault.vault import mirror_workers
    from tiervault.vault.mirror_workers import MirrorJob, run_jobs

    record = tmp_path / "env.txt"
    fake = tmp_path / "fake-python"
    fake.write_text(f"#!/bin/sh\nenv > {record}\nexit 1\n")
    fake.chmod(0o755)
    restarted = huge_pages_env({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"}, **LINUX)
    assert restarted is not None
    for key in ("GLIBC_TUNABLES", "PYTHONMALLOC", hp.MARKER):
        monkeypatch.setenv(key, restarted[key])
    db = tmp_path / "team.db"
    db.write_bytes(b"")
    outcomes = run_jobs([MirrorJob("team", str(db), 1)], 1, python=str(fake))
    assert not outcomes[0].ok
    env = dict(line.split("=", 1) for line in record.read_text().splitlines() if "=" in line)
    # the user's own tunable stays; a worker adds glibc's heap only (mirror_workers.heap_only)
    assert env["GLIBC_TUNABLES"] == ":".join(["glibc.malloc.arena_max=2", *mirror_workers.HEAP_TUNABLES])
    assert "PYTHONMALLOC" not in env and hp.MARKER not in env
    assert env["TIERVAULT_MIRROR_WORKERS"] == "0" and env[mirror_workers.HUGEPAGE_ENV] == "0"
    # a user who set huge pages themselves (no restart) keeps them in the workers too
    monkeypatch.setenv("GLIBC_TUNABLES", HUGE)
    monkeypatch.delenv(hp.MARKER)
    run_jobs([MirrorJob("team", str(db), 1)], 1, python=str(fake))
    env = dict(line.split("=", 1) for line in record.read_text().splitlines() if "=" in line)
    assert env["GLIBC_TUNABLES"] == HUGE and env["PYTHONMALLOC"] == "malloc"
