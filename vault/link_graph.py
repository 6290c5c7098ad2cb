"""A tier's links as a memory-mapped adjacency: the graph hops of a search without SQL.

Why: a search reads the links touching its seeds, then those touching the seeds'
neighbours, in every tier (:func:`tiervault.brain.graph.graph_hops`): six SQL
statements a query (~20 us each plus the rows' objects). A resident copy of the
links was refused for memory (300,000 id pairs at 1,000,000 entries); this one
lives in a cache file next to the tier (``<tier>.links.graph``), mapped, so a
process pays only for the pages its look-ups touch.

Layout (arrays of :mod:`array_file`, every one CRC-checked when the file is opened):
the tier's ``n`` link endpoints (every id that is a source or a target of a link
stored in the tier) sorted by their 64-bit fingerprint ``keys`` (the string
table's, :func:`~tiervault.vault.string_table.fingerprints`), their UTF-8 bytes
``blob[offsets[i]:offsets[i + 1]]`` in the same order, and the links as a CSR:
endpoint ``i``'s half-edges are ``adj[adj_offsets[i]:adj_offsets[i + 1]]``, each
``other * 8 + type * 2 + inbound`` (``type`` the index in ``LINK_TYPES``,
``inbound`` 1 when ``i`` is the link's target). A look-up binary-searches ``keys``
in plain Python over a ``memoryview`` (~1 us for the few ids a search asks) and
compares the candidates' bytes: a fingerprint collision costs a comparison,
never a wrong answer.

Staying exact (:class:`LinkGraphCache`): the graph carries the tier generation it
is exact at and the links' change count (``meta['links.changes']``, bumped in the
same transaction by every link, unlink and link copy, :mod:`sqlite_links`). When
the generation moves, one snapshot reads the count and the entries deleted since
(tombstones): the graph stays exact when the count did not move and no deleted
id is one of its endpoints (a delete cascades only to the links of that id);
otherwise it is rebuilt from the table and saved again. A file of another tier or
another history (uid, epoch of its generation: recorded, or pinned by the save in
``meta['links.pin']`` so that the file outlives the epoch window), or a damaged
one, is rebuilt with a warning.
"""

from __future__ import annotations

import logging
from zlib import crc32
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from tiervault.errors import TierVaultError
from tiervault.vault import array_file
from tiervault.vault.entry import LINK_TYPES
from tiervault.vault.rows import LinkEnds

__all__ = ["LinkGraph", "LinkGraphCache", "GRAPH_VERSION", "graph_path", "bucket_bits"]

log = logging.getLogger(__name__)

GRAPH_VERSION = 1
_CODE = {t: i for i, t in enumerate(LINK_TYPES)}
_ARRAYS = ("keys", "starts", "blob", "offsets", "adj_offsets", "adj")


def graph_path(store: Any) -> Path | None:
    prefix = store.cache_prefix()
    return Path(f"{prefix}.links.graph") if prefix is not None else None


def bucket_bits(n: int) -> int:
    """Bits of the bucket index for ``n`` endpoints: 2**bits >= n buckets (<= 1 key each
    on average), so a look-up reads one bucket bound pair and ~1 key."""
    return min(32, max(1, (max(n, 1) - 1).bit_length()))


