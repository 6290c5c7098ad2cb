"""Does :func:`tiervault.vault.porter.porter_stem` give FTS5's term for every word?

    python bench/porter_check.py [--scifact DIR] [--entries 20000] [--random 300000] [--json out.json]

Every distinct ``[a-z0-9]`` word (the words the Python stemmer is used for) of: the
bench vocabulary (``bench/vocabulary.py``), the texts of a ``bench/corpus.py`` corpus of
``--entries`` entries and its queries, the SciFact corpus and queries (``--scifact``, the
BEIR directory) and ``--random`` random words (letters drawn with English-like vowel
shares, half of them given a suffix one of the porter rules reads), each stemmed by
FTS5 itself (``Stemmer.fts5_stems``, the table the search uses) and in Python. Prints
the counts and every word that differs (none expected).
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))

from bench.output import emit  # noqa: E402

# every suffix a rule of fts5_tokenize.c's porter reads, and a few endings around them
SUFFIXES = ("s", "es", "sses", "ies", "ss", "ed", "eed", "ing", "at", "bl", "iz", "y",
            "ational", "tional", "enci", "anci", "izer", "logi", "bli", "alli", "entli",
            "eli", "ousli", "ization", "ation", "ator", "alism", "iveness", "fulness",
            "ousness", "aliti", "iviti", "biliti", "icate", "ative", "alize", "iciti",
            "ical", "ful", "ness", "al", "ance", "ence", "er", "ic", "able", "ible", "ant",
            "ement", "ment", "ent", "sion", "tion", "ion", "ou", "ism", "ate", "iti", "ous",
            "ive", "ize", "e", "ll", "l", "ying", "yed", "lled", "tted", "zzed", "ssing",
            "ating", "bling", "izing", "hop", "ow", "ox", "oy", "ey", "ay")


def _plain(words: set[str]) -> list[str]:
    """The ``[a-z0-9]`` words (what the Python stemmer is used for), sorted."""
    return sorted(w for w in words if w.isascii() and w.isalnum() and w.lower() == w)


def _bench_words(entries: int) -> dict[str, set[str]]:
    from bench.corpus import generate, queries, vocabulary
    from tiervault.vault.tokenizer import split_words

    vocab: set[str] = set()
    for w in vocabulary().words:
        vocab.update(split_words(w))
    corpus: set[str] = set()
    for e in generate(entries).entries():
        for field in ("title", "content", "context", "rationale", "domain", "id"):
            value = e.get(field)
            if isinstance(value, str):
                corpus.update(split_words(value))
        for tag in e.get("tags") or ():
            corpus.update(split_words(tag))
    for q in queries(2000, 7):
        corpus.update(split_words(q["text"]))
    return {"bench vocabulary": vocab, f"bench corpus ({entries} entries) + 2000 queries": corpus}


def _scifact_words(root: Path) -> dict[str, set[str]]:
    from tiervault.vault.tokenizer import split_words

    out: set[str] = set()
    for name in ("corpus.jsonl.gz", "queries.jsonl.gz"):
        with gzip.open(root / name, "rt", encoding="utf-8") as fh:
            for line in fh:
                row = json.loads(line)
                out.update(split_words(row.get("title", "") + " " + row.get("text", "")))
    return {"SciFact corpus + queries": out}


def _random_words(n: int, seed: int) -> dict[str, set[str]]:
    rng = random.Random(seed)
    vowels, consonants = "aeiouy", "bcdfghjklmnpqrstvwxz"
    out: set[str] = set()
    while len(out) < n:
        size = rng.randint(1, 12)
        w = "".join(rng.choice(vowels) if rng.random() < 0.4 else rng.choice(consonants)
                    for _ in range(size))
        if rng.random() < 0.5:
            w += rng.choice(SUFFIXES)
        if rng.random() < 0.03:
            w += str(rng.randint(0, 99))
        out.add(w)
    return {f"random ({n}, seed {seed})": out}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scifact", type=Path, default=Path("/work/shared/data/beir/scifact"))
    ap.add_argument("--entries", type=int, default=20000)
    ap.add_argument("--random", type=int, default=300000)
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)

    from tiervault.vault.porter import porter_stem
    from tiervault.vault.tokenizer import Stemmer

    sets = _bench_words(args.entries)
    if args.scifact.exists():
        sets.update(_scifact_words(args.scifact))
    sets.update(_random_words(args.random, args.seed))
    stemmer = Stemmer()
    out: dict = {"sets": {}}
    all_differ: list = []
    for name, words in sets.items():
        plain = _plain(words)
        t0 = time.perf_counter()
        ref = stemmer.fts5_stems(plain)
        t1 = time.perf_counter()
        ours = [porter_stem(w) for w in plain]
        t2 = time.perf_counter()
        differ = [(w, r, o) for w, r, o in zip(plain, ref, ours) if r != o]
        changed = sum(r != w for w, r in zip(plain, ref))
        all_differ.extend(differ)
        out["sets"][name] = {"words": len(words), "plain_words": len(plain),
                             "changed_by_fts5": changed, "differ": len(differ),
                             "first_differ": differ[:20],
                             "us_per_word_fts5": round((t1 - t0) * 1e6 / max(1, len(plain)), 2),
                             "us_per_word_python": round((t2 - t1) * 1e6 / max(1, len(plain)), 2)}
    import sqlite3
    out["sqlite_version"] = sqlite3.sqlite_version
    out["all_equal"] = not all_differ
    emit(out, args.json)
    return 0 if not all_differ else 1


if __name__ == "__main__":
    raise SystemExit(main())
