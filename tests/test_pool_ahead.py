"""The pool's light rows read ahead (Pool.from_candidates(ahead=...)): the vector hits'
rows come with the candidates' in one statement a tier, and add_external joins exactly
the entries (tier, row, lexical evidence) it joins when it reads them itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.brain_vault import at_a_day_old, filler, vault_at
from tiervault.brain.pool import Pool
from tiervault.vault.filters import Filters
from tiervault.vault.manager import VaultManager

NOW = 1_800_000_000.0


@pytest.fixture()
def vault(tmp_path: Path) -> Iterator[VaultManager]:
    for manager in vault_at(tmp_path, "agent", "project", "team"):
        manager.capture_many(filler(30, "fa"), tier="agent")
        manager.capture_many(filler(30, "fp"), tier="project")
        manager.capture_many(filler(30, "ft"), tier="team")
        lexical = dict(title="Retry budget for flaky uploads", description="Cap upload retries.")
        manager.capture(at_a_day_old(id="lex-a", **lexical), tier="agent")
        manager.capture(at_a_day_old(id="lex-t", title="Upload retries", description="Backoff."),
                        tier="team")
        plain = dict(title="Connection pool sizing", description="Size pools per core.")
        manager.capture(at_a_day_old(id="both", **plain), tier="team")  # in two tiers: agent wins
        manager.capture(at_a_day_old(id="both", title="Connection pools", description="Per core."),
                        tier="agent")
        manager.capture(at_a_day_old(id="only-p", **plain), tier="project")
        manager.capture(at_a_day_old(id="gone", title="Old upload note", description="Retries."),
                        tier="project")
        manager.capture(at_a_day_old(id="expired", title="Pool note", description="Old.",
                                     valid_until=NOW - 10), tier="team")
        yield manager


def _joined(pool: Pool) -> list[tuple[Any, ...]]:
    return [(pool.ids[i], pool.tiers[i], pool.via[i], pool.lexical[i], pool.tfidf[i],
             pool.tier_weight[i], pool.rows[i]) for i in range(len(pool))]


def _counted(manager: VaultManager) -> dict[str, int]:
    """Count each tier's light-row statements (the real method runs)."""
    calls = {"n": 0}
    for tier in manager.tiers.values():
        read = tier.store.light_rows

        def counting(ids: Any, *args: Any, _read: Any = read, **kwargs: Any) -> Any:
            calls["n"] += 1
            return _read(ids, *args, **kwargs)

        tier.store.light_rows = counting  # type: ignore[method-assign]
    return calls


@pytest.mark.parametrize("tiers", [None, ["agent", "team"]])
def test_read_ahead_joins_what_reading_later_joins(vault: VaultManager, tiers: Any) -> None:
    filters = Filters(now=NOW)
    cands = vault.search("upload retries", filters=filters, limit=30, tiers=tiers)
    assert {"lex-a", "lex-t", "gone"} & set(cands.ids)
    # vector hits: candidates, an id of two tiers, one of a tier left out by ``tiers``,
    # an unknown id, an expired entry (the filters drop it) and a repeat
    hits = ["only-p", "lex-a", "both", "nowhere", "expired", "fa-3", "both", "ft-7"]
    calls = _counted(vault)
    want = Pool.from_candidates(vault, cands)
    want.add_external(vault, hits, "vector", cands.query, filters, tiers, 30)
    reference_calls = calls["n"]
    calls["n"] = 0
    got = Pool.from_candidates(vault, cands, ahead=hits, tiers=tiers)
    got.add_external(vault, hits, "vector", cands.query, filters, tiers, 30)
    assert _joined(got) == _joined(want)
    assert ("both", "agent") in [(e[0], e[1]) for e in _joined(got)]
    searched = len(vault.ordered(tiers))
    assert calls["n"] == searched < reference_calls  # one statement a tier, nothing after


def test_a_candidate_gone_before_its_row_is_read_is_looked_up_again(vault: VaultManager) -> None:
    filters = Filters(now=NOW)
    cands = vault.search("upload retries", filters=filters, limit=30)
    assert "gone" in cands.ids
    vault.store("project").delete("gone")  # after the search, before the rows are read
    vault.capture(at_a_day_old(id="gone", title="Upload note", description="Retries."), tier="team")
    hits = ["gone", "only-p"]
    want = Pool.from_candidates(vault, cands)
    want.add_external(vault, hits, "vector", cands.query, filters, None, 30)
    got = Pool.from_candidates(vault, cands, ahead=hits)
    got.add_external(vault, hits, "vector", cands.query, filters, None, 30)
    assert _joined(got) == _joined(want)
    assert ("gone", "team") in [(e[0], e[1]) for e in _joined(got)]


def test_rows_read_over_other_tiers_are_not_used(vault: VaultManager) -> None:
    filters = Filters(now=NOW)
    cands = vault.search("upload retries", filters=filters, limit=30, tiers=["team"])
    hits = ["both", "only-p"]
    got = Pool.from_candidates(vault, cands, ahead=hits, tiers=["team"])
    got.add_external(vault, hits, "vector", cands.query, filters, None, 30)  # every tier
    want = Pool.from_candidates(vault, cands)
    want.add_external(vault, hits, "vector", cands.query, filters, None, 30)
    assert _joined(got) == _joined(want)
    assert ("both", "agent") in [(e[0], e[1]) for e in _joined(got)]
