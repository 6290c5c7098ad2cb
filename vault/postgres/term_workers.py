"""Helper processes that compute a bulk load's terms, next to the process that writes.

Preparing a batch for the PostgreSQL tier -- splitting the five indexed fields
of every entry into words, stemming them (FTS5 ``porter unicode61``) and writing
the binary tsvector (:func:`~tiervault.vault.postgres.lexical.batch_terms`) --
is ~30 us of CPU per entry in Python, and the GIL keeps it on one core: a bulk
load ran at the pace of that one thread while the server, on the other core,
waited (bench/README.md, "PostgreSQL ... 1M"). :class:`TermWorkers` runs that
same function in ``python -m tiervault.vault.postgres.term_worker`` processes
(the same interpreter, hence the same tiervault), so the terms are the same by
construction; the writing process keeps only deduplication, COPY formatting and
the server round trips.

Protocol, on each worker's stdin / stdout: frames of an 8-byte little-endian
length and a :mod:`marshal` payload (the worker is our own code in our own
interpreter, so marshal is safe and ~5x faster than pickle for lists of tuples
of strings). Request: a list of (id, title, description, context, tags) rows.
Reply: ``(True, [(binary tsvector, token count), ...])`` or ``(False, message)``.
The first reply is a hello, ``(True, path of lexical.py)``: a worker that imported
another checkout's tiervault is refused (:class:`TermWorkerError`), never trusted.

A worker that dies or answers an error fails its future with
:class:`TermWorkerError`; the caller (``writer.pipelined``) then prepares that
batch and the rest of the load in-process, so a failed helper costs speed only.
"""

from __future__ import annotations

import logging
import marshal
import os
import subprocess
import sys
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from typing import IO, Any, Sequence

from tiervault.errors import StorageError
from tiervault.vault.postgres import lexical

__all__ = ["TermWorkers", "TermWorkerError", "PendingTerms", "default_worker_count", "MIN_HELPED_BATCH",
           "read_frame", "write_frame"]

log = logging.getLogger(__name__)

#: Upper bound of helper processes (each holds its own stemmer cache).
MAX_WORKERS = 4
#: Smallest batch worth a helper by default: starting one costs ~0.25 s of CPU
#: (an interpreter and its imports), about 8,000 entries' worth of stemming.
MIN_HELPED_BATCH = 1_000


class TermWorkerError(StorageError):
    """A term worker could not start, died, or answered an error.

    Part of the one tree (``tiervault.errors``) though the writer catches it and
    carries the load on in-process: it only escapes if that fallback is removed.
    """


def default_worker_count() -> int:
    """One helper per core but one, at least one, at most :data:`MAX_WORKERS`.

    The core left is the writing process's and the server's: on this 2-core
    machine one helper beat two and none (bench/README.md, "import A/B").
    ``TIERVAULT_PG_TERM_WORKERS`` overrides it (0: prepare in-process).
    """
    env = os.environ.get("TIERVAULT_PG_TERM_WORKERS")
    if env is not None and env.strip().isdigit():
        return min(int(env), MAX_WORKERS)
    if env is not None:
        log.warning("TIERVAULT_PG_TERM_WORKERS=%r is not a count (0, 1, 2...): ignored, "
                    "the default is used", env[:40])
    return max(1, min((os.cpu_count() or 1) - 1, MAX_WORKERS))


def write_frame(stream: IO[bytes], value: Any) -> None:
    """One frame: 8-byte little-endian length, then ``marshal.dumps(value)``."""
    data = marshal.dumps(value)
    stream.write(len(data).to_bytes(8, "little"))
    stream.write(data)
    stream.flush()


def read_frame(stream: IO[bytes]) -> Any:
    """The next frame's value; EOFError when the stream ends (cleanly or mid-frame)."""
    head = stream.read(8)
    if len(head) < 8:
        raise EOFError("stream closed")
    size = int.from_bytes(head, "little")
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("stream closed mid-frame")
    return marshal.loads(data)


class _Worker:
    """One helper process and the thread that talks to it (requests answered in order)."""

    def __init__(self) -> None:
        # The worker's stderr goes to a file, not the user's terminal, and its tail is
        # quoted when the worker stops (an import error's traceback, say).
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tiervault.vault.postgres.term_worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr)
        self.io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tiervault-terms")
        self.hello: Future[Any] = self.io.submit(self._receive)

    def _receive(self) -> Any:
        assert self.proc.stdout is not None
        try:
            ok, value = read_frame(self.proc.stdout)
        except (EOFError, ValueError, OSError) as exc:
            raise TermWorkerError(f"term worker (pid {self.proc.pid}) stopped: {exc}{self._last_words()}") from exc
        if not ok:
            raise TermWorkerError(f"term worker (pid {self.proc.pid}) failed: {value}")
        return value

    def _ask(self, rows: list[tuple[str, ...]]) -> list[tuple[bytes, int]]:
        assert self.proc.stdin is not None
        try:
            write_frame(self.proc.stdin, rows)
        except (OSError, ValueError) as exc:
            raise TermWorkerError(f"term worker (pid {self.proc.pid}) stopped: {exc}{self._last_words()}") from exc
        return self._receive()

    def _last_words(self) -> str:
        """The tail of what the worker wrote to stderr, as a message suffix ('' if nothing)."""
        size = os.fstat(self.stderr.fileno()).st_size
        tail = os.pread(self.stderr.fileno(), 500, max(0, size - 500)).decode("utf-8", "replace").strip()
        return f"; its stderr ends: {tail}" if tail else ""

    def submit(self, rows: list[tuple[str, ...]]) -> Future[list[tuple[bytes, int]]]:
        return self.io.submit(self._ask, rows)

    def close(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:  # a broken pipe to a dead worker: nothing left to flush
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # stuck: it holds nothing of ours
            self.proc.kill()
            self.proc.wait()
        self.io.shutdown(wait=True, cancel_futures=True)
        self.stderr.close()


class PendingTerms:
    """The terms of one batch being computed by the workers, part by part, in order."""

    def __init__(self, parts: list[Future[list[tuple[bytes, int]]]]) -> None:
        self.parts = parts

    def result(self) -> list[tuple[bytes, int]]:
        out: list[tuple[bytes, int]] = []
        for part in self.parts:
            out.extend(part.result())
        return out


class TermWorkers:
    """``count`` helper processes; :meth:`submit` splits a batch into one part each."""

    def __init__(self, count: int) -> None:
        if count < 1:
            raise ValueError(f"term workers: count must be >= 1, got {count}")
        self.workers: list[_Worker] = []
        try:
            for _ in range(count):
                self.workers.append(_Worker())
            for worker in self.workers:
                path = worker.hello.result(timeout=60)
                if os.path.realpath(path) != os.path.realpath(lexical.__file__):
                    raise TermWorkerError(f"term worker imported {path}, this process "
                                          f"{lexical.__file__}: not the same tiervault")
        except BaseException:
            self.close()
            raise

    def submit(self, rows: Sequence[tuple[str, ...]]) -> PendingTerms:
        """Start computing ``batch_terms(rows, binary=True)``; the answer comes in ``rows`` order."""
        rows = list(rows)
        size = -(-len(rows) // len(self.workers)) or 1
        return PendingTerms([w.submit(rows[i:i + size])
                             for w, i in zip(self.workers, range(0, len(rows), size))])

    def close(self) -> None:
        """Stop the workers (they exit when their stdin closes)."""
        for worker in self.workers:
            worker.close()
        self.workers = []

    def __enter__(self) -> "TermWorkers":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
