"""Validate the bundled starter pack (vault/packs/starter.jsonl).

The quickstart loads this file into a fresh vault, so every line must be a valid
entry, ids and titles must be unique, links must point inside the pack, and the
pack must cover enough domains, types and severities to be useful out of the box.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timezone
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest

from tiervault.errors import ValidationError
from tiervault.vault.entry import ENTRY_TYPES, LINK_TYPES, SEVERITIES, Entry

PACK_PATH = Path(__file__).resolve().parents[1] / "vault" / "packs" / "starter.jsonl"

MIN_ENTRIES = 150
MIN_DOMAINS = 8
MAX_TITLE_CHARS = 120


def _load_raw_lines() -> list[str]:
    """Non-empty lines of the pack file, in order."""
    text = PACK_PATH.read_text(encoding="utf-8")
    return [line for line in text.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def raw_entries() -> list[dict[str, Any]]:
    """Each line parsed as JSON (the 'links' key still present)."""
    out = []
    for lineno, line in enumerate(_load_raw_lines(), start=1):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            pytest.fail(f"{PACK_PATH.name}:{lineno} is not valid JSON: {exc}")
        assert isinstance(obj, dict), f"{PACK_PATH.name}:{lineno} is not a JSON object"
        out.append(obj)
    return out


@pytest.fixture(scope="module")
def entries(raw_entries: list[dict[str, Any]]) -> list[Entry]:
    """Each object validated by Entry.from_dict after popping 'links'."""
    out = []
    for lineno, obj in enumerate(raw_entries, start=1):
        data = dict(obj)
        data.pop("links", None)
        try:
            out.append(Entry.from_dict(data))
        except ValidationError as exc:
            pytest.fail(f"{PACK_PATH.name}:{lineno} ({obj.get('id')!r}) is not a valid entry: {exc}")
    return out


def test_pack_file_exists_and_every_line_is_a_json_object(raw_entries: list[dict[str, Any]]) -> None:
    assert PACK_PATH.is_file(), f"missing {PACK_PATH}"
    assert len(raw_entries) == len(_load_raw_lines())


def test_pack_is_reachable_as_package_data() -> None:
    resource = files("tiervault.vault").joinpath("packs/starter.jsonl")
    assert resource.is_file(), "starter.jsonl is not reachable via importlib.resources"
    assert resource.read_text(encoding="utf-8") == PACK_PATH.read_text(encoding="utf-8")


def test_every_entry_validates_and_keeps_its_explicit_id(
        raw_entries: list[dict[str, Any]], entries: list[Entry]) -> None:
    assert len(entries) == len(raw_entries)
    for obj, entry in zip(raw_entries, entries):
        # An id must be given explicitly; a title-derived slug would change when the title is edited.
        assert obj.get("id"), f"entry titled {obj.get('title')!r} has no explicit id"
        assert entry.id == obj["id"]
        assert entry.origin == "pack", f"{entry.id}: origin must be 'pack', got {entry.origin!r}"


def test_ids_and_titles_are_unique(entries: list[Entry]) -> None:
    dup_ids = [k for k, n in Counter(e.id for e in entries).items() if n > 1]
    assert not dup_ids, f"duplicate ids: {dup_ids}"
    dup_titles = [k for k, n in Counter(e.title.casefold() for e in entries).items() if n > 1]
    assert not dup_titles, f"duplicate titles: {dup_titles}"


def test_pack_size_and_coverage(entries: list[Entry]) -> None:
    assert len(entries) >= MIN_ENTRIES, f"only {len(entries)} entries; need at least {MIN_ENTRIES}"
    domains = {e.domain for e in entries}
    assert len(domains) >= MIN_DOMAINS, f"only {len(domains)} domains: {sorted(domains)}"
    missing_types = set(ENTRY_TYPES) - {e.type for e in entries}
    assert not missing_types, f"no entries of type {sorted(missing_types)}"
    missing_sev = set(SEVERITIES) - {e.severity for e in entries}
    assert not missing_sev, f"no entries of severity {sorted(missing_sev)}"


def test_entry_fields_meet_the_pack_conventions(entries: list[Entry]) -> None:
    problems = []
    for e in entries:
        if len(e.title) > MAX_TITLE_CHARS:
            problems.append(f"{e.id}: title is {len(e.title)} chars (max {MAX_TITLE_CHARS})")
        if not 2 <= len(e.tags) <= 5:
            problems.append(f"{e.id}: has {len(e.tags)} tags (want 2-5)")
        if any(t != t.lower() for t in e.tags):
            problems.append(f"{e.id}: tags must be lowercase: {e.tags}")
        if not e.context.strip() or not e.why.strip():
            problems.append(f"{e.id}: context and why must be filled in")
        if " " in e.domain or e.domain != e.domain.lower():
            problems.append(f"{e.id}: domain {e.domain!r} must be one lowercase word")
    assert not problems, "\n".join(problems)


def test_created_at_is_fixed_and_within_2024_to_2026(
        raw_entries: list[dict[str, Any]], entries: list[Entry]) -> None:
    low = datetime(2024, 1, 1, tzinfo=timezone.utc).timestamp()
    high = datetime(2027, 1, 1, tzinfo=timezone.utc).timestamp()
    for obj, e in zip(raw_entries, entries):
        assert isinstance(obj.get("created_at"), str) and obj["created_at"].endswith("Z"), (
            f"{e.id}: created_at must be an ISO 8601 UTC string, got {obj.get('created_at')!r}")
        assert e.created_at is not None and low <= e.created_at < high, (
            f"{e.id}: created_at {obj['created_at']} is outside 2024-2026")
    assert len({e.created_at for e in entries}) > len(entries) // 2, "created_at values are not varied"
    assert any(e.valid_from is not None or e.valid_until is not None for e in entries), (
        "no time-bound entries (valid_from/valid_until)")


def test_links_are_well_formed_and_point_inside_the_pack(raw_entries: list[dict[str, Any]]) -> None:
    ids = {obj["id"] for obj in raw_entries}
    problems = []
    total = 0
    seen_types: Counter[str] = Counter()
    for obj in raw_entries:
        links = obj.get("links", [])
        if not isinstance(links, list):
            problems.append(f"{obj['id']}: links must be a list, got {type(links).__name__}")
            continue
        pairs = set()
        for link in links:
            total += 1
            if not isinstance(link, dict) or set(link) - {"target", "type", "note"}:
                problems.append(f"{obj['id']}: malformed link {link!r}")
                continue
            target, kind = link.get("target"), link.get("type")
            if target not in ids:
                problems.append(f"{obj['id']}: link target {target!r} is not in the pack")
            if target == obj["id"]:
                problems.append(f"{obj['id']}: links to itself")
            if kind not in LINK_TYPES:
                problems.append(f"{obj['id']}: link type {kind!r} is not one of {LINK_TYPES}")
            if not isinstance(link.get("note"), str) or not link["note"].strip():
                problems.append(f"{obj['id']}: link to {target!r} needs a note")
            if (target, kind) in pairs:
                problems.append(f"{obj['id']}: duplicate link {kind} -> {target}")
            pairs.add((target, kind))
            seen_types[kind] += 1
    assert not problems, "\n".join(problems)
    assert total >= len(raw_entries) * 0.4, f"only {total} links for {len(raw_entries)} entries"
    for kind in ("contradicts", "sequences"):
        assert seen_types[kind] > 0, f"no {kind!r} links in the pack"
