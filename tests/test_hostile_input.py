"""Hostile input: whatever a model or a user sends, the answer is results or a typed error.

Property-based (hypothesis): arbitrary unicode, lone surrogates, FTS5 syntax,
SQL fragments, NUL bytes, control characters, empty strings and 1 MB strings,
and values of the wrong JSON type, thrown at

- search queries (``VaultManager.search``, ``Brain.search_intelligent``),
- filters (``Filters.build``, then both the in-memory and the SQL search path),
- every capture field (``Entry.from_dict`` + ``VaultManager.capture``) and JSONL import,
- links (ids, link types, notes), feedback (query, id, action), memories.

Allowed outcomes: a result, or a :class:`~tiervault.errors.TierVaultError`
with a message. Any other exception fails the test. A write that fails leaves
the database byte-for-byte as it was (checksum of a full SQL dump before and
after). Explicit tests show SQL injection strings are plain values.

Number of examples: see ``EXAMPLES`` (per property); set TIERVAULT_HYPOTHESIS_EXAMPLES
to run more. The run is derandomized so CI is reproducible.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sqlite3
from pathlib import Path
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tiervault.brain import Brain
from tiervault.errors import ReadOnlyTier, TierVaultError
from tiervault.vault.entry import (ENTRY_TYPES, FEEDBACK_ACTIONS, LINK_TYPES, MAX_TEXT_CHARS,
                                   SEVERITIES, Entry)
from tiervault.vault.filters import Filters
from tiervault.vault.jsonl import import_lines
from tiervault.vault.manager import Tier, VaultManager
from tiervault.vault.query import MAX_QUERY_CHARS

EXAMPLES = int(os.environ.get("TIERVAULT_HYPOTHESIS_EXAMPLES", "300"))
RUN = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                      HealthCheck.function_scoped_fixture])
COUNTS: dict[str, int] = {}

FTS5_SYNTAX = ['"', '""', '"unterminated', "NEAR(a b, 2)", "NEAR(", "a NOT b", "AND", "OR",
               "NOT", "*", "jwt*", "title:jwt", "id:*", "{title id}: x", "- jwt", "^jwt", "(", ")",
               ")(", "+", "a:b:c", "'", "\\", "\"a\" AND \"b\"", "rank MATCH 'x'", "bm25(x)"]
SQL_FRAGMENTS = ["x' OR '1'='1", "); DROP TABLE entries; --", "'; DELETE FROM entries; --",
                 "' UNION SELECT id, title FROM entries --", "%", "_", "1 = 1", "?", ":name",
                 "@p", "$1", "`", "[entries]", "/*", "*/", "-- ", "NULL", "\"; ATTACH 'x' AS y; --"]
ODD = ["", " ", "\t\n\r", "\x00", "a\x00b", "\ud800", "x\udfffy", "\u202e", "\ufeff", "\u200b",
       "🙂", "İ", "ß", "e\u0301", "ǅ", "𝔘𝔫𝔦", "\x1b[31m", "\x7f", "\uffff", "a,b", "#tag", "-", "."]
MB = 1 << 20
BIG = ["a" * MB, ("ü🙂 jwt rotation " * (MB // 10))[:MB], "\x00" * MB, "word " * (MB // 5),
       "x" * (MAX_TEXT_CHARS + 1), "y" * MAX_QUERY_CHARS * 2]

piece = st.one_of(st.text(max_size=40), st.sampled_from(FTS5_SYNTAX + SQL_FRAGMENTS + ODD))
hostile = st.one_of(piece, st.lists(piece, max_size=6).map("".join), st.sampled_from(BIG))
# A value of any JSON type (what a model's tool call can carry), mostly hostile strings.
json_value = st.one_of(
    hostile, hostile, st.none(), st.booleans(), st.integers(), st.floats(),
    st.lists(hostile, max_size=4), st.dictionaries(st.text(max_size=5), hostile, max_size=2))
string_list = st.one_of(hostile, st.lists(hostile, max_size=5), json_value)

SEED = [
    dict(id="jwt-rotation", title="Rotate JWT signing keys", description="Rotate keys every 90 days; "
         "NEAR(a b) and title:x are just words here.", tags=["security", "jwt"], domain="security",
         severity="critical", type="rule"),
    dict(id="sql-params", title="Parameterise SQL", description="Never format user values into "
         "SQL: x' OR '1'='1 must stay a value.", tags=["sql"], domain="databases"),
    dict(id="retry-backoff", title="Retry with jittered backoff", description="Bound retries.",
         tags=["http", "reliability"], domain="reliability", severity="warning", type="pattern"),
    dict(id="unicode-note", title="Ünïcödé 🙂 titles work", description="Straße İstanbul ǅ",
         tags=["unicode"], domain="i18n"),
]


@pytest.fixture(scope="module")
def vault(tmp_path_factory) -> Any:
    root = tmp_path_factory.mktemp("hostile")
    for name in ("agent", "project"):
        with VaultManager.at({name: str(root / f"{name}.db")}) as m:
            m.capture_many([Entry.from_dict({**r, "id": f"{r['id']}-{name}"} if name == "project" else r)
                            for r in SEED], name)
    with VaultManager.at({"agent": str(root / "pack.db")}) as m:
        m.capture(Entry.from_dict(SEED[0]), "agent")
    manager = VaultManager([Tier("agent", str(root / "agent.db"), 1.0),
                            Tier("project", str(root / "project.db"), 0.8),
                            Tier("pack", str(root / "pack.db"), 0.5, read_only=True)])
    yield {"manager": manager, "brain": Brain(manager), "root": root}
    manager.close()


@pytest.fixture(scope="module", autouse=True)
def report_examples():
    yield
    total = sum(COUNTS.values())
    print(f"\nhostile input: {total} hypothesis examples ({', '.join(f'{k} {v}' for k, v in sorted(COUNTS.items()))})")


def count(name: str) -> None:
    COUNTS[name] = COUNTS.get(name, 0) + 1


def checksum(root: Path) -> str:
    """SHA-256 of a full SQL dump of every tier file (schema, rows, FTS shadow tables)."""
    h = hashlib.sha256()
    for db in sorted(root.glob("*.db")):
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            for line in conn.iterdump():
                h.update(line.encode("utf-8", "surrogatepass"))
        finally:
            conn.close()
    return h.hexdigest()


def outcome(fn: Callable[[], Any]) -> tuple[Any, TierVaultError | None]:
    """Run ``fn``: (result, None) or (None, typed error). Anything else propagates (a failure)."""
    try:
        return fn(), None
    except TierVaultError as exc:
        assert str(exc).strip(), f"{type(exc).__name__} without a message"
        return None, exc


def write_outcome(vault: Any, fn: Callable[[], Any]) -> tuple[Any, TierVaultError | None]:
    """Like :func:`outcome` for a write: a failed write must not change any tier file."""
    before = checksum(vault["root"])
    result, error = outcome(fn)
    if error is not None:
        assert checksum(vault["root"]) == before, f"a failed write changed the database: {error}"
    return result, error


# -- search ------------------------------------------------------------------------------
@RUN
@given(query=hostile, limit=st.one_of(st.integers(-5, 2_000), st.sampled_from([None, 1.5, "10", True])))
def test_search_queries(vault, query, limit):
    count("search")
    m, brain = vault["manager"], vault["brain"]
    result, _ = outcome(lambda: m.search(query))
    assert result is not None  # any string is a valid query
    assert len(result.ids) == len(set(result.ids))
    rows, error = outcome(lambda: brain.search_intelligent(query, limit=limit))
    if isinstance(limit, int) and not isinstance(limit, bool) and 1 <= limit <= 1_000:
        assert error is None, error
    if rows is not None:
        assert all(isinstance(r["id"], str) for r in rows)


@RUN
@given(query=json_value, mode=json_value, tiers=string_list, names=st.lists(hostile, max_size=3))
def test_search_arguments_of_any_type(vault, query, mode, tiers, names):
    """The agent-facing call takes any JSON value; the Python API takes strings (typed)."""
    count("search args")
    outcome(lambda: vault["brain"].search_intelligent(query, mode=mode, tiers=tiers))
    result, _ = outcome(lambda: vault["manager"].search("rotate keys", tiers=names))
    assert result is not None or any(n not in vault["manager"].tiers for n in names)


# -- filters -----------------------------------------------------------------------------
def filter_value(valid: list[str]) -> st.SearchStrategy:
    """None, valid values, or hostile strings/lists/any JSON."""
    good = st.sampled_from(valid)
    return st.one_of(st.none(), good, st.lists(st.one_of(good, hostile), max_size=3), string_list)


@RUN
@given(type_=filter_value(list(ENTRY_TYPES)), domain=filter_value(["security", "i18n"]),
       severity=filter_value(list(SEVERITIES)), origin=filter_value(["agent", "user", "pack"]),
       tags=filter_value(["jwt", "sql"]), expired=json_value)
def test_filter_arguments(type_, domain, severity, origin, tags, expired):
    count("filter args")
    outcome(lambda: Filters.build(type=type_, domain=domain, severity=severity, origin=origin,
                                  tags=tags, include_expired=expired))


# Domain and tag filters are free-form: every hostile string that passes validation is a
# value that reaches SQL (as a parameter) and the in-memory mask.
free = st.one_of(st.sampled_from(["security", "databases", "i18n", "jwt", "sql", "unicode"]),
                 hostile, st.lists(hostile, max_size=3))


@RUN
@given(type_=st.one_of(st.none(), st.sampled_from(ENTRY_TYPES)),
       severity=st.one_of(st.none(), st.sampled_from(SEVERITIES)), domain=free, tags=free,
       query=st.sampled_from(["jwt", "sql values", "retry", "ünïcödé", ""]))
def test_filters(vault, type_, domain, severity, tags, query):
    count("filters")
    filters, error = outcome(lambda: Filters.build(type=type_, domain=domain, severity=severity,
                                                   tags=tags))
    if error is not None:
        return
    count("filters valid")
    m = vault["manager"]
    found, _ = outcome(lambda: m.search(query or "rotate", filters=filters))
    assert found is not None
    for tier in m.ordered():
        store = tier.store
        # The SQL path (filter values become parameters) and the mirror path agree.
        fts, _ = outcome(lambda: store.search_fts(["rotate", "sql", "retry", "titles"], filters, 50))
        listed, _ = outcome(lambda: store.list_entries(filters=filters, limit=1_000))
        assert fts is not None and listed is not None
        for entry in listed:
            assert not filters.domains or entry.domain in filters.domains
            assert not filters.types or entry.type in filters.types
            assert not filters.tags or set(entry.tags) & set(filters.tags)
    rows, _ = outcome(lambda: vault["brain"].search_intelligent(
        query or "rotate", domain=domain, type=type_, severity=severity, tags=tags))
    if rows is not None:
        for r in rows:
            assert not filters.domains or r["domain"] in filters.domains


# -- capture -----------------------------------------------------------------------------
FIELDS = ["id", "title", "description", "type", "domain", "context", "example", "counter_example",
          "why", "tags", "applies_to", "severity", "origin", "valid_from", "valid_until",
          "created_at", "updated_at", "content_hash", "links", "unknown_field"]
TEXT_FIELDS = ["title", "description", "context", "example", "counter_example", "why", "domain"]
valid_record = st.fixed_dictionaries(
    {"id": st.from_regex(r"[a-z0-9][a-z0-9._-]{0,30}", fullmatch=True),
     "title": st.just("A title"), "description": st.just("Some text")},
    optional={"type": st.sampled_from(ENTRY_TYPES), "severity": st.sampled_from(SEVERITIES),
              "tags": st.lists(st.sampled_from(["jwt", "sql", "x-y", "ünï", "🙂"]), max_size=3),
              "valid_until": st.sampled_from(["2099-01-01T00:00:00Z", 4_000_000_000])})
# A valid record with hostile text in some fields (often still valid) and, now and then,
# any JSON value in any field (mostly invalid): both sides of validation get exercised.
record = st.builds(lambda base, text, other: {**base, **text, **other}, valid_record,
                   st.dictionaries(st.sampled_from(TEXT_FIELDS), hostile, max_size=3),
                   st.one_of(st.just({}), st.just({}),
                             st.dictionaries(st.sampled_from(FIELDS), json_value, max_size=3)))


@RUN
@given(rec=record, tier=st.sampled_from(["agent", "project", "pack", "nope", "", "../agent"]))
def test_capture_any_record(vault, rec, tier):
    count("capture")
    m = vault["manager"]

    def capture() -> Entry:
        entry = Entry.from_dict({k: v for k, v in rec.items() if k not in ("links", "content_hash")})
        return m.capture(entry, tier)

    stored, error = write_outcome(vault, capture)
    count("capture stored" if stored is not None else "capture refused")
    if tier == "pack":
        assert error is not None  # a read-only source refuses every write
    if stored is not None:
        # What was stored is exactly what was sent, and the FTS index agrees with it.
        again = m.store(tier).get(stored.id)
        assert again == stored and again.content_hash == stored.compute_hash()
        assert m.store(tier).integrity_problems() == []


@RUN
@given(lines=st.lists(st.one_of(hostile, record.map(json.dumps), st.just("{\"title\": \"\\ud800\", "
                                                                       "\"description\": \"x\"}")),
                      max_size=5),
       strict=st.booleans())
def test_jsonl_import_lines(vault, lines, strict):
    count("import")
    text = "\n".join(line.replace("\n", " ") for line in lines)
    report, error = write_outcome(vault, lambda: import_lines(vault["manager"], "project",
                                                              io.StringIO(text), strict=strict))
    if report is not None:
        assert report.read >= len(report.errors)


# -- links, feedback, memories -----------------------------------------------------------
ids = st.one_of(st.sampled_from(["jwt-rotation", "sql-params", "retry-backoff-project"]), hostile,
                json_value)


@RUN
@given(source=ids, target=ids, link_type=st.one_of(st.sampled_from(LINK_TYPES), json_value),
       note=st.one_of(st.just(""), hostile, json_value),
       tier=st.sampled_from([None, "agent", "project", "pack", "x"]))
def test_links(vault, source, target, link_type, note, tier):
    count("link")
    write_outcome(vault, lambda: vault["manager"].link(source, target, link_type, note, tier=tier))


@RUN
@given(query=st.one_of(st.just("jwt keys"), hostile, json_value), entry_id=ids,
       action=st.one_of(st.sampled_from(FEEDBACK_ACTIONS), json_value))
def test_feedback(vault, query, entry_id, action):
    count("feedback")
    write_outcome(vault, lambda: vault["brain"].feedback(query, entry_id, action))
    write_outcome(vault, lambda: vault["manager"].store("agent").add_feedback(query, entry_id, action))


@RUN
@given(summary=st.one_of(st.just("deploy failed"), hostile, json_value),
       context=st.one_of(st.just(""), hostile, json_value), topics=string_list,
       project=st.one_of(st.just(""), hostile, json_value))
def test_memories(vault, summary, context, topics, project):
    count("memory")
    store = vault["manager"].store("agent")
    write_outcome(vault, lambda: store.add_memory(summary, context=context, topics=topics,
                                                  project=project))
    outcome(lambda: vault["brain"].search_intelligent(summary if isinstance(summary, str) else "x",
                                                      include_memories=True))


# -- explicit: injection strings are values ------------------------------------------------
INJECTIONS = ["x' OR '1'='1", "); DROP TABLE entries; --", "'; DELETE FROM entries; --",
              "\" OR 1=1 --", "' UNION SELECT id FROM entries --"]


def test_injection_strings_are_just_values(tmp_path):
    m = VaultManager.at({"agent": str(tmp_path / "a.db")})
    m.capture_many([Entry.from_dict(r) for r in SEED], "agent")
    # One entry carries an injection string (no spaces: a domain and a tag may not have any).
    target = m.capture(Entry.from_dict({"id": "target", "title": "Target entry",
                                        "description": "); DROP TABLE entries; --",
                                        "domain": "x'OR'1'='1", "tags": ["');DROP", "--"]}), "agent")
    store = m.store("agent")
    total = store.count()
    for value in INJECTIONS:
        filters = Filters.build(domain=value, tags=[value])
        assert m.search("rotate sql entry", filters=filters).ids == []
        assert store.search_fts(["rotate", "sql", "entry"], filters, 10).ids == []
        assert store.list_entries(filters=filters) == []
        assert store.get(value) is None and m.get_many([value]) == {}
        assert m.search(value).ids in ([], ["target"], ["sql-params"], ["target", "sql-params"],
                                       ["sql-params", "target"])
    # The value is matched literally, and only literally.
    for filters in (Filters.build(domain="x'OR'1'='1"), Filters.build(tags=["');DROP"])):
        assert m.search("target entry", filters=filters).ids == ["target"]
        assert store.search_fts(["target"], filters, 10).ids == ["target"]
        assert [e.id for e in store.list_entries(filters=filters)] == ["target"]
    assert store.get("target") == target
    assert store.count() == total  # nothing deleted, every table still there
    names = {r[0] for r in store.db.query("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"entries", "links", "feedback", "meta", "memories"} <= names
    assert store.integrity_problems() == []
    m.close()


def test_read_only_source_refuses_every_write(vault):
    m = vault["manager"]
    store = m.store("pack")
    before = checksum(vault["root"])
    entry = Entry.from_dict(SEED[1])
    for write in (lambda: m.capture(entry, "pack"), lambda: m.capture_many([entry], "pack"),
                  lambda: m.delete("jwt-rotation", "pack"),
                  lambda: m.link("jwt-rotation", "sql-params", "supports", tier="pack"),
                  lambda: store.unlink("jwt-rotation", "sql-params"),
                  lambda: store.add_feedback("q", "jwt-rotation", "accepted"),
                  lambda: store.add_memory("summary")):
        with pytest.raises(ReadOnlyTier, match="read-only"):
            write()
    assert checksum(vault["root"]) == before
