"""Issue 16, session 17 probe: a build worker's imports before it can fork, with and
without ``scipy.stats`` stood in for (vault/deferred_module.py), in fresh processes.

    python bench/s17_defer_probe.py [--rounds 3]

Each run: a fresh interpreter imports tiervault's build modules, then (``deferred``)
puts the stand-in in place, then imports what a worker imports before forking
(``mirror_workers``'s scikit-learn modules, the stop words); it prints the seconds of
each step and whether ``scipy.stats`` ran.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

_CHILD = """
import sys, time
t = time.perf_counter()
from tiervault.vault import postings, store  # noqa: F401  (what the worker imports first)
from tiervault.vault.tokenizer import STOP_WORDS
t1 = time.perf_counter()
if sys.argv[1] == "deferred":
    from tiervault.vault.deferred_module import defer
    defer("scipy.stats")
STOP_WORDS.get()
import sklearn.feature_extraction.text, sklearn.utils.extmath  # noqa: E401,F401
t2 = time.perf_counter()
print(round(t1 - t, 3), round(t2 - t1, 3), "scipy.stats._stats_py" in sys.modules)
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    runs = []
    for r in range(args.rounds):
        for side in ("plain", "deferred"):
            out = subprocess.run([sys.executable, "-c", _CHILD, side], capture_output=True, text=True,
                                 check=True).stdout.split()
            runs.append({"round": r, "side": side, "tiervault_s": float(out[0]),
                         "sklearn_and_stop_words_s": float(out[1]), "scipy_stats_ran": out[2] == "True",
                         "load": round(os.getloadavg()[0], 2)})
            print(json.dumps(runs[-1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
