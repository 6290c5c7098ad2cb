"""Nothing is served stale: a long-lived Brain, its memos warm (each term's BM25 per tier,
top k from the head, postings without the alive filter, kept tf-idf hits, bulk dedup
look-ups, slot ids, LSA's query vector), answers exactly what a Brain freshly opened over
the same tier files answers, after any random sequence of writes.

Seeded random walks over three real SQLite tiers (agent / project / team), written
through the warm Brain's manager or a second one over the same files: captures
(also of another tier's id or another tier's content), updates that keep an entry's
length and words (same statistics: words reordered, severity or tags changed), updates
that change them, deletes, links, validity windows that open or close around the wall
clock while the walk runs, and searches (scan and full, FTS-only, with and without
filters, each query asked twice so the memos answer the second time) between writes.
Ids, order and every score breakdown (``explain=True``) must be equal, also to a Brain over
copies of the files without their saved mirrors (built from the rows alone). That one
found a small tier keeping its TF-IDF model after a delete (its idf still counted the
deleted entry) while a mirror built from the same rows left it out: small tiers now
rebuild on a delete as on any other change (vault/postings.py).
"""

from __future__ import annotations

import random
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from tiervault.vault.entry import LINK_TYPES, SEVERITIES, Entry
from tiervault.vault.manager import VaultManager

from tests.brain_vault import NOW, fixed_brain

TIERS = ("agent", "project", "team")
WORDS = ("retry", "backoff", "cache", "stale", "index", "token", "timeout", "deadlock",
         "schema", "migration", "lock", "queue", "replica", "shard", "latency", "budget",
         "parser", "lexer", "vector", "memo")
DOMAINS = ("general", "db", "net")
TYPES = ("pattern", "anti-pattern", "rule")
TAGS = ("ops", "perf", "sec")
SEEDS = (101, 202, 303)
STEPS = 70


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


