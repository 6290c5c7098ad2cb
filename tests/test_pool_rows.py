"""The pool's light rows read once a tier (brain/pool.py ``Pool.read_rows``).

An FTS-only scan reads its candidates' light rows in the expand stage, in the same
statement per tier as its graph neighbours' rows; a hybrid scan reads its vector hits'
rows with the candidates'. These tests count the statements on real tier files and
compare every answer with the read of before (the candidates' rows read in the gather
stage, the neighbours' by ``add_external`` itself: ``rows_wait_for_neighbours`` False,
the path PRF and modulated scans take): neighbours held by two tiers, neighbours the
filters refuse, a neighbour deleted in a higher tier, and a candidate deleted or
rewritten by another process between the search and the read.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tiervault.brain import Brain, stages
from tiervault.brain.pool import Pool
from tiervault.brain.vectors import VectorMatch
from tiervault.embeddings.providers.hash import HashEmbedder
from tiervault.vault import light_feed
from tiervault.vault.manager import VaultManager

from brain_vault import NOW, at_a_day_old as E, filler, fixed_brain

TIERS = ("agent", "project", "team")
LIGHT_READ = "substr(e.description, 1, "  # the light-row statement (vault/sqlite_sql.py)


def _build(folder: Path) -> None:
    """Three tiers: kafka entries (seeds) linked to neighbours in every tier, one
    neighbour id held by two tiers, one neighbour of another type, filler for idf."""
    manager = VaultManager.at({t: str(folder / f"{t}.db") for t in TIERS})
    try:
        manager.capture_many(filler(40), tier="team")
        manager.capture_many(filler(20, prefix="pfill"), tier="project")
        manager.capture(E(id="lag", title="Kafka consumer lag alerts",
                          description="Alert when kafka consumer lag grows."), tier="agent")
        manager.capture(E(id="rebalance", title="Kafka consumer rebalance storms",
                          description="Consumer group rebalances stall kafka consumers."),
                        tier="project")
        manager.capture(E(id="retention", title="Kafka retention sizing",
                          description="Size kafka retention by consumer lag budget."), tier="team")
        for tier, title in (("agent", "Partition keys (agent copy)"),
                            ("team", "Partition keys (team copy)")):
            manager.capture(E(id="twin", title=title, description="Choose partition keys."),
                            tier=tier)
        manager.capture(E(id="hop-team", title="Broker disk alarms",
                          description="Disks fill before retention."), tier="team")
        manager.capture(E(id="hop-project", title="Schema registry", type="decision",
                          description="One registry per cluster."), tier="project")
        manager.capture(E(id="hop2", title="Cluster sizing sheet",
                          description="Spreadsheet of brokers."), tier="team")
        manager.capture(E(id="gone-agent", title="Old broker notes",
                          description="Notes on brokers."), tier="team")
        manager.link("twin", "lag", "supports", tier="team")  # the team's twin links
        manager.link("lag", "hop-team", "extends")
        manager.link("rebalance", "hop-project", "supports")
        manager.link("hop-team", "hop2", "sequences")
        manager.link("retention", "gone-agent", "supports")
    finally:
        manager.close()


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("pool-rows")
    _build(folder)
    return folder


def _open(built: Path, to: Path, records: bool = False) -> VaultManager:
    """A manager over a fresh copy of the built tiers (each test writes its own); without
    ``records`` the mirrors keep no light records (vault/light_records.py): every light
    row is read from SQL, the pool's statements are the ones counted here."""
    shutil.copytree(built, to)
    if not records:
        for cache in to.glob("*.postings.mirror"):
            cache.unlink()
    return VaultManager.at({t: str(to / f"{t}.db") for t in TIERS})


@pytest.fixture(autouse=True)
def _no_records(monkeypatch):
    """Mirrors built without light records unless a test says otherwise."""
    monkeypatch.setattr(light_feed, "RECORDS_MAX_ROWS", -1)


def _light_reads(manager: VaultManager) -> Counter[str]:
    """Light-row statements per tier, counted from now on (SQLite's trace)."""
    return _statements(manager, LIGHT_READ)


