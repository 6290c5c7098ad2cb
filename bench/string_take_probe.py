"""A string table's ids decoded at a top k's slots: NumPy slices against memoryview slices.

    python bench/string_take_probe.py --workdir DIR [--slots 30] [--draws 2000] [--json out.json]

``DIR`` is a ``bench/run.py`` work directory. For each tier's entry-id table (mapped from
its mirror cache), ``--draws`` sets of ``--slots`` random sorted slots; the strings cut
from the blob as ``StringTable.take`` did up to session 12 (``blob[a:b].tobytes().decode()``)
and as memoryview slices (``str(memoryview(blob)[a:b], "utf-8")``, session 13's first
change, and ``memoryview(blob)[a:b].tobytes().decode()``), the same strings checked; best of 9 runs, us a call (issue 16 session 13). Warm: one loop.
"""

from __future__ import annotations

import argparse
import os
import sys
import timeit
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: a checkout's own tiervault

import numpy as np  # noqa: E402

from bench.output import emit  # noqa: E402
from bench.phases import write_config  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--slots", type=int, default=30)
    ap.add_argument("--draws", type=int, default=2000)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)

    from tiervault.brain.brain import Brain

    brain = Brain.open(write_config(args.workdir))
    rng = np.random.default_rng(3)
    out: dict[str, object] = {"workdir": str(args.workdir), "slots": args.slots}
    for tier in brain.manager.ordered():
        table = tier.store.postings().ids.base
        blob, offsets = table.blob.all(), table.offsets.all()
        draws = []
        for _ in range(args.draws):
            at = np.sort(rng.choice(len(table), size=args.slots, replace=False))
            draws.append((offsets[at].tolist(), offsets[at + 1].tolist()))

        def numpy_slices() -> list[list[str]]:
            return [[blob[a:b].tobytes().decode() for a, b in zip(s, e)] for s, e in draws]

        def memoryview_slices() -> list[list[str]]:
            raw = memoryview(blob)
            return [[str(raw[a:b], "utf-8") for a, b in zip(s, e)] for s, e in draws]
        def memoryview_bytes() -> list[list[str]]:
            raw = memoryview(blob)
            return [[raw[a:b].tobytes().decode() for a, b in zip(s, e)] for s, e in draws]
        if not numpy_slices() == memoryview_slices() == memoryview_bytes():
            raise SystemExit("the decodes differ")
        out[tier.name] = {
            name: round(min(timeit.repeat(fn, number=1, repeat=9)) / args.draws * 1e6, 2)
            for name, fn in (("numpy_slices_us", numpy_slices), ("memoryview_slices_us", memoryview_slices),
                             ("memoryview_bytes_us", memoryview_bytes))}
    out["load"] = [round(x, 2) for x in os.getloadavg()]
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
