"""The benchmark corpus generator: deterministic, within spec, valid entries."""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/ is not installed

from bench.corpus import (DOMAINS, TECH_TERMS, TIERS, generate, queries, vocabulary,  # noqa: E402
                          write_dir, write_jsonl)
from tiervault.vault.entry import ENTRY_TYPES, LINK_TYPES, SEVERITIES, Entry  # noqa: E402
from tiervault.vault.filters import Filters  # noqa: E402

N = 4_000


@pytest.fixture(scope="module")
def corpus():
    return generate(N, seed=7)


def _ts(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _dump(c) -> str:
    return json.dumps([c.tiers, c.links, c.duplicates], sort_keys=True)


def test_same_seed_same_output_other_seed_differs(corpus):
    again = generate(N, seed=7)
    assert _dump(again) == _dump(corpus)
    other = generate(N, seed=8)
    assert _dump(other) != _dump(corpus)


def test_sizes_and_tier_split(corpus):
    assert len(corpus) == N
    shares = {t: len(corpus.tiers[t]) / N for t in TIERS}
    assert abs(shares["agent"] - 0.2) < 0.03
    assert abs(shares["project"] - 0.3) < 0.03
    assert abs(shares["team"] - 0.5) < 0.03


def test_every_entry_validates(corpus):
    for tier in TIERS:
        for row in corpus.tiers[tier]:
            entry = Entry.from_dict(row)
            assert entry.id == row["id"]


def test_field_lengths_and_choices(corpus):
    edited = {d["copy_id"] for d in corpus.duplicates if d["kind"] == "id"}
    tag_names = set(vocabulary().tags)
    assert len(tag_names) == 200
    seen_domains, seen_types, seen_sev = Counter(), Counter(), Counter()
    for tier in TIERS:
        for row in corpus.tiers[tier]:
            assert 4 <= len(row["title"].split()) <= 8
            assert 10 <= len(row["context"].split()) <= 20
            n_desc = len(row["description"].split())
            if row["id"] in edited and tier != corpus.tier_of[row["id"]]:
                assert n_desc <= 40 + 5  # "Updated:" plus four words
            else:
                assert 20 <= n_desc <= 40
            assert len(row["tags"]) == 3 and len(set(row["tags"])) == 3
            assert set(row["tags"]) <= tag_names
            seen_domains[row["domain"]] += 1
            seen_types[row["type"]] += 1
            seen_sev[row["severity"]] += 1
    assert set(seen_domains) == set(DOMAINS)
    assert set(seen_types) == set(ENTRY_TYPES)
    assert set(seen_sev) == set(SEVERITIES)
    # A realistic mix, not uniform: suggestions outnumber critical ones.
    assert seen_sev["suggestion"] > 3 * seen_sev["critical"]


def test_ids_unique_per_tier_and_duplicates_as_declared(corpus):
    for tier in TIERS:
        ids = [row["id"] for row in corpus.tiers[tier]]
        assert len(ids) == len(set(ids))
    assert len(corpus.tier_of) == N - len(corpus.duplicates)
    kinds = Counter(d["kind"] for d in corpus.duplicates)
    assert kinds["id"] > 0 and kinds["content"] > 0
    assert 0.01 <= len(corpus.duplicates) / N <= 0.05
    by_tier = {t: {row["id"]: row for row in corpus.tiers[t]} for t in TIERS}
    for dup in corpus.duplicates:
        assert dup["original_tier"] != dup["copy_tier"]
        orig = Entry.from_dict(by_tier[dup["original_tier"]][dup["original_id"]])
        copy = Entry.from_dict(by_tier[dup["copy_tier"]][dup["copy_id"]])
        if dup["kind"] == "id":
            assert copy.id == orig.id and copy.content_hash != orig.content_hash
            assert copy.updated_at > orig.updated_at
        else:
            assert copy.id != orig.id and copy.content_hash == orig.content_hash


def test_timestamps_and_validity_windows(corpus):
    now = corpus.now
    rows = list(corpus.entries())
    windowed = expired = future = 0
    for row in rows:
        created, updated = _ts(row["created_at"]), _ts(row["updated_at"])
        assert now - 3 * 365 * 86_400 - 1 <= created <= now
        assert created <= updated <= now
        vf, vu = row.get("valid_from"), row.get("valid_until")
        if vf or vu:
            windowed += 1
        if vf and vu:
            assert _ts(vu) > _ts(vf)
        if vu and _ts(vu) < now:
            expired += 1
        if vf and _ts(vf) > now:
            future += 1
    assert 0.15 <= windowed / len(rows) <= 0.25
    assert expired > 0.03 * len(rows) and future > 0.02 * len(rows)
    # Spread over the three years, not bunched.
    years = Counter(row["created_at"][:4] for row in rows)
    assert len(years) >= 3


def test_links_distinct_and_targets_exist(corpus):
    links = corpus.links
    assert len(links) == round(0.3 * N)
    assert len(set((s, t) for s, t, _ in links)) == len(links)
    for s, t, ty in links:
        assert s != t and ty in LINK_TYPES
        assert s in corpus.tier_of and t in corpus.tier_of
    grouped = corpus.links_by_tier()
    assert sum(len(v) for v in grouped.values()) == len(links)
    for tier, tier_links in grouped.items():
        ids = {row["id"] for row in corpus.tiers[tier]}
        assert all(s in ids for s, _, _ in tier_links)


def test_zipf_vocabulary_and_common_words_match_most_rows(corpus):
    rows = list(corpus.entries())
    docs = [(r["title"] + " " + r["description"] + " " + r["context"]).lower() for r in rows]
    tokens = Counter(w for d in docs for w in re.findall(r"[a-z]+", d))
    vocab = vocabulary()
    assert 50_000 <= len(vocab.words) <= 51_000 and len(set(vocab.words)) == len(vocab.words)
    synthetic = [w for w in vocab.words if w not in TECH_TERMS]
    assert all(re.fullmatch(r"[a-z]+", w) and re.search("[aeiouy]", w) for w in synthetic)
    with_the = sum(1 for d in docs if re.search(r"\bthe\b", d)) / len(docs)
    with_to = sum(1 for d in docs if re.search(r"\bto\b", d)) / len(docs)
    assert with_the > 0.95 and with_to > 0.8
    # Log-log slope of frequency vs rank over the synthetic head (topical words aside).
    ranks = np.array([r for r in range(64, 400) if re.fullmatch(r"[a-z]+", vocab.words[r])])
    freq = np.array([tokens[vocab.words[r]] for r in ranks], dtype=float) + 1
    slope = np.polyfit(np.log(ranks + 1), np.log(freq), 1)[0]
    assert -1.4 < slope < -0.8


def test_queries_reproducible_and_within_spec():
    qs = queries(300, seed=7)
    assert qs == queries(300, seed=7)
    assert qs != queries(300, seed=8)
    assert len(qs) == 300 and len({q["id"] for q in qs}) == 300
    rank = {w: i for i, w in enumerate(vocabulary().words)}
    kinds = Counter(q["kind"] for q in qs)
    assert kinds["punct"] >= 40 and kinds["plain"] >= 100
    n_filtered = 0
    has_common = has_rare = 0
    for q in qs:
        assert 2 <= len(q["words"]) <= 5 and len(set(q["words"])) == len(q["words"])
        for w in q["words"]:
            assert w in rank and w in q["text"]
        has_common += any(rank[w] < 64 for w in q["words"])
        has_rare += any(rank[w] > 2_000 for w in q["words"])
        if q["filters"]:
            n_filtered += 1
            Filters.build(**q["filters"])  # valid keywords and values
    assert 0.15 <= n_filtered / 300 <= 0.35
    assert has_common >= 60 and has_rare >= 60
    assert any(re.search(r"[?'/\"():*-]", q["text"]) for q in qs)


def test_write_jsonl_and_dir_round_trip(corpus, tmp_path):
    path = tmp_path / "team.jsonl"
    assert write_jsonl(corpus, path, "team") == len(corpus.tiers["team"])
    with open(path, encoding="utf-8") as fh:
        assert [json.loads(line) for line in fh] == corpus.tiers["team"]
    paths = write_dir(corpus, tmp_path / "out", n_queries=20)
    with open(paths["links"], encoding="utf-8") as fh:
        assert sum(1 for _ in fh) == len(corpus.links)
    with open(paths["queries"], encoding="utf-8") as fh:
        assert [json.loads(line) for line in fh] == queries(20, corpus.seed)


def test_small_and_bad_sizes():
    tiny = generate(5, seed=1)
    assert len(tiny) == 5 and not tiny.duplicates
    with pytest.raises(ValueError):
        generate(0)
