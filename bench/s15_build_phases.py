"""Issue 16, session 15 probe: one tier's first mirror build in this process, split by
phase into user CPU, system CPU and minor page faults (getrusage around each wrapped
function; nested phases are counted in their own row and subtracted from the caller's).

    python bench/s15_build_phases.py TIER_DB NAME [--json out.json]

The tier's mirror cache is deleted first; the build is ``Postings.build`` (what a
build worker runs), with scikit-learn imported before timing (as a forking worker does).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import sys
import time
from pathlib import Path


def usage_now() -> tuple[float, float, int]:
    """This process's user CPU, system CPU (s) and minor page faults so far."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime, r.ru_stime, r.ru_minflt


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("db", type=Path)
    ap.add_argument("name")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    import sklearn.decomposition  # noqa: F401
    from tiervault.vault import latent, mirror_analysis, mirror_cache, postings, store as store_mod, tfidf_rows
    from tiervault.vault.tokenizer import STOP_WORDS

    STOP_WORDS.get()
    totals: dict[str, list[float]] = {}
    stack: list[list[float]] = []

    def wrap(owner, attr, label):
        fn = getattr(owner, attr)

        def timed(*a, **k):
            u0, s0, f0 = usage_now()
            stack.append([0.0, 0.0, 0.0])  # children's own
            try:
                return fn(*a, **k)
            finally:
                u1, s1, f1 = usage_now()
                kids = stack.pop()
                du, ds, df = u1 - u0, s1 - s0, f1 - f0
                row = totals.setdefault(label, [0.0, 0.0, 0.0, 0])
                row[0] += du - kids[0]; row[1] += ds - kids[1]; row[2] += df - kids[2]; row[3] += 1
                if stack:
                    stack[-1][0] += du; stack[-1][1] += ds; stack[-1][2] += df
        setattr(owner, attr, timed)

    wrap(store_mod.TierStore, "changes_since", "read rows (changes_since)")
    # An SQLite tier's first build reads its rows a chunk at a time as it analyses them
    # (TierStore.rows_in_chunks, 8411e45): each fetch is a phase of its own, or it would
    # count in the build's rest and "read rows" would show nothing.
    real_chunks = store_mod.TierStore.rows_in_chunks

    class _Fetch:
        @staticmethod
        def next_chunk(chunks):
            return next(chunks, None)

    wrap(_Fetch, "next_chunk", "read rows (rows_in_chunks)")

    def fetched(chunks):
        while (chunk := _Fetch.next_chunk(chunks)) is not None:
            yield chunk

    @contextlib.contextmanager
    def timed_chunks(self, size):
        with real_chunks(self, size) as (gen, chunks, records):  # records: light_feed.py
            yield gen, fetched(chunks), records

    store_mod.TierStore.rows_in_chunks = timed_chunks
    wrap(postings, "analyse_rows", "row analysis (words -> codes, sums)")
    wrap(postings.Postings, "_register", "slot columns (_register)")
    wrap(postings, "assemble", "assemble (CSR -> CSC)")
    wrap(postings.Postings, "_fit", "TF-IDF fit")
    wrap(postings.Postings, "_freeze", "freeze")
    wrap(latent, "fit_components", "latent fit (SVD)")
    wrap(latent, "saved_rows", "latent rows (projection)")
    wrap(mirror_cache, "save", "cache write")
    from tiervault.vault import array_file
    wrap(array_file, "write", "cache write: array_file.write")
    wrap(array_file, "block_crcs", "cache write: block CRCs")
    wrap(os, "fsync", "cache write: fsync")
    wrap(postings.Postings, "_rebuild_now", "the whole build (rest)")
    for cache in (Path(f"{args.db}.postings.mirror"),):
        if cache.exists():
            cache.unlink()
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    u0, s0, f0 = usage_now()
    with store_mod.TierStore(args.db, name=args.name) as st:
        rows = postings.Postings.build(st).base_rows
    u1, s1, f1 = usage_now()
    out = {"db": str(args.db), "rows": rows, "wall_s": round(time.perf_counter() - t0, 3),
           "user_s": round(u1 - u0, 3), "sys_s": round(s1 - s0, 3), "minflt": f1 - f0,
           "load_before": round(load, 2), "load_after": round(os.getloadavg()[0], 2),
           "phases": {k: {"user_s": round(v[0], 3), "sys_s": round(v[1], 3), "minflt": int(v[2]), "calls": v[3]}
                      for k, v in sorted(totals.items(), key=lambda kv: -(kv[1][0] + kv[1][1]))}}
    print(json.dumps(out, indent=1))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
