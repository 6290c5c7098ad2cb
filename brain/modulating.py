"""Applying a search's :class:`~tiervault.brain.modulation_spec.Modulations` to its stages.

Fixed order, whatever order the tokens were written in:

1. ``pool:N`` — gather fetches N candidates (instead of ``max(3*limit, 30)``);
2. ``centroid`` — gather shifts the query vector before vector recall and cosines:
   ``q' = unit(a*q + (1-a)*mean(E))``;
3. suppress + trajectory — ONE product ``S = M @ D^T`` of the candidate vectors
   ``M`` with the stacked directions ``D`` (suppress texts/entries, trajectory
   ``unit(B - A)``), then
   ``s' = (1 - c)*s + c*S_traj - sum_i w_i*max(S_i, 0)`` on the score array (c = 0.5
   when a trajectory is given). Only resemblance demotes: a candidate pointing away
   from a suppressed direction is not promoted for it. Suppression also lowers each candidate's graph-seed
   relevance the same way, so a suppressed entry does not pull its neighbours in;
4. ``decay:N`` — ``s' = s * f(age)`` with ``f = 1/(1+age/N)`` or ``2^(-age/N)``,
   age in days since the entry's last update (float32);
5. ``diverse[:l]`` — MMR over the candidates' vectors with relevance ``s``; the
   order it selects is the answer's order (``rank`` uses it).

A candidate without a vector has similarity 0 to every direction.

Lexical-only vaults (no embeddings): ``suppress:@ID`` still works -- the resemblance
``S_i`` is then the TF-IDF cosine between each candidate and the suppressed entry's
text (title, description, context, tags) under its tier's TF-IDF model (the
semantic signal's model), and the same formula applies. ``suppress:TEXT``,
centroid, trajectory and diverse need embeddings: the search is refused with an
error naming them; decay and pool always work.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tiervault.brain import modulation as mod
from tiervault.brain.modulation_spec import Modulations, Target
from tiervault.errors import QueryError

__all__ = ["check_available", "shifted_query", "directions", "direction_sims", "apply",
           "lexical_targets"]

DAY_SECONDS = 86_400.0


def check_available(brain: Any, mods: Modulations) -> None:
    """Refuse, naming them, the modulations this Brain cannot run (no embeddings)."""
    need = mods.needs_vectors
    if need and brain.vectors is None:
        raise QueryError("modulate", f"{', '.join(need)} need embeddings, and this vault has "
                                     "none; enable embedding in agent.yaml and run "
                                     "`tiervault embed`, or use suppress:@ID / decay / pool")


def lexical_targets(brain: Any, mods: Modulations, tiers: Any) -> list[Any]:
    """Without embeddings: one lexical query (the manager's LexicalQuery) per
    ``suppress:@ID``, made of that entry's text; an id no searched tier holds is an error."""
    ids = [t.entry_id for t in mods.suppress if t.entry_id is not None]
    found = brain.manager.get_many(ids, tiers) if ids else {}
    out = []
    for entry_id in ids:
        if entry_id not in found:
            raise QueryError("modulate", f"suppress:@{entry_id}: no searched tier holds an entry "
                                         f"with id {entry_id!r}")
        e, _ = found[entry_id]  # (entry, tier)
        text = " ".join([e.title, e.description, e.context, " ".join(e.tags)])
        out.append(brain.manager.lexical_query(text, tiers))
    return out


def _lexical_sims(brain: Any, ctx: Any, start: int) -> np.ndarray:
    """(n - start, k) TF-IDF cosines of the pool's candidates from ``start`` with each
    suppressed entry's text (0 where a tier does not answer)."""
    pool, n = ctx.pool, len(ctx.pool)
    out = np.zeros((n - start, len(ctx.suppress_queries)))
    by_tier: dict[str, list[int]] = {}
    for i in range(start, n):
        by_tier.setdefault(pool.tiers[i], []).append(i)
    for col, lq in enumerate(ctx.suppress_queries):
        for tier, idx in by_tier.items():
            scores = brain.manager.lexical_scores(lq, tier, [pool.ids[i] for i in idx])
            for i in idx:
                out[i - start, col] = scores.get(pool.ids[i], (0.0, 0.0))[1]
    return out


def _entry_vector(brain: Any, entry_id: str, tiers: Any) -> np.ndarray:
    for tier in brain.manager.ordered(tiers):
        vecs = brain.vectors.vectors_for(tier.name, [entry_id])
        if vecs is not None and not np.isnan(vecs[0]).any():
            return mod.unit(vecs[0])
    raise QueryError("modulate", f"entry {entry_id!r} has no vector in the searched tiers "
                                 "(unknown id, or not embedded yet: run `tiervault embed`)")


def _target_vector(brain: Any, target: Target, tiers: Any) -> np.ndarray:
    if target.entry_id is not None:
        return _entry_vector(brain, target.entry_id, tiers)
    return mod.unit(brain.vectors.embed_query(target.text))


def shifted_query(brain: Any, qvec: np.ndarray | None, mods: Modulations,
                  tiers: Any) -> np.ndarray | None:
    """The query vector after ``centroid`` (unchanged without one)."""
    if qvec is None or not mods.centroid:
        return qvec
    examples = np.stack([_entry_vector(brain, i, tiers) for i in mods.centroid])
    return mod.centroid_query(qvec, examples, mods.centroid_alpha)


def directions(brain: Any, mods: Modulations, tiers: Any) -> tuple[np.ndarray | None, int]:
    """Stacked directions ``D`` (suppress rows first, then the trajectory row) and how
    many suppress rows there are; None when there is no linear modulation."""
    rows = [_target_vector(brain, t, tiers) for t in mods.suppress]
    if mods.trajectory is not None:
        a, b = (_target_vector(brain, t, tiers) for t in mods.trajectory)
        rows.append(mod.trajectory_direction(a, b))
    return (np.stack(rows) if rows else None), len(mods.suppress)


def candidate_vectors(brain: Any, pool: Any, start: int, dim: int) -> np.ndarray:
    """(n - start, dim) vectors of the pool's candidates from ``start`` (0 rows: none)."""
    n = len(pool)
    out = np.zeros((n - start, dim), dtype=np.float32)
    by_tier: dict[str, list[int]] = {}
    for i in range(start, n):
        by_tier.setdefault(pool.tiers[i], []).append(i)
    for tier, idx in by_tier.items():
        vecs = brain.vectors.vectors_for(tier, [pool.ids[i] for i in idx])
        if vecs is not None:
            out[np.asarray(idx) - start] = np.nan_to_num(vecs, nan=0.0)
    return out


def direction_sims(brain: Any, ctx: Any, start: int) -> None:
    """Extend ``ctx.vectors`` and ``ctx.direction_sims`` (= M @ D^T, one product) to the
    pool's candidates from ``start`` on (without embeddings: the lexical resemblance
    to each ``suppress:@ID`` entry instead)."""
    if ctx.suppress_queries:
        sims = _lexical_sims(brain, ctx, start)
        ctx.direction_sims = np.vstack([ctx.direction_sims[:start], sims]) if start else sims
        return
    if ctx.directions is None and ctx.modulations.diverse is None:
        return
    dim = (ctx.directions.shape[1] if ctx.directions is not None
           else (ctx.qvec.shape[0] if ctx.qvec is not None else 0))
    new = candidate_vectors(brain, ctx.pool, start, dim)
    ctx.vectors = np.vstack([ctx.vectors[:start], new]) if start else new
    if ctx.directions is not None:
        sims = new @ ctx.directions.T
        ctx.direction_sims = np.vstack([ctx.direction_sims[:start], sims]) if start else sims


def suppression(ctx: Any) -> np.ndarray:
    """sum_i w_i * max(S_i, 0) per candidate (0 when nothing is suppressed)."""
    k = ctx.n_suppress
    if k == 0 or not len(ctx.pool):
        return np.zeros(len(ctx.pool))
    w = np.full(k, mod.DEFAULT_SUPPRESS_WEIGHT, dtype=np.float64)
    return np.maximum(ctx.direction_sims[:, :k].astype(np.float64), 0.0) @ w


def apply(ctx: Any, age_days: np.ndarray) -> None:
    """Steps 3-5 of the module docstring on ``ctx.score`` (and the memories' scores)."""
    mods: Modulations = ctx.modulations
    s = np.asarray(ctx.score, dtype=np.float64)
    if (ctx.directions is not None or ctx.suppress_queries) and len(s):
        if mods.trajectory is not None:
            c = mod.TRAJECTORY_SHARE
            s = (1.0 - c) * s + c * ctx.direction_sims[:, -1].astype(np.float64)
        s = s - suppression(ctx)
    if mods.decay_days is not None:
        f = (mod.exponential_decay if mods.decay_kind == "exp" else mod.reciprocal_decay)
        s = s * f(age_days, mods.decay_days)
        if ctx.memories is not None and len(ctx.memory_score):
            m_age = (ctx.now - np.asarray([m.hit.created_at for m in ctx.memories.hits],
                                          dtype=np.float64)) / DAY_SECONDS
            ctx.memory_score = ctx.memory_score * f(m_age, mods.decay_days)
    ctx.score = s
    if mods.diverse is not None and len(s):
        k = min(len(s), max(ctx.limit, 1))
        res = mod.mmr(s, ctx.vectors, k, mods.diverse)
        ctx.mmr_order, ctx.mmr_scores = res.order, res.scores
