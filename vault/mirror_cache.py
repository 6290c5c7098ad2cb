"""The search mirror's cache file: one ``<tier>.postings.mirror`` beside the tier.

Layout (:mod:`array_file`): uncompressed, 64-byte-aligned arrays behind a JSON
header, opened with ``mmap`` -- a cold process maps the file and reads only the
pages its queries touch, instead of inflating and copying every array of an
``.npz`` (at 1,000,000 entries: 1.5 s and 1.5 GB before, see bench/README.md).

Disposable and verified. A cache is used only when its version, the tier's uid
and the epoch of the generation it was saved at all match the tier (a restored
or copied file has other epochs); a save pins the epoch it needs
(``pin_epoch``), so the file stays usable after any number of later writes.
What is checked, and when:

- on open: the header's CRC-32, the file's exact size (truncation), every
  array's dtype / shape / bounds, the CRC-32 of every per-row array (codes,
  dates, lengths, rowids; ~40 bytes a row), of the tag index and the postings'
  ``indptr`` / ``idf``, then their consistency (:func:`validate_mirror`);
- on first read: the postings (BM25: a column per term; TF-IDF: a row per
  slot) and the string tables (ids, content hashes, terms) -- 90% of the file --
  block by block against CRC-32s written with them, slots and term ids also
  against their ranges
  (:mod:`checked_array`). A block is used only after it matched, so a damaged
  byte is found before it can change an answer; the query is then answered again
  from a rebuilt mirror, with one warning.

Not caught: a file edited in place *after* a block was verified by a process
that maps it (tiervault never does that: a save writes a temporary file and
renames it over the old one; no fsync: what a crash leaves is refused, atomic_file.py), and a deliberately forged file whose CRCs
were recomputed (only its structure is checked). Anything else costs a rebuild,
never a wrong answer.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tiervault.errors import TierVaultError
from tiervault.vault import array_file, latent
from tiervault.vault.mirror_validation import validate_mirror
from tiervault.vault.sparse_columns import Columns
from tiervault.vault.tfidf_rows import TfidfRows
from tiervault.vault.hash_table import HashTable, table_of
from tiervault.vault.light_records import INDEX_DTYPE, SNIPPET_CHARS, LightRecords
from tiervault.vault.string_table import StringColumn, StringTable
from tiervault.vault.vocabulary import Vocabulary
from tiervault.vault.tokenizer import STOP_WORDS
from tiervault.vault.validity_edges import edges_of

if TYPE_CHECKING:
    from tiervault.vault.postings import Postings

__all__ = ["CACHE_VERSION", "StoreFailure", "cache_path", "fits", "load", "save", "tier_epoch", "verify_all"]

log = logging.getLogger(__name__)

# 3: tier epoch; 4: updated_at; 5: mapped array file, string tables; 6: T by row;
# 7: T as counts + row norms (vault/tfidf_rows.py), W_counts (TF-IDF counts by posting),
#    content hashes as raw bytes (vault/hash_table.py), latent V_k (vault/latent.py)
# 8: V_k checked per block and read by row; the base rows' latent vectors (latent_rows)
# 9: the base's light rows (vault/light_records.py: light_index, light_blob)
CACHE_VERSION = 9
_ROW_ARRAYS = ("rowids", "rowid_order", "alive", "doclen", "type_code", "severity_code",
               "origin_code", "domain_code", "valid_from", "valid_until", "updated_at")
_TABLES = ("ids", "hashes", "terms")
#: A cache file larger than this reads its postings columns, TF-IDF rows and latent
#: rows with ``pread`` (checked_array.py: this kernel maps a file's page-cache folios
#: up to 2 MB at a time, so a 1,000,000-entry process's queries would leave most of a
#: ~200-440 MB file resident); a smaller one reads them through its mapping, with no
#: system call (~34 ``preadv`` a 100,000-entry scan, 22-46 MB files; issue 16 session
#: 16). A negative value: always ``pread``.
PREAD_ABOVE_BYTES = 64 << 20


class StoreFailure(Exception):
    """The tier (not the cache) failed while a cache was checked: re-raised as is."""

    def __init__(self, cause: Exception) -> None:
        super().__init__(str(cause))
        self.cause = cause


def tier_epoch(store: Any, gen: int) -> str | None:
    """The tier's epoch at ``gen`` (None for a backend that keeps none)."""
    epoch_at = getattr(store, "epoch_at", None)
    return epoch_at(gen) if epoch_at is not None else None