class LinkGraph:
    """One tier's links at generation ``gen`` (module docstring)."""

    def __init__(self, arrays: dict[str, np.ndarray], gen: int, changes: int, epoch: str) -> None:
        self.gen, self.changes, self.epoch = gen, changes, epoch
        keys, starts, blob, offsets = arrays["keys"], arrays["starts"], arrays["blob"], arrays["offsets"]
        adj_offsets, adj = arrays["adj_offsets"], arrays["adj"]
        n = keys.size
        bits = bucket_bits(n)
        if (keys.dtype != np.uint32 or blob.dtype != np.uint8 or offsets.size != n + 1
                or starts.size != (1 << bits) + 1 or adj_offsets.size != n + 1
                or any(x.dtype.kind != "i" for x in (starts, offsets, adj_offsets, adj))):
            raise ValueError("link graph arrays disagree in type or length")
        if n and (offsets[0] != 0 or offsets[-1] != blob.size or np.any(np.diff(offsets) < 0)
                  or starts[0] != 0 or starts[-1] != n or np.any(np.diff(starts) < 0)
                  or np.any(np.diff(keys.astype(np.int64)) < 0)
                  or not np.array_equal(np.searchsorted(starts, np.arange(n), side="right") - 1,
                                        keys >> np.uint32(32 - bits))
                  or adj_offsets[0] != 0 or adj_offsets[-1] != adj.size
                  or np.any(np.diff(adj_offsets) < 0)
                  or (adj.size and (adj.min() < 0 or int(adj.max()) >> 3 >= n))):
            raise ValueError("link graph arrays are not a graph (offsets, order or ends out of range)")
        self.n = n
        self.shift = 32 - bits
        self.arrays = arrays
        # memoryviews: indexing one yields a Python int in C (no NumPy scalar per read)
        self._keys = memoryview(keys)
        self._starts = memoryview(starts)
        self._blob = memoryview(blob)
        self._offsets = memoryview(offsets)
        self._adj_offsets = memoryview(adj_offsets)
        self._adj = memoryview(adj)

    @classmethod
    def build(cls, rows: Sequence[tuple[str, str, str]], gen: int, changes: int,
              epoch: str) -> "LinkGraph":
        """The graph of ``rows`` = (source, target, type)."""
        index: dict[str, int] = {}
        src = [index.setdefault(r[0], len(index)) for r in rows]
        tgt = [index.setdefault(r[1], len(index)) for r in rows]
        code = np.fromiter((_CODE[r[2]] for r in rows), dtype=np.int64, count=len(rows))
        raw = [name.encode() for name in index]
        n = len(raw)
        keys = np.fromiter(map(crc32, raw), dtype=np.uint32, count=n)
        order = np.argsort(keys, kind="stable")
        rank = np.empty(n, dtype=np.int64)
        rank[order] = np.arange(n, dtype=np.int64)
        raw = [raw[i] for i in order.tolist()]
        keys = keys[order]
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, raw), dtype=np.int64, count=n), out=offsets[1:])
        bits = bucket_bits(n)
        bounds = np.arange((1 << bits) + 1, dtype=np.int64) << (32 - bits)
        starts = np.searchsorted(keys.astype(np.int64), bounds, side="left")
        s, t = rank[np.asarray(src, dtype=np.int64)], rank[np.asarray(tgt, dtype=np.int64)]
        node = np.concatenate([s, t])
        half = np.concatenate([t * 8 + code * 2, s * 8 + code * 2 + 1])
        perm = np.argsort(node, kind="stable")
        adj_offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(node, minlength=n), out=adj_offsets[1:])
        big = offsets[-1] >= 2**31 - 1 or (half.size and half.max() >= 2**31 - 1)
        small = np.int64 if big else np.int32
        arrays = {"keys": keys, "starts": starts.astype(small),
                  "blob": np.frombuffer(b"".join(raw), dtype=np.uint8),
                  "offsets": offsets.astype(small), "adj_offsets": adj_offsets.astype(small),
                  "adj": half[perm].astype(small)}
        return cls(arrays, gen, changes, epoch)

    def _find(self, data: bytes) -> int:
        """The endpoint whose UTF-8 bytes are ``data``, or -1: its CRC-32's bucket, then
        the bucket's keys, then the bytes of a key that matches."""
        key = crc32(data)
        b = key >> self.shift
        starts, keys = self._starts, self._keys
        i, hi = starts[b], starts[b + 1]
        while i < hi:
            if keys[i] == key and self._blob[self._offsets[i]:self._offsets[i + 1]] == data:
                return i
            i += 1
        return -1

    def touching(self, ids: Sequence[str]) -> set[LinkEnds]:
        """Every link of this tier whose source or target is one of ``ids``."""
        out: set[LinkEnds] = set()
        if not self.n or not ids:
            return out
        offsets, blob, adj_offsets, adj = self._offsets, self._blob, self._adj_offsets, self._adj
        find = self._find
        for eid in ids:
            i = find(eid.encode())
            if i < 0:
                continue  # the usual case: most ids have no link in a given tier
            for half in adj[adj_offsets[i]:adj_offsets[i + 1]]:
                j = half >> 3
                other = str(blob[offsets[j]:offsets[j + 1]], "utf-8")
                kind = LINK_TYPES[(half >> 1) & 3]
                out.add(LinkEnds(other, eid, kind) if half & 1 else LinkEnds(eid, other, kind))
        return out

    def holds(self, ids: Sequence[str]) -> bool:
        """True when one of ``ids`` is an endpoint (a deleted one changed the links)."""
        return any(self._find(eid.encode()) >= 0 for eid in ids)

    def save(self, path: Path, uid: str) -> None:
        meta = {"version": GRAPH_VERSION, "gen": self.gen, "changes": self.changes,
                "tier_uid": uid, "epoch": self.epoch}
        array_file.write(path, meta, {k: self.arrays[k] for k in _ARRAYS}, mode=0o600)

    @classmethod
    def load(cls, path: Path) -> tuple["LinkGraph", str]:
        """The graph in ``path`` (every array CRC-checked) and the tier uid it names;
        ValueError / OSError when the file is damaged or of another layout."""
        f = array_file.read(path)
        meta = f.meta
        if meta.get("version") != GRAPH_VERSION or set(f.names()) != set(_ARRAYS):
            raise ValueError(f"not a link graph of version {GRAPH_VERSION}")
        graph = cls({k: f.array(k) for k in _ARRAYS}, int(meta["gen"]), int(meta["changes"]),
                    str(meta["epoch"]))
        return graph, str(meta["tier_uid"])


