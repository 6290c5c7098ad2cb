"""Rank fusion and score normalisation: pure functions, no state.

Two ways to combine a lexical ranking (FTS/BM25) with a vector ranking:

* the Brain's weighted sum of per-signal scores, which needs each signal on a
  common scale first -> :func:`min_max_normalize`;
* reciprocal-rank fusion (``fusion="rrf"``), which ignores score scales and
  only uses positions -> :func:`rrf`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tiervault.errors import ValidationError

__all__ = ["rrf", "min_max_normalize", "RRF_K", "RRF_ABSENT_RANK"]

RRF_K = 60
RRF_ABSENT_RANK = 1000


def rrf(rankings: Sequence[Sequence[str]], k: int = RRF_K, absent_rank: int = RRF_ABSENT_RANK) -> dict[str, float]:
    """Reciprocal-rank fusion of several rankings (best first) of candidate ids.

    For every candidate ``d`` appearing in at least one ranking::

        RRF(d) = sum over rankings R of 1 / (k + rank_R(d))

    with 1-based ``rank_R(d)``; a candidate missing from ``R`` counts at
    ``rank_R(d) = absent_rank`` (1000 by default, so absence is a penalty, not a
    zero contribution). A repeated id within one ranking keeps its best rank.
    Returns ``{id: score}`` ordered by descending score, ties by first appearance.

    >>> rrf([["a", "b"], ["b", "c"]])["b"] == 1 / 62 + 1 / 61
    True
    """
    if k < 0:
        raise ValidationError("k", f"rrf needs k >= 0, got {k}")
    if absent_rank < 1:
        raise ValidationError("absent_rank", f"rrf needs absent_rank >= 1, got {absent_rank}")
    ranks: list[dict[str, int]] = []
    order: dict[str, None] = {}
    for ranking in rankings:
        positions: dict[str, int] = {}
        for pos, doc in enumerate(ranking, start=1):
            positions.setdefault(doc, pos)
            order.setdefault(doc, None)
        ranks.append(positions)
    scores = {
        doc: sum(1.0 / (k + positions.get(doc, absent_rank)) for positions in ranks) for doc in order
    }
    return dict(sorted(scores.items(), key=lambda item: -item[1]))


def min_max_normalize(scores: Mapping[str, float], *, constant: float = 1.0) -> dict[str, float]:
    """Rescale scores to [0, 1]: ``x' = (x - min) / (max - min)``.

    When every score is equal (including a single score) there is no spread to
    rescale; all get ``constant`` (1.0 by default: "as good as the best"; pass 0.0
    to make a flat signal contribute nothing). NaN scores are refused: min and max
    are meaningless with one. No tiervault path hands it user values (user-given
    numbers -- brain.weights, modulation tokens -- are refused as non-finite where
    they enter: config/fields.py, brain/weights.py, brain/modulation_spec.py), so a
    NaN here is a caller's computed score.
    """
    if not scores:
        return {}
    values = list(scores.values())
    if any(v != v for v in values):
        bad = [key for key, v in scores.items() if v != v]
        raise ValidationError("scores", f"NaN score for {', '.join(map(repr, bad[:5]))}"
                                        f"{' ...' if len(bad) > 5 else ''}; drop these "
                                        "candidates or give them a number (e.g. the lowest "
                                        "score) before normalising")
    lo, hi = min(values), max(values)
    if hi == lo:
        return {key: constant for key in scores}
    span = hi - lo
    return {key: (value - lo) / span for key, value in scores.items()}
