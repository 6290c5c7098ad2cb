"""Remote tiers: a team tier served by `tiervault serve`, federated by an agent's VaultManager.

Exactness: the same data as a local file and as a remote tier rank identically (same
top-10, same tiers, scores within 1e-6) through VaultManager.search and the Brain.
Failures: a server that is down or does not answer leaves the tier out (listed in
``problems``) and the next call tries again; a write to it fails clearly and nothing
is queued; the token's rights hold over the wire.
"""

from __future__ import annotations

import json
import shutil
import socket
import sys
import threading
from pathlib import Path

import pytest

from serve_process import ServeProcess, create_token, free_port, run_cli
from tiervault.brain import Brain
from tiervault.config import load_settings
from tiervault.errors import EntryNotFound, ReadOnlyTier, StorageError
from tiervault.vault.entry import Entry
from tiervault.vault.manager import VaultManager

ROOT = Path(__file__).resolve().parents[1]
PACK = ROOT / "vault" / "packs" / "starter.jsonl"
sys.path.insert(0, str(ROOT))
from bench import corpus  # noqa: E402

QUERIES = ["retry http calls with backoff", "sql injection parameterised queries",
           "timeouts on every network call", "idempotency keys for POST", "secrets in logs",
           "database migrations without downtime", "flaky tests", "cache invalidation",
           "how do I rotate credentials", "the and of"]


def _agent_entries() -> list[Entry]:
    """Local agent entries: one new, one copying a team entry's content under another id,
    one shadowing a team id."""
    import json

    team = [{k: v for k, v in json.loads(line).items() if k != "links"}
            for line in PACK.read_text().splitlines()[:3]]
    dup = {**team[0], "id": "my-copy-of-" + team[0]["id"]}
    same_id = {**team[1], "description": team[1]["description"] + " (agent's own version)"}
    mine = {"id": "agent-retry-budget", "title": "Cap retries with a retry budget",
            "description": "Retries over HTTP need a budget per call and per client.",
            "tags": ["http", "retries"]}
    return [Entry.from_dict(e) for e in (dup, same_id, mine)]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("remote")
    server_dir = root / "server"
    server_dir.mkdir()
    (server_dir / "home").mkdir()
    (server_dir / "agent.yaml").write_text("tiers:\n  team: team.db\n")
    data = corpus.generate(3000, seed=11)
    jsonl = root / "team.jsonl"
    corpus.write_jsonl(data, jsonl, tier="team")
    run_cli(server_dir, "import", str(jsonl), "--tier", "team")
    run_cli(server_dir, "import", str(PACK), "--tier", "team")
    local_team = root / "local-team.db"
    shutil.copy(server_dir / "team.db", local_team)  # the same rows, before the server opens it
    agent_db = root / "agent.db"
    with VaultManager.at({"agent": str(agent_db)}) as m:
        m.capture_many(_agent_entries(), "agent")
    tokens = {"rw": create_token(server_dir, "alice", "team:rw"),
              "r": create_token(server_dir, "bob", "team:r")}
    srv = ServeProcess(server_dir).start()
    yield {"root": root, "server": srv, "tokens": tokens, "agent_db": agent_db,
           "local_team": local_team, "queries": QUERIES + [q["text"] for q in
                                                           corpus.queries(40, seed=11)]}
    srv.stop()


def remote_settings(setup, tmp: Path, token: str, url: str | None = None):
    cfg = tmp / "agent.yaml"
    cfg.write_text(f"agent_id: alice\ntiers:\n  agent: {setup['agent_db']}\n"
                   f"  team:\n    url: {url or setup['server'].url}\n    token: ${{TEAM_TOKEN}}\n")
    return load_settings(cfg, env={"HOME": str(tmp), "TEAM_TOKEN": token})


def local_settings(setup, tmp: Path):
    cfg = tmp / "local.yaml"
    cfg.write_text(f"agent_id: alice\ntiers:\n  agent: {setup['agent_db']}\n"
                   f"  team: {setup['local_team']}\n")
    return load_settings(cfg, env={"HOME": str(tmp)})


@pytest.fixture(autouse=True)
def patient_client(monkeypatch):
    """A loaded CI machine must not turn a slow answer into a left-out tier here; the
    failure tests below set their own short timeouts."""
    monkeypatch.setenv("TIERVAULT_REMOTE_READ_TIMEOUT", "60")


