"""Small hand-made vaults for the Brain's rule tests: entries at a fixed moment,
filler that gives BM25 a realistic idf, and a Brain on a fixed clock.

Shared by test_brain, test_relevance, test_relevance_fusion and
test_feedback_learning (one definition of "a Brain under test").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

from tiervault.brain import Brain
from tiervault.config import BrainConfig, Settings
from tiervault.vault.entry import Entry
from tiervault.vault.manager import VaultManager

__all__ = ["NOW", "DAY", "at_a_day_old", "entry", "filler", "fixed_brain", "good_and_loud", "vault_at"]

NOW = 1_800_000_000.0
DAY = 86_400.0


def at_a_day_old(**kw: Any) -> Entry:
    """An entry created and updated one day before NOW (unless given)."""
    kw.setdefault("created_at", NOW - DAY)
    kw.setdefault("updated_at", NOW - DAY)
    return Entry.create(**kw)


def entry(**kw: Any) -> Entry:
    """A validated warning-level general pattern written at NOW (fields given in ``kw`` win)."""
    base = {"type": "pattern", "domain": "general", "severity": "warning", "created_at": NOW,
            "updated_at": NOW}
    return Entry.from_dict({**base, **kw})


def vault_at(folder: Path, *tiers: str) -> Iterator[VaultManager]:
    """Yield a manager over fresh tier files ``folder/<tier>.db`` and close it afterwards
    (the body of a pytest fixture: ``yield from vault_at(tmp_path, "agent")``)."""
    manager = VaultManager.at({tier: str(folder / f"{tier}.db") for tier in tiers})
    try:
        yield manager
    finally:
        manager.close()


def filler(n: int, prefix: str = "fill", make: Callable[..., Entry] = at_a_day_old) -> list[Entry]:
    """Unrelated entries so BM25 idf behaves as in a real vault (query terms are rare)."""
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
    return [make(id=f"{prefix}-{i}", title=f"{words[i % 8]} {words[(i * 3) % 8]} note {i}",
                 description=f"General remark number {i} about {words[(i * 5) % 8]} matters.")
            for i in range(n)]


def good_and_loud(folder: Path, topics: list[str]) -> Iterator[VaultManager]:
    """Yield agent + team tiers holding 40 filler entries and, per topic, its answer
    (``good-<i>``: matches the words best, a suggestion) and a loud incident rule
    (``loud-<i>``: critical, matches a little worse, so its severity lifts it above the
    answer): the vault of the feedback tests."""
    for manager in vault_at(folder, "agent", "team"):
        manager.capture_many(filler(40), tier="team")
        for i, topic in enumerate(topics):
            first, second = topic.split()[:2]
            manager.capture(at_a_day_old(
                id=f"good-{i}", title=f"Handling {topic}", severity="suggestion",
                description=f"How to diagnose and fix {topic} step by step."), tier="team")
            manager.capture(at_a_day_old(
                id=f"loud-{i}", title=f"{topic} incident", severity="critical",
                description=f"Always page the on-call about {first} and {second} incidents."),
                tier="team")
        yield manager


def fixed_brain(manager: Any, *, agent_id: str = "t", now: float = NOW, **cfg: Any) -> Brain:
    """A Brain over ``manager`` with ``BrainConfig(**cfg)``, no embedder, clock at ``now``."""
    settings = Settings(agent_id=agent_id, tiers=(), embedding=None, features=frozenset(),
                        brain=BrainConfig(**cfg), config_path=None)
    return Brain(manager, settings, clock=lambda: now)
