"""SIGKILL `tiervault serve` while clients write; after a restart every write the server
acknowledged (201) is there, in the shared team tier and in the agents' own tiers."""

from __future__ import annotations

import threading

import httpx

from serve_process import ServeProcess
from tiervault.server.tokens import TokenStore, parse_allow


def test_acknowledged_writes_survive_sigkill(tmp_path):
    (tmp_path / "home").mkdir()
    (tmp_path / "agent.yaml").write_text("tiers:\n  team: team.db\n")
    store = TokenStore(tmp_path / ".tiervault-server" / "tokens.json")  # where serve looks
    tokens = [store.create(f"w{i}", parse_allow("team:rw"))[0] for i in range(4)]
    acked: list[tuple[int, str, str]] = []  # (writer, tier, id)
    lock = threading.Lock()
    enough = threading.Event()
    srv = ServeProcess(tmp_path, "--rate", "0").start()

    def writer(n: int) -> None:
        with srv.client(tokens[n]) as c:
            for i in range(10_000):
                tier = "team" if i % 2 else "agent"
                eid = f"w{n}-{i}"
                try:
                    r = c.post("/api/v1/entries", json={"tier": tier, "entries": [
                        {"id": eid, "title": f"Crash test entry {n} {i}",
                         "description": "Written while the server is killed."}]})
                except httpx.HTTPError:
                    return  # the server died under this request: not acknowledged
                if r.status_code != 201:
                    return
                with lock:
                    acked.append((n, tier, eid))
                    if len(acked) >= 120:
                        enough.set()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    assert enough.wait(120), srv.output()
    srv.kill()
    for t in threads:
        t.join(60)
    assert len(acked) >= 120
    with ServeProcess(tmp_path, "--rate", "0", port=srv.port) as again:
        missing = []
        for n in range(4):
            with again.client(tokens[n]) as c:
                for writer, tier, eid in acked:
                    if writer != n:
                        continue
                    r = c.get(f"/api/v1/entries/{eid}")
                    if r.status_code != 200 or r.json()["tier"] != tier:
                        missing.append((tier, eid, r.status_code))
        assert missing == []
        with again.client(tokens[0]) as c:  # the tier files are healthy after the kill
            assert c.post("/api/v1/search", json={"query": "crash test"}).json()["problems"] == []