def _statements(manager: VaultManager, marker: str) -> Counter[str]:
    """Statements holding ``marker`` per tier, counted from now on (SQLite's trace)."""
    seen: Counter[str] = Counter()
    for tier in manager.ordered():
        tier.store.db.conn.set_trace_callback(
            lambda sql, name=tier.name: seen.update([name] if marker in sql else []))
    return seen


def _early(monkeypatch: pytest.MonkeyPatch) -> None:
    """The read of before: the candidates' rows in gather, the others' (vector hits, graph
    neighbours) by ``add_external`` itself."""
    read_rows = Pool.read_rows

    def candidates_only(pool, manager, tiers, extra=()):
        return read_rows(pool, manager, tiers)

    monkeypatch.setattr(stages, "rows_wait_for_neighbours", lambda ctx: False)
    monkeypatch.setattr(Pool, "read_rows", candidates_only)


QUERIES = [("kafka consumer lag", {}), ("kafka consumer", {"type": "pattern"}),
           ("kafka retention consumer", {"tags": ["nothing"]}), ("partition keys kafka", {}),
           ("kafka", {"not_type": "decision"})]


def _answers(b: Brain) -> list:
    return [(b.search_intelligent(q, explain=True, **kw),
             b.search_intelligent(q, mode="full", explain=True, **kw)) for q, kw in QUERIES]


def test_a_scan_reads_each_tiers_light_rows_once_with_its_graph_neighbours(built, tmp_path):
    manager = _open(built, tmp_path / "v")
    try:
        b = fixed_brain(manager)
        b.search_intelligent("kafka consumer lag")  # mirrors and link graphs built
        reads = _light_reads(manager)
        rows = {r["id"]: r for r in b.search_intelligent("kafka consumer lag", explain=True)}
        assert {"twin", "hop-team", "hop2"} <= set(rows)  # neighbours joined (1 and 2 hops)
        assert rows["twin"]["explain"]["via"] == "graph"
        assert reads and max(reads.values()) == 1, reads  # before: 2 in a tier with neighbours
    finally:
        manager.close()


def test_with_light_records_a_scan_reads_no_light_row_from_sql(built, tmp_path, monkeypatch):
    # issue 16 session 20: the mirrors' light records answer every base row
    monkeypatch.setattr(light_feed, "RECORDS_MAX_ROWS", 150_000)
    with_records, without = _open(built, tmp_path / "r", records=True), _open(built, tmp_path / "s")
    try:
        answers = []
        for manager in (with_records, without):
            b = fixed_brain(manager)
            b.search_intelligent("kafka consumer lag")  # mirrors (with records or not) built
            monkeypatch.setattr(light_feed, "RECORDS_MAX_ROWS", -1)
            reads = _light_reads(manager)
            answers.append((_answers(b), sum(reads.values())))
        assert answers[0][0] == answers[1][0]
        assert answers[0][1] == 0 and answers[1][1] > 0
    finally:
        with_records.close()
        without.close()


def test_every_answer_equals_the_read_of_before(built, tmp_path, monkeypatch):
    new, old = _open(built, tmp_path / "new"), _open(built, tmp_path / "old")
    try:
        got = _answers(fixed_brain(new))
        _early(monkeypatch)
        assert got == _answers(fixed_brain(old))
        scan = {r["id"]: r for r in got[0][0]}
        # the twin from the higher-priority tier holding it; a neighbour the filters refuse
        # (hop-project is a decision) stays out
        assert scan["twin"]["tier"] == "agent" and scan["twin"]["title"].endswith("(agent copy)")
        assert "hop-project" in scan and scan["hop-project"]["explain"]["via"] == "graph"
        assert "hop-project" not in {r["id"] for r in got[4][0]}
    finally:
        new.close()
        old.close()


