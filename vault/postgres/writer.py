"""Batch writes of entries into a PostgreSQL tier: staging rows, bulk loads, a pipeline.

A batch is *prepared* in Python (the FTS5 terms of every entry, stemmed at
once, as binary tsvectors, and the rows) and *written* by the server in one
transaction (a binary COPY, :func:`copy_binary`, of the new ids straight into ``entries``
and of the changed ones into a staging table applied by one UPDATE: see
:meth:`PgEntryStore._write_batch`). :func:`pipelined` overlaps the two: while
the server writes batch k in a worker thread (psycopg releases the GIL while it
waits), this thread prepares batch k+1, so the import runs at the pace of the
slower side instead of their sum. Batches still commit one at a time, in order.
"""

from __future__ import annotations

import json
import logging
from collections import deque
from functools import cache
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import islice
from typing import Any, Callable, Iterable, Iterator, NamedTuple, Sequence

from tiervault.vault.entry import Entry
from tiervault.vault.gc_pause import gc_paused
from tiervault.vault.rows import CommittedBatch
from tiervault.vault.postgres.lexical import batch_terms
from tiervault.vault.postgres.term_workers import PendingTerms, TermWorkerError, TermWorkers

__all__ = ["PreparedBatch", "prepare", "latest_of", "indexed_fields", "stage_rows", "direct_rows", "pipelined",
           "batches", "gc_paused", "copy_binary", "ENTRY_TYPES", "TSVECTOR_OID"]

log = logging.getLogger(__name__)


#: PostgreSQL's built-in OID of ``tsvector`` (fixed in pg_type.dat since 8.3).
TSVECTOR_OID = 3614
#: The binary COPY types of ``ENTRY_COLUMNS`` (13 texts, 4 times, the content hash).
ENTRY_TYPES = ("text",) * 13 + ("float8",) * 4 + ("text",)


class PreparedBatch(NamedTuple):
    """The latest version of each entry of a batch, with its terms (binary tsvector, doclen)."""

    entries: list[Entry]
    terms: list[tuple[bytes, int]]


def latest_of(batch: Sequence[Entry]) -> list[Entry]:
    """The batch deduplicated by id, the last version of each entry winning."""
    return list({e.id: e for e in batch}.values())


def indexed_fields(entries: Sequence[Entry]) -> list[tuple[str, str, str, str, str]]:
    """The FTS fields of each entry (id, title, description, context, tags), as stemmed."""
    return [(e.id, e.title, e.description, e.context, e.tag_text) for e in entries]


def prepare(batch: Sequence[Entry]) -> PreparedBatch:
    """Dedupe a batch by id (the last version wins) and stem all its entries at once."""
    return _stemmed(latest_of(batch))


def _stemmed(latest: list[Entry]) -> PreparedBatch:
    """A deduplicated batch with its terms computed in this process."""
    return PreparedBatch(latest, batch_terms(indexed_fields(latest), binary=True))


def _entry_fields(e: Entry, now: float) -> tuple:
    """The entry's stored columns, id .. content hash (``ENTRY_COLUMNS`` order), with
    ``now`` for a missing creation / update time: what both row forms below start with."""
    applies = json.dumps(list(e.applies_to)) if e.applies_to else "[]"
    return (e.id, e.type, e.domain, e.title, e.description, e.context, e.example,
            e.counter_example, e.why, e.tag_text, applies, e.severity, e.origin,
            e.valid_from, e.valid_until,
            e.created_at if e.created_at is not None else now,
            e.updated_at if e.updated_at is not None else now,
            e.content_hash or e.compute_hash())


def stage_rows(prepared: PreparedBatch, keep: Sequence[bool], now: float) -> Iterator[tuple]:
    """Staging rows (the store's ``_STAGE_COLUMNS``: the columns, the creation time as
    given, doclen, terms) of the stored entries flagged in ``keep``, to be updated."""
    for e, (tsv, doclen), wanted in zip(prepared.entries, prepared.terms, keep):
        if not wanted:
            continue
        yield (*_entry_fields(e, now), e.created_at, doclen, tsv)


def direct_rows(prepared: PreparedBatch, keep: Sequence[bool], gen: int, now: float) -> Iterator[tuple]:
    """Rows for a COPY straight into ``entries`` (``ENTRY_COLUMNS``, gen, doclen, terms) of the
    entries flagged in ``keep``, all new ids; the terms are the binary tsvector."""
    for e, (tsv, doclen), wanted in zip(prepared.entries, prepared.terms, keep):
        if not wanted:
            continue
        yield (*_entry_fields(e, now), gen, doclen, tsv)


