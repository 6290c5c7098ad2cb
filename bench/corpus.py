"""Deterministic synthetic corpus and query set for the tiervault benchmarks.

``generate(n, seed)`` builds ``n`` entry dicts (valid input for
``tiervault.vault.entry.Entry.from_dict``) split across the agent / project /
team tiers, with ``0.3 * n`` links and a few deliberate cross-tier duplicates.
``queries(n_queries, seed)`` builds the fixed query set drawn from the same
vocabulary. Same arguments -> byte-identical output, on any machine.

Text model: a fixed pronounceable vocabulary of ~50,000 synthetic words plus
English function words and a few technical terms, ranked and drawn with a
Zipf law (exponent 1.1). Function words hold the top ranks, as in real text,
so they occur in nearly every entry: that is the slow case for FTS5 (every
match is scored before sorting), which the benchmark must exercise. Each
domain also has its own topical words so domain filters correlate with text.

Everything heavy is vectorised with NumPy; strings are made with ``join`` on
slices of one token list. One million entries take a few tens of seconds.
"""

from __future__ import annotations

import gc
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from bench.vocabulary import (DOMAINS, FUNCTION_WORDS, N_TAGS, TECH_TERMS, Vocabulary,
                              vocabulary)

# Vocabulary, vocabulary, DOMAINS, FUNCTION_WORDS and TECH_TERMS live in bench/vocabulary.py
# and are re-exported: ``from bench.corpus import vocabulary`` keeps working.
__all__ = ["Corpus", "Vocabulary", "generate", "queries", "vocabulary", "write_jsonl",
           "write_dir", "TIERS", "DOMAINS", "FUNCTION_WORDS", "TECH_TERMS", "REFERENCE_NOW"]

TIERS = ("agent", "project", "team")
TIER_SHARES = (0.2, 0.3, 0.5)
# Skewed like a real team's knowledge base: a few domains dominate.
DOMAIN_WEIGHTS = (0.18, 0.16, 0.13, 0.11, 0.10, 0.09, 0.08, 0.06, 0.05, 0.04)
TYPES = ("pattern", "anti-pattern", "rule", "playbook", "decision", "reference")
TYPE_WEIGHTS = (0.35, 0.15, 0.20, 0.08, 0.12, 0.10)
SEVERITIES = ("suggestion", "warning", "critical")
SEVERITY_WEIGHTS = (0.60, 0.30, 0.10)
ORIGINS = ("agent", "user", "pack")
ORIGIN_WEIGHTS = (0.60, 0.30, 0.10)
LINK_TYPES = ("supports", "contradicts", "extends", "sequences")
LINK_WEIGHTS = (0.45, 0.10, 0.30, 0.15)

#: Fixed "now" so output never depends on the clock; pass ``now=`` to override.
REFERENCE_NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z
DAY = 86_400.0
LINK_FRACTION = 0.3
DUPLICATE_FRACTION = 0.03
VALIDITY_FRACTION = 0.2

@dataclass
class Corpus:
    """Generated entries per tier, links, duplicates and the parameters used."""

    n: int
    seed: int
    now: float
    tiers: dict[str, list[dict[str, Any]]]
    links: list[tuple[str, str, str]]
    duplicates: list[dict[str, str]] = field(default_factory=list)
    tier_of: dict[str, str] = field(default_factory=dict)  # base id -> its (first) tier

    def __len__(self) -> int:
        return sum(len(v) for v in self.tiers.values())

    def entries(self, tier: str | None = None) -> Iterator[dict[str, Any]]:
        """Entry dicts of one tier, or of all tiers in ``TIERS`` order."""
        for name in (TIERS if tier is None else (tier,)):
            yield from self.tiers[name]

    def links_by_tier(self) -> dict[str, list[tuple[str, str, str]]]:
        """Links grouped by the tier that holds their source (where ``link`` must run)."""
        out: dict[str, list[tuple[str, str, str]]] = {t: [] for t in TIERS}
        for link in self.links:
            out[self.tier_of[link[0]]].append(link)
        return out


