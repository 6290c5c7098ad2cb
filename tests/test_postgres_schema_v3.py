"""Schema v3 of a PostgreSQL tier: the browse orders read an index in order.

``light_page(order="updated")`` orders by (gen DESC, rowid DESC) and
``links_of_type`` by (created_at DESC, source_id, target_id) within one type; v3
indexes both in that order (on v2 the first sorted a whole generation, the second
scanned every link). A v2 tier holding data is migrated when it is opened.
"""

from __future__ import annotations

import psycopg

from tiervault.vault.entry import Entry
from tiervault.vault.postgres import PgTierStore
from tiervault.vault.postgres.schema import SCHEMA_VERSION, migrate_schema

_UPDATED = ("SELECT e.id FROM entries e ORDER BY e.gen DESC, e.rowid DESC LIMIT 25")
_LINKS = ("SELECT source_id, target_id FROM links WHERE link_type = 'supports' "
          'ORDER BY created_at DESC, source_id COLLATE "C", target_id COLLATE "C" LIMIT 20')


def _plan(store: PgTierStore, sql: str) -> str:
    with store.mapped("explain") as conn:
        with conn.transaction():
            conn.execute("SET LOCAL enable_seqscan = off")  # a few rows: ask for the index path
            return "\n".join(r[0] for r in conn.execute(f"EXPLAIN {sql}"))


def test_a_v2_tier_is_migrated_and_its_browse_orders_need_no_sort(pg_server):
    url, schema = pg_server.url("tiervault_test"), "t_schema_v3_migrated"
    pg_server.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE", "tiervault_test")
    with psycopg.connect(url) as conn:  # a tier as v2 made it, with data
        migrate_schema(conn, schema, target=2)
        conn.execute(f"INSERT INTO {schema}.entries (id, type, domain, title, description, severity, "
                     "origin, created_at, updated_at, content_hash, gen) SELECT 'old' || g, 'rule', "
                     "'net', 'title ' || g, 'text', 'suggestion', 'user', 1, 1, md5(g::text), g / 10 "
                     "FROM generate_series(1, 300) g")
        conn.execute(f"INSERT INTO {schema}.links (source_id, target_id, link_type, created_at) "
                     "SELECT 'old' || g, 'old' || (g + 1), (ARRAY['supports', 'extends'])[1 + g % 2], g "
                     f"FROM generate_series(1, 299) g")
        conn.execute(f"UPDATE {schema}.meta SET value = '30' WHERE key = 'gen'")
        conn.commit()
    try:
        with PgTierStore(url, name="team", schema=schema) as store:
            before = _plan(store, _UPDATED)  # opening it migrated it
            version = store.query("SELECT value FROM meta WHERE key = 'schema_version'")[0][0]
            assert int(version) == SCHEMA_VERSION == 3
            assert "Sort" not in before and "entries_gen" in before, before
            links = _plan(store, _LINKS)
            assert "Sort" not in links and "links_type" in links, links
            page = store.light_page(order="updated", limit=3)
            assert [r.id for r in page.rows] == ["old300", "old299", "old298"]
            assert [link.source_id for link in store.links_of_type("supports", 2)] == ["old298", "old296"]
            store.capture(Entry.create(id="new", type="rule", title="after the migration",
                                       description="written at v3"))
            assert store.light_page(order="updated", limit=1).rows[0].id == "new"
    finally:
        pg_server.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE", "tiervault_test")


def test_on_v2_the_updated_page_sorted_within_a_generation(pg_server):
    """The plan the v3 index removes (so the test above can fail)."""
    url, schema = pg_server.url("tiervault_test"), "t_schema_v3_v2plan"
    pg_server.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE", "tiervault_test")
    try:
        with psycopg.connect(url) as conn:
            migrate_schema(conn, schema, target=2)
            conn.execute("SET enable_seqscan = off")
            plan = "\n".join(r[0] for r in conn.execute(
                f"EXPLAIN SELECT e.id FROM {schema}.entries e ORDER BY e.gen DESC, e.rowid DESC LIMIT 25"))
            assert "Sort" in plan, plan
    finally:
        pg_server.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE", "tiervault_test")