@cache
def _tsvector_dumper() -> type:
    """A psycopg binary dumper that passes a prepared binary tsvector through as is."""
    from psycopg.adapt import Dumper
    from psycopg.pq import Format

    class TsvectorBinaryDumper(Dumper):
        format = Format.BINARY
        oid = TSVECTOR_OID

        def dump(self, obj: bytes) -> bytes:
            return obj

    return TsvectorBinaryDumper


def copy_binary(conn: Any, table: str, columns: Sequence[str], types: Sequence[str | int],
                rows: Iterable[tuple]) -> None:
    """``COPY table (columns) FROM STDIN (FORMAT BINARY)`` of ``rows``, typed by ``types``
    (type names, or :data:`TSVECTOR_OID` for a :func:`~tiervault.vault.postgres.lexical.tsvector_binary`).

    Binary, because the text form made the server parse every value back: the tsvector
    literal (a tokenizer pass, then a sort of the lexemes: ~6.5 of the COPY loop's
    ~13 us per entry at 1M), four floats and the escapes of every text column. The
    binary tsvector arrives sorted; ``tsvectorrecv`` only copies it (bench/README.md).
    """
    with conn.cursor() as cur:
        cur.adapters.register_dumper(None, _tsvector_dumper())
        with cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(list(types))
            for row in rows:
                copy.write_row(row)


def batches(entries: Iterable[Entry], size: int) -> Iterator[list[Entry]]:
    """``entries`` in lists of ``size`` (the last one shorter)."""
    stream = iter(entries)
    while batch := list(islice(stream, size)):
        yield batch


def pipelined(chunks: Iterable[list[Entry]], write: Callable[[PreparedBatch], int],
              on_batch: Callable[[CommittedBatch], None] | None = None, workers: int = 0) -> int:
    """Prepare each chunk while ``write`` commits the previous one in a worker thread.

    With ``workers`` > 0 the terms are computed by that many helper processes
    (:class:`~tiervault.vault.postgres.term_workers.TermWorkers`), one batch ahead:
    while the writer thread COPYs batch k and the server ingests it, the helpers
    stem batch k+1 and this thread hands batch k+2 to them. Otherwise (or once a
    helper failed: logged, then the rest of the load is prepared here) this thread
    prepares batch k+1 itself. Batches commit one at a time, in order.

    Returns the sum of what ``write`` returned; ``on_batch`` (the chunk as given, what
    it wrote, the running total) after each commit, before the next one is handed over.
    An error in either side stops the load: batches committed before it stay committed.
    """
    total = 0
    pending: Future[int] | None = None
    helpers = _start_helpers(workers)
    ahead: deque[tuple[list[Entry], PendingTerms]] = deque()
    # The chunks taken but not yet committed, oldest first: batches commit in the order
    # they were taken, so the oldest is the one a commit acknowledges.
    uncommitted: deque[list[Entry]] = deque()

    def committed() -> None:
        nonlocal total
        assert pending is not None
        written = pending.result()
        total += written
        chunk = uncommitted.popleft()
        if on_batch:
            on_batch(CommittedBatch(chunk, written, total))

    def hand_over(prepared: PreparedBatch) -> None:
        nonlocal pending
        if pending is not None:
            committed()
        pending = worker.submit(write, prepared)

    def collect(latest: list[Entry], terms: PendingTerms) -> PreparedBatch:
        nonlocal helpers
        if helpers is not None:
            try:
                return PreparedBatch(latest, terms.result())
            except TermWorkerError as exc:
                log.warning("%s; preparing the rest of this load in-process", exc)
                helpers.close()
                helpers = None
        with gc_paused():
            return _stemmed(latest)

    try:
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="tiervault-pg-write") as worker:
            for chunk in chunks:
                uncommitted.append(chunk)
                if helpers is None:
                    while ahead:
                        hand_over(collect(*ahead.popleft()))
                    with gc_paused():
                        prepared = prepare(chunk)
                    hand_over(prepared)
                    continue
                latest = latest_of(chunk)
                ahead.append((latest, helpers.submit(indexed_fields(latest))))
                if len(ahead) > 1:
                    hand_over(collect(*ahead.popleft()))
            while ahead:
                hand_over(collect(*ahead.popleft()))
            if pending is not None:
                committed()
    finally:
        if helpers is not None:
            helpers.close()
    return total


def _start_helpers(count: int) -> TermWorkers | None:
    """``count`` term workers, or None (none asked, or they could not start: logged)."""
    if count <= 0:
        return None
    try:
        return TermWorkers(count)
    except (TermWorkerError, OSError) as exc:
        log.warning("term workers did not start (%s); preparing batches in-process", exc)
        return None