def cache_path(store: Any) -> Path | None:
    prefix = store.cache_prefix()
    return Path(f"{prefix}.postings.mirror") if prefix is not None else None


def _legacy_path(store: Any) -> Path | None:
    prefix = store.cache_prefix()
    return Path(f"{prefix}.postings.npz") if prefix is not None else None


def _dense(x: "np.ndarray | latent.MatrixRows") -> np.ndarray:
    return x.whole() if isinstance(x, latent.MatrixRows) else x


def _table(column: StringColumn | Vocabulary) -> "StringTable | HashTable":
    """The strings as one table (they are after a build; rebuilt defensively if not,
    hex digests as a HashTable as a build makes them)."""
    extra = column.extra if isinstance(column, StringColumn) else column.added
    return column.base if not extra else table_of(column.tolist())


def save(m: "Postings", store: Any) -> None:
    """Write the base segment of ``m`` atomically (rename, no fsync: atomic_file.py; the
    temporary file never outlives a failure); failure only costs a rebuild next time."""
    if store.read_only or m.delta_W or not store.exists:
        return
    path = cache_path(store)
    if path is None:
        return
    tags = sorted(m.tags)
    slot_type = np.int32 if m.base_rows < 2**31 - 1 else np.int64
    tag_slots = [np.asarray(m.tags[t], dtype=slot_type) for t in tags]
    arrays: dict[str, np.ndarray] = {name: getattr(m, name) for name in _ROW_ARRAYS}
    arrays.update(
        tag_indptr=np.cumsum([0] + [len(s) for s in tag_slots]).astype(np.int64),
        tag_slots=np.concatenate(tag_slots) if tag_slots else np.zeros(0, dtype=slot_type),
        idf=m.idf,
        validity_edges=edges_of(m.valid_until[:m.base_rows], m.valid_from[:m.base_rows]))
    lazy = set()
    if m.latent_V is not None:
        # both read a row at a time with pread (latent.MatrixRows), checked per block
        arrays["latent_V"] = _dense(m.latent_V)
        lazy.add("latent_V")
        if m.latent_rows is not None:
            arrays["latent_rows"] = _dense(m.latent_rows)
            lazy.add("latent_rows")
    if m.records is not None and m.records.n == m.base_rows:
        arrays.update(m.records.arrays())  # read a row at a time, checked per block
        lazy |= {"light_index", "light_blob"}
    for name, a in m.W.arrays().items():
        arrays[f"W_{name}"] = a
    for name, a in m.T.arrays().items():
        arrays[f"T_{name}"] = a
    lazy |= {"W_indices", "W_data", "W_counts", "T_indices", "T_counts", "T_norms"}
    for prefix, column in (("ids", m.ids), ("hashes", m.hashes), ("terms", m.vocab)):
        for name, a in _table(column).arrays().items():
            arrays[f"{prefix}_{name}"] = a
            lazy.add(f"{prefix}_{name}")
    meta = {"version": CACHE_VERSION, "gen": m.gen, "base_rows": m.base_rows,
            "tfidf_terms": m.tfidf_terms, "T_terms": m.T.n_rows,
            "tier_uid": store.uid(), "epoch": m.epoch or "",
            "domains": m.domains, "tags": tags, "stop_words": sorted(STOP_WORDS.get()),
            "light_snippet": SNIPPET_CHARS}
    try:
        array_file.write(path, meta, arrays, lazy, mode=0o600)
        pin = getattr(store, "pin_epoch", None)
        if pin is not None and m.epoch is not None:
            pin(m.gen)  # the file stays usable after the epoch window moves on
        legacy = _legacy_path(store)
        if legacy is not None:
            legacy.unlink(missing_ok=True)  # the .npz of an older version: never read again
    except (OSError, TierVaultError) as exc:
        log.warning("could not cache the search mirror of tier %r at %s: %s", store.name, path, exc)


