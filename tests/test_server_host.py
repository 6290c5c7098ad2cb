"""The server's views of the vault, in process: read-only views refuse every write,
Locked proxies hold the vault lock for every call they pass on (nested objects too),
and agent ids never name a path."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tiervault.config import load_settings
from tiervault.errors import ReadOnlyTier
from tiervault.server.errors import ApiError
from tiervault.server.host import VaultHost
from tiervault.server.principal import Principal
from tiervault.vault.entry import Entry


@pytest.fixture
def host(tmp_path: Path):
    (tmp_path / "agent.yaml").write_text("tiers:\n  team: team.db\n  project: project.db\n")
    h = VaultHost(load_settings(tmp_path / "agent.yaml", env={"HOME": str(tmp_path)}),
                  tmp_path / "state")
    yield h
    h.close()


def entry(eid: str) -> Entry:
    return Entry.from_dict({"id": eid, "title": f"Title {eid}", "description": "Body."})


def test_rights_become_views(host):
    writer = host.brain_for(Principal("w", {"agent": "rw", "team": "rw"}))
    reader = host.brain_for(Principal("r", {"agent": "rw", "team": "r"}))
    assert set(writer.manager.tiers) == {"agent", "team"}  # project not granted: not in view
    writer.manager.capture(entry("shared-one"), "team")
    assert reader.manager.get("shared-one")[1] == "team"
    for write in (lambda: reader.manager.capture(entry("x"), "team"),
                  lambda: reader.manager.delete("shared-one", "team"),
                  lambda: reader.manager.store("team").add_feedback("q", "shared-one", "accepted"),
                  lambda: reader.manager.link("shared-one", "shared-one", "supports", tier="team")):
        with pytest.raises(ReadOnlyTier):
            write()
    assert reader.manager.store("team").count() == 1
    assert host.brain_for(Principal("w", {"agent": "rw", "team": "rw"})) is writer  # cached


def test_agent_tiers_are_separate_files(host):
    a = host.brain_for(Principal("alice", {"agent": "rw"}))
    b = host.brain_for(Principal("bob", {"agent": "rw"}))
    a.manager.capture(entry("alice-only"), "agent")
    assert b.manager.store("agent").get("alice-only") is None
    assert (host.agents_dir / "alice.db").exists()
    for bad in ("../bob", "Bob", "a/b", "", "x" * 65):
        with pytest.raises(ApiError):
            host.agent_path(bad)


def test_locked_proxy_holds_the_lock_for_nested_calls(host):
    from tiervault.server.host import Locked

    def other_thread_can_take_lock() -> bool:
        out: list[bool] = []

        def probe() -> None:
            out.append(host.lock.acquire(blocking=False))
            if out[0]:
                host.lock.release()
        t = threading.Thread(target=probe)
        t.start()
        t.join()
        return out[0]

    class Store:
        def capture(self, e):  # a backend-shaped object
            return other_thread_can_take_lock()

    class Tier:
        store = Store()

    class Manager:
        tiers = {"team": Tier()}

        def store(self, name):
            return Store()

    class Brain:
        manager = Manager()

        def search_intelligent(self, q):
            return other_thread_can_take_lock()

    locked = Locked(Brain(), host.lock)
    assert locked.search_intelligent("q") is False
    assert locked.manager.store("team").capture(None) is False
    assert locked.manager.tiers["team"].store.capture(None) is False
    assert other_thread_can_take_lock() is True
    real = host.locked_brain_for(Principal("web", {"agent": "rw", "team": "rw"}))
    assert isinstance(real.manager.store("team"), Locked)
    assert isinstance(real.manager.tiers["agent"].store, Locked)
    assert real.manager.store("team").count() == 0


def test_revoking_a_mistyped_token_never_echoes_its_secret(tmp_path):
    from tiervault.errors import ValidationError
    from tiervault.server.tokens import TokenStore

    store = TokenStore(tmp_path / "tokens.json")
    token, _ = store.create("alice", {"team": "r"})
    mangled = token[:-1] + ("A" if token[-1] != "A" else "B")  # not a valid key nor a token
    mangled = mangled.replace("tv_", "tv-", 1)
    with pytest.raises(ValidationError) as err:
        store.revoke(mangled)
    assert mangled not in str(err.value) and token.split("_")[-1] not in str(err.value)
