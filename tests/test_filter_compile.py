"""One Filters value, four forms: SQLite SQL, PostgreSQL SQL, the mirror mask and the
row predicate select the same entries on random data (real SQLite files, a real
PostgreSQL tier, the mirror built from them, the light rows they return)."""

from __future__ import annotations

import itertools
import math
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tiervault.errors import QueryError
from tiervault.vault.entry import ENTRY_TYPES, ORIGINS, SEVERITIES, Entry, format_timestamp
from tiervault.vault.filter_compile import (matches, memory_matches, row_test, to_postgres, to_sqlite)
from tiervault.vault.filters import Filters
from tiervault.vault.rows import LightRow, MemoryHit
from tiervault.vault.store import TierStore
from tiervault.vault.tokenizer import STEMMER

NOW = 1_800_000_000.0
BODY = STEMMER.stems(["body"])["body"]
DOMAINS = ("net", "db", "ui")
TAGS = ("a", "b", "c", "d")
# Few distinct instants, so bounds often fall exactly on a stored value (>= vs >, < vs <=).
MOMENTS = tuple(NOW + d * 86_400.0 for d in (-30, -10, -1, 0, 5))

entry_fields = st.fixed_dictionaries({
    "type": st.sampled_from(ENTRY_TYPES), "domain": st.sampled_from(DOMAINS),
    "severity": st.sampled_from(SEVERITIES), "origin": st.sampled_from(ORIGINS),
    "tags": st.lists(st.sampled_from(TAGS), max_size=3, unique=True),
    "updated_at": st.sampled_from(MOMENTS[:4]),
    "valid_from": st.one_of(st.none(), st.none(), st.sampled_from(MOMENTS)),
    "valid_until": st.one_of(st.none(), st.none(), st.sampled_from(MOMENTS)),
})


def _some(values, most=2):
    return st.lists(st.sampled_from(values), min_size=1, max_size=most, unique=True)


_FILTER_VALUES = {
    # up to every type: the mirror's member test compares a few codes, gathers more
    "type": _some(ENTRY_TYPES, len(ENTRY_TYPES)), "domain": _some(DOMAINS + ("nowhere",)),
    "severity": _some(SEVERITIES), "origin": _some(ORIGINS), "tags": _some(TAGS + ("zz",)),
    "not_type": _some(ENTRY_TYPES, len(ENTRY_TYPES)), "not_domain": _some(DOMAINS + ("nowhere",)),
    "not_tags": _some(TAGS), "exclude_ids": _some(tuple(f"e{i}" for i in range(12)) + ("ghost",)),
    "updated_after": st.sampled_from(MOMENTS), "updated_before": st.sampled_from(MOMENTS),
    "include_expired": st.booleans(), "include_future": st.booleans(),
}
# A few filters at a time, so that many examples still select something.
filter_args = st.lists(st.sampled_from(sorted(_FILTER_VALUES)), max_size=3, unique=True).flatmap(
    lambda keys: st.fixed_dictionaries({k: _FILTER_VALUES[k] for k in keys}))


def _entries(fields: list[dict]) -> list[Entry]:
    out = []
    for i, f in enumerate(fields):
        f = dict(f)
        if f["valid_from"] is not None and f["valid_until"] is not None \
                and f["valid_until"] <= f["valid_from"]:
            f["valid_until"] = None
        out.append(Entry.create(id=f"e{i}", title=f"note {i}", description=f"body {i}",
                                created_at=f["updated_at"] - 100.0, **f))
    return out


def _filters(args: dict) -> Filters | None:
    try:
        return Filters.build(now=NOW, **args)
    except QueryError:  # updated_before <= updated_after: refused, nothing to compare
        return None


def _mask_ids(store, filters: Filters) -> set[str]:
    view = store.filter_mask(filters)
    return {view.ids[i] for i in range(len(view.ids)) if view.mask[i]}


