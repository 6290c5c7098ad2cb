"""The storage contract's browsing (the curator pages), against every registered backend:
orders, pages, totals, facets, sweeps, links by type, the vocabulary of facets.
"""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tiervault.errors import ValidationError
from tiervault.vault.entry import ENTRY_TYPES, SEVERITIES, Entry
from tiervault.vault.filter_compile import matches
from tiervault.vault.filters import Filters
from tiervault.vault.rows import FacetCounts, LightPage, Link, TitleRow

from tier_contract import entry, open_tier, terms_of, tier  # fixtures and builders


NOW = 1_800_000_000.0
MOMENTS = tuple(NOW + d * 86_400.0 for d in (-30, -10, -1, 0, 5))
DOMAINS = ("net", "db", "ui")
TAGS = ("a", "b", "c", "d")

browse_entry = st.fixed_dictionaries({
    "type": st.sampled_from(ENTRY_TYPES), "domain": st.sampled_from(DOMAINS),
    "severity": st.sampled_from(SEVERITIES), "tags": st.lists(st.sampled_from(TAGS), max_size=3, unique=True),
    "updated_at": st.sampled_from(MOMENTS[:4]),
    "valid_until": st.one_of(st.none(), st.none(), st.sampled_from(MOMENTS)),
    "description": st.sampled_from(["x", "short", "a longer description " * 8]),
})
_BROWSE_FILTERS = {
    "type": st.lists(st.sampled_from(ENTRY_TYPES), min_size=1, max_size=2, unique=True),
    "domain": st.lists(st.sampled_from(DOMAINS + ("nowhere",)), min_size=1, max_size=2, unique=True),
    "tags": st.lists(st.sampled_from(TAGS), min_size=1, max_size=2, unique=True),
    "not_tags": st.lists(st.sampled_from(TAGS), min_size=1, max_size=1),
    "updated_after": st.sampled_from(MOMENTS), "include_expired": st.booleans(),
}
browse_filters = st.one_of(st.none(), st.lists(st.sampled_from(sorted(_BROWSE_FILTERS)), max_size=2,
                                               unique=True).flatmap(
    lambda keys: st.fixed_dictionaries({k: _BROWSE_FILTERS[k] for k in keys})))


def _ranked(counts: Counter) -> dict[str, int]:
    return dict(sorted(((k, v) for k, v in counts.items() if v), key=lambda kv: (-kv[1], kv[0])))


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(fields=st.lists(browse_entry, min_size=1, max_size=14),
       cuts=st.lists(st.integers(1, 13), max_size=3), edits=st.lists(st.integers(0, 13), max_size=4),
       gone=st.lists(st.integers(0, 13), max_size=2), filter_args=browse_filters,
       order=st.sampled_from(["newest", "updated"]), offset=st.integers(0, 6),
       limit=st.integers(0, 5))
def test_pages_facets_and_sweeps_equal_a_model_of_the_writes(tier, fields, cuts, edits, gone,
                                                             filter_args, order, offset, limit):
    """Random entries written in random batches, some rewritten and some deleted: every
    backend's page (order, filters, offset, limit), total, facet counts and title sweep
    equal the ones a model of those writes gives."""
    tier.delete_many([r.id for r in tier.title_rows(0, 10_000)])  # the tier of the last example
    def make(i: int, title: str) -> Entry:
        return Entry.create(id=f"e{i}", title=title, created_at=fields[i]["updated_at"] - 100.0,
                            **fields[i])

    entries = [make(i, f"note {i}") for i in range(len(fields))]
    written: dict[str, int] = {}  # id -> the write (generation order) that last changed it
    bounds = sorted({0, len(entries), *(c for c in cuts if c < len(entries))})
    for n, (lo, hi) in enumerate(zip(bounds, bounds[1:])):  # one transaction per batch
        assert tier.capture_many(entries[lo:hi]) == hi - lo
        written.update({e.id: n for e in entries[lo:hi]})
    for n, i in enumerate(edits, start=len(bounds)):  # a rewrite keeps the entry's place
        if i < len(entries):
            entries[i] = make(i, f"edited {n}")
            tier.capture(entries[i])
            written[entries[i].id] = n
    dead = {f"e{i}" for i in gone}
    tier.delete_many(sorted(dead))
    live = [e for e in entries if e.id not in dead]
    filters = Filters.build(now=NOW, **filter_args) if filter_args is not None else None
    passing = [e for e in live if filters is None or matches(filters, SimpleNamespace(
        id=e.id, type=e.type, domain=e.domain, severity=e.severity, origin=e.origin,
        tags=e.tag_text, updated_at=e.updated_at, valid_from=e.valid_from,
        valid_until=e.valid_until))]
    rank = {e.id: i for i, e in enumerate(entries)}  # insertion order (rewrites keep it)
    if order == "newest":
        expected = sorted(passing, key=lambda e: -rank[e.id])
    else:
        expected = sorted(passing, key=lambda e: (-written[e.id], -rank[e.id]))

    page = tier.light_page(order=order, filters=filters, offset=offset, limit=limit, snippet_chars=7)
    assert isinstance(page, LightPage) and page.total == len(passing)
    assert [r.id for r in page.rows] == [e.id for e in expected[offset:offset + limit]]
    assert page.rows == [tier.light_rows([r.id], 7)[r.id] for r in page.rows]  # the same rows

    facets = tier.facet_counts(filters)
    assert isinstance(facets, FacetCounts) and facets.total == len(passing)
    assert facets.by_type == {t: sum(e.type == t for e in passing) for t in ENTRY_TYPES}
    assert facets.by_severity == {s: sum(e.severity == s for e in passing) for s in SEVERITIES}
    assert facets.by_domain == _ranked(Counter(e.domain for e in passing))
    assert facets.by_tag == _ranked(Counter(t for e in passing for t in e.tags))

    swept: list[TitleRow] = []
    while True:  # the review's sweep, 3 rows a call
        rows = tier.title_rows(swept[-1].key if swept else 0, 3)
        swept.extend(rows)
        if len(rows) < 3:
            break
    assert [(r.id, r.title) for r in swept] == [(e.id, e.title) for e in live]
    assert [r.key for r in swept] == sorted({r.key for r in swept})
    assert [r.content_hash for r in swept] == [tier.get(e.id).content_hash for e in live]