def _choice(rng: np.random.Generator, options: tuple[str, ...], weights: tuple[float, ...],
            size: int) -> np.ndarray:
    return rng.choice(len(options), size=size, p=np.asarray(weights) / sum(weights))


def _iso(ts: np.ndarray) -> list[str]:
    stamps = np.datetime_as_string(ts.astype("datetime64[s]"), unit="s")
    return [s + "Z" for s in stamps.tolist()]


class _TextMaker:
    """Turns drawn ranks into field strings: one big token list, sliced per field."""

    def __init__(self, vocab: Vocabulary) -> None:
        w = np.array(vocab.words, dtype=object)
        cap = np.array([x[:1].upper() + x[1:] for x in vocab.words], dtype=object)
        # Variant table: plain, "word,", "word.", Capital, "Capital,", "Capital." —
        # punctuation and sentence case chosen by index arithmetic, not per-token Python.
        self.table = np.concatenate([w, w + ",", w + ".", cap, cap + ",", cap + "."])
        self.v = len(vocab.words)

    def fields(self, rng: np.random.Generator, vocab: Vocabulary, lengths: np.ndarray,
               domain: np.ndarray, *, min_rank_share: float,
               sentences: bool) -> tuple[list[str], np.ndarray]:
        """One string per entry (``lengths[i]`` tokens) and the ranks of its first two tokens."""
        starts = np.concatenate([[0], np.cumsum(lengths)])
        total = int(starts[-1])
        ranks = vocab.draw(rng, total)
        if min_rank_share:  # titles: fewer function words than running text
            content = rng.random(total) < min_rank_share
            ranks[content] = vocab.draw(rng, int(content.sum()), vocab.content_start)
        owner = np.repeat(np.arange(len(lengths)), lengths)
        topical = rng.random(total) < 0.15
        pick = np.minimum(rng.zipf(1.3, int(topical.sum())) - 1, vocab.topic.shape[1] - 1)
        ranks[topical] = vocab.topic[domain[owner[topical]], pick]
        variant = np.zeros(total, dtype=np.int64)
        last = starts[1:] - 1
        if sentences:
            u = rng.random(total)  # none 86% / comma 6% / period 8%
            punct = (u >= 0.86).astype(np.int64) + (u >= 0.92)
            punct[last] = 2
            cap = np.zeros(total, dtype=bool)
            cap[1:] = punct[:-1] == 2
            variant = punct + 3 * cap
        first = starts[:-1]
        variant[first] = np.where(variant[first] >= 3, variant[first], variant[first] + 3)
        tokens = self.table[ranks + self.v * variant].tolist()
        s = starts.tolist()
        texts = [" ".join(tokens[s[i]:s[i + 1]]) for i in range(len(lengths))]
        return texts, np.stack([ranks[first], ranks[np.minimum(first + 1, total - 1)]], axis=1)


def _distinct_rows(rng: np.random.Generator, n: int, k: int, m: int, p: np.ndarray) -> np.ndarray:
    """``n`` rows of ``k`` distinct values in ``range(m)`` drawn with weights ``p``."""
    out = rng.choice(m, size=(n, k), p=p)
    while True:
        s = np.sort(out, axis=1)
        bad = np.nonzero((s[:, 1:] == s[:, :-1]).any(axis=1))[0]
        if not len(bad):
            return out
        out[bad] = rng.choice(m, size=(len(bad), k), p=p)