@pytest.fixture(scope="module")
def counter():
    return itertools.count()


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(fields=st.lists(entry_fields, min_size=1, max_size=12), args=filter_args)
def test_every_form_selects_the_same_entries(fields, args, tmp_path, pg_tier, counter):
    filters = _filters(args)
    if filters is None:
        return
    entries = _entries(fields)
    sqlite = TierStore(tmp_path / f"t{next(counter)}.db", name="agent")
    try:
        sqlite.capture_many(entries)
        where, params = to_sqlite(filters)
        by_sql = {r[0] for r in sqlite.db.query(f"SELECT e.id FROM entries e WHERE 1 = 1{where}",
                                                params)}
        light = sqlite.light_rows([e.id for e in entries])
        by_predicate = {i for i, row in light.items() if matches(filters, row)}
        by_mask = _mask_ids(sqlite, filters)
        # the mask at a few slots (a query's matching slots) is the full mask's there
        p = sqlite.postings()
        dense = p.mask(filters)
        for at in (np.arange(len(p.ids)), np.arange(0, len(p.ids), 2), np.arange(0)):
            assert p.mask(filters, at).tolist() == dense[at].tolist()
        counted = sqlite.lexical_count([BODY], filters, 1_000)  # every entry says "body"
    finally:
        sqlite.close()
    pg = _pg(pg_tier)
    pg.delete_many([r[0] for r in pg.query("SELECT id FROM entries")])
    pg.capture_many(entries)
    where, params = to_postgres(filters)
    by_pg = {r[0] for r in pg.query(f"SELECT e.id FROM entries e WHERE true{where}", params)}
    by_pg_mask = _mask_ids(pg, filters)
    expected = {e.id for e in entries if _reference(filters, e)}
    assert by_sql == by_predicate == by_mask == by_pg == by_pg_mask == expected
    assert counted == pg.lexical_count([BODY], filters, 1_000) == len(expected)


_PG: list = []


def _pg(pg_tier):
    """One PostgreSQL tier for every example (a schema per example would be slow)."""
    if not _PG:
        _PG.append(pg_tier())
    return _PG[0]


@pytest.fixture(scope="module", autouse=True)
def _forget_pg():
    yield
    _PG.clear()


def _reference(f: Filters, e, now: float = NOW) -> bool:
    """The rules of the vault.filters docstring, written out once more by hand, for an
    Entry or a light row (tags as text); a missing or NaN validity bound never excludes."""
    tags = set(e.tags.split() if isinstance(e.tags, str) else e.tags)
    until = None if e.valid_until is None or math.isnan(e.valid_until) else e.valid_until
    since = None if e.valid_from is None or math.isnan(e.valid_from) else e.valid_from
    return all([
        not f.types or e.type in f.types, not f.domains or e.domain in f.domains,
        not f.severities or e.severity in f.severities, not f.origins or e.origin in f.origins,
        not f.tags or bool(tags & set(f.tags)), e.type not in f.not_types,
        e.domain not in f.not_domains, not tags & set(f.not_tags), e.id not in f.exclude_ids,
        f.updated_after is None or e.updated_at >= f.updated_after,
        f.updated_before is None or e.updated_at < f.updated_before,
        f.include_expired or until is None or until > now,
        f.include_future or since is None or since <= now,
    ])


@settings(max_examples=200, deadline=None)
@given(args=filter_args)
def test_describe_round_trips(args):
    filters = _filters(args)
    if filters is None:
        return
    echoed = filters.describe()
    assert Filters.build(now=NOW, **echoed) == filters
    assert Filters.from_wire({**echoed_wire(filters)}) == filters


def echoed_wire(f: Filters) -> dict:
    import dataclasses
    return {k.name: getattr(f, k.name) for k in dataclasses.fields(f)}


_BOUND = st.one_of(st.none(), st.just(float("nan")), st.sampled_from(MOMENTS))


@settings(max_examples=300, deadline=None)
@given(fields=entry_fields, args=filter_args, until=_BOUND, since=_BOUND, now=st.sampled_from((NOW, None)))
def test_a_bound_row_test_answers_as_the_rules(fields, args, until, since, now):
    """row_test(filters) and matches(filters, .) answer as the rules written out by hand on
    every light row: validity bounds missing, NaN, on the instant or either side of it;
    filters restricting or not; now set or not (then the wall clock: every MOMENT is after it)."""
    try:
        filters = Filters.build(**args) if now is None else Filters.build(now=now, **args)
    except QueryError:
        return
    row = LightRow(fields["tags"] and "e1" or "e2", fields["type"], fields["domain"], fields["severity"],
                   "t", "s", " ".join(fields["tags"]), NOW - 100.0, fields["updated_at"], since, until,
                   "h", 10, fields["origin"])
    expected = _reference(filters, row, NOW if now is not None else time.time())
    assert row_test(filters)(row) == matches(filters, row) == expected


def test_the_bound_test_of_unrestricting_filters_reads_validity_only():
    """Without a restricting field and with ``now`` set, the test reads the two bounds
    only (a row lacking every other attribute is tested), answering as matches."""
    class Bounds:
        def __init__(self, since, until):
            self.valid_from, self.valid_until = since, until

    for include in ({}, {"include_expired": True}, {"include_future": True},
                    {"include_expired": True, "include_future": True}):
        filters = Filters.build(now=NOW, **include)
        for since in (None, float("nan"), NOW - 1, NOW, NOW + 1):
            for until in (None, float("nan"), NOW - 1, NOW, NOW + 1):
                full = LightRow("e", "rule", "net", SEVERITIES[0], "t", "s", "a", 0.0, 0.0, since, until, "h", 1,
                                ORIGINS[0])
                expected = _reference(filters, full)
                assert row_test(filters)(Bounds(since, until)) == matches(filters, full) == expected, \
                    (include, since, until)
    with pytest.raises(AttributeError):  # a restricting filter reads the other fields
        row_test(Filters.build(now=NOW, type=["rule"]))(Bounds(None, None))


