"""TierStore on real SQLite files: CRUD, FTS5 ranking, query safety, filters, schema."""

from __future__ import annotations

import os
import sqlite3
import stat

import numpy as np
import pytest

from tiervault.errors import EntryNotFound, ReadOnlyTier, TierUnavailable, ValidationError
from tiervault.vault.entry import Entry
from tiervault.vault.filters import Filters
from tiervault.vault.query import match_expression, query_terms
from tiervault.vault.schema import SCHEMA_VERSION, migrate
from tiervault.vault.store import TierStore


def make(eid: str, title: str, description: str = "body text", **kw) -> Entry:
    return Entry.create(id=eid, title=title, description=description, **kw)


@pytest.fixture
def store(tmp_path):
    with TierStore(tmp_path / "agent.db") as s:
        yield s


def test_capture_get_update_delete_roundtrip(store):
    e = make("a1", "Rotate JWT keys", "Rotate signing keys", tags=["jwt", "security"],
             created_at="2024-01-02T03:04:05Z")
    stored = store.capture(e)
    assert stored.created_at == e.created_at and stored.updated_at is not None
    assert store.get("a1").tags == ("jwt", "security")
    updated = store.capture(make("a1", "Rotate JWT keys often", "Rotate signing keys"))
    assert updated.title == "Rotate JWT keys often"
    assert updated.created_at == e.created_at  # creation time survives an update
    assert store.count() == 1
    assert store.delete("a1") is True
    assert store.get("a1") is None and store.delete("a1") is False
    assert store.integrity_problems() == []


def test_unchanged_capture_is_not_rewritten(store):
    e = make("a1", "Title", "Body")
    assert store.capture_many([e]) == 1
    gen = store.generation()
    assert store.capture_many([e]) == 0
    assert store.generation() == gen + 1  # a transaction ran, but wrote nothing
    assert store.search_fts(["title"], Filters(), 10).ids == ["a1"]


def test_title_hit_outranks_same_word_in_context(store):
    store.capture_many([
        make("in-context", "Unrelated heading", "plain words", context="kubernetes"),
        make("in-title", "Kubernetes", "plain words"),
        make("in-description", "Another heading", "kubernetes"),
    ])
    hits = store.search_fts(query_terms("kubernetes"), Filters(), 10)
    assert hits.ids == ["in-title", "in-description", "in-context"]
    assert np.all(np.diff(hits.scores) < 0)


def test_porter_stemming_matches_word_forms(store):
    store.capture(make("auth", "Authentication tokens", "how to authenticate"))
    assert store.search_fts(query_terms("authenticating"), Filters(), 5).ids == ["auth"]


@pytest.mark.parametrize("query", [
    "NOT", "AND", "OR", '"', '""', "*", "NEAR(", "NEAR(a b)", "title:secret", "^start",
    "a AND b", "jwt NOT keys", 'unbalanced "quote', "col:value*", "-", "()", "'; DROP TABLE entries; --",
])
def test_fts5_syntax_is_searched_as_words(store, query):
    store.capture_many([make("not-entry", "Do NOT disable near checks", "and or not near title"),
                        make("jwt", "JWT keys", "secret title start value")])
    hits = store.search_fts(query_terms(query), Filters(), 10)  # must not raise
    assert all(isinstance(i, str) for i in hits.ids)
    assert store.count() == 2


def test_operator_words_find_entries_containing_them(store):
    store.capture_many([make("neg", "Never use NOT IN with NULLs", "sql"), make("other", "Cache", "x")])
    assert store.search_fts(query_terms("NOT"), Filters(), 5).ids == ["neg"]
    assert match_expression(['a"b']) == '"a""b"'


def test_empty_query_returns_nothing_not_everything(store):
    store.capture(make("x1", "Something", "else"))
    for q in ["", "   ", "a", "!!", "- _ . /"]:
        assert query_terms(q) == [] or all(len(t) >= 2 for t in query_terms(q))
        assert store.search_fts(query_terms(q), Filters(), 10).ids == []


def test_query_transformation_rules():
    assert query_terms("How does JWT-validation work?") == ["how", "does", "jwt", "validation", "work"]
    assert query_terms("file_name.py/path\\x a") == ["file", "name", "py", "path"]
    assert match_expression(query_terms("how does JWT validation work")) == \
        '"how" OR "does" OR "jwt" OR "validation" OR "work"'


def test_filters_apply_before_the_limit(store):
    # The first 150 BM25 hits are all domain "noise"; the two "target" entries rank last.
    entries = [make(f"n{i}", "retry retry retry policy", "retry", domain="noise") for i in range(150)]
    entries += [make("t1", "policy", "a retry note deep down", domain="target"),
                make("t2", "unrelated", "retry once", domain="target")]
    store.capture_many(entries)
    hits = store.search_fts(["retry"], Filters.build(domain="target"), 10)
    assert sorted(hits.ids) == ["t1", "t2"]
    mirror = store.postings()
    assert set(np.flatnonzero(mirror.mask(Filters.build(domain="target")))) == {150, 151}