def _base_entries(n: int, rng: np.random.Generator, now: float) -> list[dict[str, Any]]:
    vocab = vocabulary()
    maker = _TextMaker(vocab)
    domain = _choice(rng, DOMAINS, DOMAIN_WEIGHTS, n)
    types = _choice(rng, TYPES, TYPE_WEIGHTS, n)
    sev = _choice(rng, SEVERITIES, SEVERITY_WEIGHTS, n)
    origin = _choice(rng, ORIGINS, ORIGIN_WEIGHTS, n)
    titles, heads = maker.fields(rng, vocab, rng.integers(4, 9, n), domain,
                          min_rank_share=0.6, sentences=False)
    descriptions, _ = maker.fields(rng, vocab, rng.integers(20, 41, n), domain,
                                min_rank_share=0.0, sentences=True)
    contexts, _ = maker.fields(rng, vocab, rng.integers(10, 21, n), domain,
                            min_rank_share=0.0, sentences=True)
    tag_p = 1.0 / np.arange(1, N_TAGS + 1) ** 0.8
    tags = _distinct_rows(rng, n, 3, N_TAGS, tag_p / tag_p.sum())
    created = now - rng.random(n) * 3 * 365 * DAY
    updated = created + rng.random(n) ** 3 * (now - created)
    # Validity windows on ~20%: 35% expired, 20% not yet valid, 45% current.
    has_window = rng.random(n) < VALIDITY_FRACTION
    kind = rng.choice(3, size=n, p=[0.35, 0.20, 0.45])
    vf = np.full(n, np.nan)
    vu = np.full(n, np.nan)
    exp = has_window & (kind == 0)
    vf[exp] = np.minimum(created[exp], now - 2 * DAY)  # so even a day-old entry can expire
    vu[exp] = np.minimum(created[exp] + (30 + rng.random(exp.sum()) * 700) * DAY, now - DAY)
    fut = has_window & (kind == 1)
    vf[fut] = now + (1 + rng.random(fut.sum()) * 180) * DAY
    open_end = rng.random(n) < 0.5
    vu[fut & ~open_end] = vf[fut & ~open_end] + (30 + rng.random((fut & ~open_end).sum()) * 365) * DAY
    cur = has_window & (kind == 2)
    vf[cur] = created[cur]
    vu[cur] = now + (1 + rng.random(cur.sum()) * 365) * DAY
    created_s, updated_s = _iso(created), _iso(updated)
    vf_s = _iso(np.nan_to_num(vf))
    vu_s = _iso(np.nan_to_num(vu))
    vf_ok, vu_ok = (~np.isnan(vf)).tolist(), (~np.isnan(vu)).tolist()
    slugs = vocab.slugs
    head_rows = heads.tolist()
    tag_names = vocab.tags
    dom, typ, sv, org = domain.tolist(), types.tolist(), sev.tolist(), origin.tolist()
    tag_rows = tags.tolist()
    out = []
    for i in range(n):
        h = head_rows[i]
        entry = {
            "id": f"{slugs[h[0]]}-{slugs[h[1]]}-{i:07x}",
            "title": titles[i],
            "description": descriptions[i],
            "context": contexts[i],
            "type": TYPES[typ[i]],
            "domain": DOMAINS[dom[i]],
            "severity": SEVERITIES[sv[i]],
            "origin": ORIGINS[org[i]],
            "tags": [tag_names[t] for t in tag_rows[i]],
            "created_at": created_s[i],
            "updated_at": updated_s[i],
        }
        if vf_ok[i]:
            entry["valid_from"] = vf_s[i]
        if vu_ok[i]:
            entry["valid_until"] = vu_s[i]
        out.append(entry)
    return out


