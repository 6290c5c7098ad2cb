"""A hybrid scan's candidates' evidence read before its vector leg (brain/evidence.py ``early``).

The FTS candidates' cosines and term proximity are read while the scan pool finishes
the int8 scan, kept by (tier, id), and taken by ``cosines`` / ``proximity`` once the vector
hits have joined. These tests compare every number and answer with the order of before
(``early`` a no-op: everything read after the vector leg) on real tier files, and check
that the reads happen before the vector search and are not made twice.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tiervault.brain import Brain, evidence, stages
from tiervault.brain.context import ScoringContext
from tiervault.brain.pool import Pool
from tiervault.config import BrainConfig
from tiervault.brain.vectors import VectorMatch
from tiervault.embeddings.providers.hash import HashEmbedder
from tiervault.vault.filters import Filters
from tiervault.vault.manager import VaultManager
from tiervault.vault.rows import FieldTexts

from brain_vault import NOW, at_a_day_old as E, filler, fixed_brain

TIERS = ("agent", "project", "team")
WORDS = ["connection", "pool", "timeout", "retry", "budget", "replica", "lag", "cache"]


def _build(folder: Path) -> VaultManager:
    """Three tiers with many lexical matches of the queries' word pairs (more than the
    proximity depth), adjacent in some entries and apart in others, and filler."""
    manager = VaultManager.at({t: str(folder / f"{t}.db") for t in TIERS})
    manager.capture_many(filler(30), tier="team")
    n = 0
    for t, tier in enumerate(TIERS):
        for i in range(14):
            a, b = WORDS[(i + t) % 8], WORDS[(i * 3 + 1) % 8]
            near = i % 2 == 0
            desc = (f"Tune the {a} {b} settings." if near else
                    f"The {a} matters here; much later text then names the {b} too.")
            manager.capture(E(id=f"e{n}", title=f"{WORDS[i % 8]} notes {i}", description=desc),
                            tier=tier)
            n += 1
    return manager


class RecordingVectors:
    """A VectorSource over the offline hash embedder (brute force), recording its calls."""

    def __init__(self, manager: VaultManager) -> None:
        self.embedder = HashEmbedder(dim=64)
        self.vecs = {(t.name, e.id): self.embedder.embed([f"{e.title}\n{e.description}"])[0]
                     for t in manager.ordered() for e in t.store.iter_entries()}
        self.calls: list[str] = []

    def embed_query(self, query: str) -> np.ndarray:
        return self.embedder.embed([query], "query")[0]

    def similarities(self, qv: np.ndarray, tier: str, ids: list[str]) -> np.ndarray:
        self.calls.append("similarities")
        return np.array([float(self.vecs[(tier, i)] @ qv) if (tier, i) in self.vecs else np.nan
                         for i in ids], dtype=np.float32)

    def prefetch(self, qv: np.ndarray, tiers: list[str]) -> bool:
        return True  # as a scan started on the scan pool

    def run_prefetch(self) -> bool:
        self.calls.append("run_prefetch")
        return True  # as while the scan pool still reads the codes: the early reads are made

    def search(self, qv: np.ndarray, k: int, tiers: list[str], filters) -> list[VectorMatch]:
        self.calls.append("search")
        hits = sorted(((float(v @ qv), t, i) for (t, i), v in self.vecs.items() if t in tiers),
                      reverse=True)[:k]
        return [VectorMatch(i, t, s) for s, t, i in hits]


QUERIES = ["connection pool", "tune the timeout retry budget", "replica lag cache",
           "pool timeout", "retry budget notes", "cache connection"]


@pytest.fixture(scope="module")
def manager(tmp_path_factory):
    m = _build(tmp_path_factory.mktemp("early"))
    yield m
    m.close()


def _scans(manager: VaultManager, monkeypatch: pytest.MonkeyPatch) -> tuple[list, list, list[list]]:
    """Each query's rows, its context (captured after the last stage) and the ids whose
    texts term proximity asked for, by query."""
    vectors = RecordingVectors(manager)
    # a small proximity depth (4 = min_fetch, over 9 candidates at limit 3): the vector hits'
    # lexical matches (in lower tiers: behind the candidates by weighted BM25) compete for it
    b = Brain(manager, fixed_brain(manager, min_fetch=4).settings, vectors=vectors,
              clock=lambda: NOW)
    ctxs: list = []
    monkeypatch.setattr(stages, "STAGES", (*stages.STAGES, lambda brain, ctx: ctxs.append(ctx)))
    asked: list[list[str]] = []
    field_texts = b.field_texts

    def spy(pool, idx, pairs=()):
        asked[-1].extend(f"{pool.tiers[i]}\0{pool.ids[i]}" for i in idx)
        return field_texts(pool, idx, pairs)

    monkeypatch.setattr(b, "field_texts", spy)
    rows = []
    for q in QUERIES:
        asked.append([])
        vectors.calls.clear()
        rows.append(b.search_intelligent(q, explain=True, limit=3))
        if evidence.early is not _no_early:
            assert vectors.calls[:2] == ["run_prefetch", "similarities"] and "search" in vectors.calls
    return rows, ctxs, asked


def _no_early(brain, ctx) -> None:
    """The order of before: every candidate's evidence read after the vector leg."""