def _other_process(db: Path, code: str) -> None:
    """Run ``code`` with ``conn`` = a plain sqlite3 connection, or ``store`` = a TierStore,
    on ``db`` in a new Python process (another writer of the file)."""
    script = ("import sys, sqlite3\nfrom tiervault.vault.store import TierStore\n"
              "conn = sqlite3.connect(sys.argv[1])\nstore = TierStore(sys.argv[1], name='x')\n"
              f"{code}\nconn.commit()\nconn.close()\nstore.close()\n")
    subprocess.run([sys.executable, "-c", script, str(db)], check=True, timeout=120)


WRITES = {
    # a seed deleted (its links cascade): it leaves the pool, the seeds change
    "deleted": ("agent", "store.delete('lag')"),
    # timestamps the model refuses, written by outside SQL: the light row is refused
    "refused": ("team", "conn.execute(\"UPDATE entries SET created_at = 1e300 WHERE id = 'retention'\")"),
}


@pytest.mark.parametrize("write", sorted(WRITES))
def test_a_candidate_gone_between_the_search_and_the_read_leaves_as_before(
        built, tmp_path, monkeypatch, write):
    tier, code = WRITES[write]
    answers = []
    for name in ("new", "old"):
        manager = _open(built, tmp_path / name)
        try:
            b = fixed_brain(manager)
            search = manager.search
            done = []

            def search_then_write(*a, **kw):
                out = search(*a, **kw)
                if not done:  # once, right after the search found the candidate
                    done.append(True)
                    _other_process(tmp_path / name / f"{tier}.db", code)
                return out

            monkeypatch.setattr(manager, "search", search_then_write)
            if name == "old":
                _early(monkeypatch)
            answers.append(b.search_intelligent("kafka consumer lag retention", explain=True))
        finally:
            manager.close()
    new, old = answers
    assert new == old
    gone = "lag" if write == "deleted" else "retention"
    assert gone not in {r["id"] for r in new} and len(new) > 3


@pytest.mark.parametrize("write", sorted(WRITES))
def test_with_light_records_a_search_answers_its_generation_and_the_next_sees_the_write(
        built, tmp_path, monkeypatch, write):
    """The light records answer from the mirror the search caught up (its read scope,
    vault/read_scope.py), as the search's other reads of it: a write another process
    commits mid-search is seen by the next search, whose rows come from SQL for it."""
    monkeypatch.setattr(light_feed, "RECORDS_MAX_ROWS", 150_000)
    tier, code = WRITES[write]
    gone = "lag" if write == "deleted" else "retention"
    quiet, manager = _open(built, tmp_path / "quiet", True), _open(built, tmp_path / "w", True)
    try:
        expected = fixed_brain(quiet).search_intelligent("kafka consumer lag retention", explain=True)
        b = fixed_brain(manager)
        search, done = manager.search, []

        def search_then_write(*a, **kw):
            out = search(*a, **kw)
            if not done:
                done.append(True)
                _other_process(tmp_path / "w" / f"{tier}.db", code)
            return out

        monkeypatch.setattr(manager, "search", search_then_write)
        got = b.search_intelligent("kafka consumer lag retention", explain=True)
        assert gone in {r["id"] for r in expected} and len(got) > 3
        if write == "refused":  # the row of the generation ranked (a delete's cascade of
            assert got == expected  # links may be read by the graph hops after it)
        after = b.search_intelligent("kafka consumer lag retention", explain=True)
        assert gone not in {r["id"] for r in after} and len(after) > 3
    finally:
        quiet.close()
        manager.close()


def test_a_neighbour_deleted_in_a_higher_tier_comes_from_the_next(built, tmp_path, monkeypatch):
    answers = []
    for name in ("new", "old"):
        manager = _open(built, tmp_path / name)
        try:
            with sqlite3.connect(tmp_path / name / "agent.db") as conn:  # outside SQL: the
                conn.execute("DELETE FROM entries WHERE id = 'twin'")  # mirror still holds it
            if name == "old":
                _early(monkeypatch)
            answers.append(fixed_brain(manager).search_intelligent("kafka consumer lag",
                                                                   explain=True))
        finally:
            manager.close()
    assert answers[0] == answers[1]
    twin = next(r for r in answers[0] if r["id"] == "twin")
    assert twin["tier"] == "team" and twin["explain"]["via"] == "graph"


