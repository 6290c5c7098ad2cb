"""The small-corpus guard counts the matches only when the search's own hits do not
already reach ``small_corpus`` (``Candidates.matched``: the hits the tiers' top k
returned before the dedup, duplicates included, each a match passing the filters, so
never more than ``VaultManager.count_matches``). Real tier files; the count is spied
on (the real method, its calls counted), and the answers are the guard's."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiervault.vault.filters import Filters
from tiervault.vault.manager import VaultManager

from brain_vault import at_a_day_old as E, filler, fixed_brain, vault_at


@pytest.fixture
def manager(tmp_path: Path):
    yield from vault_at(tmp_path, "agent", "project", "team")


def _redis(prefix: str, n: int, **kw) -> list:
    return [E(id=f"{prefix}-{i}", title=f"Redis eviction policy {prefix} {i}",
              description="Pick an eviction policy.", **kw) for i in range(n)]


def _counted(manager: VaultManager, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The answers of every ``count_matches`` call from now on."""
    answers: list[int] = []
    count = manager.count_matches

    def counting(*a, **kw):
        answers.append(count(*a, **kw))
        return answers[-1]

    monkeypatch.setattr(manager, "count_matches", counting)
    return answers


def test_no_count_when_the_tiers_top_k_found_enough(manager, monkeypatch):
    manager.capture_many(filler(40), tier="team")
    for tier in ("agent", "project", "team"):
        manager.capture_many(_redis(tier, 30), tier=tier)  # 90 matches, 30 in each tier's top k
    counted = _counted(manager, monkeypatch)
    rows = fixed_brain(manager).search_intelligent("redis eviction")
    assert len(rows) == 10 and not rows.widened
    assert counted == []  # before: one count (90 >= 50, no widening)
    cands = manager.search("redis eviction", limit=30)
    assert cands.matched == 90
    assert manager.count_matches(cands.query, Filters(), 50) >= 50


def test_duplicates_count_on_both_sides(manager, monkeypatch):
    same = _redis("same", 30)
    manager.capture_many(same, tier="agent")
    manager.capture_many(same, tier="team")  # the same 30 entries: 60 hits, 30 kept
    counted = _counted(manager, monkeypatch)
    rows = fixed_brain(manager).search_intelligent("redis eviction")
    assert len(rows) == 10 and not rows.widened and counted == []
    cands = manager.search("redis eviction", limit=30)
    assert len(cands) == 30 and cands.matched == 60
    assert manager.count_matches(cands.query, Filters(), 50) >= 50  # duplicates included


def test_too_few_hits_still_count_and_widen(manager, monkeypatch):
    manager.capture_many(filler(40), tier="team")
    manager.capture_many(_redis("a", 20), tier="agent")
    manager.capture_many(_redis("t", 25), tier="team")  # 45 hits < 50: counted
    counted = _counted(manager, monkeypatch)
    rows = fixed_brain(manager).search_intelligent("redis eviction")
    assert counted == [45] and len(rows) == 45 and rows.widened


def test_filters_bound_the_hits_and_the_count_alike(manager, monkeypatch):
    for tier in ("agent", "project", "team"):
        manager.capture_many(_redis(tier, 20), tier=tier)
        manager.capture_many(_redis(f"{tier}-d", 10, type="decision"), tier=tier)
    counted = _counted(manager, monkeypatch)
    rows = fixed_brain(manager).search_intelligent("redis eviction", type="decision")
    assert counted == [30] and len(rows) == 30 and rows.widened  # 3 x 10 decisions
    assert {r["type"] for r in rows} == {"decision"}
