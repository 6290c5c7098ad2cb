"""Batched writes that overlap reading the input with the backend's GIL-free work.

A bulk load through :meth:`TierStore.capture_many` spends its time in two halves of
about the same size: reading the input (a JSONL import decodes, validates and hashes
every entry: Python, holding the GIL) and SQLite (inserting the rows, then indexing
them in FTS5 and committing). The FTS5 ``INSERT ... SELECT`` and the ``COMMIT`` are one
``sqlite3_step`` each, run with the GIL released, so a second core can read batch
``N + 1`` meanwhile. :func:`write_pipelined` runs each batch's transaction in one
writer thread; ``write(batch, inserted)`` calls ``inserted()`` once the rows are in
(everything before that binds parameters row by row, taking the GIL back after every
row) and the caller's thread then reads the next batch while the writer indexes and
commits. The caller's thread waits while the writer holds the GIL for long: two
threads both running Python would hand the GIL to and fro every 5 ms (the switch
interval) and each ``executemany`` row would wait for it (the convoy effect).
After ``inserted()`` the writer needs the GIL back twice or thrice (after the FTS5
statement, around the commit), waiting up to the switch interval each time while the
caller's thread parses: ~2 us a row at 5,000-row batches. (A 0.5-1 ms switch interval
during the load was not conclusively better: bench/README.md.)

Per batch of ``n`` entries the critical path is then ``rows + max(read, index +
commit)`` instead of ``read + rows + index + commit`` (bench/README.md, issue 16).

What stays as with :func:`~tiervault.vault.entry_rows.write_in_batches`: one
transaction per batch (the writer's ``write``, all-or-nothing), ``on_batch`` in order,
in the caller's thread, after that batch committed and before the next one starts
(an exception it raises stops the load; committed batches stay). What changes: the
input is read one batch ahead of the commits (the PostgreSQL bulk load does the
same), so after a crash the batch being read was never handed to the writer, and the
one in the writer is committed whole or not at all. A load of one batch or less runs
in the caller's thread (no thread for a single ``capture``), as do batches smaller
than :data:`MIN_PIPELINED_BATCH`.

The overlap needs a free core: before each batch a :class:`Chooser` (by default
:class:`~tiervault.vault.spare_cores.SpareCores`, the spare cores measured over the
previous batch) decides whether the writer thread writes it or the caller's thread
does, one after the other as :func:`write_in_batches` would; the thread starts at the
first batch handed to it. Either way the same transactions, in the same order, with
``on_batch`` after each commit: on a machine with no core free the thread only added
hand-overs (~7% more CPU, bench/README.md).
"""

from __future__ import annotations

import threading
from itertools import islice
from queue import SimpleQueue
from typing import Callable, Iterable, Iterator, Protocol

from tiervault.vault.entry import Entry
from tiervault.vault.entry_rows import write_in_batches
from tiervault.vault.rows import CommittedBatch
from tiervault.vault.spare_cores import SpareCores

__all__ = ["write_pipelined", "BatchWriter", "Chooser", "MIN_PIPELINED_BATCH", "new_chooser"]

#: ``write(batch, inserted)``: one transaction; calls ``inserted()`` (at most once) when
#: only GIL-free work (or none) is left; returns how many entries changed.
BatchWriter = Callable[[list[Entry], Callable[[], None]], int]

#: Smaller batches are written one after the other in the caller's thread.
MIN_PIPELINED_BATCH = 256


class _Job:
    """One batch handed to the writer thread, and what became of it."""

    __slots__ = ("batch", "inserted", "done", "written", "error")

    def __init__(self, batch: list[Entry]) -> None:
        self.batch = batch
        self.inserted = threading.Event()
        self.done = threading.Event()
        self.written = 0
        self.error: BaseException | None = None


def _serve(jobs: SimpleQueue, write: BatchWriter) -> None:
    """The writer thread: one job at a time until ``None``."""
    while (job := jobs.get()) is not None:
        try:
            job.written = write(job.batch, job.inserted.set)
        except BaseException as exc:  # handed to the caller's thread, which raises it
            job.error = exc
        finally:
            job.inserted.set()
            job.done.set()


class Chooser(Protocol):
    """Decides before each batch whether the writer thread writes it."""

    def threaded(self) -> bool: ...


#: The chooser a load makes (tests pin one): by default, by the spare cores measured
#: over the previous batch (:mod:`spare_cores`).
new_chooser: Callable[[], Chooser] = SpareCores


def write_pipelined(entries: Iterable[Entry], batch_size: int, write: BatchWriter,
                    on_batch: Callable[[CommittedBatch], None] | None = None) -> int:
    """Feed ``entries`` to ``write`` in lists of ``batch_size`` (each one transaction),
    reading the next list while the writer finishes the last when a core is spare; sums
    what ``write`` returns, calling ``on_batch`` after each commit (see the module
    docstring)."""
    def serial(entries: Iterable[Entry]) -> int:
        return write_in_batches(entries, batch_size, lambda b: write(b, _nothing), on_batch)

    if batch_size < MIN_PIPELINED_BATCH:  # a thread hand-over per few rows: not worth it
        return serial(entries)
    chooser = new_chooser()  # measures from here: the first batch's reading
    it: Iterator[Entry] = iter(entries)
    batch = list(islice(it, batch_size))
    if len(batch) < batch_size:  # one batch or none: no thread
        return serial(batch)
    jobs: SimpleQueue = SimpleQueue()
    writer: threading.Thread | None = None
    total = 0

    def finish(job: _Job) -> None:
        nonlocal total
        job.done.wait()
        if job.error is not None:
            raise job.error
        total += job.written
        if on_batch:
            on_batch(CommittedBatch(job.batch, job.written, total))

    try:
        while batch:
            if not chooser.threaded():  # no core to overlap with: this thread writes it
                written = write(batch, _nothing)
                total += written
                if on_batch:
                    on_batch(CommittedBatch(batch, written, total))
                batch = list(islice(it, batch_size))
                continue
            if writer is None:
                writer = threading.Thread(target=_serve, args=(jobs, write),
                                          name="tiervault-writer", daemon=True)
                writer.start()
            job = _Job(batch)
            jobs.put(job)
            job.inserted.wait()
            try:  # the writer indexes and commits meanwhile (GIL released)
                batch = list(islice(it, batch_size))
            except BaseException:
                finish(job)  # the batch before the failing input is acknowledged, as before
                raise
            finish(job)
    finally:
        if writer is not None:
            jobs.put(None)
            writer.join()
    return total


def _nothing() -> None:
    """``inserted`` of a write run in the caller's thread: nothing to wake."""
