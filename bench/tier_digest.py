"""What a tier stores, as digests: to show that a change of the write path stores the
same thing (issue 16, "write side round 4").

:func:`digest` of a tier file: the row count and a sha256 over

- ``entries``: every row by ``rowid``, all columns (``gen`` included, so the batches
  committed are the same too);
- the FTS5 index: every ``(term, rowid, column, offset)`` of the ``entries_fts`` index,
  read through an ``fts5vocab`` "instance" table (the tokens FTS5 stored, not its
  segment layout, which depends on when merges ran);
- ``links``.

As a script it imports the bench corpus's JSONL with checkout A and checkout B (each in
its own fresh process and empty tiers, through ``bench/import_timing.py`` as
``write_ab.py`` times it) and compares the digests of every tier::

    python bench/tier_digest.py --a /path/main --b . --entries 100000 --json out.json

``--odd N``: also mix N odd-but-valid and N bad lines into each tier file (non-ASCII,
whitespace to fold, numbers as times; the bad ones are reported, not stored) so the
slow paths are compared too. Exit status 1 when any digest differs.
"""

from __future__ import annotations

import hashlib
import json
import random
import sqlite3
import sys
from pathlib import Path
from typing import Any

TIERS = ("agent", "project", "team")


def _feed(h: Any, rows: Any) -> int:
    n = 0
    for row in rows:
        h.update(repr(row).encode())
        h.update(b"\n")
        n += 1
    return n


def digest(path: Path) -> dict[str, Any]:
    """Row counts and sha256 digests of a tier's entries, FTS5 tokens and links."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        out: dict[str, Any] = {}
        cols = [r[1] for r in conn.execute("PRAGMA table_info(entries)")]
        h = hashlib.sha256()
        out["entries"] = _feed(h, conn.execute(
            f"SELECT rowid, {', '.join(cols)} FROM entries ORDER BY rowid"))
        out["entries_sha256"] = h.hexdigest()
        conn.execute("CREATE VIRTUAL TABLE temp.tv_vocab USING fts5vocab(main, entries_fts, instance)")
        h = hashlib.sha256()
        out["fts_tokens"] = _feed(h, conn.execute(
            "SELECT term, doc, col, offset FROM temp.tv_vocab"))
        out["fts_sha256"] = h.hexdigest()
        h = hashlib.sha256()
        out["links"] = _feed(h, conn.execute(
            "SELECT source_id, target_id, link_type, note FROM links ORDER BY 1, 2, 3"))
        out["links_sha256"] = h.hexdigest()
        return out
    finally:
        conn.close()


def odd_lines(n: int, seed: int) -> list[str]:
    """``n`` valid lines that take the slow paths and ``n`` bad ones (times given, so
    the stored rows do not depend on the clock)."""
    rng = random.Random(seed)
    texts = ["  Lead and trail  ", "tab\there", "Straße café", "nb\u00a0sp", "two  spaces",
             "x\x01y", "UPPER lower"]
    out = []
    for i in range(n):
        record = {"id": f"odd-{seed}-{i}", "title": rng.choice(texts), "description": rng.choice(texts),
                  "context": rng.choice(texts + [""]), "tags": rng.sample(["É", "b", "a", "ß"], 2),
                  "applies_to": ["Py3", "node"], "domain": " Infra ",
                  "created_at": rng.choice([1_700_000_000 + i, "2024-01-02T03:04:05Z"]),
                  "updated_at": "2024-05-06T07:08:09.123456Z"}
        out.append(json.dumps(record, ensure_ascii=rng.random() < 0.5))
        out.append(rng.choice(['{"id": "Bad Id", "title": "t", "description": "d"}',
                               '{"title": "t"', "[1, 2]", '{"id": "x", "title": "", "description": "d"}']))
    return out


def worker(src: Path, workdir: Path) -> dict[str, Any]:
    """One checkout's import of ``src/<tier>.jsonl`` into fresh tiers, and their digests."""
    from import_timing import time_jsonl_import  # this script's folder (see write_ab.py)
    from tiervault.vault.jsonl import import_lines
    from tiervault.vault.manager import VaultManager

    paths = {t: workdir / f"{t}.db" for t in TIERS}
    reports = {}
    if not any((src / f"{t}.odd").exists() for t in TIERS):
        time_jsonl_import(paths, src)
    else:
        with VaultManager.at({t: str(p) for t, p in paths.items()}) as manager:
            for t in TIERS:
                lines = (src / f"{t}.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
                odd = (src / f"{t}.odd").read_text(encoding="utf-8").splitlines(keepends=True)
                step = max(1, len(lines) // max(1, len(odd)))
                mixed = [x for i, line in enumerate(lines)
                         for x in ([line, odd[i // step]] if i % step == 0 and i // step < len(odd)
                                   else [line])]
                report = import_lines(manager, t, mixed)
                reports[t] = {"written": report.written, "errors": len(report.errors),
                              "errors_sha256": hashlib.sha256("\n".join(report.errors).encode()).hexdigest()}
    return {"tiers": {t: {**digest(p), **reports.get(t, {})} for t, p in paths.items()}}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--_worker":
        print(json.dumps(worker(Path(argv[1]), Path(argv[2]))))
        return 0
    import shutil
    import tempfile

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench.checkouts import ab_parser, commit_of, run_worker
    from bench.corpus import generate, write_jsonl

    ap = ab_parser(__doc__)
    ap.add_argument("--odd", type=int, default=0, metavar="N")
    args = ap.parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="tiervault-digest-"))
    try:
        src = base / "jsonl"
        src.mkdir()
        corpus = generate(args.entries, args.seed)
        for t in TIERS:
            write_jsonl(corpus, src / f"{t}.jsonl", t)
            if args.odd:
                (src / f"{t}.odd").write_text("\n".join(odd_lines(args.odd, len(t))) + "\n",
                                              encoding="utf-8")
        del corpus
        out: dict[str, Any] = {"entries": args.entries, "seed": args.seed, "odd": args.odd}
        for name, checkout, commit in (("A", args.a.resolve(), args.a_commit),
                                       ("B", args.b.resolve(), args.b_commit)):
            work = base / name
            work.mkdir()
            out[name] = {"commit": commit or commit_of(checkout),
                         **run_worker(checkout, str(Path(__file__).resolve()), [str(src), str(work)])}
        out["identical"] = out["A"]["tiers"] == out["B"]["tiers"]
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(json.dumps(out, indent=2))
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0 if out["identical"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
