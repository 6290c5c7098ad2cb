"""Pseudo-relevance feedback for the lexical leg (RM3-style), off unless configured.

With ``BrainConfig.prf_terms = m > 0``, after the first lexical pass:

1. the ``prf_docs`` best FTS candidates by the semantic signal are the feedback
   documents, each weighted by its semantic value w_d (summing to 1);
2. every word t of their text (title, tags, description, context; lowercased,
   >= 3 letters, not a stop word, not a number, not already in the query) gets
   ``score(t) = idf(t) * sum_d w_d * tf(t, d) / |d|`` (the relevance model of
   RM3 times the federated BM25 idf, so words every entry has do not win; a word
   only one entry holds is skipped: it cannot find anything new);
3. the best m words form the expansion query; a second lexical pass fetches its
   own top candidates into the pool, and every candidate gets its BM25 under the
   expansion query;
4. the lexical signal becomes ``(1 - prf_weight) * lex_q + prf_weight * exp_q``,
   each per-query max-scaled (RM3's interpolation of the original and the
   expansion model, done on scores because the BM25 leg has no term weights).

The expansion never replaces the query: with ``prf_weight`` < 0.5 an entry matching
the original words stays ahead of one matching only the expansion.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from tiervault.vault.query import query_terms
from tiervault.vault.tokenizer import STEMMER, STOP_WORDS, split_words

__all__ = ["Expansion", "expansion_terms", "expand_query"]


@dataclass(slots=True)
class Expansion:
    """The expansion query of one search and the BM25 of each pool candidate under it."""

    terms: list[str]
    lq: Any  # the manager's LexicalQuery of the expansion terms
    lexical: np.ndarray


def _doc_words(entry: Any) -> list[str]:
    """The words of an entry's text (repeats kept) that may expand a query."""
    text = " ".join(str(getattr(entry, f, "") or "") for f in
                    ("title", "tags", "description", "context"))
    stop = STOP_WORDS.get()
    return [w for w in split_words(text) if len(w) >= 3 and w.isalnum() and not w.isdigit()
            and w not in stop]


def expansion_terms(docs: Sequence[Any], weights: Sequence[float], query: str, manager: Any,
                    tiers: Sequence[str] | None, m: int) -> list[str]:
    """The ``m`` best expansion words of the feedback ``docs`` (entries) for ``query``."""
    total = float(sum(weights))
    if not docs or total <= 0 or m <= 0:
        return []
    in_query = set(query_terms(query))
    model: Counter[str] = Counter()
    for doc, w in zip(docs, weights):
        words = _doc_words(doc)
        if not words:
            continue
        counts = Counter(words)
        for t, c in counts.items():
            if t not in in_query:
                model[t] += (w / total) * c / len(words)
    if not model:
        return []
    cands = [t for t, _ in model.most_common(8 * m)]
    lq = manager.lexical_query(" ".join(cands), tiers)
    # a word only one entry holds can find nothing the first pass did not: no expansion
    idf_of = {st: idf for st, idf, df in zip(lq.stems, lq.stats.idf(), lq.stats.df) if df > 1}
    stem_of = STEMMER.stems(cands)
    query_stems = {stem_of.get(t) for t in in_query}
    scored = [(model[t] * float(idf_of.get(stem_of.get(t), 0.0)), t) for t in cands
              if stem_of.get(t) and stem_of.get(t) not in query_stems]
    scored.sort(key=lambda x: (-x[0], x[1]))
    out: list[str] = []
    seen: set[str] = set()
    for s, t in scored:
        if s <= 0 or stem_of[t] in seen:
            continue
        seen.add(stem_of[t])
        out.append(t)
        if len(out) >= m:
            break
    return out


def expand_query(brain: Any, ctx: Any, semantic: np.ndarray) -> Expansion | None:
    """Run steps 1-3 over ``ctx.pool`` (FTS candidates ranked by ``semantic``);
    None when there is nothing to expand with."""
    cfg, pool, manager = ctx.config, ctx.pool, brain.manager
    n = min(ctx.n_fts, len(semantic))
    if n == 0:
        return None
    order = np.argsort(-semantic[:n], kind="stable")[: cfg.prf_docs]
    order = [int(i) for i in order if semantic[i] > 0]
    if not order:
        return None
    full = brain.full_entries(pool, order)
    docs = [full.get(f"{pool.tiers[i]}\0{pool.ids[i]}") for i in order]
    keep = [(d, float(semantic[i])) for d, i in zip(docs, order) if d is not None]
    terms = expansion_terms([d for d, _ in keep], [w for _, w in keep], ctx.query, manager,
                            ctx.tiers, cfg.prf_terms)
    if not terms:
        return None
    text = " ".join(terms)
    fetch = max(cfg.fetch_factor * ctx.limit, cfg.min_fetch)
    extra = manager.search(text, filters=ctx.filters, limit=fetch, tiers=ctx.tiers)
    pool.add_external(manager, list(extra.ids), "expansion", ctx.lq, ctx.filters, ctx.tiers,
                      fetch)
    lq = extra.query
    return Expansion(terms, lq, expansion_scores(manager, lq, pool, 0))


def expansion_scores(manager: Any, lq: Any, pool: Any, start: int,
                     before: np.ndarray | None = None) -> np.ndarray:
    """BM25 (upper-bound normalised) of pool candidates from ``start`` on under ``lq``."""
    out = np.zeros(len(pool))
    if before is not None:
        out[:start] = before[:start]
    by_tier: dict[str, list[int]] = {}
    for i in range(start, len(pool)):
        by_tier.setdefault(pool.tiers[i], []).append(i)
    for tier, idx in by_tier.items():
        scores = manager.lexical_scores(lq, tier, [pool.ids[i] for i in idx])
        for i in idx:
            out[i] = scores.get(pool.ids[i], (0.0, 0.0))[0]
    return out