def test_filters_by_type_severity_tags_and_validity(store):
    now = 1_800_000_000.0
    store.capture_many([
        make("r1", "retry rule", "x", type="rule", severity="critical", tags=["http"]),
        make("p1", "retry pattern", "x", type="pattern", severity="warning", tags=["db"]),
        make("old", "retry expired", "x", valid_from=now - 200, valid_until=now - 100),
        make("new", "retry future", "x", valid_from=now + 100),
    ])
    def ids(**kw):
        return sorted(store.search_fts(["retry"], Filters.build(now=now, **kw), 10).ids)
    assert ids(type="rule") == ["r1"]
    assert ids(severity="warning") == ["p1"]
    assert ids(tags="db,http") == ["p1", "r1"]
    assert ids() == ["p1", "r1"]
    assert ids(include_expired=True) == ["old", "p1", "r1"]
    assert ids(include_future=True) == ["new", "p1", "r1"]
    with pytest.raises(ValidationError, match="type"):
        Filters.build(type="bogus")


def test_sql_injection_in_filters_is_just_a_value(store):
    store.capture(make("a", "retry", "x", domain="security"))
    for evil in ["x' OR '1'='1", "); DROP TABLE entries; --"]:
        assert store.search_fts(["retry"], Filters.build(domain=evil), 10).ids == []
        assert store.search_fts(["retry"], Filters.build(tags=evil.replace(" ", "")), 10).ids == []
    assert store.count() == 1


def test_links_cascade_on_delete(store):
    store.capture_many([make("a", "A", "x"), make("b", "B", "x")])
    store.link("a", "b", "supports", "because")
    store.link("b", "elsewhere-id", "extends")  # target may live in another tier
    assert {(l.source_id, l.target_id) for l in store.links_touching(["b"])} == {("a", "b"), ("b", "elsewhere-id")}
    with pytest.raises(ValidationError, match="link_type"):
        store.link("a", "b", "likes")
    with pytest.raises(EntryNotFound):
        store.link("missing", "b", "supports")
    store.delete("b")
    assert store.links_touching(["a", "b"]) == []


def test_memories_search_with_punctuation(store):
    store.add_memory("Agreed the retry policy: 3 attempts with jitter", topics=["http"])
    hits = store.search_memories(query_terms("what's the retry policy?"), 5)
    assert len(hits) == 1 and "retry policy" in hits[0].summary


def test_feedback_counters(store):
    store.capture(make("a", "A", "x"))
    for action in ["accepted", "accepted", "dismissed", "failed"]:
        store.add_feedback("q", "a", action)
    assert store.feedback_counts() == {"accepted": 2, "modified": 0, "dismissed": 1, "failed": 1}
    with pytest.raises(ValidationError, match="action"):
        store.add_feedback("q", "a", "liked")


def test_missing_tier_is_empty_until_first_write_and_private(tmp_path):
    path = tmp_path / "deep" / "dir" / "team.db"
    s = TierStore(path, name="team")
    assert not path.exists() and s.count() == 0 and s.search_fts(["x"], Filters(), 5).ids == []
    s.capture(make("a", "A", "x"))
    assert path.exists()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    s.close()


def test_read_only_tier_refuses_writes(tmp_path):
    path = tmp_path / "t.db"
    TierStore(path).capture(make("a", "A", "x"))
    ro = TierStore(path, name="team", read_only=True)
    assert ro.get("a") is not None
    with pytest.raises(ReadOnlyTier, match="read-only"):
        ro.capture(make("b", "B", "x"))
    with pytest.raises(ReadOnlyTier):
        ro.add_feedback("q", "a", "accepted")


def test_corrupt_and_foreign_and_directory_files_are_named(tmp_path):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(TierUnavailable, match="junk.db"):
        TierStore(junk, name="team")
    foreign = tmp_path / "foreign.db"
    sqlite3.connect(foreign).execute("CREATE TABLE t(x)").connection.commit()
    with pytest.raises(TierUnavailable, match="not a tiervault tier"):
        TierStore(foreign)
    with pytest.raises(TierUnavailable, match="directory"):
        TierStore(tmp_path, name="agent")


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "new.db"
    TierStore(path).capture(make("a", "A", "x"))
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    with pytest.raises(TierUnavailable, match="newer tiervault"):
        TierStore(path)


