"""eval/agent.py's dev_set_half: the one way the labs cut an agent dev set to a split half
(it replaced the same nine lines in four eval scripts). Real files of eval/agentset/."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eval import agent as A  # noqa: E402


@pytest.mark.parametrize("name, folder, pack", [
    ("agent", "eval/agentset", "vault/packs/starter.jsonl"),
    ("ops", "eval/agentset/ops", "eval/agentset/ops/pack.jsonl")])
def test_the_halves_partition_the_set_with_their_own_grades(name, folder, pack) -> None:
    queries, qrels = A.load_set(ROOT / folder)
    tune, report, whole = (A.dev_set_half(name, h) for h in ("tune", "report", "all"))
    assert tune.pack == report.pack == ROOT / pack
    assert {q["split"] for q in tune.queries} == {"tune"}
    assert {q["split"] for q in report.queries} == {"report"}
    assert sorted(q["id"] for q in tune.queries + report.queries) == sorted(q["id"] for q in queries)
    assert whole.queries == queries
    assert tune.qrels == {q["id"]: qrels[q["id"]] for q in tune.queries}
    assert [(i.id, i.text, i.filters) for i in tune.items] == [
        (q["id"], q["text"], q.get("filters", {})) for q in tune.queries]
    assert tune.now == 1_767_225_600.0  # DEFAULT_NOW, 2026-01-01T00:00:00Z


def test_an_unknown_set_or_half_is_named() -> None:
    with pytest.raises(ValueError, match="'scifact'"):
        A.dev_set_half("scifact", "tune")
    with pytest.raises(ValueError, match="'odd'"):
        A.dev_set_half("agent", "odd")