def test_links_of_type_newest_first(open_tier):
    agent, team = open_tier("agent"), open_tier("team")
    agent.capture_many([entry(f"a{i}") for i in range(4)])
    agent.link("a0", "a1", "contradicts", "first")
    agent.link("a2", "t9", "contradicts", "across tiers")
    agent.link("a1", "a3", "supports")
    agent.link("a3", "a0", "contradicts", "last")
    found = agent.links_of_type("contradicts")
    assert [(l.source_id, l.target_id, l.note) for l in found] == \
        [("a3", "a0", "last"), ("a2", "t9", "across tiers"), ("a0", "a1", "first")]
    assert all(isinstance(l, Link) and l.tier == "agent" and l.link_type == "contradicts" for l in found)
    assert [l.source_id for l in agent.links_of_type("contradicts", 2)] == ["a3", "a2"]
    assert [l.source_id for l in agent.links_of_type("supports")] == ["a1"]
    assert agent.links_of_type("extends") == [] and team.links_of_type("contradicts") == []
    with pytest.raises(ValidationError):
        agent.links_of_type("likes")


def test_browse_arguments_are_refused_alike(tier):
    tier.capture(entry("a"))
    for bad in (lambda: tier.light_page(order="oldest"), lambda: tier.light_page(limit=-1),
                lambda: tier.light_page(limit=1_001), lambda: tier.light_page(offset=-3),
                lambda: tier.title_rows(0, 10_001), lambda: tier.links_of_type("contradicts", -1)):
        with pytest.raises(ValidationError):
            bad()
    assert tier.light_page(limit=0) == LightPage([], 1)


def test_a_new_tier_browses_as_empty(tier):
    assert tier.light_page() == LightPage([], 0) and tier.title_rows() == []
    empty = tier.facet_counts()
    assert empty.total == 0 and empty.by_domain == {} and empty.by_tag == {}
    assert empty.by_type == dict.fromkeys(ENTRY_TYPES, 0)
    assert tier.links_of_type("contradicts") == []


def test_vocabulary_is_the_same_before_and_after_the_mirror_is_built(open_tier):
    """A backend may answer ``vocabulary`` from its search mirror once it holds one:
    the answer is the one a fresh handle (no mirror yet) gives."""
    writer = open_tier("agent")
    writer.capture_many([entry("a", domain="net", tags=("x", "y")), entry("b", domain="net", tags=("x",)),
                         entry("c", domain="db", type="rule", severity="critical")])
    fresh = open_tier("agent").vocabulary()
    stems, _ = terms_of("title")
    writer.term_stats(stems)  # a search: the mirror is in memory now
    warm = writer.vocabulary()
    assert fresh == warm
    assert warm["domains"] == {"net": 2, "db": 1} and warm["tags"] == {"x": 2, "y": 1}
    assert warm["types"] == {"pattern": 2, "rule": 1}
    assert warm["severities"] == {"suggestion": 2, "critical": 1}
