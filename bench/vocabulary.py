"""The fixed synthetic vocabulary the bench corpus and queries are written in.

~50,000 pronounceable synthetic words (syllables from fixed onset / nucleus / coda
tables) plus English function words and a few technical terms, ranked and drawn with a
Zipf law, ``p(rank r) = r^-s / sum_k k^-s`` with ``s`` = :data:`ZIPF_EXPONENT` (1.1).
Function words hold the top ranks, as in real text; technical terms sit at log-spaced mid
ranks; each domain of :data:`DOMAINS` has 300 topical words of its own. Built once per
process from :data:`VOCAB_SEED`, so the vocabulary is the same whatever the corpus seed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

__all__ = ["Vocabulary", "vocabulary", "DOMAINS", "FUNCTION_WORDS", "TECH_TERMS", "N_TAGS"]

#: The entry domains; each has topical words of its own (``Vocabulary.topic``).
DOMAINS = ("api", "database", "auth", "frontend", "infra", "testing", "security",
           "performance", "observability", "data")
ZIPF_EXPONENT = 1.1
VOCAB_SIZE = 50_000
VOCAB_SEED = 20_240_607
LOOKUP_SIZE = 1 << 22  # the vocabulary is the same whatever ``seed`` is
N_TAGS = 200

FUNCTION_WORDS = (
    "the", "to", "of", "and", "a", "in", "is", "for", "how", "with", "on", "when", "not",
    "use", "this", "that", "it", "be", "by", "from", "as", "at", "an", "if", "or", "do",
    "should", "what", "why", "can", "all", "are", "you", "we", "no", "before", "after",
)
TECH_TERMS = (
    "retry", "policy", "timeout", "cache", "jwt", "token", "oauth", "sqlite", "postgres",
    "index", "query", "schema", "migration", "deploy", "docker", "kubernetes", "rust",
    "c++", "python", "node.js", "async", "mutex", "latency", "throughput", "endpoint",
    "webhook", "queue", "kafka", "redis", "ttl", "backoff", "circuit-breaker", "grpc",
    "graphql", "csrf", "cors", "tls", "dns", "pagination", "idempotency", "rollback",
    "feature-flag", "logging", "tracing", "metrics", "alerting", "sharding", "replica",
    "deadlock", "n+1", "utf-8", "regex", "json", "yaml", "ci/cd", "e2e", "flaky",
)
_ONSETS = ("b c d f g h j k l m n p r s t v w z br cr dr fr gr pr tr bl cl fl gl pl sl "
           "st sp sk sn sm ch sh th qu").split() + [""] * 4
_NUCLEI = "a e i o u a e i o ai ea io ou oo ie y".split()
_CODAS = "n r l s t m nd nt st ck x ng rk sh".split() + [""] * 8
_SLUG_BAD = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True)
class Vocabulary:
    """Words by Zipf rank (0 = most frequent) and the tables drawn from them."""

    words: tuple[str, ...]
    probs: np.ndarray          # Zipf probability per rank
    cdf: np.ndarray            # cumulative probs, for inverse-CDF draws
    bucket: np.ndarray         # bucket[j] = #cdf values <= j / LOOKUP_SIZE (see draw)
    content_start: int         # first rank past the function-word head
    tags: tuple[str, ...]      # the 200 tag names
    topic: np.ndarray          # (len(DOMAINS), k) ranks of each domain's topical words
    slugs: tuple[str, ...]     # id-safe form of each word

    def draw(self, rng: np.random.Generator, size: int, min_rank: int = 0) -> np.ndarray:
        """Ranks drawn from the Zipf law, conditioned on ``rank >= min_rank``."""
        lo = self.cdf[min_rank - 1] if min_rank else 0.0
        u = lo + rng.random(size) * (1.0 - lo)
        # Exact inverse CDF without a binary search: every rank's probability is
        # wider than one bucket (checked in vocabulary()), so a bucket holds at most
        # one CDF step and one comparison finishes the lookup. 5x faster than searchsorted.
        r = self.bucket[(u * LOOKUP_SIZE).astype(np.int64)].astype(np.int64)
        r += self.cdf[r] <= u
        return np.minimum(r, len(self.words) - 1)


@lru_cache(maxsize=1)
def vocabulary() -> Vocabulary:
    """The fixed vocabulary (built once per process from ``VOCAB_SEED``)."""
    rng = np.random.default_rng(VOCAB_SEED)
    reserved = set(FUNCTION_WORDS) | set(TECH_TERMS)
    synthetic: dict[str, None] = {}
    while len(synthetic) < VOCAB_SIZE:
        batch = 40_000
        n_syl = rng.choice([1, 2, 3, 4], size=batch, p=[0.12, 0.48, 0.32, 0.08])
        parts = [rng.integers(0, len(t), size=(batch, 4)) for t in (_ONSETS, _NUCLEI, _CODAS)]
        for i in range(batch):
            word = "".join(_ONSETS[parts[0][i, s]] + _NUCLEI[parts[1][i, s]]
                           + (_CODAS[parts[2][i, s]] if s == n_syl[i] - 1 else "")
                           for s in range(n_syl[i]))
            if len(word) >= 3 and word not in reserved:
                synthetic[word] = None
    words_syn = list(synthetic)[:VOCAB_SIZE]
    # Shorter words are more frequent in real text: order by length plus noise.
    order = np.argsort(np.array([len(w) for w in words_syn]) + rng.normal(0, 1.5, len(words_syn)),
                       kind="stable")
    words_syn = [words_syn[i] for i in order]
    # Head: ranks 0-9 function words; 10-63 the rest interleaved with synthetic words.
    ranked: list[str] = list(FUNCTION_WORDS[:10])
    rest_fw = list(FUNCTION_WORDS[10:])
    syn_iter = iter(words_syn)
    while rest_fw:
        ranked.append(rest_fw.pop(0))
        ranked.append(next(syn_iter))
    ranked.extend(syn_iter)
    content_start = 64
    # Technical terms at log-spaced mid ranks (frequent enough to be searched for).
    prev = content_start
    for rank, term in zip(np.geomspace(80, 6_000, len(TECH_TERMS)).astype(int).tolist(), TECH_TERMS):
        prev = max(rank, prev + 1)
        ranked.insert(prev, term)
    words = tuple(ranked)
    probs = 1.0 / np.arange(1, len(words) + 1, dtype=np.float64) ** ZIPF_EXPONENT
    probs /= probs.sum()
    cdf = np.cumsum(probs)
    cdf[-1] = 1.0
    if probs.min() <= 1.0 / LOOKUP_SIZE:
        raise AssertionError("vocabulary too large for the draw lookup table; raise LOOKUP_SIZE")
    bucket = np.searchsorted(cdf, np.arange(LOOKUP_SIZE) / LOOKUP_SIZE,
                             side="right").astype(np.int32)
    # Tags: the technical terms that are valid tag strings, then mid-rank words.
    tag_pool = [t for t in TECH_TERMS if "/" not in t]
    extra = rng.choice(np.arange(200, 8_000), size=N_TAGS * 2, replace=False)
    for r in extra:
        if len(tag_pool) >= N_TAGS:
            break
        if words[r] not in tag_pool and words[r] not in FUNCTION_WORDS:
            tag_pool.append(words[r])
    topic = np.stack([np.sort(rng.choice(np.arange(150, 20_000), size=300, replace=False))
                      for _ in DOMAINS])
    slugs = tuple(_SLUG_BAD.sub("-", w).strip("-") or "x" for w in words)
    return Vocabulary(words, probs, cdf, bucket, content_start, tuple(tag_pool[:N_TAGS]),
                      topic, slugs)
