"""Rewrite a work directory's files in 2 MiB writes, and count how much of each file a
mapping of it gets as 2 MiB (PMD) pages (issue 16, session 18).

    python bench/s18_folio_copy.py --tiers DIR [--rewrite .mirror,.db] [--json out.json]

Why: this kernel (6.18, ext4 with large folios) keeps a file's page cache in folios whose
size follows how the pages came in. A buffered write of a whole, aligned 2 MiB range makes
one 2 MiB folio, and any mapping of the file then maps it with one page-table entry
(``FilePmdMapped`` in ``/proc/self/smaps``, whatever the ``madvise``); ``cp`` (and SQLite's
4 KiB page writes, and faults under ``MADV_RANDOM``) leave 4 KiB folios. So two copies of
one ``bench/run.py`` build can differ in TLB misses while holding the same bytes:
``bench/s16_read_paths_ab.py --labels`` times one code over both.

``--rewrite``: the file name endings to rewrite in place (each file copied to a temporary
file in 2 MiB writes, fsynced, renamed over it; modes and times kept). Without it, only the
count is made. The count maps each file read-only, touches one byte of every 4 KiB page
(bringing absent pages in) and reads its ``Rss`` and ``FilePmdMapped``.
"""

from __future__ import annotations

import argparse
import mmap
import os
import shutil
import sys
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent.parent))

from bench.output import emit  # noqa: E402

CHUNK = 2 << 20


def rewrite(path: Path) -> None:
    """``path`` copied onto itself in aligned 2 MiB writes (temporary file + rename)."""
    tmp = path.with_name(path.name + ".s18-folio")
    with open(path, "rb") as src, open(tmp, "wb", buffering=0) as dst:
        while block := src.read(CHUNK):
            dst.write(block)
        os.fsync(dst.fileno())
    shutil.copystat(path, tmp)
    os.replace(tmp, path)


def mapped_kb(path: Path) -> dict[str, int]:
    """``Rss`` and ``FilePmdMapped`` (kB) of a read-only mapping of ``path``, every page touched."""
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            return {"rss_kb": 0, "pmd_kb": 0}
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            sum(mm[off] for off in range(0, size, mmap.PAGESIZE))
            return _smaps_of(path)
        finally:
            mm.close()


def _smaps_of(path: Path) -> dict[str, int]:
    out = {"rss_kb": 0, "pmd_kb": 0}
    inside = False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()
            if head and "-" in head[0] and ":" not in head[0]:  # a mapping's first line
                inside = len(head) >= 6 and head[-1] == str(path)
            elif inside and head[0] == "Rss:":
                out["rss_kb"] += int(head[1])
            elif inside and head[0] == "FilePmdMapped:":
                out["pmd_kb"] += int(head[1])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiers", type=Path, required=True, help="a work directory's tiers/ folder")
    ap.add_argument("--rewrite", default="", help="file name endings to rewrite, e.g. .mirror,.db")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    ends = tuple(e for e in args.rewrite.split(",") if e)
    files = sorted(p for p in args.tiers.iterdir() if p.is_file() and p.name.endswith((".mirror", ".db")))
    out: dict[str, Any] = {"tiers": str(args.tiers), "rewritten": list(ends), "files": {}}
    for p in files:
        if ends and p.name.endswith(ends):
            rewrite(p)
        out["files"][p.name] = mapped_kb(p.resolve())
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
