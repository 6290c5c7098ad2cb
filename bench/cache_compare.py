"""Compare mirror cache files (``*.postings.mirror``) array by array.

    python bench/cache_compare.py DIR_A DIR_B [--json out.json]

Every ``*.postings.mirror`` in DIR_A against the same name in DIR_B (e.g. build_ab.py's
``copy-A`` / ``copy-B`` after a run): each array's dtype, shape and bytes (lazy arrays
read whole, every block checked), and the header's fields. The generation and epoch a
build pins may differ between two copies; everything else must not (issue 16, session 14:
a faster build must leave the mirror the same, bit for bit).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from tiervault.vault import array_file


def _arrays(f: array_file.ArrayFile) -> dict[str, np.ndarray]:
    out = {}
    for name in sorted(f.names()):
        out[name] = np.asarray(f.checked(name).all() if name in f.lazy_names() else f.array(name))
    return out


def compare(a: Path, b: Path) -> dict:
    fa, fb = array_file.read(a), array_file.read(b)
    xa, xb = _arrays(fa), _arrays(fb)
    differ = sorted(n for n in set(xa) | set(xb)
                    if n not in xa or n not in xb or xa[n].dtype != xb[n].dtype
                    or xa[n].shape != xb[n].shape or not np.array_equal(xa[n].view(np.uint8), xb[n].view(np.uint8)))
    meta_differ = sorted(k for k in set(fa.meta) | set(fb.meta) if fa.meta.get(k) != fb.meta.get(k))
    return {"file": a.name, "arrays": len(xa), "arrays_differ": differ, "meta_differ": meta_differ}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a", type=Path)
    ap.add_argument("b", type=Path)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    rows = [compare(p, args.b / p.name) for p in sorted(args.a.glob("*.postings.mirror"))]
    for r in rows:
        print(json.dumps(r))
    if args.json:
        args.json.write_text(json.dumps({"a": str(args.a), "b": str(args.b), "files": rows}, indent=2) + "\n")
    return 0 if rows and all(not r["arrays_differ"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
