"""Atomic file writes: every file tiervault writes appears whole or not at all.

:func:`atomic_write` writes into a temporary file in the target's own folder
(so the final rename never crosses a filesystem), flushes and fsyncs it, then
renames it over the target. If anything fails -- a full disk, a bad folder, an
exception in the caller's code -- the temporary file is removed and the old
target is left exactly as it was (an export never truncates the previous
backup). The folder is fsynced after the rename where the OS allows it, so the
new name survives a power cut too.

``durable=False`` (the array-file caches: search mirror, link graph) keeps the
temporary file and the rename -- a reader sees the old file or the whole new one,
never a half-written one -- but skips both fsyncs. Why that is safe: such a file
is disposable and every byte a reader uses is checked before use against a
CRC-32 written with it (``array_file``: magic, layout, the header's CRC and the
exact file size on open, each small array's CRC on open, each 64 KiB block of a
large one on first read; padding between arrays is never read). So what an OS
crash can leave of an unsynced write -- a short file, a right-sized one with
zeroed or stale blocks, the old name -- is refused (a zeroed block passes only
where the written block was zeros too, i.e. the same bytes) and the cache rebuilt
from the tier, never served. Why skip: the fsync of a 1M mirror cache (~440 MB)
idled its build 0.12-0.18 s a tier (issue 16, session 23). Everything not so
verified (exports, the vector caches' files, tier data) keeps ``durable=True``.

Used by: ``export -o``, ``export-md``, the search-mirror, link-graph and vector caches.
"""

from __future__ import annotations

import os
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

from tiervault.errors import ValidationError

__all__ = ["atomic_write", "TEMP_PREFIX", "TEMP_SUFFIX"]

#: Temporary files are ``.<name>.<random>.tv-tmp`` next to the target.
TEMP_PREFIX = "."
TEMP_SUFFIX = ".tv-tmp"


def _default_mode() -> int:
    # The mode a plain open() would give a new file (0666 minus the umask). Reading
    # the umask means setting it; tiervault's CLI is single-threaded when it writes.
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def _check_target(path: Path) -> None:
    """A clear ValidationError (naming the file) when ``path`` cannot be a file target."""
    if path.is_dir():
        raise ValidationError("output", f"{path} is a directory; give a file name")
    parent = path.parent
    if not parent.exists():
        raise ValidationError("output", f"folder {parent} does not exist; create it first")
    if not parent.is_dir():
        raise ValidationError("output", f"{parent} is not a folder")
    if path.exists() and not path.is_file():
        raise ValidationError("output", f"{path} exists and is not a regular file")


@contextmanager
def atomic_write(path: str | Path, *, binary: bool = False, mode: int | None = None,
                 encoding: str = "utf-8", durable: bool = True) -> Iterator[IO]:
    """``with atomic_write(p) as fh: fh.write(...)``: ``p`` is replaced only on success.
    ``durable=False``: no fsync of the file or folder (only for files verified on
    read: module docstring).

    ``mode``: permissions of a new file (default: those of the file being
    replaced, else 0666 minus the umask). OSErrors surface as ValidationError
    naming the file; the temporary file never outlives a failure.
    """
    target = Path(path)
    _check_target(target)
    if mode is None:
        try:
            mode = stat.S_IMODE(target.stat().st_mode)
        except OSError:
            mode = _default_mode()
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f"{TEMP_PREFIX}{target.name}.",
                                   suffix=TEMP_SUFFIX)
    except OSError as exc:
        raise ValidationError("output", f"cannot write in {target.parent}: {exc.strerror}") from exc
    try:
        os.fchmod(fd, mode)
        if binary:
            fh: IO = os.fdopen(fd, "wb")
        else:
            fh = os.fdopen(fd, "w", encoding=encoding, newline="\n")
        with fh:
            yield fh
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:  # already gone or never made: the first error is the one to report
            pass
        if isinstance(exc, OSError):
            raise ValidationError("output", f"cannot write {target}: "
                                  f"{exc.strerror or exc}") from exc
        raise
    if durable:
        _fsync_dir(target.parent)


def _fsync_dir(directory: Path) -> None:
    """Make the rename durable; some filesystems refuse a directory fsync (harmless)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # some filesystems refuse a directory fsync; the rename itself is done
        pass
    finally:
        os.close(fd)
