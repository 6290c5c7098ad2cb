"""``hash``: offline signed feature hashing (numpy only, no model, no network).

**Lexical, not semantic.** Two texts are close when they share words and word
fragments; synonyms and paraphrases ("car" / "automobile") are *not* close. It
is a smarter grep that makes the vector machinery work with zero setup, not a
replacement for a real embedding model (use ``local`` or a remote provider for
meaning).

Features of a text (after ``str.lower`` and ``[^\\W_]+`` word tokenisation, i.e.
runs of letters/digits of any script):

* every word token ``w`` -> feature ``"w:" + w`` with weight 1;
* every character 3-gram of ``" " + w + " "`` -> feature ``"g:" + gram`` with
  weight ``1 / sqrt(G_w)`` where ``G_w = len(w)`` is the number of 3-grams of the
  padded word, so a word's fragment block has about unit norm whatever its length.

Each feature ``f`` is hashed with BLAKE2b (8-byte digest, personalised, so it is
stable across processes and machines, unlike Python's salted ``hash()``) into
``h``; it adds ``sign(f) * weight`` to bucket ``h mod dim`` where ``sign`` is
taken from the top bit of ``h`` (signed hashing keeps collisions unbiased):

    v[b] = sum_{f : h(f) mod dim = b} sign(f) * weight(f) * count(f),
    v <- v / ||v||_2

An empty text (no tokens) gives the zero vector, which stays zero: it has cosine
0 with everything instead of pretending to be similar to something.

Speed: per-token features are computed once and cached (bounded cache, results
do not depend on it), and a whole batch is accumulated with a single
``np.bincount`` over ``row * dim + bucket`` indices.
"""

from __future__ import annotations

import hashlib
import re
from itertools import chain
from typing import ClassVar

import numpy as np

from tiervault.embeddings.base import InputType, check_input_type, prepare_texts
from tiervault.errors import ConfigError

__all__ = ["HashEmbedder", "HASH_VERSION"]

# Bump when the features or the hashing change: the model name carries it, so
# stored vectors of an older scheme are never compared with new ones.
HASH_VERSION = "hash-v1"
_TOKEN_RE = re.compile(r"[^\W_]+")
_PERSON = b"tiervault-hash1"
_CACHE_MAX = 500_000
_SUB_BATCH = 1024


def _feature_hash(feature: str) -> int:
    return int.from_bytes(
        hashlib.blake2b(feature.encode("utf-8"), digest_size=8, person=_PERSON).digest(), "little"
    )


