"""A JSONL import (bulk validation, batch hashes, the scanner shortcut, the writer
thread) stores exactly what storing ``Entry.from_dict`` of each line stores: the same
rows (rowids, every column, generations), the same FTS5 tokens, the same links --
compared by ``bench/tier_digest.py``'s digests of two real tier files."""

from __future__ import annotations

import json

from bench.corpus import generate
from bench.tier_digest import digest, odd_lines
from tiervault.vault.entry import Entry
from tiervault.vault.jsonl import import_lines, parse_lines
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


def test_an_import_reports_what_its_lines_one_by_one_report(tmp_path):
    """An import accounts for a group of good lines at once (no object per line): its report
    -- bad lines and repeated ids by line number, in line order, the lines read, the links of
    the line that wins -- is what ``parse_lines`` (one ParsedLine a line) gives, over groups
    of good lines whose ids repeat within a group, across groups and after a bad line."""
    targets = [{"id": f"target-{k}", "title": f"target {k}", "description": "a link target"}
               for k in range(3)]
    records = []
    for i in range(2_600):
        eid = f"acct-{i % 2_300:05d}"  # ids 0..299 come twice, in the last lines
        if i == 1_600:
            eid = "acct-01601"  # the next line's id, close by
        rec = {"id": eid, "title": f"entry {i}", "description": f"line {i} of the accounting"}
        if i % 7 == 0:
            rec["links"] = [{"target": f"target-{i % 3}", "type": "supports"}]
        records.append(rec)
    lines = [json.dumps(r) + "\n" for r in targets + records]
    lines[1_103] = "{not json\n"  # acct-01100: no later repeat
    lines[1_903] = json.dumps({"id": "acct-bad", "title": "t", "description": "d",
                               "type": "nope"}) + "\n"
    lines.insert(1_400, "\n")

    expected, first, links, read = [], {}, {}, 0
    reads_at: list[int] = []  # the lines read when each entry was handed to the store
    for p in parse_lines(iter(lines)):
        read += 1
        if p.error:
            expected.append(f"line {p.line}: {p.error}")
            continue
        if p.entry.id in first:
            expected.append(f"line {p.line}: id {p.entry.id!r} was already on line "
                            f"{first[p.entry.id]}; the last line wins (its fields and links)")
        first.setdefault(p.entry.id, p.line)
        links[p.entry.id] = p.links
        reads_at.append(read)

    progress: list[int] = []
    with VaultManager.at({"team": str(tmp_path / "team.db")}) as manager:
        report = import_lines(manager, "team", iter(lines), batch_size=500,
                              on_progress=progress.append)
        stored = manager.links_touching([f"target-{k}" for k in range(3)])
    assert report.errors == expected and len(expected) == 2 + 300 + 1
    assert report.read == read == len(lines) - 1
    assert report.links == sum(map(len, links.values())) == len(stored)
    assert sorted(l.source_id for l in stored) == sorted(k for k, v in links.items() if v)
    # after each 500-entry batch: the lines read up to its last entry; at the end, all
    assert progress == reads_at[499::500] + [read] and len(progress) == 6
