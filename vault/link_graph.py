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
is exact at and the links' change count (``meta['links.changes']``), which schema v6
moves by a trigger at every link row inserted, deleted or re-pointed -- by
tiervault, by an entry delete's cascade, or by outside SQL (the sqlite3 shell,
another program). A search reads the count with the generation (one statement, once
per read scope, :mod:`sqlite_epochs`): the graph is read while both equal its own.
When the generation moved and the count did not, the graph moves to the new
generation; when the count moved, it is stale and never read: the tier answers by
SQL until the link rows changed since the graph reach max(256, 5%) of its links (a
small graph: at once), then it is rebuilt from the table and saved again -- so an
agent linking between searches does not pay a whole rebuild per search. A tier file
of schema < 6 (opened read-only, not migrated: no trigger) is answered by SQL only.
A file of another tier or another history (uid, epoch of its generation: recorded,
or pinned by the save in ``meta['links.pin']`` so that the file outlives the epoch
window), or a damaged one, is rebuilt with a warning.
"""

from __future__ import annotations

import logging
from zlib import crc32
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from tiervault.errors import TierVaultError
from tiervault.vault import array_file
from tiervault.vault.checked_array import BLOCK_BYTES, CheckedArray
from tiervault.vault.entry import LINK_TYPES
from tiervault.vault.gc_pause import gc_paused
from tiervault.vault.rows import LinkEnds

__all__ = ["LinkGraph", "LinkGraphCache", "GRAPH_VERSION", "graph_path", "bucket_bits"]

log = logging.getLogger(__name__)

GRAPH_VERSION = 2  # 2: every array verified per block on first read
#: A stale graph is rebuilt once the link changes since it reach max(REBUILD_MIN,
#: REBUILD_SHARE x its links) -- the mirror's max(256, 5%) -- or at once below SMALL_LINKS
#: links (a rebuild of 2,048 links costs ~2-5 ms; 30,000 links ~20-80 ms: bench/README.md).
REBUILD_MIN = 256
REBUILD_SHARE = 0.05
SMALL_LINKS = 2_048
_CODE = {t: i for i, t in enumerate(LINK_TYPES)}
_ARRAYS = ("keys", "starts", "blob", "offsets", "adj_offsets", "adj")


def graph_path(store: Any) -> Path | None:
    prefix = store.cache_prefix()
    return Path(f"{prefix}.links.graph") if prefix is not None else None


def bucket_bits(n: int) -> int:
    """Bits of the bucket index for ``n`` endpoints: 2**bits >= n buckets (<= 1 key each
    on average), so a look-up reads one bucket bound pair and ~1 key."""
    return min(32, max(1, (max(n, 1) - 1).bit_length()))


class _Blocks:
    """An array of a graph read through a ``memoryview``, with the blocks verified so far
    (``ok``: 1 a block; all 1 for a graph built here). A block is verified against the
    CRC-32 written with it (and the array's value bounds) by
    :class:`~tiervault.vault.checked_array.CheckedArray` the first time a look-up reads it."""

    __slots__ = ("mv", "ok", "shift", "per", "src", "done")

    def __init__(self, a: np.ndarray, src: CheckedArray | None) -> None:
        self.mv = memoryview(a)
        self.per = max(1, BLOCK_BYTES // max(1, a.itemsize))  # a power of two: 1-, 4-, 8-byte items
        self.shift = self.per.bit_length() - 1
        n_blocks = -(-a.size // self.per) + 1  # one spare: ``ready`` may ask for the block past the end
        self.ok = bytearray(b"\1" * n_blocks) if src is None else bytearray(n_blocks)
        self.src = src
        self.done = src is None  # every block verified: look-ups skip the flags

    def need(self, lo: int, hi: int) -> None:
        """Verify the blocks holding elements ``[lo, hi)`` (CacheDamaged if one fails)."""
        if self.src is not None and hi > lo:
            self.src.check_ranges([lo], [hi])
            for b in range(lo >> self.shift, ((hi - 1) >> self.shift) + 1):
                self.ok[b] = 1
            self.done = self.ok.find(0, 0, len(self.ok) - 1) < 0


def _ready(c: _Blocks, lo: int, hi: int) -> None:
    """Elements ``[lo, hi)`` of ``c`` verified (the usual case: one or two flags read)."""
    if hi - lo > c.per or not c.ok[lo >> c.shift] or not c.ok[(hi - 1) >> c.shift]:
        c.need(lo, hi)


class LinkGraph:
    """One tier's links at generation ``gen`` (module docstring). ``checked``: the arrays
    of a file, verified per block on first read; None: arrays built here (trusted)."""

    def __init__(self, arrays: dict[str, np.ndarray], gen: int, changes: int, epoch: str,
                 checked: dict[str, CheckedArray] | None = None) -> None:
        self.gen, self.changes, self.epoch = gen, changes, epoch
        keys, starts, blob, offsets = arrays["keys"], arrays["starts"], arrays["blob"], arrays["offsets"]
        adj_offsets, adj = arrays["adj_offsets"], arrays["adj"]
        n = keys.size
        bits = bucket_bits(n)
        if (keys.dtype != np.uint32 or blob.dtype != np.uint8 or offsets.size != n + 1
                or starts.size != (1 << bits) + 1 or adj_offsets.size != n + 1
                or any(x.dtype.kind != "i" for x in (starts, offsets, adj_offsets, adj))):
            raise ValueError("link graph arrays disagree in type or length")
        if checked is None and n and (
                offsets[0] != 0 or offsets[-1] != blob.size or np.any(np.diff(offsets) < 0)
                or starts[0] != 0 or starts[-1] != n or np.any(np.diff(starts) < 0)
                or np.any(np.diff(keys.astype(np.int64)) < 0)
                or not np.array_equal(np.repeat(np.arange(starts.size - 1, dtype=np.uint32),
                                                np.diff(starts)), keys >> np.uint32(32 - bits))
                or adj_offsets[0] != 0 or adj_offsets[-1] != adj.size
                or np.any(np.diff(adj_offsets) < 0)
                or (adj.size and (adj.min() < 0 or int(adj.max()) >> 3 >= n))):
            raise ValueError("link graph arrays are not a graph (offsets, order or ends out of range)")
        self.n = n
        self.shift = 32 - bits
        self.arrays = arrays
        # memoryviews: indexing one yields a Python int in C (no NumPy scalar per read); a
        # file's blocks are verified as look-ups first read them (a cold process reads a
        # few pages of a 20 MB file at 1M entries, not all of it)
        self._c = {k: _Blocks(arrays[k], checked[k] if checked is not None else None) for k in _ARRAYS}
        self._lazy = checked is not None  # a file's arrays: each block verified when first read
        self._c_starts, self._c_keys = self._c["starts"], self._c["keys"]
        self._c_offsets, self._c_blob = self._c["offsets"], self._c["blob"]
        self._c_adj_offsets, self._c_adj = self._c["adj_offsets"], self._c["adj"]
        self._keys, self._starts, self._blob = (self._c[k].mv for k in ("keys", "starts", "blob"))
        self._offsets, self._adj_offsets, self._adj = (self._c[k].mv for k in
                                                       ("offsets", "adj_offsets", "adj"))

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
        c_starts, c_keys = self._c_starts, self._c_keys
        if not c_starts.done:  # a mapped file: the blocks read here verified first
            # (_ready inline: ``starts``' last block holds one bound and is seldom read, so
            # this array may stay not done all along, and this runs for every look-up)
            ok, shift = c_starts.ok, c_starts.shift
            if not ok[b >> shift] or not ok[(b + 1) >> shift]:
                c_starts.need(b, b + 2)
        starts, keys, offsets = self._starts, self._keys, self._offsets
        i, hi = starts[b], starts[b + 1]
        if not c_keys.done and i < hi:
            _ready(c_keys, i, hi)
        while i < hi:
            if keys[i] == key:
                if not self._c_offsets.done:
                    _ready(self._c_offsets, i, i + 2)
                if not self._c_blob.done:
                    _ready(self._c_blob, offsets[i], max(offsets[i + 1], offsets[i] + 1))
                if self._blob[offsets[i]:offsets[i + 1]] == data:
                    return i
            i += 1
        return -1

    def touching(self, ids: Sequence[str]) -> set[LinkEnds]:
        """Every link of this tier whose source or target is one of ``ids``."""
        out: set[LinkEnds] = set()
        if not self.n or not ids:
            return out
        offsets, blob, adj_offsets, adj = self._offsets, self._blob, self._adj_offsets, self._adj
        find, lazy = self._find, self._lazy
        # each array's flags read until its every block is verified (a few dozen scans;
        # ``starts``' last block, one bound, may never be: the others do not wait for it)
        c_adj_offsets, c_adj, c_offsets, c_blob = (self._c_adj_offsets, self._c_adj,
                                                   self._c_offsets, self._c_blob)
        for eid in ids:
            i = find(eid.encode())
            if i < 0:
                continue  # the usual case: most ids have no link in a given tier
            if lazy:
                if not c_adj_offsets.done:
                    _ready(c_adj_offsets, i, i + 2)
                if not c_adj.done:
                    _ready(c_adj, adj_offsets[i], max(adj_offsets[i + 1], adj_offsets[i] + 1))
            for half in adj[adj_offsets[i]:adj_offsets[i + 1]]:
                j = half >> 3
                if lazy:
                    if not c_offsets.done:
                        _ready(c_offsets, j, j + 2)
                    if not c_blob.done:
                        _ready(c_blob, offsets[j], max(offsets[j + 1], offsets[j] + 1))
                other = str(blob[offsets[j]:offsets[j + 1]], "utf-8")
                kind = LINK_TYPES[(half >> 1) & 3]
                out.add(LinkEnds(other, eid, kind) if half & 1 else LinkEnds(eid, other, kind))
        return out

    def blocks_verified(self) -> dict[str, tuple[int, int]]:
        """Per array: (blocks verified so far, blocks in all) -- all of them for a graph
        built here; for a mapped file, those its look-ups read."""
        return {k: (sum(c.ok[:-1]), len(c.ok) - 1) for k, c in self._c.items()}

    def all_links(self) -> set[LinkEnds]:
        """Every link of the graph, each block of a file verified first (CacheDamaged /
        ValueError when one fails): what ``tiervault check`` compares with the table."""
        for c in self._c.values():
            c.need(0, len(c.mv))
        offsets, blob, adj_offsets, adj = self._offsets, self._blob, self._adj_offsets, self._adj
        names = [str(blob[offsets[i]:offsets[i + 1]], "utf-8") for i in range(self.n)]
        return {LinkEnds(names[i], names[half >> 3], LINK_TYPES[(half >> 1) & 3])
                for i in range(self.n) for half in adj[adj_offsets[i]:adj_offsets[i + 1]]
                if not half & 1}  # each link once: from its source's outbound half-edge

    @property
    def links(self) -> int:
        """How many links the graph holds (each is two half-edges)."""
        return len(self._adj) // 2

    def save(self, path: Path, uid: str) -> None:
        meta = {"version": GRAPH_VERSION, "gen": self.gen, "changes": self.changes,
                "tier_uid": uid, "epoch": self.epoch}
        array_file.write(path, meta, {k: self.arrays[k] for k in _ARRAYS}, set(_ARRAYS), mode=0o600)

    @classmethod
    def load(cls, path: Path) -> tuple["LinkGraph", str]:
        """The graph in ``path`` and the tier uid it names: header, sizes and types checked
        now, each block of an array the first time a look-up reads it (its CRC-32 and
        its values' bounds: ``CacheDamaged``); ValueError / OSError when the file is
        damaged or of another layout."""
        f = array_file.read(path)
        meta = f.meta
        if (meta.get("version") != GRAPH_VERSION or set(f.names()) != set(_ARRAYS)
                or f.lazy_names() != set(_ARRAYS)):
            raise ValueError(f"not a link graph of version {GRAPH_VERSION}")
        n, n_blob, n_adj = (f.array_size(k) for k in ("keys", "blob", "adj"))
        bounds = {"starts": (0, n + 1), "offsets": (0, n_blob + 1), "adj_offsets": (0, n_adj + 1),
                  "adj": (0, max(8 * n, 1))}
        checked = {k: f.checked(k, bounds.get(k)) for k in _ARRAYS}
        graph = cls({k: checked[k].a for k in _ARRAYS}, int(meta["gen"]), int(meta["changes"]),
                    str(meta["epoch"]), checked)
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
        # the (generation, change count) at which the graph was last found stale (SQL answers)
        self.stale_at: tuple[int, int] | None = None
        self.by_sql = False  # a file of schema < 6: no trigger keeps the count, no graph

    def touching(self, ids: Sequence[str]) -> list[LinkEnds]:
        """The links of the tier touching ``ids``, as the table holds them now: from the
        graph while it is exact, else from SQL (a missing file answers no link)."""
        graph = self.current()
        if graph is None:
            return LinkEnds.of(self.links.touching(ids))
        try:
            return list(graph.touching(ids))
        except (ValueError, IndexError) as exc:  # a block of the file failed its check
            graph = self._damaged(graph, exc)
            return list(graph.touching(ids)) if graph is not None else []

    def forget(self) -> None:
        """Drop the graph held (its file was deleted): the next search maps or builds anew."""
        with self.lock:
            self.graph, self.loaded, self.stale_at = None, False, None

    def _damaged(self, graph: LinkGraph, exc: Exception) -> LinkGraph | None:
        """A graph whose file failed a block check: one warning, then one built from the table."""
        with self.lock:
            if self.graph is graph:
                log.warning("link graph %s is damaged (%s): rebuilding it", graph_path(self.store), exc)
                self.graph = self._build()
            return self.graph

    def current(self) -> LinkGraph | None:
        """The graph exact at the tier's generation and links' change count; None while
        the file does not exist, its schema keeps no count, or the graph is stale but not
        yet worth rebuilding (:meth:`_catch_up`): SQL answers."""
        gen, count = self.store.epochs.versions()  # one statement, once per read scope
        graph = self.graph
        if graph is not None and graph.gen == gen and graph.changes == count:
            return graph
        if self.stale_at == (gen, count) or self.by_sql:
            return None
        with self.lock:
            if self.graph is None and not self.loaded:
                self.loaded = True
                if not self.links.counted():
                    self.by_sql = True
                    return None
                self.graph = self._load()
            graph = self.graph
            verdict = "rebuild" if graph is None else self._catch_up(graph)
            if verdict == "stale":
                self.stale_at = (gen, count)
                return None
            if verdict == "rebuild":
                graph = self.graph = self._build()
            return graph

    def _catch_up(self, graph: LinkGraph) -> str:
        """``exact`` (``graph`` moved to the tier's generation: no link row changed since
        it), ``stale`` or ``rebuild``.

        Why not rebuild at every link change: a rebuild reads every link (300,000 at
        1,000,000 bench entries: ~0.5 s), and an agent that links between its searches
        would pay it per search. A stale graph is never read -- the tier answers by SQL,
        as before the graph -- until the link rows changed since it (written, removed,
        cascaded from entry deletes: the trigger counts each) reach max(REBUILD_MIN,
        REBUILD_SHARE of its links), the mirror's own cadence; a graph of fewer than
        SMALL_LINKS links is rebuilt at once (a few ms)."""
        changes = self.links.changes_since()
        if changes is None or changes.gen < graph.gen or changes.changes < graph.changes:
            return "rebuild"  # another history: the file no longer exists or went back
        pending = changes.changes - graph.changes
        if pending == 0:
            graph.gen = changes.gen
            return "exact"
        links = graph.links
        if links < SMALL_LINKS:
            return "rebuild"
        return "rebuild" if pending >= max(REBUILD_MIN, int(links * REBUILD_SHARE)) else "stale"

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
        # every link's row is a tuple of three strings (150,269 in the 1M team tier), none
        # in a cycle: the cyclic collector walked them ~every 700 anyway, ~40% of the
        # agent tier's graph build after its mirror (0.24 -> 0.15 s CPU; issue 16, session 14)
        with gc_paused():
            state = self.links.state()
            if state is None:
                return None
            graph = LinkGraph.build(state.rows, state.gen, state.changes,
                                    self.store.epoch_at(state.gen) or "")
            del state
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
