"""The Brain's latent semantic (LSA) signal: each tier's ``latent_scores`` (the storage
contract, vault/backend.py; the model is :mod:`tiervault.vault.latent`).

FTS-only queries have no semantic evidence beyond shared words; LSA (Deerwester et al.
1990) gives a soft topical match from the tier's own TF-IDF rows (formulas in
vault/latent.py): ``lsa = max(0, d . q)`` with d, q the unit rank-k latent vectors of
the entry and the query. The Brain mixes it into the semantic signal beside the TF-IDF
share (brain/combine.py): ``semantic = (1 - s - b) * lex_q + s * tfidf_q + b * lsa_q``,
b = ``BrainConfig.lsa_share`` (FTS-only) / ``hybrid_lsa_share``; k = ``lsa_components``
(16: chosen on the starter tune half + SciFact odd ids, eval/README.md).

Every tier answers through the contract, a remote tier too (its server scores over its
own mirror of the same rows, so it ranks exactly as the same rows in a local file). A
tier with no latent space (no more rows or terms than k) answers None: NaN here, and the
Brain then uses the candidate's own lexical signal (round 3's ranking inside that tier).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import numpy as np

__all__ = ["TierText", "scores", "text_scores"]


def _floats(values: Sequence[float | None]) -> np.ndarray:
    """float64, NaN for None (NumPy's float conversion of None is NaN)."""
    return np.array(values, dtype=np.float64)


def scores(manager: Any, words: Sequence[str], ids: Sequence[str], tiers: Sequence[str],
           k: int) -> np.ndarray:
    """lsa of each (id, tier) candidate for the query ``words`` (0: not in the tier;
    NaN: the tier has no latent space)."""
    if tiers and tiers.count(tiers[0]) == len(tiers):  # one tier (the graph neighbours, often)
        return _floats(manager.store(tiers[0]).latent_scores(list(words), list(ids), k))
    out = np.zeros(len(ids))
    by_tier: dict[str, list[int]] = {}
    for i, t in enumerate(tiers):
        by_tier.setdefault(t, []).append(i)
    for tier, idx in by_tier.items():
        got = manager.store(tier).latent_scores(list(words), [ids[i] for i in idx], k)
        out[idx] = _floats(got)
    return out


class TierText(NamedTuple):
    """A free text (a memory's words) and the tier whose latent space scores it."""

    tier: str
    words: Sequence[str]


def text_scores(manager: Any, words: Sequence[str], docs: Sequence[TierText],
                k: int) -> np.ndarray:
    """lsa of free texts (memories) under their tier's latent space (NaN as in :func:`scores`)."""
    out = np.zeros(len(docs))
    by_tier: dict[str, list[int]] = {}
    for i, doc in enumerate(docs):
        by_tier.setdefault(doc.tier, []).append(i)
    for tier, idx in by_tier.items():
        got = manager.store(tier).latent_text_scores(list(words), [list(docs[i].words) for i in idx], k)
        out[idx] = _floats(got)
    return out