def _edges(e: np.ndarray) -> np.ndarray:
    """The saved validity edges, refused unless sorted, distinct float64 (no NaN)."""
    if e.dtype != np.float64 or e.ndim != 1 or (e.size > 1 and not bool(np.all(e[1:] > e[:-1]))) \
            or bool(np.isnan(e).any()):
        raise ValueError("the validity edges are not sorted distinct numbers")
    e.flags.writeable = False
    return e


def _epoch_if_ours(meta: dict[str, Any], store: Any) -> "str | None | bool":
    """The tier's epoch at the cache's generation when the cache belongs to this tier's
    history (this version, this tier, a generation it had, the same epoch), else False."""
    if meta.get("version") != CACHE_VERSION:
        return False
    gen = int(meta["gen"])
    try:
        uid, current = store.uid(), store.generation()
        epoch = tier_epoch(store, gen)
    except TierVaultError as exc:  # the tier itself fails: not the cache's fault
        raise StoreFailure(exc) from exc
    if meta["tier_uid"] != uid or gen > current:
        return False  # another tier's cache, or the tier was replaced by an older copy
    if meta["epoch"] != (epoch or ""):
        return False  # same generation number, another history: a restored copy
    return epoch


def fits(store: Any) -> bool:
    """True when ``store`` has a cache file whose header says it belongs to the tier's
    history (:func:`load` may still find it damaged, or :meth:`Postings.catch_up` too
    far behind: both rebuild). Reads the header only, not the arrays."""
    path = cache_path(store)
    if path is None or not path.exists():
        return False
    try:
        meta = array_file.read_meta(path)
    except (OSError, ValueError):
        return False  # unreadable or damaged: a build replaces it
    try:
        return _epoch_if_ours(meta, store) is not False
    except (KeyError, TypeError, ValueError):
        return False  # a header without the fields of this version: a build replaces it


def _string_table(f: array_file.ArrayFile, prefix: str) -> "StringTable | HashTable":
    if f"{prefix}_raw" in f.names():  # hex digests as raw bytes (vault/hash_table.py)
        n = f.array_size(f"{prefix}_keys")
        return HashTable(f.checked(f"{prefix}_raw"), f.checked(f"{prefix}_keys"),
                         f.checked(f"{prefix}_order", bounds=(0, max(n, 1))))
    n_bytes = f.array_size(f"{prefix}_blob")
    n = f.array_size(f"{prefix}_keys")
    return StringTable(f.checked(f"{prefix}_blob"),
                       f.checked(f"{prefix}_offsets", bounds=(0, n_bytes + 1)),
                       f.checked(f"{prefix}_keys"),
                       f.checked(f"{prefix}_order", bounds=(0, max(n, 1))))