class LinkGraphCache:
    """A SQLite tier's :class:`LinkGraph`, kept exact (module docstring). ``store`` is
    the :class:`~tiervault.vault.store.TierStore`; ``links`` its
    :class:`~tiervault.vault.sqlite_links.TierLinks`."""

    def __init__(self, store: Any, links: Any) -> None:
        self.store = store
        self.links = links
        # the tier connection's lock: the mirror's first build prepares the graph under it
        self.lock = links.db.lock
        self.graph: LinkGraph | None = None
        self.loaded = False  # the file was tried once (a cold process maps it, never reads it twice)
        self.builds = 0  # graphs built from the table by this process (tests and bench read it)

    def touching(self, ids: Sequence[str]) -> list[LinkEnds]:
        """The links of the tier touching ``ids``, as the table holds them now."""
        graph = self.current()
        return list(graph.touching(ids)) if graph is not None else []

    def current(self) -> LinkGraph | None:
        """The graph exact at the tier's generation (None while the file does not exist)."""
        gen = self.store.generation()
        graph = self.graph
        if graph is not None and graph.gen == gen:
            return graph
        with self.lock:
            if self.graph is None and not self.loaded:
                self.loaded = True
                self.graph = self._load()
            graph = self.graph
            if graph is not None and graph.gen != gen and not self._still_exact(graph):
                graph = None
            if graph is None:
                graph = self._build()
            self.graph = graph
            return graph

    def _still_exact(self, graph: LinkGraph) -> bool:
        """Moves ``graph`` to the tier's generation now when no link changed since."""
        changes = self.links.changes_since(graph.gen)
        if changes is None or changes.gen < graph.gen or changes.changes != graph.changes:
            return False
        if changes.deleted and graph.holds(changes.deleted):
            return False
        graph.gen = changes.gen
        return True

    def _load(self) -> LinkGraph | None:
        path = graph_path(self.store)
        if path is None or not path.exists():
            return None
        try:
            graph, uid = LinkGraph.load(path)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("link graph %s is damaged or of another version (%s): rebuilding it", path, exc)
            return None
        if uid != self.store.uid() or graph.gen > self.store.generation() \
                or self._epoch(graph.gen) != graph.epoch:
            log.warning("link graph %s belongs to another tier or history: rebuilding it", path)
            return None
        return graph

    def _epoch(self, gen: int) -> str:
        """The tier's epoch of ``gen``: recorded (the window) or pinned by a graph save."""
        return self.store.epoch_at(gen) or self.links.pinned_epoch(gen) or ""

    def _build(self) -> LinkGraph | None:
        state = self.links.state()
        if state is None:
            return None
        graph = LinkGraph.build(state.rows, state.gen, state.changes,
                                self.store.epoch_at(state.gen) or "")
        self.builds += 1
        path = graph_path(self.store)
        if path is not None and not self.store.read_only:
            try:
                graph.save(path, self.store.uid())
                if graph.epoch:
                    self.links.pin(graph.gen)  # the file stays usable after the window moves on
            except (OSError, TierVaultError) as exc:  # only costs a rebuild in the next process
                log.warning("could not save the link graph of tier %r at %s: %s",
                            self.store.name, path, exc)
        return graph