def generate(n: int, seed: int = 7, *, now: float | None = None,
             duplicate_fraction: float = DUPLICATE_FRACTION) -> Corpus:
    """``n`` entry rows in all (duplicates included) across the three tiers.

    ``n - round(duplicate_fraction * n)`` distinct entries are split 20/30/50%
    over agent/project/team; the remaining rows are copies placed in a tier
    other than the original's: half keep the id (edited description, later
    ``updated_at``), half keep the content under a new id. ``now`` (default
    ``REFERENCE_NOW``) anchors timestamps and validity windows.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    now = REFERENCE_NOW if now is None else float(now)
    # Millions of new dicts/lists trigger the cyclic GC again and again (nothing here
    # is cyclic): pausing it makes 1M entries about twice as fast.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _generate(n, seed, now, duplicate_fraction)
    finally:
        if was_enabled:
            gc.enable()


def _generate(n: int, seed: int, now: float, duplicate_fraction: float) -> Corpus:
    rng = np.random.default_rng(seed)
    n_dup = int(round(duplicate_fraction * n)) if n >= 20 else 0
    n_base = n - n_dup
    base = _base_entries(n_base, rng, now)
    tier_idx = rng.choice(len(TIERS), size=n_base, p=TIER_SHARES)
    tiers: dict[str, list[dict[str, Any]]] = {t: [] for t in TIERS}
    tier_of: dict[str, str] = {}
    for entry, t in zip(base, tier_idx.tolist()):
        tiers[TIERS[t]].append(entry)
        tier_of[entry["id"]] = TIERS[t]
    duplicates: list[dict[str, str]] = []
    if n_dup:
        src = rng.choice(n_base, size=n_dup, replace=False)
        shift = rng.integers(1, len(TIERS), size=n_dup)
        vocab = vocabulary()
        extra_words = vocab.draw(rng, n_dup * 4, vocab.content_start).reshape(-1, 4).tolist()
        newer = _iso(now - (np.arange(n_dup) % 30) * 3600.0)
        for j, (s, sh) in enumerate(zip(src.tolist(), shift.tolist())):
            orig = base[s]
            to_tier = TIERS[(int(tier_idx[s]) + sh) % len(TIERS)]
            copy = dict(orig, tags=list(orig["tags"]))
            if j % 2 == 0:  # same id, edited and newer
                copy["description"] = (orig["description"] + " Updated: "
                                       + " ".join(vocab.words[w] for w in extra_words[j]) + ".")
                copy["updated_at"] = newer[j]
                kind = "id"
            else:  # same content, new id
                copy["id"] = f"{orig['id']}-dup{j:x}"
                kind = "content"
            tiers[to_tier].append(copy)
            duplicates.append({"kind": kind, "original_id": orig["id"], "copy_id": copy["id"],
                               "original_tier": tier_of[orig["id"]], "copy_tier": to_tier})
    links = _links(rng, [e["id"] for e in base], int(round(LINK_FRACTION * n)))
    return Corpus(n=n, seed=seed, now=now, tiers=tiers, links=links,
                  duplicates=duplicates, tier_of=tier_of)


def _links(rng: np.random.Generator, ids: list[str], k: int) -> list[tuple[str, str, str]]:
    """``k`` distinct (source, target, type) links, no self-links, sources and targets in ``ids``."""
    m = len(ids)
    if m < 2 or k == 0:
        return []
    k = min(k, m * (m - 1))
    pairs = np.empty(0, dtype=np.int64)
    while len(pairs) < k:
        need = int((k - len(pairs)) * 1.1) + 8
        s = rng.integers(0, m, need)
        t = rng.integers(0, m, need)
        keep = s != t
        new = s[keep].astype(np.int64) * m + t[keep]
        pairs = np.concatenate([pairs, new])
        _, first = np.unique(pairs, return_index=True)
        pairs = pairs[np.sort(first)]  # keep draw order, drop repeats
    pairs = pairs[:k]
    types = _choice(rng, LINK_TYPES, LINK_WEIGHTS, k).tolist()
    return [(ids[p // m], ids[p % m], LINK_TYPES[ty]) for p, ty in zip(pairs.tolist(), types)]


_PUNCT_TEMPLATES = (
    "what's the {0}-{1}?", "{0}/{1}", "how to {0} {1}?", '"{0} {1}" {2}', "{0}: {1} {2}",
    "{0} AND {1} NOT {2}", "{0}* {1}", "({0} OR {1})", "{0}_{1}.{2}", "NEAR({0} {1})",
    "{0}, {1}; {2}!", "{0} {1} -{2}", "^{0} {1}", "{0}'s {1} (see {2})",
)


def queries(n_queries: int = 300, seed: int = 7) -> list[dict[str, Any]]:
    """The fixed query set: ``{"id", "text", "words", "kind", "filters"}`` dicts.

    2-5 words each, drawn from the corpus vocabulary: ~30% of words from the
    whole Zipf law (mostly function words: the slow, match-everything case),
    the rest from its content part (rank >= 64, median rank ~500, a long rare
    tail). ~30% use punctuation or FTS5 operator characters; ~25% carry
    filters (keywords of ``Filters.build``: domain, type, severity, tags).
    """
    vocab = vocabulary()
    rng = np.random.default_rng([seed, 1])  # independent of generate()'s stream
    rank_of = {w: i for i, w in enumerate(vocab.words)}
    tech = [rank_of[t] for t in TECH_TERMS]
    out = []
    for q in range(n_queries):
        k = int(rng.integers(2, 6))
        chosen: list[int] = []
        while len(chosen) < k:
            r = rng.random()
            if r < 0.3:
                w = int(vocab.draw(rng, 1)[0])
            elif r < 0.4:
                w = tech[int(rng.integers(len(tech)))]
            else:
                w = int(vocab.draw(rng, 1, vocab.content_start)[0])
            if w not in chosen:
                chosen.append(w)
        words = [vocab.words[w] for w in chosen]
        kind = "plain"
        if rng.random() < 0.3:
            template = _PUNCT_TEMPLATES[int(rng.integers(len(_PUNCT_TEMPLATES)))]
            used = len(re.findall(r"\{\d\}", template))
            if used <= k:
                text = template.format(*words) + ("" if used == k else " " + " ".join(words[used:]))
                kind = "punct"
            else:
                text = " ".join(words)
        else:
            text = " ".join(words)
        filters: dict[str, Any] = {}
        if rng.random() < 0.25:
            which = rng.choice(4, size=int(rng.integers(1, 3)), replace=False)
            for f in which.tolist():
                if f == 0:
                    filters["domain"] = DOMAINS[int(_choice(rng, DOMAINS, DOMAIN_WEIGHTS, 1)[0])]
                elif f == 1:
                    filters["type"] = TYPES[int(_choice(rng, TYPES, TYPE_WEIGHTS, 1)[0])]
                elif f == 2:
                    filters["severity"] = SEVERITIES[int(rng.integers(len(SEVERITIES)))]
                else:
                    filters["tags"] = [vocab.tags[int(rng.integers(40))]]
        if all(rank_of[w] < vocab.content_start for w in words):
            kind = "common" if kind == "plain" else kind
        out.append({"id": f"q{q:04d}", "text": text, "words": words, "kind": kind,
                    "filters": filters})
    return out


def write_jsonl(corpus: Corpus, path: str | Path, tier: str | None = None) -> int:
    """Write the entries of ``tier`` (or all tiers) as JSONL; returns the line count."""
    count = 0
    with open(path, "w", encoding="utf-8") as fh:
        for entry in corpus.entries(tier):
            fh.write(json.dumps(entry, ensure_ascii=False))
            fh.write("\n")
            count += 1
    return count


def write_dir(corpus: Corpus, directory: str | Path, n_queries: int = 300) -> dict[str, Path]:
    """Write ``<tier>.jsonl`` per tier, ``links.jsonl`` and ``queries.jsonl`` into ``directory``."""
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    paths = {}
    for tier in TIERS:
        paths[tier] = root / f"{tier}.jsonl"
        write_jsonl(corpus, paths[tier], tier)
    paths["links"] = root / "links.jsonl"
    with open(paths["links"], "w", encoding="utf-8") as fh:
        for s, t, ty in corpus.links:
            fh.write(json.dumps({"source": s, "target": t, "type": ty,
                                 "tier": corpus.tier_of[s]}) + "\n")
    paths["queries"] = root / "queries.jsonl"
    with open(paths["queries"], "w", encoding="utf-8") as fh:
        for q in queries(n_queries, corpus.seed):
            fh.write(json.dumps(q, ensure_ascii=False) + "\n")
    return paths


if __name__ == "__main__":  # python bench/corpus.py N OUT_DIR [SEED]
    import sys
    import time

    t0 = time.perf_counter()
    c = generate(int(sys.argv[1]), int(sys.argv[3]) if len(sys.argv) > 3 else 7)
    print(f"generated {len(c)} rows in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    if len(sys.argv) > 2:
        print(write_dir(c, sys.argv[2]), file=sys.stderr)