def load(store: Any, cls: "type[Postings]") -> "Postings | None":
    """The cached mirror if it belongs to this tier's history, else None (no cache,
    another tier's, another history's); a damaged file raises (the caller rebuilds),
    a failing tier raises :class:`StoreFailure`."""
    path = cache_path(store)
    if path is None or not path.exists():
        return None
    f = array_file.read(path)
    read = path.stat().st_size > PREAD_ABOVE_BYTES  # columns by pread, else through the mapping
    meta = f.meta
    epoch = _epoch_if_ours(meta, store)
    if epoch is False:
        return None
    gen, base_rows, tfidf_terms = int(meta["gen"]), int(meta["base_rows"]), int(meta["tfidf_terms"])
    m = cls()
    m.gen, m.epoch, m.base_rows, m.tfidf_terms = gen, epoch, base_rows, tfidf_terms
    m.domains = [str(d) for d in meta["domains"]]
    for name in _ROW_ARRAYS:
        setattr(m, name, f.array(name))
    m.alive = np.array(m.alive, dtype=bool)  # written by catch-up: a private copy (1 byte a row)
    if "validity_edges" in f.names():  # absent from a cache written before session 22
        m.validity_edges = _edges(f.array("validity_edges"))
    m.ids, m.hashes = (StringColumn(_string_table(f, p)) for p in ("ids", "hashes"))
    m.vocab = Vocabulary(_string_table(f, "terms"))
    n_terms = len(m.vocab)
    # postings are read a column at a time: with pread in a large file, else through the mapping
    m.W = Columns(f.array("W_indptr"),
                  f.checked("W_indices", bounds=(0, max(base_rows, 1)), read=read),
                  f.checked("W_data", read=read), base_rows,
                  f.checked("W_counts", read=read))  # a column per term: slots, weights, TF-IDF counts
    t_terms = int(meta["T_terms"])
    m.idf = f.array("idf")
    if m.idf.dtype != np.float64 or m.idf.ndim != 1 or m.idf.size < t_terms:
        raise ValueError("TF-IDF idf does not cover the TF-IDF terms")
    counts = f.checked("T_counts", read=read)
    if counts.a.dtype.kind != "u":
        raise ValueError("TF-IDF counts are not unsigned integers")
    m.T = TfidfRows(f.array("T_indptr"),
                    f.checked("T_indices", bounds=(0, max(t_terms, 1)), read=read),
                    counts, f.checked("T_norms"), m.idf.astype(np.float32),
                    t_terms)  # a row per slot: term ids, counts
    tag_indptr, tag_slots = f.array("tag_indptr"), f.array("tag_slots")
    tag_names = [str(t) for t in meta["tags"]]
    validate_mirror(m, n_terms, tag_indptr, tag_slots, len(tag_names))
    m.tags = {t: tag_slots[tag_indptr[i]:tag_indptr[i + 1]] for i, t in enumerate(tag_names)}
    if "latent_V" in f.names():
        V = f.checked("latent_V", read=read)
        k = len(V) // max(t_terms, 1)
        if V.a.dtype != np.float32 or k < 1 or len(V) != t_terms * k:
            raise ValueError(f"latent V of {len(V)} values for {t_terms} TF-IDF terms")
        m.latent_V = latent.MatrixRows(V, k)
        if "latent_rows" in f.names():
            rows = f.checked("latent_rows", read=read)
            if rows.a.dtype != np.float32 or len(rows) != base_rows * k:
                raise ValueError(f"{len(rows)} latent row values for {base_rows} rows of {k}")
            m.latent_rows = latent.MatrixRows(rows, k)
    if "light_index" in f.names() and meta.get("light_snippet") == SNIPPET_CHARS:
        index = f.checked("light_index", read=read)
        if index.a.dtype != np.uint8 or len(index) != INDEX_DTYPE.itemsize * base_rows:
            raise ValueError(f"light-row index of {len(index)} values for {base_rows} rows")
        blob = f.checked("light_blob", read=read)
        if blob.a.dtype != np.uint8:
            raise ValueError("light-row records are not bytes")
        m.records = LightRecords(index, blob, read=read)
    STOP_WORDS.prime(str(w) for w in meta["stop_words"])
    m.total_len = float(m.doclen[m.alive].sum())
    return m


def verify_all(m: "Postings") -> None:
    """Check every block of a mirror loaded from its cache file now (``tiervault
    check``); raises ``CacheDamaged`` at the first that fails."""
    for table in (m.ids.base, m.hashes.base, m.vocab.base):
        for name in table.ARRAYS:
            getattr(table, name).all()
    m.W.indices.all()
    m.W.data.all()
    if m.W.counts is not None:
        m.W.counts.all()
    for name in ("indices", "counts", "norms"):
        getattr(m.T, name).all()
    for rows in (m.latent_V, m.latent_rows):
        if isinstance(rows, latent.MatrixRows):
            rows.verify()
    if m.records is not None:
        m.records.index.all()
        m.records.blob.all()
