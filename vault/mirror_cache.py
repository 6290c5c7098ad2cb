"""The search mirror's cache file: one ``.postings.npz`` beside the tier.

Disposable and verified: a cache is used only when its version, the tier's uid
and the epoch of the generation it was saved at all match the tier (a restored
or copied file has other epochs), and :func:`validate_mirror` checks every array
before use. A save pins the epoch it needs (``pin_epoch``), so the file stays
usable after any number of later writes. Anything wrong costs a rebuild, never a
wrong answer.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import scipy.sparse as sp

from tiervault.errors import TierVaultError
from tiervault.vault.atomic_file import atomic_write
from tiervault.vault.mirror_validation import validate_mirror
from tiervault.vault.tokenizer import STOP_WORDS

if TYPE_CHECKING:
    from tiervault.vault.postings import Postings

__all__ = ["CACHE_VERSION", "StoreFailure", "cache_path", "load", "save", "tier_epoch"]

log = logging.getLogger(__name__)

CACHE_VERSION = 4  # 3: the tier epoch is recorded (restored tiers refuse stale caches); 4: updated_at


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
    return Path(f"{prefix}.postings.npz") if prefix is not None else None


def _join(strings: Sequence[str]) -> np.ndarray:
    return np.frombuffer("\n".join(strings).encode(), dtype=np.uint8)


def _split(blob: np.ndarray) -> list[str]:
    text = blob.tobytes().decode()
    return text.split("\n") if text else []


def save(m: "Postings", store: Any) -> None:
    """Write the base segment of ``m`` atomically (fsync, rename; the temporary file
    never outlives a failure); failure only costs a rebuild next time."""
    if store.read_only or m.delta_W or not store.exists:
        return
    path = cache_path(store)
    if path is None:
        return
    tags = sorted(m.tags)
    tag_slots = [np.asarray(m.tags[t], dtype=np.int64) for t in tags]
    try:
        arrays = dict(
            version=np.array([CACHE_VERSION, m.gen, m.base_rows, m.tfidf_terms], dtype=np.int64),
            tier_uid=_join([store.uid()]), epoch=_join([m.epoch or ""]),
            terms=_join(m.terms), ids=_join(m.ids),
            hashes=_join(m.hashes), domains=_join(m.domains), tags=_join(tags),
            tag_indptr=np.cumsum([0] + [len(s) for s in tag_slots]).astype(np.int64),
            tag_slots=np.concatenate(tag_slots) if tag_slots else np.zeros(0, dtype=np.int64),
            rowids=m.rowids, alive=m.alive, doclen=m.doclen, type_code=m.type_code,
            severity_code=m.severity_code, origin_code=m.origin_code,
            domain_code=m.domain_code, valid_from=m.valid_from, valid_until=m.valid_until,
            updated_at=m.updated_at,
            W_data=m.W.data, W_indices=m.W.indices, W_indptr=m.W.indptr,
            T_data=m.T.data, T_indices=m.T.indices, T_indptr=m.T.indptr,
            idf=m.idf, stop_words=_join(sorted(STOP_WORDS.get())),
        )
        with atomic_write(path, binary=True, mode=0o600) as fh:
            np.savez(fh, **arrays)
        pin = getattr(store, "pin_epoch", None)
        if pin is not None and m.epoch is not None:
            pin(m.gen)  # the file stays usable after the epoch window moves on
    except (OSError, TierVaultError) as exc:
        log.warning("could not cache the search mirror of tier %r at %s: %s", store.name, path, exc)


def load(store: Any, cls: "type[Postings]") -> "Postings | None":
    """The cached mirror if it belongs to this tier's history, else None (no cache,
    another tier's, another history's); a damaged file raises (the caller rebuilds),
    a failing tier raises :class:`StoreFailure`."""
    path = cache_path(store)
    if path is None or not path.exists():
        return None
    with np.load(path, allow_pickle=False) as z:
        version, gen, base_rows, tfidf_terms = (int(v) for v in z["version"])
        if version != CACHE_VERSION:
            return None
        try:
            uid, current = store.uid(), store.generation()
            epoch = tier_epoch(store, gen)
        except TierVaultError as exc:  # the tier itself fails: not the cache's fault
            raise StoreFailure(exc) from exc
        if _split(z["tier_uid"]) != [uid] or gen > current:
            return None  # another tier's cache, or the tier was replaced by an older copy
        if (_split(z["epoch"]) or [""])[0] != (epoch or ""):
            return None  # same generation number, another history: a restored copy
        m = cls()
        m.gen, m.epoch, m.base_rows, m.tfidf_terms = gen, epoch, base_rows, tfidf_terms
        m.terms = _split(z["terms"])
        m.term_ids = dict(zip(m.terms, range(len(m.terms))))
        m.ids, m.hashes, m.domains = _split(z["ids"]), _split(z["hashes"]), _split(z["domains"])
        indptr, tag_slots = z["tag_indptr"], z["tag_slots"]
        tag_names = _split(z["tags"])
        for name in ("rowids", "alive", "doclen", "type_code", "severity_code",
                     "origin_code", "domain_code", "valid_from", "valid_until", "updated_at"):
            setattr(m, name, z[name])
        shape = (base_rows, len(m.terms))
        m.W = sp.csc_matrix((z["W_data"], z["W_indices"], z["W_indptr"]), shape=shape)
        m.T = sp.csc_matrix((z["T_data"], z["T_indices"], z["T_indptr"]),
                            shape=(base_rows, z["T_indptr"].size - 1))
        m.idf = z["idf"]
        stop_words = _split(z["stop_words"])
    validate_mirror(m, indptr, tag_slots, len(tag_names))
    m.T.sort_indices()  # tfidf_at binary-searches a column (a no-op when sorted)
    m.tags = {t: tag_slots[indptr[i]:indptr[i + 1]].tolist() for i, t in enumerate(tag_names)}
    STOP_WORDS.prime(stop_words)
    m.index_live()
    m.total_len = float(m.doclen[m.alive].sum())
    return m
