"""Session memories scored on the same scale as entries.

The seed gives every memory a fixed 0.5. Here a memory gets the same signals,
weights and tier factor as an entry, computed from its own text:

- semantic: the same blend as entries (:func:`signals.semantic`), on the same
  per-query scale (divided by the best entry-or-memory score of the query), with
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
- score: the entries' rule (:mod:`tiervault.brain.combine`): relevance R =
  semantic (a memory has no vector), priors from severity, decay and tags.

So a memory that matches the query strongly outranks an entry that matches
weakly, and the other way round. A memory that matches only stop words of the
query ("the", "what") is dropped: FTS5 has no stop words, and a stop word that
no entry contains would otherwise get the entries' maximal idf. FTS5 on the memories table only chooses
which memories are scored (with the same safe query transformation).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, Sequence

import numpy as np

from tiervault.brain import signals
from tiervault.brain.matrix import SignalMatrix
from tiervault.vault.rows import MemoryHit
from tiervault.vault.scoring import FTS_WEIGHTS, bm25_term
from tiervault.vault.tokenizer import STEMMER, STOP_WORDS, split_words

__all__ = ["MemorySignals", "TieredMemory", "memory_signals", "MEMORY_COLUMN_WEIGHTS"]

_W = dict(zip(("id", "title", "description", "context", "tags"), FTS_WEIGHTS))
#: Memory field -> weight of the entry column it is scored as.
MEMORY_COLUMN_WEIGHTS = {"summary": _W["title"], "context": _W["description"],
                         "topics": _W["tags"], "project": _W["context"]}


class TieredMemory(NamedTuple):
    """One memory hit and the tier that holds it."""

    hit: MemoryHit
    tier: str


@dataclass(slots=True)
class MemorySignals:
    hits: list[TieredMemory]
    lexical: np.ndarray
    tfidf: np.ndarray
    signals: SignalMatrix  # semantic is filled by the score stage (per-query scale)
    content: np.ndarray  # bool: the memory matches at least one query word that is not a stop word


def memory_signals(found: Sequence[tuple[MemoryHit, str]], lq, *, now: float,
                   half_life_days: float, query_tags: Sequence[str], manager: Any) -> MemorySignals:
    """Signals of each (memory, tier) hit on the entries' scale (see the module docstring)."""
    hits = [TieredMemory(hit, tier) for hit, tier in found]
    n = len(hits)
    lexical = np.zeros(n)
    tfidf = np.zeros(n)
    content = np.zeros(n, dtype=bool)
    if n and lq.stems and lq.tiers:
        # The entries' federated statistics (the memory is scored as one more entry row).
        idf = lq.stats.idf() if lq.stats.n_docs else np.ones(len(lq.stems))
        avglen = lq.stats.avg_len
        bound = lq.bound if lq.bound > 0 else float(np.sum(idf) * 2.2)
        stem_pos = {s: i for i, s in enumerate(lq.stems)}
        query_stem = STEMMER.stems(lq.words)
        stop_words = STOP_WORDS.get()
        content_stems = {query_stem[w] for w in lq.words if w not in stop_words}
        documents: dict[str, list[tuple[int, list[str]]]] = {}
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
            if tier in lq.tiers:
                documents.setdefault(tier, []).append((i, all_words))
        for tier, docs in documents.items():
            # TF-IDF cosine under the model of the memory's tier (fitted on its entries).
            sims = manager.store(tier).text_similarity(lq.words, [words for _, words in docs])
            for (i, _), sim in zip(docs, sims):
                tfidf[i] = sim
    created = np.array([h.created_at for h, _ in hits], dtype=np.float64)
    nan = np.full(n, np.nan)
    m = SignalMatrix(n)
    m["severity"] = signals.severity(["suggestion"] * n)
    m["temporalDecay"] = signals.temporal_decay(nan, created, nan, nan, now, half_life_days)
    m["tagOverlap"] = signals.tag_overlap(query_tags, [h.topics.split() for h, _ in hits])
    return MemorySignals(hits, lexical, tfidf, m, content)
