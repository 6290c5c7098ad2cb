"""`tiervault import` into a PostgreSQL tier takes the store's bulk path (issue 13).

The manager hands the whole input to the store in one ``capture_many`` call: into an
empty tier of more than one batch, the PostgreSQL store drops the secondary indexes of
``entries`` and builds them once at the end (new index objects), while the write hooks
(embed-on-write here) still run after every committed batch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from embeddings_server import FakeEmbeddingServer
from tiervault.vault.entry import Entry
from tiervault.vault.manager import Tier, VaultManager
from tiervault.vault.postgres import PgTierStore
from tiervault.vault.postgres.schema import ENTRY_INDEXES
from tiervault.vault.store import TierStore

BATCH = 5_000  # import_lines' batch size
N = 2 * BATCH + 321  # three batches, the last one short
_INDEX_OIDS = ("SELECT c.relname, c.oid::bigint FROM pg_class c JOIN pg_namespace n "
               "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'i'")


def _entries(n: int) -> list[Entry]:
    return [Entry.create(id=f"imp{i:06d}", title=f"imported rule {i}", type="rule",
                         description=f"bulk import body {i} " + "word " * (i % 7),
                         tags=[f"t{i % 3}"], domain=("x", "y")[i % 2]) for i in range(n)]


def _index_oids(store: PgTierStore, schema: str) -> dict[str, int]:
    return {name: oid for name, oid in store.query(_INDEX_OIDS, (schema,)) if name in ENTRY_INDEXES}


def test_cli_import_into_postgres_takes_the_bulk_path_and_hooks_see_every_batch(
        tmp_path: Path, pg_server, embeddings_server: FakeEmbeddingServer):
    schema = "t_cli_bulk_import"
    pg_server.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE", "tiervault_test")
    url = pg_server.url("tiervault_test").replace(pg_server.password, "${TV_IMPORT_PW}")
    (tmp_path / "agent.yaml").write_text(
        f"tiers:\n  agent: {tmp_path / 'agent.db'}\n  project: {tmp_path / 'project.db'}\n"
        f"  team:\n    url: {url}\n    schema: {schema}\n"
        f"embedding:\n  provider: http\n  model: fake-model\n  baseUrl: {embeddings_server.openai_url}\n"
        "  apiKey: sk-import-1234\nfeatures:\n  embedding-enabled: true\n")
    data = _entries(N)
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(e.to_dict()) + "\n" for e in data))
    store = PgTierStore(pg_server.url("tiervault_test"), name="team", schema=schema)
    try:
        before = _index_oids(store, schema)  # the tier exists, empty, with its indexes
        assert set(before) == set(ENTRY_INDEXES) and store.count() == 0
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TIERVAULT_", "OPENAI_"))}
        done = subprocess.run([sys.executable, "-m", "tiervault", "import", str(source), "--tier", "team",
                               "--json"], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                              env={**env, "TV_IMPORT_PW": pg_server.password})
        assert done.returncode == 0, done.stdout + done.stderr
        report = json.loads(done.stdout.strip().splitlines()[-1])
        assert (report["read"], report["written"], report["unchanged"]) == (N, N, 0)
        after = _index_oids(store, schema)
        assert set(after) == set(ENTRY_INDEXES)  # built again at the end of the load...
        assert all(after[name] != before[name] for name in ENTRY_INDEXES)  # ...as new indexes
        stored = {e.id: e for e in store.iter_entries()}
        assert {i: e.content_hash for i, e in stored.items()} == {e.id: e.content_hash for e in data}
        assert stored[data[-1].id].title == data[-1].title
        # embed-on-write ran after each committed batch: every entry was sent and is embedded
        sent = {text for r in embeddings_server.requests for text in r.inputs}
        assert all(any(e.title in text for text in sent) for e in (data[0], data[BATCH], data[-1]))
        counts = [store.embedding_counts(m) for m in _models(store)]
        assert counts and counts[0]["ok"] == N and counts[0]["pending"] == counts[0]["error"] == 0
    finally:
        store.close()
        pg_server.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE", "tiervault_test")


def _models(store: PgTierStore) -> list[str]:
    return [r[0] for r in store.query("SELECT DISTINCT model FROM embedding_state")]


def test_write_hooks_see_every_committed_batch_of_one_streamed_call(tmp_path: Path, pg_tier):
    tiers = {"agent": TierStore(tmp_path / "agent.db", name="agent"), "team": pg_tier()}
    manager = VaultManager([Tier(name, str(tmp_path / name), 1.0, store=store) for name, store in tiers.items()])
    seen: list[tuple[str, list[str], int]] = []

    def hook(tier: str, batch: list[Entry]) -> None:  # what is committed when the hook runs
        ids = [e.id for e in batch]
        seen.append((tier, ids, len(tiers[tier].get_many(ids))))

    manager.add_write_hook(hook)
    progress: list[int] = []
    for name in tiers:
        data = _entries(7)
        stream = iter(data)  # read once: one call to the store for the whole stream
        assert manager.capture_many(stream, name, batch_size=3,
                                    on_batch=lambda b: progress.append(b.total)) == 7
        assert [s for s in seen if s[0] == name] == [
            (name, [e.id for e in data[0:3]], 3), (name, [e.id for e in data[3:6]], 3),
            (name, [e.id for e in data[6:]], 1)]
        assert tiers[name].count() == 7
    assert progress == [3, 6, 7, 3, 6, 7]

