"""A JSONL import (bulk validation, batch hashes, the scanner shortcut, the writer
thread) stores exactly what storing ``Entry.from_dict`` of each line stores: the same
rows (rowids, every column, generations), the same FTS5 tokens, the same links --
compared by ``bench/tier_digest.py``'s digests of two real tier files."""

from __future__ import annotations

import json

from bench.corpus import generate
from bench.tier_digest import digest, odd_lines
from tiervault.vault.entry import Entry
from tiervault.vault.jsonl import import_lines
from tiervault.vault.manager import VaultManager


def _reference_store(manager: VaultManager, tier: str, lines: list[str]) -> int:
    """The slow path: json.loads + Entry.from_dict per line, bad lines dropped, a
    repeated id keeping its last line, in 5,000-entry batches as the import writes."""
    entries = []
    for text in lines:
        try:
            record = json.loads(text)
            record.pop("links", None)
            entries.append(Entry.from_dict(record))
        except (ValueError, AttributeError, TypeError):
            continue
    return manager.capture_many(entries, tier, batch_size=5_000)


def test_an_import_stores_what_from_dict_of_each_line_stores(tmp_path):
    corpus = generate(12_000, seed=3)
    lines = [json.dumps(r, ensure_ascii=False) + "\n" for r in corpus.entries("team")]
    odd = odd_lines(150, seed=4)
    mixed = lines[:2_500] + odd + lines[2_500:]  # one group of odd lines, the rest plain
    paths = {"bulk": tmp_path / "bulk.db", "ref": tmp_path / "ref.db"}
    with VaultManager.at({k: str(p) for k, p in paths.items()}) as manager:
        report = import_lines(manager, "bulk", mixed)
        written = _reference_store(manager, "ref", mixed)
    assert report.written == written > 5_000
    assert len(report.errors) == 150
    got, want = digest(paths["bulk"]), digest(paths["ref"])
    assert got == want and got["fts_tokens"] > 100_000