def test_migration_from_v1_keeps_entries_and_search(tmp_path):
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, target=1)
    # A v1 tier: FTS maintained by row triggers, no gen column, no memories table.
    conn.execute("INSERT INTO entries(id, type, domain, title, description, tags, severity, origin, "
                 "created_at, updated_at, content_hash) VALUES ('old-one', 'rule', 'db', "
                 "'Vacuum regularly', 'run vacuum', 'sqlite', 'warning', 'user', 1, 2, 'h')")
    conn.close()
    s = TierStore(path)
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert s.get("old-one").title == "Vacuum regularly"
    assert s.search_fts(["vacuum"], Filters(), 5).ids == ["old-one"]
    s.capture(make("new-one", "Vacuum after bulk deletes", "x"))
    assert set(s.search_fts(["vacuum"], Filters(), 5).ids) == {"old-one", "new-one"}
    s.add_memory("memories work after migration")
    assert s.integrity_problems() == []
    assert s.postings().slot("old-one") is not None


def test_entry_validation_names_field_and_allowed_values():
    with pytest.raises(ValidationError, match="severity.*critical, warning, suggestion"):
        Entry.create(title="t", description="d", severity="high")
    with pytest.raises(ValidationError, match="^id"):
        Entry.create(id="Bad ID!", title="t", description="d")
    with pytest.raises(ValidationError, match="title"):
        Entry.create(description="d")
    with pytest.raises(ValidationError, match="colour"):
        Entry.from_dict({"title": "t", "description": "d", "colour": "red"})
    with pytest.raises(ValidationError, match="valid_until"):
        Entry.create(title="t", description="d", valid_from=10, valid_until=5)
    e = Entry.create(title="Use JWT rotation!", description="d", created_at=1700000000)
    assert e.id == "use-jwt-rotation"
    assert e.to_dict()["created_at"] == "2023-11-14T22:13:20Z"
    assert Entry.from_dict(e.to_dict()) == e


def test_a_bulk_write_stores_what_small_writes_store(tmp_path):
    """A batch of >= BULK_ROWS rows (plain INSERTs of new ids, FTS5 merging off inside
    its transaction, its pending terms flushed once) leaves the same rows, rowids, FTS5
    tokens and answers as writes of a few rows each (the UPSERT of every row); FTS5's own
    merge and hash settings survive it."""
    from tests.test_vault_manager import random_entries
    from tiervault.vault.store import BULK_ROWS

    first = random_entries(1500, seed=3)
    # a second pass: changed rows (new text), unchanged ones, new ones and a repeated id
    second = ([Entry.create(id=e.id, title=e.title + " revised", description=e.description)
               for e in first[:400]] + first[400:700] + random_entries(900, seed=4, prefix="n")
              + [Entry.create(id="n5", title="last one wins", description="the repeat")])
    assert len(second) >= BULK_ROWS
    bulk, small = TierStore(tmp_path / "bulk.db"), TierStore(tmp_path / "small.db")
    bulk.create()
    bulk.db.writer().execute(
        "INSERT INTO entries_fts(entries_fts, rank) VALUES ('automerge', 8)")
    bulk.db.writer().execute(
        "INSERT INTO entries_fts(entries_fts, rank) VALUES ('hashsize', 300000)")
    for batch in (first, second):
        bulk.capture_many(batch, batch_size=len(batch))
        small.capture_many(batch, batch_size=7)
    rows = "SELECT rowid, {} FROM entries ORDER BY rowid".format(
        ", ".join(c for c in ("id", "type", "domain", "title", "description", "context", "tags",
                              "applies_to", "severity", "origin", "valid_from", "valid_until",
                              "content_hash")))
    assert bulk.db.query(rows) == small.db.query(rows)
    assert bulk.integrity_problems() == [] and small.integrity_problems() == []
    for q in ("revised", "last one", "n5 repeat", first[3].title, "ops db"):
        a = bulk.search_fts(query_terms(q), Filters(), 50)
        b = small.search_fts(query_terms(q), Filters(), 50)
        assert a.ids == b.ids and np.allclose(a.scores, b.scores, rtol=1e-12)
    assert bulk.db.query("SELECT v FROM entries_fts_config WHERE k = 'automerge'") == [(8,)]
    assert bulk.db.query("SELECT v FROM entries_fts_config WHERE k = 'hashsize'") == [(300000,)]
    # every token, position and document size alike (the bulk batch's pending terms are
    # flushed as one segment, the small writes' as many)
    tokens = ("SELECT term, doc, col, offset FROM temp.vocab ORDER BY term, doc, col, offset",
              "SELECT id, sz FROM entries_fts_docsize ORDER BY id")
    for store in (bulk, small):
        store.db.writer().execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.vocab USING fts5vocab(main, entries_fts, instance)")
    assert [bulk.db.writer().execute(q).fetchall() for q in tokens] == \
        [small.db.writer().execute(q).fetchall() for q in tokens]