def token_features(token: str, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """(buckets int64, signed weights float32) of one lowercased word token.

    Weights per bucket are summed, so repeated fragments and collisions add up.
    """
    padded = f" {token} "
    grams = [padded[i : i + 3] for i in range(len(padded) - 2)]
    gram_w = 1.0 / np.sqrt(len(grams))
    feats = [("w:" + token, 1.0)] + [("g:" + g, gram_w) for g in grams]
    buckets = np.empty(len(feats), dtype=np.int64)
    weights = np.empty(len(feats), dtype=np.float32)
    for j, (f, w) in enumerate(feats):
        h = _feature_hash(f)
        buckets[j] = h % dim
        weights[j] = -w if h >> 63 else w
    return buckets, weights


class HashEmbedder:
    """Deterministic lexical embedder (see the module docstring for the formula).

    ``model`` is ``"hash-v1-<dim>"`` so that a change of dimension is a change of
    model for the pipeline (vectors of different dimensions are never compared).
    """

    name: ClassVar[str] = "hash"

    def __init__(self, dim: int = 384, *, max_input_chars: int = 8000) -> None:
        if not isinstance(dim, int) or dim < 2:
            raise ConfigError(f"embedding.dim for provider 'hash' must be an integer >= 2, got {dim!r}", key="embedding.dim")
        self._dim = dim
        self.max_input_chars = int(max_input_chars)
        self._cache: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    @classmethod
    def from_config(cls, cfg: object) -> HashEmbedder:
        """Build from an ``EmbeddingConfig`` (uses ``dim`` and ``max_input_chars``)."""
        dim = getattr(cfg, "dim", None) or 384
        return cls(dim, max_input_chars=getattr(cfg, "max_input_chars", 8000))

    @property
    def model(self) -> str:
        return f"{HASH_VERSION}-{self._dim}"

    @property
    def dim(self) -> int:
        return self._dim

    def _features(self, token: str) -> tuple[np.ndarray, np.ndarray]:
        hit = self._cache.get(token)
        if hit is None:
            if len(self._cache) >= _CACHE_MAX:
                self._cache.clear()  # a cache only: results never depend on it
            hit = self._cache[token] = token_features(token, self._dim)
        return hit

    def embed(self, texts: list[str], input_type: InputType = "document") -> np.ndarray:
        """Embed ``texts`` -> float32 (len(texts), dim); rows L2-normalised (blank -> 0).

        ``input_type`` is accepted for the protocol and ignored (queries and
        documents are hashed the same way, which is what makes them comparable).
        """
        check_input_type(input_type)
        prepared = prepare_texts(texts, self.max_input_chars)
        out = np.zeros((len(prepared), self._dim), dtype=np.float32)
        # Sub-batches bound the temporary index arrays (~8 slots per token).
        for s in range(0, len(prepared), _SUB_BATCH):
            self._embed_into(prepared[s : s + _SUB_BATCH], out[s : s + _SUB_BATCH])
        return out

    def _embed_into(self, prepared: list[str], out: np.ndarray) -> None:
        n, dim = len(prepared), self._dim
        if n == 1:
            self._embed_one(prepared[0], out)
            return
        # One vocabulary for the batch: every distinct token is looked up once.
        per_doc = [_TOKEN_RE.findall(text.lower()) for text in prepared]
        all_toks = list(chain.from_iterable(per_doc))
        if not all_toks:
            return
        local = {t: i for i, t in enumerate(dict.fromkeys(all_toks))}
        occ = np.fromiter(map(local.__getitem__, all_toks), dtype=np.int64, count=len(all_toks))
        doc_len = np.fromiter(map(len, per_doc), dtype=np.int64, count=n)
        occ_rows = np.repeat(np.arange(n, dtype=np.int64), doc_len)
        feats = [self._features(t) for t in local]  # dict order == local id order
        lengths = np.fromiter((len(b) for b, _ in feats), dtype=np.int64, count=len(feats))
        starts = np.zeros(len(feats) + 1, dtype=np.int64)
        np.cumsum(lengths, out=starts[1:])
        flat_b = np.concatenate([b for b, _ in feats])
        flat_w = np.concatenate([w for _, w in feats])
        # Ragged gather: for each token occurrence, all of its feature slots.
        counts = lengths[occ]
        total = int(counts.sum())
        offsets = np.repeat(starts[occ] - np.cumsum(counts) + counts, counts) + np.arange(total)
        target = np.repeat(occ_rows, counts) * dim + flat_b[offsets]
        acc = np.bincount(target, weights=flat_w[offsets], minlength=n * dim)
        out[:] = acc.reshape(n, dim)
        norms = np.linalg.norm(out, axis=1)
        nz = norms > 0
        out[nz] /= norms[nz, None]

    def _embed_one(self, text: str, out: np.ndarray) -> None:
        """:meth:`_embed_into` of one text (a search's query), with a few NumPy calls
        instead of the batch's ragged gather: the same (bucket, weight) pairs in the same
        order (each token occurrence's features in turn), summed by the same
        ``np.bincount``, normalised by the same 2-D norm -- the same bits."""
        toks = _TOKEN_RE.findall(text.lower())
        if not toks:
            return
        feats = [self._features(t) for t in toks]
        buckets = np.concatenate([b for b, _ in feats])
        weights = np.concatenate([w for _, w in feats])
        out[:] = np.bincount(buckets, weights=weights, minlength=self._dim).reshape(1, self._dim)
        norms = np.linalg.norm(out, axis=1)
        nz = norms > 0
        out[nz] /= norms[nz, None]

    def close(self) -> None:
        """Nothing to release (kept for symmetry with the remote providers)."""

    def __repr__(self) -> str:
        return f"HashEmbedder(dim={self._dim})"