def test_remote_tier_ranks_exactly_as_a_local_file(setup, tmp_path):
    # With the default FTS-only LSA share: the server scores latent matches over its own
    # mirror of the same rows (the contract's latent_scores), the same model as a local file's.
    with Brain.open(local_settings(setup, tmp_path)) as local, \
            Brain.open(remote_settings(setup, tmp_path, setup["tokens"]["r"])) as remote:
        assert remote.manager.problems == {}
        assert remote.config.lsa_share > 0
        compared, latent = 0, 0
        for q in setup["queries"]:
            a = local.manager.search(q, limit=30)
            b = remote.manager.search(q, limit=30)
            assert a.ids == b.ids and a.tiers == b.tiers and a.also_in == b.also_in, q
            assert a.lexical == pytest.approx(b.lexical, abs=1e-12), q
            assert a.tfidf == pytest.approx(b.tfidf, abs=1e-9), q
            ra = local.search_intelligent(q, mode="full", limit=10, explain=True)
            rb = remote.search_intelligent(q, mode="full", limit=10, explain=True)
            assert [(r["entry"]["id"], r["tier"]) for r in ra] == [(r["entry"]["id"], r["tier"]) for r in rb], q
            for x, y in zip(ra, rb):
                # Scores are shown rounded to 6 decimals: one step of the last digit apart
                # is 1e-6 plus the float error of the two roundings (1.00000000003e-6 seen).
                assert abs(x["score"] - y["score"]) <= 1e-6 + 1e-12, (q, x["entry"]["id"])
                assert x["entry"] == y["entry"]
                assert x["explain"]["lsa"] == y["explain"]["lsa"], (q, x["entry"]["id"])
                latent += x["explain"]["lsa"] > 0
            compared += len(ra)
        assert compared > 200 and latent > 100
        # Dedup across local and remote: the agent's copy wins, the team copy is "also in".
        hit = remote.manager.search("parameterised queries SQL string formatting", limit=5)
        assert hit.tiers[0] == "agent" and "team" in hit.also_in[0]


def test_remote_tier_browses_as_the_local_file(setup, tmp_path):
    """The curator reads (pages in both orders with filters, totals, facet counts, the
    title sweep, links by type) over the wire equal those of the same rows in a local
    file; a tier the token may not read is refused by the server's rights check."""
    from tiervault.errors import TierVaultError
    from tiervault.vault.filters import Filters
    from tiervault.vault.remote import RemoteTier

    with Brain.open(local_settings(setup, tmp_path)) as local, \
            Brain.open(remote_settings(setup, tmp_path, setup["tokens"]["r"])) as remote:
        a, b = local.manager.store("team"), remote.manager.store("team")
        assert isinstance(b, RemoteTier)
        every = a.facet_counts()
        top_domain, top_tag = next(iter(every.by_domain)), next(iter(every.by_tag))
        for filters in (None, Filters(types=("rule",), include_expired=True, include_future=True),
                        Filters(domains=(top_domain,), include_expired=True, include_future=True),
                        Filters(tags=(top_tag,), not_types=("rule",))):
            assert a.facet_counts(filters) == b.facet_counts(filters)
            for order in ("newest", "updated"):
                for offset in (0, 25, 1_000):
                    pa = a.light_page(order=order, filters=filters, offset=offset, limit=25)
                    pb = b.light_page(order=order, filters=filters, offset=offset, limit=25)
                    assert pa.rows == pb.rows and pa.total == pb.total, (order, offset, filters)
                    assert pa.total > 25 and (offset >= pa.total or pa.rows)
        assert [(r.id, r.title, r.content_hash) for r in a.title_rows(0, 10_000)] == \
            [(r.id, r.title, r.content_hash) for r in b.title_rows(0, 10_000)]
        for link_type in ("contradicts", "supports"):
            assert a.links_of_type(link_type, 50) == b.links_of_type(link_type, 50)
    stranger = RemoteTier("project", f"{setup['server'].url}/tiers/project", setup["tokens"]["r"])
    try:
        with pytest.raises(TierVaultError, match="may not read tier 'project'"):
            stranger.light_page()
    finally:
        stranger.close()


def test_remote_tier_reads_writes_and_rights(setup, tmp_path):
    with Brain.open(remote_settings(setup, tmp_path, setup["tokens"]["rw"])) as brain:
        m = brain.manager
        e = Entry.from_dict({"id": "remote-written", "title": "Written through a remote tier",
                             "description": "Captured over HTTP into the team tier."})
        stored = m.capture(e, "team")
        assert stored.id == "remote-written" and stored.created_at is not None
        assert m.get("remote-written")[1] == "team"
        link = m.link("remote-written", "agent-retry-budget", "supports", tier="team")
        assert link.tier == "team"
        with pytest.raises(EntryNotFound):
            m.store("team").link("nope-not-here", "remote-written", "supports")
        assert m.delete("remote-written", "team") is True
        assert m.store("team").get("remote-written") is None
    with Brain.open(remote_settings(setup, tmp_path, setup["tokens"]["r"])) as brain:
        with pytest.raises(ReadOnlyTier):
            brain.manager.capture(e, "team")
    bad = remote_settings(setup, tmp_path, "tv_0000000000_" + "x" * 43)
    with Brain.open(bad) as brain:  # a refused token: the tier is out, the agent tier answers
        rows = brain.search_intelligent("retry http calls")
        assert rows and {r["tier"] for r in rows} == {"agent"}
        assert "team" in brain.manager.problems and "refused the token" in brain.manager.problems["team"]
        with pytest.raises(StorageError, match="refused the token"):
            brain.manager.store("team").count()


