"""Issue 16, session 16 probe: ``mirror_analysis.assemble`` of one tier's analysed rows
with the 32-bit packing (wtf << 16 | count, when both fit) against the 64-bit one,
alternating in one process (the rows analysed once): user / system CPU, minor faults
and wall of each call.

    python bench/s16_assemble_packing.py TIER_DB [--rounds 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))

from bench.s15_build_phases import usage_now  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("db", type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    import numpy as np

    import tiervault.vault.mirror_analysis as ma
    from tiervault.vault.postings import Postings
    from tiervault.vault.store import TierStore
    from tiervault.vault.tokenizer import STOP_WORDS
    from tiervault.vault.word_codes import WordCodes

    STOP_WORDS.get()
    gc.disable()
    vocab, words, parts = Postings().vocab, WordCodes(), []
    with TierStore(args.db, name="t") as store, store.rows_in_chunks(20_000) as (_gen, chunks):
        for chunk in chunks:
            parts.append(ma.analyse_rows(chunk, vocab, words))
    narrow = ma.packed_pairs
    variants = {"narrow": narrow, "wide": lambda ps, total: np.concatenate([p.packed for p in ps])}
    runs = []
    out = {"db": str(args.db), "entries": int(sum(p.packed.size for p in parts)),
           "load_before": round(os.getloadavg()[0], 2), "runs": runs}
    for r in range(args.rounds):
        for name, fn in variants.items():
            ma.packed_pairs = fn
            u0, s0, f0 = usage_now()
            t0 = time.perf_counter()
            built = ma.assemble(parts, len(vocab))
            wall = time.perf_counter() - t0
            u1, s1, f1 = usage_now()
            del built
            runs.append({"variant": name, "round": r, "user_s": round(u1 - u0, 3),
                         "sys_s": round(s1 - s0, 3), "minflt": f1 - f0, "wall_s": round(wall, 3)})
            print(json.dumps(runs[-1]), flush=True)
    ma.packed_pairs = narrow
    out["load_after"] = round(os.getloadavg()[0], 2)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