class Walk:
    """One random walk: the warm Brain, the writes it sees, and the checks."""

    def __init__(self, folder: Path, rng: random.Random) -> None:
        self.rng = rng
        self.folder = folder
        self.copies = 0
        self.paths = {t: str(folder / f"{t}.db") for t in TIERS}
        self.manager = VaultManager.at(self.paths)
        self.brain = fixed_brain(self.manager)
        # a second writer over the same files (another process, say): the warm Brain's
        # tiers learn of its writes only from the files
        self.other = VaultManager.at(self.paths)
        self.held: dict[str, set[str]] = {t: set() for t in TIERS}  # ids per tier
        self.boundaries: list[float] = []  # wall-clock validity edges set so far
        self.serial = 0
        self.compared = 0

    def close(self) -> None:
        self.other.close()
        self.manager.close()

    @property
    def writer(self) -> VaultManager:
        """The warm Brain's own manager mostly, the other writer a third of the time."""
        return self.other if self.rng.random() < 0.3 else self.manager

    # -- writes ---------------------------------------------------------------------
    def _new_entry(self, entry_id: str, **kw: Any) -> Entry:
        rng = self.rng
        base: dict[str, Any] = {
            "id": entry_id, "title": _text(rng, rng.randint(2, 4)),
            "description": _text(rng, rng.randint(3, 12)), "type": rng.choice(TYPES),
            "domain": rng.choice(DOMAINS), "severity": rng.choice(SEVERITIES),
            "tags": rng.sample(TAGS, rng.randint(0, 2)),
            "created_at": NOW - rng.randint(0, 90) * 86_400.0,
        }
        base["updated_at"] = base["created_at"]
        base.update(kw)
        return Entry.from_dict(base)

    def _some(self, tier: str | None = None) -> tuple[str, str] | None:
        pairs = [(t, i) for t in TIERS if tier in (None, t) for i in sorted(self.held[t])]
        return self.rng.choice(pairs) if pairs else None

    def capture(self) -> str:
        tier = self.rng.choice(TIERS)
        self.serial += 1
        self.writer.capture(self._new_entry(f"e{self.serial}"), tier=tier)
        self.held[tier].add(f"e{self.serial}")
        return f"capture e{self.serial} -> {tier}"

    def duplicate(self) -> str:
        """Another tier's id (a shadowed copy) or another tier's content under a new id."""
        found = self._some()
        if found is None:
            return self.capture()
        src_tier, src_id = found
        tier = self.rng.choice([t for t in TIERS if t != src_tier])
        current = self.manager.store(src_tier).get(src_id)
        record = current.to_dict()
        record.pop("content_hash", None)
        if self.rng.random() < 0.5:
            entry_id = src_id  # same id in another tier
            record["description"] = record["description"] + " " + self.rng.choice(WORDS)
        else:
            self.serial += 1
            entry_id = f"e{self.serial}"  # same content, another id
        record["id"] = entry_id
        self.writer.capture(Entry.from_dict(record), tier=tier)
        self.held[tier].add(entry_id)
        return f"duplicate {src_tier}/{src_id} -> {tier}/{entry_id}"

    def same_stats_update(self) -> str:
        """Words reordered / severity / tags changed: the tier's BM25 statistics stay."""
        found = self._some()
        if found is None:
            return self.capture()
        tier, entry_id = found
        current = self.manager.store(tier).get(entry_id)
        words = current.description.split()
        self.rng.shuffle(words)
        patch = self.rng.choice([
            {"description": " ".join(words)},
            {"severity": self.rng.choice(SEVERITIES)},
            {"tags": self.rng.sample(TAGS, self.rng.randint(0, 2))},
        ])
        self.writer.update(entry_id, patch, tier=tier)
        return f"same-stats update {tier}/{entry_id} {sorted(patch)}"

    def changing_update(self) -> str:
        found = self._some()
        if found is None:
            return self.capture()
        tier, entry_id = found
        patch = self.rng.choice([
            {"description": _text(self.rng, self.rng.randint(3, 12))},
            {"title": _text(self.rng, self.rng.randint(2, 4))},
            {"domain": self.rng.choice(DOMAINS), "type": self.rng.choice(TYPES)},
        ])
        self.writer.update(entry_id, patch, tier=tier)
        return f"changing update {tier}/{entry_id} {sorted(patch)}"

    def delete(self) -> str:
        found = self._some()
        if found is None:
            return self.capture()
        tier, entry_id = found
        self.writer.delete(entry_id, tier=tier)
        self.held[tier].discard(entry_id)
        return f"delete {tier}/{entry_id}"

    def link(self) -> str:
        a, b = self._some(), self._some()
        if a is None or b is None or a[1] == b[1]:
            return self.capture()
        self.writer.link(a[1], b[1], self.rng.choice(LINK_TYPES), tier=a[0])
        return f"link {a} -> {b}"

    def validity(self) -> str:
        """A window that closes or opens soon on the wall clock (or already did): the
        search filters judge validity at ``time.time()``, which memos must not freeze."""
        found = self._some()
        if found is None:
            return self.capture()
        tier, entry_id = found
        edge = time.time() + self.rng.choice([-30.0, 0.25, 0.25, 30.0])
        self.boundaries.append(edge)
        field = self.rng.choice(["valid_until", "valid_from"])
        other = "valid_from" if field == "valid_until" else "valid_until"
        self.writer.update(entry_id, {field: edge, other: None}, tier=tier)
        return f"validity {tier}/{entry_id} {field}={edge - time.time():+.2f}s"

    # -- checks ---------------------------------------------------------------------
    def _copied(self) -> dict[str, str]:
        """The tier files copied (SQLite's backup: one consistent snapshot each) into a new
        folder without the saved mirrors beside them, so a Brain there builds its
        postings from the rows alone and cannot share a stale saved mirror."""
        self.copies += 1
        folder = self.folder / f"copy{self.copies}"
        folder.mkdir()
        paths = {}
        for tier, path in self.paths.items():
            paths[tier] = str(folder / f"{tier}.db")
            source, target = sqlite3.connect(path), sqlite3.connect(paths[tier])
            try:
                source.backup(target)
            finally:
                source.close()
                target.close()
        return paths

    def _fresh(self, paths: dict[str, str], queries: list[tuple[str, dict[str, Any]]]) -> list[Any]:
        manager = VaultManager.at(paths)
        try:
            brain = fixed_brain(manager)
            return [list(brain.search_intelligent(q, **kw)) for q, kw in queries]
        finally:
            manager.close()

    def _edge_between(self, start: float, end: float) -> bool:
        return any(start <= edge <= end for edge in self.boundaries)

    def _query(self) -> tuple[str, dict[str, Any]]:
        rng = self.rng
        text = " ".join(rng.sample(WORDS, rng.randint(1, 3)))
        kw: dict[str, Any] = {"mode": rng.choice(["scan", "full"]), "explain": True}
        for name, choices in (("domain", DOMAINS), ("type", TYPES), ("severity", SEVERITIES),
                              ("tags", TAGS), ("not_tags", TAGS), ("tiers", TIERS)):
            if rng.random() < 0.15:
                kw[name] = rng.choice(choices)
        if rng.random() < 0.1 and self._some():
            kw["exclude_ids"] = [self._some()[1]]  # type: ignore[index]
        if rng.random() < 0.3:
            kw["limit"] = rng.randint(1, 30)
        return text, kw

    def search(self, label: str, queries: list[tuple[str, dict[str, Any]]] | None = None
               ) -> list[tuple[str, dict[str, Any]]]:
        """Ask three queries twice of the warm Brain and once of a Brain freshly opened over
        the same files and of one over copies of them (:meth:`_copied`); equal answers.
        A batch during which a validity edge passed is asked again (the two Brains
        must judge validity on the same side of every edge)."""
        queries = queries or [self._query() for _ in range(3)]
        while True:
            start = time.time()
            warm = [list(self.brain.search_intelligent(q, **kw)) for q, kw in queries + queries]
            fresh = self._fresh(self.paths, queries)
            rebuilt = self._fresh(self._copied(), queries)
            if not self._edge_between(start, time.time()):
                break
        for i, (q, kw) in enumerate(queries + queries):
            assert warm[i] == fresh[i % len(queries)], (
                f"after {label}: warm Brain differs from a fresh one for {q!r} {kw}")
            assert warm[i] == rebuilt[i % len(queries)], (
                f"after {label}: warm Brain differs from one over copied files for {q!r} {kw}")
            self.compared += 1
        return queries

    def across_an_edge(self, label: str) -> None:
        """The same queries before and after the newest validity edge, no write between:
        a memo must not keep what the wall clock has since changed."""
        queries = self.search(label)
        while time.time() <= self.boundaries[-1]:
            time.sleep(0.02)
        self.search(label + " (its edge passed)", queries)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_warm_brain_answers_what_a_fresh_brain_answers(tmp_path, seed):
    rng = random.Random(seed)
    walk = Walk(tmp_path, rng)
    try:
        for _ in range(24):
            walk.capture()
        log: list[str] = []
        walk.search("the first captures")
        ops = [(walk.capture, 4), (walk.duplicate, 2), (walk.same_stats_update, 3),
               (walk.changing_update, 2), (walk.delete, 2), (walk.link, 1), (walk.validity, 2)]
        for step in range(STEPS):
            op = rng.choices([f for f, _ in ops], weights=[w for _, w in ops])[0]
            log.append(op())
            if op == walk.validity and 0.0 < walk.boundaries[-1] - time.time() < 1.0:
                walk.across_an_edge("; ".join(log[-4:]))
            elif rng.random() < 0.4 or step == STEPS - 1:
                walk.search("; ".join(log[-4:]))
        assert walk.compared >= 60  # the walk compared many answers (not a vacuous pass)
        assert any(walk.held.values())
    finally:
        walk.close()