class HashVectors:
    """A VectorSource over the offline hash embedder (brute force over every tier)."""

    def __init__(self, manager: VaultManager) -> None:
        self.embedder = HashEmbedder(dim=64)
        self.vecs = {(t.name, e.id): self.embedder.embed([f"{e.title}\n{e.description}"])[0]
                     for t in manager.ordered() for e in t.store.iter_entries()}

    def embed_query(self, query: str) -> np.ndarray:
        return self.embedder.embed([query], "query")[0]

    def similarities(self, qv: np.ndarray, tier: str, ids: list[str]) -> np.ndarray:
        return np.array([float(self.vecs[(tier, i)] @ qv) if (tier, i) in self.vecs else np.nan
                         for i in ids])

    def prefetch(self, qv: np.ndarray, tiers: list[str]) -> bool:
        return False  # a hint: nothing to start here

    def search(self, qv: np.ndarray, k: int, tiers: list[str], filters) -> list[VectorMatch]:
        hits = sorted(((float(v @ qv), t, i) for (t, i), v in self.vecs.items() if t in tiers),
                      reverse=True)[:k]
        return [VectorMatch(i, t, s) for s, t, i in hits]


def _hybrid_new_and_old(built, tmp_path, old: Callable[[], None], marker: str,
                        ask: Callable[[Brain], list]) -> tuple[list[list], list[int]]:
    """``ask``'s answers from a hybrid Brain over two copies of ``built`` and the
    statements holding ``marker`` they made: "new" as the code is, "old" after ``old()``
    patched in the code of before (after one warm-up search)."""
    answers, reads = [], []
    for name in ("new", "old"):
        manager = _open(built, tmp_path / name)
        try:
            b = Brain(manager, fixed_brain(manager).settings, vectors=HashVectors(manager),
                      clock=lambda: NOW)
            b.search_intelligent("kafka consumer lag")
            if name == "old":
                old()
            seen = _statements(manager, marker)
            answers.append(ask(b))
            reads.append(sum(seen.values()))
        finally:
            manager.close()
    return answers, reads


def test_a_hybrid_scan_reads_its_vector_hits_with_the_candidates(built, tmp_path, monkeypatch):
    answers, reads = _hybrid_new_and_old(
        built, tmp_path, lambda: _early(monkeypatch), LIGHT_READ,
        lambda b: [b.search_intelligent(q, explain=True, **kw) for q, kw in QUERIES])
    assert answers[0] == answers[1]
    assert any(r["explain"]["via"] == "vector" for rows in answers[0] for r in rows)
    assert reads[0] < reads[1]  # the vector hits' statements are gone


TEXTS_READ = "e.id, e.title, e.description, e.context, e.tags FROM"  # store.field_texts


def test_a_hybrid_scan_reads_proximitys_texts_with_its_light_rows(built, tmp_path, monkeypatch):
    # issue 16 session 18: the pool keeps each row's FieldTexts from its light-row
    # statements; term proximity then reads no entry again. "old" forces keep_texts off
    # before the pool's first read (its own field_texts statements, the code of before).
    read_rows = Pool.read_rows

    def texts_off(pool, *a, **kw):
        pool.keep_texts = False
        return read_rows(pool, *a, **kw)

    def ask(b: Brain) -> list:
        assert b.config.hybrid_proximity_weight > 0
        return [b.search_intelligent(q, mode=mode, explain=True, **kw)
                for q, kw in QUERIES for mode in ("scan", "full")]

    answers, reads = _hybrid_new_and_old(
        built, tmp_path, lambda: monkeypatch.setattr(Pool, "read_rows", texts_off), TEXTS_READ, ask)
    assert answers[0] == answers[1]
    assert any(r["explain"]["via"] == "vector" for rows in answers[0][::2] for r in rows)
    assert reads[1] > 0 and reads[0] == 0, reads
