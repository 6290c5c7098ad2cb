"""The federated rescoring of compressed vector scans (embeddings/tier_scan.py): one
rescoring over every tier's approximate scores answers as each tier's own exact top k
merged by ``cosine * tier weight``, with fewer rows read; ids held by several tiers keep
the per-tier semantics (the answer falls back to each tier's own top k)."""

from __future__ import annotations

import numpy as np
import pytest

from tiervault.embeddings.index import VectorIndex
from tiervault.embeddings.recall import VectorRecall
from tiervault.embeddings.tier_scan import rescore_federated
from tiervault.vault.entry import Entry
from tiervault.vault.manager import VaultManager

MODEL = "test:random"
DIM = 48
WEIGHTS = (1.0, 0.8, 0.6)


def unit(rng: np.random.Generator, n: int, dim: int = DIM) -> np.ndarray:
    m = rng.standard_normal((n, dim)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def merged(answers: list[tuple[np.ndarray, np.ndarray]], k: int) -> list[tuple[float, int, int, float]]:
    """Each tier's (rows, scores) ranked by ``score * weight`` (ties: tier order)."""
    hits = [(-float(c) * WEIGHTS[t], t, int(r), float(c))
            for t, (rows, cos) in enumerate(answers) for r, c in zip(rows, cos)]
    return sorted(hits, key=lambda h: (h[0], h[1]))[:k]


@pytest.fixture(scope="module")
def indexes() -> list[VectorIndex]:
    """Three tiers: int8, float16, and int8 with a delta (upserts and a delete)."""
    rng = np.random.default_rng(5)
    out = []
    for t, (n, dtype) in enumerate(((2500, "int8"), (3500, "float16"), (4000, "int8"))):
        ids = [f"t{t}-{i}" for i in range(n)]
        out.append(VectorIndex.build(ids, unit(rng, n), dtype=dtype, normalized=True))
    out[2].upsert([f"t2-{i}" for i in range(0, 300, 3)] + ["t2-new"], unit(rng, 101))
    out[2].remove(["t2-7", "t2-8"])
    return out


@pytest.mark.parametrize("k", [1, 10, 30, 100])
def test_federated_rescoring_answers_as_each_tiers_own_top_k(indexes, k) -> None:
    rng = np.random.default_rng(k)
    read_fed = read_own = 0
    for _ in range(12):
        q = unit(rng, 1)[0]
        own = []
        for index in indexes:
            scan = index.scan(q, k)
            before = scan.left
            scan.complete()
            read_own += before - scan.left
            own.append(scan.best())
        scans = [index.scan(q, k) for index in indexes]
        before = sum(s.left for s in scans)
        assert rescore_federated(list(zip(WEIGHTS, scans)), k)
        read_fed += before - sum(s.left for s in scans)
        # Bit for bit: the same rows, the same float32 scores, the same order.
        assert merged([s.best() for s in scans], k) == merged(own, k)
    assert read_fed < read_own  # one rescoring over the tiers, not one per tier


def test_a_filtered_gathered_and_tiny_scan_fall_back_or_agree(indexes) -> None:
    """Row filters (gathered and masked), a tier with fewer allowed rows than k (not
    decided federated when all tiers together hold fewer than k), a zero weight."""
    rng = np.random.default_rng(9)
    q = unit(rng, 1)[0]
    few = np.array([3, 50, 51, 900], dtype=np.int64)
    half = np.zeros(indexes[1].row_count, dtype=bool)
    half[::2] = True
    for allowed in ((few, half, None), (few, few, few)):
        own = []
        for index, a in zip(indexes, allowed):
            scan = index.scan(q, 20, allowed=a)
            scan.complete()
            own.append(scan.best())
        scans = [index.scan(q, 20, allowed=a) for index, a in zip(indexes, allowed)]
        decided = rescore_federated(list(zip(WEIGHTS, scans)), 20)
        assert decided == (allowed[2] is None)  # 12 allowed rows < k = 20: not decided
        for s in scans:
            s.complete()
        assert merged([s.best() for s in scans], 20) == merged(own, 20)
    scans = [index.scan(q, 5) for index in indexes]
    assert not rescore_federated([(1.0, scans[0]), (0.0, scans[1])], 5)
    assert [s.left for s in scans[:2]] == [len(indexes[0]), len(indexes[1])]  # nothing rescored


def per_tier_reference(q, tiers, k):
    """The federated answer's definition: each tier's exact top k (float64), ranked by
    cosine * weight, an id in several tiers kept from the higher-priority tier's answer."""
    hits = []
    for rank, (name, weight, vecs) in enumerate(tiers):
        ids = list(vecs)
        s = np.array([vecs[i] for i in ids], dtype=np.float64) @ q.astype(np.float64)
        for p in np.argsort(-s, kind="stable")[:k]:
            hits.append((-float(s[p]) * weight, rank, ids[p], name, float(s[p])))
    hits.sort(key=lambda h: (h[0], h[1]))
    best = {}
    for h in hits:
        if h[2] not in best or h[1] < best[h[2]][1]:
            best[h[2]] = h
    return [(h[2], h[3]) for h in sorted(best.values(), key=lambda h: (h[0], h[1]))[:k]]


def test_ids_in_two_tiers_keep_the_per_tier_semantics(tmp_path) -> None:
    """Half of each tier's ids are also the other's (other vectors); 8-d vectors, so the
    int8 bounds are wide and rows near the k-th score get rescored in the agent tier out
    of its own top k. A team copy ranked in the answer is shadowed by its agent copy only
    when that copy is in the agent's own top k, which the federated rescoring does not
    compute: it falls back (without that, ~1 in 150 of these answers differs). Every
    answer equals the per-tier reference and the float32 index's."""
    rng = np.random.default_rng(3)
    dim = 8
    paths = {"agent": str(tmp_path / "agent.db"), "team": str(tmp_path / "team.db")}
    vecs: dict[str, dict[str, np.ndarray]] = {}
    with VaultManager.at(paths) as vault:
        for name in ("agent", "team"):
            ids = [f"s{i:04d}" for i in range(30)] + [f"{name}{i:05d}" for i in range(30)]
            vault.store(name).capture_many([Entry.create(id=i, title=f"t {i}", description="d")
                                            for i in ids])
            m = unit(rng, len(ids), dim)
            vault.store(name).put_vectors(MODEL, [(i, "h", v) for i, v in zip(ids, m)])
            vecs[name] = dict(zip(ids, m))
        tiers = [(t.name, t.weight, vecs[t.name]) for t in vault.ordered()]
        int8, f32 = VectorRecall(vault, MODEL, dtype="int8"), VectorRecall(vault, MODEL, dtype="float32")
        own = VectorRecall(vault, MODEL, dtype="int8", federated=False)  # each tier rescores its own
        for q in unit(rng, 1000, dim):
            for k in (2, 3, 5):
                ids, names, cos = int8.search(q, k)
                assert list(zip(ids, names)) == per_tier_reference(q, tiers, k)
                ids_own, names_own, cos_own = own.search(q, k)
                assert (ids_own, names_own, cos_own.tobytes()) == (ids, names, cos.tobytes())
                ids32, names32, cos32 = f32.search(q, k)
                assert (ids32, names32) == (ids, names)
                np.testing.assert_allclose(cos, cos32, atol=2e-6)
        ids, names, _ = int8.search(vecs["team"]["s0000"], 5)  # its agent copy is far off
        assert ("s0000", "team") in list(zip(ids, names))


def test_no_tier_with_vectors_answers_nothing(tmp_path) -> None:
    """Tiers whose entries have no vector yet (or none at all): no scan to rescore."""
    paths = {"agent": str(tmp_path / "agent.db"), "team": str(tmp_path / "team.db")}
    with VaultManager.at(paths) as vault:
        vault.store("agent").capture(Entry.create(id="x", title="no vector", description="d"))
        q = unit(np.random.default_rng(1), 1)[0]
        assert VectorRecall(vault, MODEL, dtype="int8").search(q, 5)[:2] == ([], [])
    assert not rescore_federated([], 5)


def _tied_scan(rng: np.random.Generator, n: int, k: int):
    """A TierScan over ``n`` approximate scores with many ties (values on a coarse grid,
    several of them -inf) and exact scores within the bound of each."""
    from tiervault.embeddings.tier_scan import Bound, TierScan

    approx = (rng.integers(0, 40, n) / 40).astype(np.float32)
    approx[rng.choice(n, n // 10, replace=False)] = -np.inf
    eps = np.float32(0.03)
    exact = (approx + rng.uniform(-0.03, 0.03, n)).astype(np.float32)
    exact[~np.isfinite(approx)] = -1.0
    allowed = int(np.isfinite(approx).sum())
    return TierScan(k, approx=approx.copy(), bound=Bound.flat(float(eps)), base_k=k, allowed=allowed,
                    exact_of=lambda rows: exact[rows])


@pytest.mark.parametrize("k", [1, 5, 20])
def test_rescore_reaching_from_the_picks_rescores_what_the_full_compare_does(k) -> None:
    """After top_approx, rows reaching a threshold are read off its picks when their least
    score is below the first cut: the same rows in the same order (ties at the picks' least
    score included) as the compare over every position, and no such compare is made."""
    rng = np.random.default_rng(k)
    skipped = 0
    for trial in range(60):
        seed = int(rng.integers(1 << 30))
        picked, full = _tied_scan(np.random.default_rng(seed), 600, k), _tied_scan(np.random.default_rng(seed), 600, k)
        pos = picked.top_approx(k)
        chosen = pos[: max(1, pos.size // 2)]  # a federated rescoring rescores some picks
        picked.rescore(chosen)
        full.rescore(chosen)  # no top_approx: the full compare decides
        threshold = float(rng.uniform(0.2, 1.1))
        picked.rescore_reaching(threshold)
        full.rescore_reaching(threshold)
        assert full.full_passes == 1
        skipped += picked.full_passes == 0
        rows_p, scores_p = picked.best()
        rows_f, scores_f = full.best()
        assert rows_p.tolist() == rows_f.tolist() and scores_p.tolist() == scores_f.tolist()
        assert picked.left == full.left
        assert picked.exact_scores().tolist() == full.exact_scores().tolist()  # rescored in the same order
    assert 0 < skipped < 60  # both paths taken


def test_a_lower_tier_makes_no_full_pass_in_the_federated_rescoring(indexes) -> None:
    """The lowest-weight tier's reaching test rarely needs a compare over all its scores."""
    rng = np.random.default_rng(77)
    passes = []
    for _ in range(20):
        q = unit(rng, 1)[0]
        scans = [index.scan(q, 10) for index in indexes]
        assert rescore_federated([(w, s) for w, s in zip(WEIGHTS, scans)], 10)
        passes.append(scans[2].full_passes)
    assert sum(passes) < len(passes) / 2


@pytest.mark.parametrize("tier", [0, 1])
def test_a_gathered_scan_scores_its_rows_as_the_scan_in_place_does(indexes, tier, monkeypatch) -> None:
    """A compressed scan of few allowed rows gathers their codes (embeddings/vector_base.py,
    ``take`` block by block): its approximate scores and error bounds are those the scan
    of every row in place gives at the same rows, bit for bit (int8 and float16)."""
    from tiervault.embeddings import index as index_module
    from tiervault.embeddings import vector_base

    monkeypatch.setattr(vector_base, "_GATHER_BLOCK", 64)  # several blocks, the last one short
    monkeypatch.setattr(index_module, "_GATHER_ROWS_COMPRESSED", 0)  # their codes, not one by one
    index, rng = indexes[tier], np.random.default_rng(31 + tier)
    rows = np.sort(rng.choice(index.row_count, 150, replace=False)).astype(np.int64)
    q = unit(rng, 1)[0]
    gathered, in_place = index.scan(q, 10, allowed=rows), index.scan(q, 10)  # every row
    assert gathered.approx is not None and in_place.approx is not None
    assert gathered.approx.size == rows.size and in_place.approx.size == index.row_count
    np.testing.assert_array_equal(gathered.approx, in_place.approx[rows])
    assert gathered.bound is not None and in_place.bound is not None
    at = np.arange(rows.size)
    np.testing.assert_array_equal(np.asarray(gathered.bound.at(at), dtype=np.float32),
                                  np.asarray(in_place.bound.at(rows), dtype=np.float32))
    assert gathered.pos_rows is not None and gathered.pos_rows.tolist() == rows.tolist()
    gathered.complete()
    want = np.argsort(-index.scores_for(rows, q), kind="stable")[:10]
    assert gathered.best()[0].tolist() == rows[want].tolist()
