"""A PostgreSQL tier whose server is down or goes away: left out, retried later, paced.

The issue: "Server down at start: that tier is reported in ``problems`` and left
out; the other tiers answer; it is retried on later searches (not only after a
restart). Server lost mid-search: same." Retries are paced by a backoff, so a
dead server does not cost every search a connect attempt.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Callable

import pytest

from pg_server import TcpProxy, start_server
from tiervault.config.settings import Secret, TierConfig
from tiervault.errors import StorageError
from tiervault.vault.backoff import Backoff
from tiervault.vault.entry import Entry
from tiervault.vault.manager import Tier, VaultManager
from tiervault.vault.postgres import PgTierStore
from tiervault.vault.store import TierStore


def _entries(n: int, prefix: str = "e") -> list[Entry]:
    return [Entry.create(id=f"{prefix}{i}", type="rule", title=f"retry note {i}",
                         description=f"retry with backoff, case {i}", domain="net") for i in range(n)]


def _until(check: Callable[[], bool], what: str, seconds: float = 60) -> None:
    """Poll ``check`` until true (the backoff decides when the tier is tried again)."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {seconds} s")
        time.sleep(0.1)


def _agent(tmp_path) -> Tier:
    agent = TierStore(tmp_path / "agent.db", name="agent")
    agent.capture_many(_entries(5, "a-"))
    return Tier("agent", str(agent.path), 1.0, store=agent)


def test_server_down_at_start_then_back_is_retried_on_later_searches(pg_tier, pg_server, tmp_path):
    pg_tier().capture_many(_entries(20))  # the tier exists on the server
    schema = f"{pg_tier().address.schema[:-2]}_0"
    proxy = TcpProxy(pg_server.host, pg_server.port)  # not started: nothing listens
    url = pg_server.url("tiervault_test").replace(f":{pg_server.port}/", f":{proxy.port}/")
    team = PgTierStore(url, name="team", schema=schema)  # does not raise: retried on use
    with VaultManager([_agent(tmp_path), Tier("team", team.location, 0.6, store=team)]) as vm:
        found = vm.search("retry", limit=20)
        assert set(found.tiers) == {"agent"}
        assert "cannot reach the PostgreSQL server" in vm.problems["team"]
        proxy.start()
        try:
            _until(lambda: "team" in vm.search("retry", limit=50).tiers, "team back after start")
            assert "team" not in vm.problems
            proxy.stop()  # lost mid-session: the pooled connections die
            found = vm.search("retry", limit=50)
            assert set(found.tiers) == {"agent"} and "team" in vm.problems
            proxy.start()
            _until(lambda: "team" in vm.search("retry", limit=50).tiers, "team back after a loss")
            assert not vm.problems
        finally:
            proxy.stop()


class _SlamListener:
    """Accepts TCP connections and closes them at once (a server that is not one); counts them."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self.sock.close()


def test_a_dead_server_is_tried_once_per_backoff_step_not_on_every_search(pg_server, tmp_path):
    dead = _SlamListener()
    try:
        url = pg_server.url("tiervault_test").replace(f":{pg_server.port}/", f":{dead.port}/")
        team = PgTierStore(url, name="team", schema="t_dead_server")
        first = dead.accepted
        assert first >= 1  # the constructor tried once
        team.session.backoff = Backoff(first_s=3600)  # pace: the next attempt only in an hour
        with pytest.raises(StorageError):
            team.count()  # this attempt fails too and starts the hour
        tried = dead.accepted
        with VaultManager([_agent(tmp_path), Tier("team", team.location, 0.6, store=team)]) as vm:
            for _ in range(20):
                assert set(vm.search("retry", limit=20).tiers) == {"agent"}
                assert "next attempt in" in vm.problems["team"]
        assert dead.accepted == tried  # 20 searches, no connection attempt
    finally:
        dead.close()


def test_a_tier_that_failed_to_open_is_opened_on_a_later_search(pg_server, tmp_path):
    pg_server.execute('DROP DATABASE IF EXISTS "tv_later" WITH (FORCE)')
    config = TierConfig("team", None, 0.6, False, url=Secret(pg_server.url("tv_later")),
                        schema="later")
    with VaultManager([_agent(tmp_path), Tier("team", config.location, 0.6, config=config)]) as vm:
        assert vm.tiers["team"].store is None and "database does not exist" in vm.problems["team"]
        assert set(vm.search("retry", limit=20).tiers) == {"agent"}
        pg_server.create_database("tv_later")  # the DBA fixes it; no restart of the agent
        _until(lambda: "team" in vm.search("retry", limit=20).query.tiers,
               "the tier opened on a later search")
        vm.capture(Entry.create(id="t-only", type="rule", title="retry from the team tier",
                                description="only the team holds this one"), "team")
        found = vm.search("retry team tier", limit=20)
        assert found.tiers[found.ids.index("t-only")] == "team" and not vm.problems
    pg_server.execute('DROP DATABASE IF EXISTS "tv_later" WITH (FORCE)')


def test_the_real_server_stopped_and_started_again(tmp_path):
    server = start_server()
    try:
        url = server.create_database("tv_restart")
        team = PgTierStore(url, name="team", schema="restart")
        team.capture_many(_entries(30))
        with VaultManager([_agent(tmp_path), Tier("team", team.location, 0.6, store=team)]) as vm:
            assert set(vm.search("retry", limit=50).tiers) == {"agent", "team"}
            server.pause()  # the server process is gone; the pool's connections die
            for _ in range(5):
                found = vm.search("retry", limit=50)
                assert set(found.tiers) == {"agent"} and "team" in vm.problems
            server.resume()
            _until(lambda: "team" in vm.search("retry", limit=50).tiers, "team back after restart")
            assert not vm.problems
            team.capture(Entry.create(id="after", type="rule", title="retry after restart",
                                      description="written once the server is back"))
            assert "after" in vm.search("retry after restart", limit=5).ids
    finally:
        server.stop()