def test_the_candidates_evidence_read_early_gives_the_same_numbers(manager, monkeypatch):
    rows, ctxs, asked = _scans(manager, monkeypatch)
    with monkeypatch.context() as m:
        m.setattr(evidence, "early", _no_early)
        old_rows, old_ctxs, _ = _scans(manager, monkeypatch)
    assert rows == old_rows
    for new, old, ids in zip(ctxs, old_ctxs, asked):
        assert new.pool.ids == old.pool.ids
        assert new.cosines.tobytes() == old.cosines.tobytes()
        assert new.proximity.tobytes() == old.proximity.tobytes()
        assert len(ids) == len(set(ids))  # no candidate's texts asked twice
    assert any(c.early_proximity for c in ctxs) and any(c.early_cosines for c in ctxs)
    assert any((c.proximity > 0).any() for c in ctxs)


def test_a_candidate_read_early_but_out_of_the_whole_pools_pick_keeps_0() -> None:
    """``proximity`` at 0 picks over the whole pool (the ``max(limit, min_fetch)`` best by
    BM25): a vector hit with more BM25 than a candidate read early takes its place; that
    candidate's early value is not used, the others' are (their texts not read again),
    and the hit's texts are read."""
    pool = Pool(ids=["c0", "c1", "c2", "h0"], tiers=["agent", "agent", "team", "team"],
                lexical=[0.9, 0.5, 0.2, 0.7])
    ctx = ScoringContext(query="connection pool", mode="scan", limit=3, limit_given=True,
                         filters=Filters(), tiers=None, query_tags=[], query_domain=None,
                         include_memories=False, explain=False, fusion="signals", now=NOW,
                         config=BrainConfig(min_fetch=3), pool=pool,
                         pairs=[("connect", "pool")])
    ctx.early_proximity = {("agent", "c0"): 1.0, ("agent", "c1"): 0.5, ("team", "c2"): 1.0}

    class Texts:
        asked: list[int] = []

        def field_texts(self, pool, idx, pairs=()):
            self.asked += idx
            return {"team\0h0": FieldTexts("h0", "Connection pool", "", "", "")}

    brain = Texts()
    out = evidence.proximity(brain, ctx, 0)
    assert out.tolist() == [1.0, 0.5, 0.0, 1.0]  # c2 (BM25 0.2) is out of the best 3
    assert brain.asked == [3]  # only the hit's texts were read


def test_a_filtered_scan_or_one_without_a_prefetch_reads_nothing_early(manager, monkeypatch):
    """The early reads need this query's prefetch still running: a source whose prefetch
    started nothing is not asked to run one (an older prefetch's bases are not scanned),
    nor is a scan with filters (its vector leg may read only the few rows they leave)."""
    vectors = RecordingVectors(manager)
    b = Brain(manager, fixed_brain(manager).settings, vectors=vectors, clock=lambda: NOW)
    b.search_intelligent("connection pool", type="pattern")
    assert "run_prefetch" not in vectors.calls and vectors.calls.index("search") == 0
    monkeypatch.setattr(vectors, "prefetch", lambda qv, tiers: False)
    vectors.calls.clear()
    b.search_intelligent("connection pool")
    assert "run_prefetch" not in vectors.calls and vectors.calls.index("search") == 0
