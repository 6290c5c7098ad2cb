"""First mirror builds in worker processes (vault/mirror_workers.py): real tier files,
real child processes. The cache files they write hold the arrays and header of an
in-process build byte for byte (the generation read at aside), a first search through them answers the same, and a worker
that fails (a program that exits 1, an interpreter importing another tiervault) costs
a warning naming the tier and an in-process build, never a missing answer."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tiervault.vault import array_file, mirror_workers
from tiervault.vault.entry import Entry
from tiervault.vault.manager import VaultManager
from tiervault.vault.mirror_workers import MirrorJob, build_missing, heap_only, plan, run_jobs

TIERS = ("agent", "project", "team")
WORDS = [f"w{i:03d}x" for i in range(300)] + ["retry", "timeout", "cache", "error", "the"]
QUERIES = ("retry timeout", "w007x cache", "error the w123x", "w250x", "nothing-matches-this")


def entries(n: int, tier: str) -> list[Entry]:
    rng = np.random.default_rng(len(tier) * 7919 + n)
    out = []
    for i in range(n):
        words = " ".join(WORDS[j] for j in rng.integers(0, len(WORDS), 14))
        out.append(Entry.create(id=f"{tier}-{i}", title=f"{tier} {words[:30]}", description=words,
                                tags=[f"t{i % 3}"]))
    return out


@pytest.fixture(scope="module")
def tiers(tmp_path_factory) -> Path:
    """Three tiers of 1,500 / 2,000 / 2,500 entries without any cache file."""
    d = tmp_path_factory.mktemp("tiers")
    with VaultManager.at({t: str(d / f"{t}.db") for t in TIERS}) as m:
        for n, t in zip((1500, 2000, 2500), TIERS):
            m.capture_many(entries(n, t), t)
    assert not list(d.glob("*.mirror"))
    return d


def copy_of(tiers: Path, dest: Path) -> Path:
    dest.mkdir()
    for f in tiers.iterdir():
        shutil.copy(f, dest / f.name)
    return dest


def manager(d: Path) -> VaultManager:
    return VaultManager.at({t: str(d / f"{t}.db") for t in TIERS})


def answers(m: VaultManager) -> list[tuple[list[str], list[float]]]:
    return [(c.ids, c.lexical.tolist()) for c in (m.search(q, limit=15) for q in QUERIES)]


@pytest.fixture
def workers_on(monkeypatch):
    """Two workers and no size floor, so that these small tiers use them."""
    monkeypatch.setenv("TIERVAULT_MIRROR_WORKERS", "2")
    monkeypatch.setattr(mirror_workers, "MIN_BYTES", 0)


def test_worker_built_caches_equal_in_process_ones_byte_for_byte(tiers, tmp_path, workers_on):
    inproc, workers = copy_of(tiers, tmp_path / "inproc"), copy_of(tiers, tmp_path / "workers")
    with manager(inproc) as m:
        for t in TIERS:
            m.store(t).postings()  # the ordinary in-process build
    with manager(workers) as m:
        outcomes = build_missing(m.store(t) for t in TIERS)
        assert sorted(o.name for o in outcomes if o.ok) == sorted(TIERS), outcomes
        assert {o.name: o.rows for o in outcomes} == {"agent": 1500, "project": 2000, "team": 2500}
        assert build_missing(m.store(t) for t in TIERS) == []  # every cache fits now
    for t in TIERS:
        a = array_file.read(inproc / f"{t}.db.postings.mirror")
        b = array_file.read(workers / f"{t}.db.postings.mirror")
        assert sorted(a.names()) == sorted(b.names()) and len(a.names()) > 10, t
        for name in a.names():
            x, y = (np.asarray(f.checked(name).all() if name in f.lazy_names() else f.array(name))
                    for f in (a, b))
            assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), (t, name)
        # the one difference allowed: the generation the worker read at (and its epoch),
        # one later when this process's link-graph save (a pin: one write) came first
        assert {k: v for k, v in a.meta.items() if k not in ("gen", "epoch")} == \
            {k: v for k, v in b.meta.items() if k not in ("gen", "epoch")}, t
        assert b.meta["gen"] in (a.meta["gen"], a.meta["gen"] + 1), t


def test_a_first_search_builds_in_workers_and_answers_as_in_process(tiers, tmp_path, workers_on,
                                                                     caplog, monkeypatch):
    workers = copy_of(tiers, tmp_path / "workers")
    with caplog.at_level(logging.INFO, logger="tiervault"), manager(workers) as m:
        got = answers(m)
        mirrors = {t: m.store(t).postings() for t in TIERS}
    assert "built the search mirrors of tiers team, project, agent in 2 worker processes" in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    # the searching process mapped the workers' files: postings read through checked blocks
    assert all(type(p.W.indices).__name__ == "CheckedArray" for p in mirrors.values())
    monkeypatch.setenv("TIERVAULT_MIRROR_WORKERS", "0")
    inproc = copy_of(tiers, tmp_path / "inproc")
    with manager(inproc) as m:
        assert answers(m) == got
        assert got[0][0]  # the queries do match


def test_a_failing_worker_is_logged_and_the_tier_built_in_process(tiers, tmp_path, workers_on,
                                                                  caplog, monkeypatch):
    d = copy_of(tiers, tmp_path / "failing")
    monkeypatch.setattr(sys, "executable", shutil.which("false"))  # a real program that exits 1
    with caplog.at_level(logging.WARNING), manager(d) as m:
        got = answers(m)
    failed = [r.message for r in caplog.records if "the worker process failed" in r.message]
    assert len(failed) == 3, caplog.text
    assert all("exit status 1" in msg and "building it in this process" in msg for msg in failed)
    assert {t for t in TIERS if any(f"tier {t!r}" in msg for msg in failed)} == set(TIERS)
    assert all((d / f"{t}.db.postings.mirror").exists() for t in TIERS)  # built here, cached
    monkeypatch.setenv("TIERVAULT_MIRROR_WORKERS", "0")
    with manager(copy_of(tiers, tmp_path / "inproc")) as m:
        assert answers(m) == got


def test_a_worker_importing_another_tiervault_refuses_before_building(tiers, tmp_path):
    d = copy_of(tiers, tmp_path / "other")
    proc = subprocess.run([sys.executable, "-c", mirror_workers._WORKER_CODE,
                           str(tmp_path / "elsewhere" / "postings.py"), str(d / "team.db"), "team"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, proc.stderr
    assert "not building a cache the caller could not use" in proc.stderr
    assert not (d / "team.db.postings.mirror").exists()


def test_run_jobs_reports_a_worker_that_cannot_start(tiers):
    jobs = [MirrorJob(t, str(tiers / f"{t}.db"), 1) for t in TIERS]
    outcomes = run_jobs(jobs, 2, python=str(tiers / "no-such-python"))
    assert sorted(o.name for o in outcomes) == sorted(TIERS)
    assert all(not o.ok and "could not start" in o.error for o in outcomes)


def test_no_workers_for_one_tier_small_tiers_or_when_turned_off(tiers, tmp_path, monkeypatch):
    d = copy_of(tiers, tmp_path / "one")
    monkeypatch.setenv("TIERVAULT_MIRROR_WORKERS", "2")
    with manager(d) as m:
        stores = [m.store(t) for t in TIERS]
        assert build_missing(stores) == []  # under MIN_BYTES: cheaper in-process
        monkeypatch.setattr(mirror_workers, "MIN_BYTES", 0)
        monkeypatch.setenv("TIERVAULT_MIRROR_WORKERS", "1")
        assert build_missing(stores) == []
        monkeypatch.setenv("TIERVAULT_MIRROR_WORKERS", "2")
        stores[0].postings()
        stores[1].postings()
        assert build_missing(stores) == []  # one tier left to build: in this process
    assert not (d / "team.db.postings.mirror").exists()


def test_a_read_only_tier_gets_no_job(tiers, tmp_path):
    from tiervault.vault.store import TierStore

    d = copy_of(tiers, tmp_path / "ro")
    with TierStore(d / "team.db", name="team", read_only=True) as ro, \
            TierStore(d / "agent.db", name="agent") as rw:
        assert ro.mirror_job() is None
        job = rw.mirror_job()
        assert job is not None and job.name == "agent" and job.size > 0
        rw.postings()
        assert rw.mirror_job() is None  # in memory (and cached) now


def test_plan_puts_the_largest_tier_first_on_the_least_loaded_worker():
    jobs = [MirrorJob(n, n, s) for n, s in (("agent", 191), ("project", 280), ("team", 457))]
    assert [[j.name for j in w] for w in plan(jobs, 2)] == [["team"], ["project", "agent"]]
    assert [[j.name for j in w] for w in plan(jobs, 8)] == [["team"], ["project"], ["agent"]]
    assert [[j.name for j in w] for w in plan(jobs, 1)] == [["team", "project", "agent"]]


def test_workers_run_with_idle_blas_threads_asleep_unless_the_user_chose(tiers, tmp_path, monkeypatch):
    """A worker's environment: OPENBLAS_THREAD_TIMEOUT=4 (idle OpenBLAS threads sleep
    instead of spinning), or what the caller set; a real program records it."""
    record = tmp_path / "env.txt"
    fake = tmp_path / "fake-python"
    fake.write_text(f"#!/bin/sh\nenv > {record}\nexit 1\n")
    fake.chmod(0o755)
    jobs = [MirrorJob("team", str(tiers / "team.db"), 1)]
    monkeypatch.delenv(mirror_workers.BLAS_SPIN_ENV, raising=False)
    monkeypatch.delenv(mirror_workers.HUGEPAGE_ENV, raising=False)
    outcomes = run_jobs(jobs, 1, python=str(fake))
    assert not outcomes[0].ok and "exit status 1" in outcomes[0].error
    env = dict(line.split("=", 1) for line in record.read_text().splitlines() if "=" in line)
    assert env[mirror_workers.BLAS_SPIN_ENV] == "4" and env["TIERVAULT_MIRROR_WORKERS"] == "0"
    assert env[mirror_workers.HUGEPAGE_ENV] == "0"  # no huge-page advice on NumPy's arrays
    monkeypatch.setenv(mirror_workers.BLAS_SPIN_ENV, "20")
    monkeypatch.setenv(mirror_workers.HUGEPAGE_ENV, "1")
    run_jobs(jobs, 1, python=str(fake))
    env = dict(line.split("=", 1) for line in record.read_text().splitlines() if "=" in line)
    assert env[mirror_workers.BLAS_SPIN_ENV] == "20" and env[mirror_workers.HUGEPAGE_ENV] == "1"


def test_workers_allocate_from_glibcs_heap_unless_the_user_chose(tiers, tmp_path, monkeypatch):
    """A worker's GLIBC_TUNABLES: no mmap'd blocks and no trim (freed arrays reused, not
    faulted in again), each tunable only where the user set none; none added when the
    user put glibc's heap on huge pages. A real program records its environment."""
    record = tmp_path / "env.txt"
    fake = tmp_path / "fake-python"
    fake.write_text(f"#!/bin/sh\nenv > {record}\nexit 1\n")
    fake.chmod(0o755)
    jobs = [MirrorJob("team", str(tiers / "team.db"), 1)]

    def tunables() -> str:
        run_jobs(jobs, 1, python=str(fake))
        env = dict(line.split("=", 1) for line in record.read_text().splitlines() if "=" in line)
        return env.get("GLIBC_TUNABLES", "")

    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    assert tunables() == "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736"
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.mmap_max=7:glibc.malloc.arena_max=2")
    assert tunables() == "glibc.malloc.mmap_max=7:glibc.malloc.arena_max=2:glibc.malloc.trim_threshold=68719476736"
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1")
    assert tunables() == "glibc.malloc.hugetlb=1"
    # the heap-only worker builds the same mirror as one with glibc's defaults
    from tiervault.vault import postings

    d1, d2 = copy_of(tiers, tmp_path / "heap"), copy_of(tiers, tmp_path / "plain")
    for cache in [*d1.glob("*.postings.mirror"), *d2.glob("*.postings.mirror")]:
        cache.unlink()
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    for d, env in ((d1, heap_only(dict(os.environ))), (d2, dict(os.environ))):
        proc = subprocess.run([sys.executable, "-c", mirror_workers._WORKER_CODE, str(postings.__file__),
                               str(d / "team.db"), "team"], env={**env, "TIERVAULT_MIRROR_WORKERS": "0"},
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
    assert (d1 / "team.db.postings.mirror").read_bytes() == (d2 / "team.db.postings.mirror").read_bytes()


def test_forked_shares_answer_apart_and_a_failing_share_fails_alone(tiers, tmp_path):
    """One started worker forks a process per further share after its imports: each
    share's tiers answer on their own; a share that fails (a tier file that is not a
    database) leaves the other's answer and makes the exit status non-zero."""
    from tiervault.vault import postings

    d = copy_of(tiers, tmp_path / "split")
    (d / "bad.db").write_bytes(b"not a database" * 1000)
    proc = subprocess.run([sys.executable, "-c", mirror_workers._WORKER_CODE, str(postings.__file__),
                           "--split=1,2", str(d / "team.db"), "team", str(d / "agent.db"), "agent",
                           str(d / "bad.db"), "bad"], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0, proc.stderr
    answers = [json.loads(line) for line in proc.stdout.splitlines()]
    assert sorted((a["name"], a["rows"]) for a in answers) == [("agent", 1500), ("team", 2500)]
    assert "Traceback" in proc.stderr
    assert (d / "team.db.postings.mirror").exists() and (d / "agent.db.postings.mirror").exists()
    assert not (d / "team.db.links.graph").exists()  # a worker builds mirrors only
    ok = copy_of(tiers, tmp_path / "ok")  # every share built: exit status 0, one line each
    proc = subprocess.run([sys.executable, "-c", mirror_workers._WORKER_CODE, str(postings.__file__),
                           "--split=1,2", *[a for t in TIERS for a in (str(ok / f"{t}.db"), t)]],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert sorted(json.loads(line)["name"] for line in proc.stdout.splitlines()) == sorted(TIERS)


def test_a_worker_builds_without_importing_scipy_stats(tiers, tmp_path):
    """scikit-learn's imports name ``scipy.stats`` (sklearn.utils.fixes), which no build
    reads: the worker (both shares: the forking one and a forked one) imports
    scikit-learn and writes the caches, and ``scipy.stats`` never runs (``-X importtime``
    lists every module a process imports, on its stderr)."""
    from tiervault.vault import postings

    d = copy_of(tiers, tmp_path / "deferred")
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", mirror_workers._WORKER_CODE,
                           str(postings.__file__), "--split=1,2",
                           *[a for t in TIERS for a in (str(d / f"{t}.db"), t)]],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sorted(json.loads(line)["name"] for line in proc.stdout.splitlines()) == sorted(TIERS)
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
    assert {"sklearn.feature_extraction.text", "sklearn.utils.extmath", "sklearn.utils.fixes"} <= imported
    assert not {m for m in imported if m == "scipy.stats" or m.startswith("scipy.stats.")}
    assert all((d / f"{t}.db.postings.mirror").exists() for t in TIERS)


def test_the_searching_process_builds_the_link_graphs_while_workers_build_mirrors(tiers, tmp_path,
                                                                                  workers_on):
    d = copy_of(tiers, tmp_path / "graphs")
    with manager(d) as m:
        m.store("team").link("team-1", "team-2", "supports")  # the graph has a link
        outcomes = build_missing(m.store(t) for t in TIERS)
        assert all(o.ok for o in outcomes) and len(outcomes) == 3
        assert all(m.store(t).graph.builds == 1 for t in TIERS)  # here, not in the workers
        assert all((d / f"{t}.db.links.graph").exists() for t in TIERS)
        assert answers(m)[0][0]
        assert all(m.store(t).graph.builds == 1 for t in TIERS)  # the search used them


def _children_of(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:  # field 4: the parent's pid
                out.append(int(d.name))
    return out


def _alive(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_an_interrupt_kills_the_worker_and_the_shares_it_forked(tiers, tmp_path):
    d = copy_of(tiers, tmp_path / "interrupt")
    jobs = [MirrorJob(t, str(d / f"{t}.db"), 1) for t in TIERS]
    seen: list[int] = []

    def interrupt() -> None:  # once the worker forked its second share: Ctrl-C
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            workers = [c for c in _children_of(os.getpid())  # not other tests' servers
                       if b"mirror_workers" in (Path("/proc") / str(c) / "cmdline").read_bytes()]
            forks = [c for w in workers for c in _children_of(w)]
            if forks:
                seen.extend(workers + forks)
                raise KeyboardInterrupt
            time.sleep(0.01)
        raise AssertionError("the worker never forked")

    with pytest.raises(KeyboardInterrupt):
        run_jobs(jobs, 2, meanwhile=interrupt)
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in seen) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(seen) == 2 and not any(_alive(p) for p in seen)
    time.sleep(2)  # a forked share left running would have written its caches by now
    assert not list(d.glob("*.postings.mirror")), list(d.glob("*.postings.mirror"))
