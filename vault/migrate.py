"""Copy a whole tier to another backend (SQLite <-> PostgreSQL), resumably, and verify it.

What is copied, in batches of ``batch`` entries (one transaction per batch on
the destination, all of them through one ``capture_many`` call: the destination's
bulk path, see :func:`_copy_entries`): entries (content, timestamps, content hash),
the links whose source is in the batch (with note and creation time), and the
vectors of every embedding model with their input hashes; then memories and feedback.

Resumable: every write is idempotent -- unchanged entries are skipped by the
content-hash check, links and vectors are upserts (a vector whose input hash
is already there is not re-sent), memories are keyed by id, feedback by
(entry, query, action, time) -- so after a kill the same command finishes the
copy, re-sending only what is missing.

Vector indexes: into a PostgreSQL tier the vectors are copied without building HNSW
indexes on the way (``deferred_vector_indexes``); every (model, dim) over the
threshold gets its index in one build once the entries are in (maintaining the
graph row by row made a 100K copy ~20x slower). A killed copy leaves the tier
without the index (exact search: slower, never wrong) until it is resumed.

Verified: counts of entries, links, memories, feedback and vectors per model,
and a sha256 over every (id, content hash) pair, read back from both sides.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from tiervault.vault.entry import Entry
from tiervault.vault.rows import CommittedBatch, VectorRow
from tiervault.vault.transfer import TierTransfer, transfer_for

__all__ = ["MigrationReport", "migrate_tier", "content_digest"]


@dataclass
class MigrationReport:
    """What was copied and what the verification found."""

    copied: Counter = field(default_factory=Counter)
    counts: dict[str, tuple[int, int]] = field(default_factory=dict)  # what -> (source, destination)
    digests: tuple[str, str] = ("", "")
    indexes: list[str] = field(default_factory=list)  # vector indexes built after the copy

    @property
    def ok(self) -> bool:
        return all(a == b for a, b in self.counts.values()) and self.digests[0] == self.digests[1]

    def lines(self) -> list[str]:
        out = [f"copied: {', '.join(f'{n} {k}' for k, n in sorted(self.copied.items())) or 'nothing new'}"]
        for what, (a, b) in self.counts.items():
            out.append(f"{'ok ' if a == b else 'DIFFERENT'} {what}: source {a}, destination {b}")
        if self.indexes:
            out.append(f"vector indexes built after the copy: {', '.join(self.indexes)}")
        same = self.digests[0] == self.digests[1]
        out.append(f"{'ok ' if same else 'DIFFERENT'} content hashes: source sha256 {self.digests[0][:16]}, "
                   f"destination sha256 {self.digests[1][:16]}")
        out.append("verified: both sides hold the same tier" if self.ok else
                   "NOT verified: the sides differ (see above); run the command again to resume, "
                   "or check that the destination held nothing else")
        return out


def content_digest(store: Any, batch: int = 5_000) -> tuple[int, str]:
    """(entries, sha256 over 'id NUL content_hash LF' in id order) of a tier."""
    h = hashlib.sha256()
    n, after = 0, ""
    while page := store.entries_after(after, batch):
        for e in page:
            h.update(f"{e.id}\0{e.content_hash}\n".encode())
        n += len(page)
        after = page[-1].id
    return n, h.hexdigest()


def migrate_tier(src: Any, dst: Any, *, batch: int = 2_000,
                 progress: Callable[[str], None] | None = None) -> MigrationReport:
    """Copy ``src`` into ``dst`` (both TierBackends) and verify; see the module docstring."""
    say = progress or (lambda _msg: None)
    ts, td = transfer_for(src), transfer_for(dst)
    report = MigrationReport()
    models = ts.vector_models()
    with td.deferred_vector_indexes():  # one index build at the end, not row by row
        _copy_entries(src, dst, td, models, batch, report, say)
    say("building vector indexes")
    report.indexes = td.build_vector_indexes()
    key = 0
    while rows := ts.memories_after(key, batch):
        report.copied["memories"] += td.put_memories(rows)
        key = rows[-1].key
    key = 0
    while rows := ts.feedback_after(key, batch):
        report.copied["feedback"] += td.put_feedback(rows)
        key = rows[-1].key
    say("verifying")
    n_src, d_src = content_digest(src)
    n_dst, d_dst = content_digest(dst)
    report.counts["entries"] = (n_src, n_dst)
    report.counts["links"] = (src.link_count(), dst.link_count())
    report.counts["memories"] = (src.memory_count(), dst.memory_count())
    report.counts["feedback"] = (ts.feedback_count(), td.feedback_count())
    for model in sorted(set(models) | set(td.vector_models())):
        report.counts[f"vectors ({model})"] = (ts.vector_count(model), td.vector_count(model))
    report.digests = (d_src, d_dst)
    return report


def _copy_entries(src: Any, dst: Any, td: TierTransfer, models: list[str], batch: int,
                  report: MigrationReport, say: Callable[[str], None]) -> None:
    """Entries in id order, handed to the destination in ONE ``capture_many`` call, each
    committed batch followed by its links and vectors.

    One call, so the destination takes its bulk path as ``tiervault import`` does (into
    an empty PostgreSQL tier: batches stemmed ahead by helper processes, the secondary
    indexes of ``entries`` dropped and built once at the end); before, one call per page
    made every page a one-batch load that maintained every index row by row. A batch's
    links and vectors are written from ``on_batch``, after the batch committed (they
    reference its entries) and before the next commits, so a kill leaves committed
    batches with or without theirs, and the re-run re-sends what is missing (idempotent).
    """
    seen = 0

    def source() -> Iterator[Entry]:
        after = ""
        while page := src.entries_after(after, batch):
            yield from page
            after = page[-1].id

    def committed(done: CommittedBatch) -> None:
        nonlocal seen
        ids = [e.id for e in done.entries]
        held = set(ids)
        links = [link for link in src.links_touching(ids) if link.source_id in held]
        report.copied["links"] += td.put_links(links)
        for model in models:
            vectors = src.vectors_for(model, ids)
            if not vectors:
                continue
            wanted = src.vector_input_hashes(model, list(vectors))
            present = dst.vector_input_hashes(model, list(vectors))
            todo = [VectorRow(i, wanted[i], v) for i, v in vectors.items() if present.get(i) != wanted[i]]
            if todo:
                report.copied[f"vectors ({model})"] += dst.put_vectors(model, todo)
        seen += len(ids)
        say(f"entries: {seen} read, {done.total} written")

    report.copied["entries"] += dst.capture_many(source(), batch_size=batch, on_batch=committed)
