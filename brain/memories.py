"""Session memories scored on the same scale as entries.

The seed gives every memory a fixed 0.5. Here a memory gets the same signals,
weights and tier factor as an entry, computed from its own text:

- semantic: the same blend as entries (:func:`signals.semantic`) with
  - lexical = BM25 of the memory against the query with the *entries'*
    federated statistics (idf, average length, k1, b, upper bound) — the memory
    is scored as if it were one more row of the entry index, its ``summary``
    in the title column (weight 10), ``context`` in the description column
    (3), ``topics`` in the tags column (2) and ``project`` in the context
    column (1);
  - tfidf = cosine with the query under the TF-IDF model of the memory's tier
    (the model fitted on that tier's entries; same stop words, same idf);
- temporalDecay from ``created_at``; tagOverlap between the query's tags and
  the memory's topics; severity 0.4 (the entry default, "suggestion");
  vector, domainMatch and graphProximity 0 (memories have none);
- total = tier weight * sum(weights * signals), like an entry.

So a memory that matches the query strongly outranks an entry that matches
weakly, and the other way round. A memory that matches only stop words of the
query ("the", "what") is dropped: FTS5 has no stop words, and a stop word that
no entry contains would otherwise get the entries' maximal idf. FTS5 on the memories table only chooses
which memories are scored (with the same safe query transformation).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import scipy.sparse as sp

from tiervault.brain import signals
from tiervault.vault.schema import FTS_WEIGHTS
from tiervault.vault.scoring import bm25_term, fts5_idf
from tiervault.vault.store import MemoryHit
from tiervault.vault.tokenizer import STEMMER, STOP_WORDS, split_words

__all__ = ["MemorySignals", "memory_signals", "MEMORY_COLUMN_WEIGHTS"]

_W = dict(zip(("id", "title", "description", "context", "tags"), FTS_WEIGHTS))
#: Memory field -> weight of the entry column it is scored as.
MEMORY_COLUMN_WEIGHTS = {"summary": _W["title"], "context": _W["description"],
                         "topics": _W["tags"], "project": _W["context"]}


@dataclass(slots=True)
class MemorySignals:
    hits: list[tuple[MemoryHit, str]]
    lexical: np.ndarray
    tfidf: np.ndarray
    values: np.ndarray  # (n, 7) signals in SIGNALS order
    content: np.ndarray  # bool: the memory matches at least one query word that is not a stop word


def memory_signals(hits: list[tuple[MemoryHit, str]], lq, *, now: float, half_life_days: float,
                   query_tags: Sequence[str]) -> MemorySignals:
    """Signals of each (memory, tier) hit on the entries' scale (see the module docstring)."""
    n = len(hits)
    lexical = np.zeros(n)
    tfidf = np.zeros(n)
    content = np.zeros(n, dtype=bool)
    mirrors = lq.postings
    if n and lq.stems and mirrors:
        n_rows = sum(p.n_alive for p in mirrors.values())
        total_len = sum(p.total_len for p in mirrors.values())
        df = sum((p.matches(lq.stems).df for p in mirrors.values()), np.zeros(len(lq.stems)))
        idf = fts5_idf(n_rows, df) if n_rows else np.ones(len(lq.stems))
        avglen = total_len / n_rows if n_rows else 1.0
        bound = lq.bound if lq.bound > 0 else float(np.sum(idf) * 2.2)
        stem_pos = {s: i for i, s in enumerate(lq.stems)}
        query_stem = STEMMER.stems(lq.words)
        stop_words = STOP_WORDS.get()
        content_stems = {query_stem[w] for w in lq.words if w not in stop_words}
        qvecs: dict[str, sp.csr_matrix | None] = {}
        for i, (hit, tier) in enumerate(hits):
            fields = {"summary": hit.summary, "context": hit.context, "topics": hit.topics,
                      "project": hit.project}
            words_by_field = {k: split_words(v or "") for k, v in fields.items()}
            all_words = [w for ws in words_by_field.values() for w in ws]
            stems = STEMMER.stems(all_words)
            wtf = np.zeros(len(lq.stems))
            for name, ws in words_by_field.items():
                weight = MEMORY_COLUMN_WEIGHTS[name]
                for w in ws:
                    j = stem_pos.get(stems[w])
                    if j is not None:
                        wtf[j] += weight
            doclen = float(len(all_words))
            content[i] = any(wtf[stem_pos[s]] > 0 for s in content_stems if s in stem_pos)
            score = 0.0
            for j in np.flatnonzero(wtf):
                score += float(bm25_term(np.array([wtf[j]]), np.array([doclen]), avglen, float(idf[j]))[0])
            lexical[i] = score / bound if bound > 0 else 0.0
            p = mirrors.get(tier)
            if p is None or p.tfidf_terms == 0:
                continue
            if tier not in qvecs:
                qvecs[tier] = p.tfidf_vector(lq.words)
            qv = qvecs[tier]
            memory_vec = p.tfidf_vector(all_words) if qv is not None else None
            if memory_vec is None:
                continue
            tfidf[i] = float(memory_vec.multiply(qv).sum())
    created = np.array([h.created_at for h, _ in hits], dtype=np.float64)
    nan = np.full(n, np.nan)
    values = np.zeros((n, 7))
    values[:, 0] = signals.semantic(tfidf, lexical)
    values[:, 2] = signals.severity(["suggestion"] * n)
    values[:, 3] = signals.temporal_decay(nan, created, nan, nan, now, half_life_days)
    values[:, 4] = signals.tag_overlap(query_tags, [h.topics.split() for h, _ in hits])
    return MemorySignals(hits, lexical, tfidf, values, content)