def test_dates_are_iso_8601_and_errors_name_the_field():
    f = Filters.build(updated_after="2026-01-31", updated_before="2026-02-01T12:00:00+02:00")
    assert f.describe() == {"updated_after": "2026-01-31T00:00:00Z",
                            "updated_before": "2026-02-01T10:00:00Z"}
    with pytest.raises(QueryError) as err:
        Filters.build(updated_after="last tuesday")
    assert err.value.field == "updated_after" and "ISO 8601" in str(err.value)
    with pytest.raises(QueryError) as err:
        Filters.build(updated_after="2026-02-01", updated_before="2026-01-01")
    assert err.value.field == "updated_before" and "later than" in str(err.value)
    with pytest.raises(QueryError) as err:
        Filters.build(not_type="essay")
    assert err.value.field == "not_type" and "pattern" in str(err.value)
    with pytest.raises(QueryError) as err:
        Filters.from_wire({"types": ["rule"], "drop_table": True})
    assert err.value.field == "filters"


def test_user_values_are_parameters_never_sql_text():
    hostile = "x' OR 1=1 --"
    f = Filters.build(domain=hostile, not_domain=hostile, tags=hostile, not_tags=hostile,
                      exclude_ids=hostile)
    for sql, params in (to_sqlite(f), to_postgres(f)):
        assert hostile not in sql and "OR 1=1" not in sql
        assert any(hostile in str(p) for p in params)


def test_memories_pass_by_topics_ids_and_creation_date():
    m = MemoryHit("m1", "summary", "", "a b", "", NOW - 10.0, 1.0)
    assert memory_matches(Filters(), m)
    assert memory_matches(Filters(tags=("b",), not_types=("rule",), not_domains=("x",)), m)
    assert not memory_matches(Filters(not_tags=("a",)), m)
    assert not memory_matches(Filters(exclude_ids=("m1",)), m)
    assert not memory_matches(Filters(types=("rule",)), m)  # memories have no type
    assert memory_matches(Filters(updated_after=NOW - 10.0), m)
    assert not memory_matches(Filters(updated_before=NOW - 10.0), m)
    assert format_timestamp(NOW) == "2027-01-15T08:00:00Z"


@pytest.mark.parametrize("at", [None, np.array([0, 3, 4, 9, 17, 30, 31], dtype=np.int64)])
def test_the_mirror_member_test_compares_few_codes_and_gathers_many(at):
    """Every subset of types and domains (none known, one, a few: compares; five or
    more: a gather from the vocabulary's table), in and not in, dense and at slots:
    the mask of the slots whose code is one of the values asked."""
    from types import SimpleNamespace

    from tiervault.vault.filter_compile import mirror_mask

    rng = np.random.default_rng(20)
    n, domains = 32, ["net", "db", "ui", "os", "ml", "qa", "ops"]
    m = SimpleNamespace(alive=rng.random(n) < 0.9,
                        type_code=rng.integers(0, len(ENTRY_TYPES), n).astype(np.int8),
                        severity_code=rng.integers(0, len(SEVERITIES), n).astype(np.int8),
                        origin_code=rng.integers(0, len(ORIGINS), n).astype(np.int8),
                        domain_code=rng.integers(0, len(domains), n).astype(np.int32),
                        domains=domains, tags={}, valid_from=np.full(n, np.nan),
                        valid_until=np.full(n, np.nan), updated_at=np.full(n, NOW),
                        slot=lambda entry_id: None)
    sel = slice(None) if at is None else at
    for size in range(len(ENTRY_TYPES) + 1):
        for types in itertools.combinations(ENTRY_TYPES, size):
            want = np.isin(m.type_code, [ENTRY_TYPES.index(t) for t in types])
            got = mirror_mask(Filters(types=types, now=NOW), m, at)
            assert np.array_equal(got, (m.alive & want if types else m.alive)[sel])
            got = mirror_mask(Filters(not_types=types, now=NOW), m, at)
            assert np.array_equal(got, (m.alive & ~want)[sel])
    for size in range(len(domains) + 1):
        for picked in itertools.combinations(domains + ["nowhere"], size):
            want = np.isin(m.domain_code, [domains.index(d) for d in picked if d in domains])
            if picked:
                assert np.array_equal(mirror_mask(Filters(domains=picked, now=NOW), m, at), (m.alive & want)[sel])
            assert np.array_equal(mirror_mask(Filters(not_domains=picked, now=NOW), m, at),
                                  (m.alive & ~want)[sel])