def test_server_down_then_back(setup, tmp_path, monkeypatch):
    """Down: left out and listed; a write fails and is not queued; back: used again."""
    server_dir = setup["root"] / "server"
    port = free_port()
    monkeypatch.setenv("TIERVAULT_REMOTE_RETRY_AFTER", "0")  # no cool-down: retry at once
    settings = remote_settings(setup, tmp_path, setup["tokens"]["rw"], f"http://127.0.0.1:{port}")
    with Brain.open(settings) as brain:
        rows = brain.search_intelligent("retry http calls")
        assert {r["tier"] for r in rows} == {"agent"}
        assert "team" in brain.manager.problems
        assert "cannot connect" in brain.manager.problems["team"]
        e = Entry.from_dict({"id": "written-while-down", "title": "Never queued",
                             "description": "This write must fail, not wait."})
        with pytest.raises(StorageError, match="cannot connect"):
            brain.manager.capture(e, "team")
        second = ServeProcess(server_dir, port=port).start()
        try:
            rows = brain.search_intelligent("retry http calls")
            assert "team" in {r["tier"] for r in rows}
            assert brain.manager.problems == {}
            assert brain.manager.store("team").get("written-while-down") is None
        finally:
            second.stop()


def test_server_that_never_answers_is_left_out(setup, tmp_path, monkeypatch):
    """A server that accepts connections but never answers: the read timeout bounds the call."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
                held.append(conn)  # read nothing, answer nothing
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    try:
        monkeypatch.setenv("TIERVAULT_REMOTE_READ_TIMEOUT", "0.5")
        settings = remote_settings(setup, tmp_path, setup["tokens"]["r"], url)
        with Brain.open(settings) as brain:
            rows = brain.search_intelligent("retry http calls")
            assert {r["tier"] for r in rows} == {"agent"}
            assert "no answer within 0.5 s" in brain.manager.problems["team"]
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        listener.close()


def test_token_never_in_location_messages_or_stats(setup, tmp_path):
    token = setup["tokens"]["r"]
    secret = token.split("_", 2)[2]
    port = free_port()
    settings = remote_settings(setup, tmp_path, token, f"http://127.0.0.1:{port}")
    with Brain.open(settings) as brain:
        brain.search_intelligent("retry")
        texts = [repr(brain.manager.store("team")), brain.manager.store("team").location,
                 str(brain.manager.problems), str(brain.stats()), repr(settings)]
        with pytest.raises(StorageError) as err:
            brain.manager.store("team").count()
        texts.append(str(err.value))
    assert not any(secret in t for t in texts)


def test_cli_search_federates_local_and_remote(setup, tmp_path):
    """The README's flow: an agent's agent.yaml names the server; `tiervault search` uses both."""
    (tmp_path / "home").mkdir()
    (tmp_path / "agent.yaml").write_text(
        f"agent_id: alice\ntiers:\n  agent: {setup['agent_db']}\n"
        f"  team:\n    url: {setup['server'].url}\n    token: ${{TIERVAULT_TEAM_TOKEN}}\n")
    r = run_cli(tmp_path, "search", "retry http calls", "--json", "--limit", "20",
                TIERVAULT_TEAM_TOKEN=setup["tokens"]["r"], TIERVAULT_REMOTE_READ_TIMEOUT="60")
    tiers = {row["tier"] for row in json.loads(r.stdout)}
    assert tiers == {"agent", "team"}
    assert setup["tokens"]["r"].split("_", 2)[2] not in r.stdout + r.stderr
    (tmp_path / "agent.yaml").write_text(
        f"agent_id: alice\ntiers:\n  agent: {setup['agent_db']}\n"
        f"  team:\n    url: http://127.0.0.1:{free_port()}\n    token: ${{TIERVAULT_TEAM_TOKEN}}\n")
    down = run_cli(tmp_path, "search", "retry http calls", "--json",
                   TIERVAULT_TEAM_TOKEN=setup["tokens"]["r"])
    assert {row["tier"] for row in json.loads(down.stdout)} == {"agent"}
    assert "left out of this answer" in down.stderr and "cannot connect" in down.stderr
