"""Graph proximity: which entries sit 1 or 2 link hops from the query's best matches.

Seeds are chosen by the expand stage (:mod:`tiervault.brain.stages`): the best
``graph_seeds`` (5) candidates by text relevance R whose R is at least
``seed_min_relevance`` (0.5) of the query's best — entries with real evidence.
A neighbour with no text or vector match of its own ranks below every direct
match (:func:`tiervault.brain.combine.below_direct`). Links are read from EVERY connected tier (a link
stored in the team tier between two agent entries counts), and are followed
in both directions: "A supports B" makes A and B related either way.

Link types:
- ``supports``, ``extends``, ``sequences``: a hop (1 hop -> 0.5, 2 hops -> 1/3).
- ``contradicts``: NOT a hop and never a boost — a contradiction is not
  evidence that the other entry is relevant in the same direction, and it is
  not a penalty either (an agent should still see a warning that contradicts
  its best match). Contradictions touching the result set are reported under
  ``explain.contradicts`` so the caller can see them.

Seeds themselves earn nothing, even when linked to each other: their
relevance is already counted, and letting linked seeds lift each other would
put a cluster of related, weaker matches above a better-matching entry that
happens to have no links. The boost goes to the neighbours seeds pull in.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Sequence

__all__ = ["POSITIVE_LINKS", "GraphHops", "graph_hops", "MAX_FRONTIER"]

POSITIVE_LINKS = frozenset({"supports", "extends", "sequences"})
MAX_FRONTIER = 200  # hop-1 nodes whose own links are read (bounds the second query)


@dataclass(slots=True)
class GraphHops:
    """Shortest positive hop count (1 or 2) from the seeds, per non-seed entry id."""

    hops: dict[str, int] = field(default_factory=dict)
    contradicts: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))


def _adjacency(links) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    adj: dict[str, set[str]] = defaultdict(set)
    contra: dict[str, set[str]] = defaultdict(set)
    for link in links:
        a, b = link.source_id, link.target_id
        if link.link_type in POSITIVE_LINKS:
            adj[a].add(b)
            adj[b].add(a)
        elif link.link_type == "contradicts":
            contra[a].add(b)
            contra[b].add(a)
    return adj, contra


def graph_hops(manager, seeds: Sequence[str]) -> GraphHops:
    """Hop counts from ``seeds`` over positive links in every tier (two link reads:
    ``manager.link_ends``, a SQLite tier's memory-mapped link graph, vault/link_graph.py)."""
    out = GraphHops()
    seeds = list(dict.fromkeys(seeds))
    if not seeds:
        return out
    first = manager.link_ends(seeds)
    adj, contra = _adjacency(first)
    hop1 = [n for s in seeds for n in adj.get(s, ()) if n not in seeds]
    hop1 = list(dict.fromkeys(hop1))[:MAX_FRONTIER]
    if hop1:
        more, more_contra = _adjacency(manager.link_ends(hop1))
        for k, v in more.items():
            adj[k] |= v
        for k, v in more_contra.items():
            contra[k] |= v
    seed_set = set(seeds)
    for seed in seeds:
        for n1 in adj.get(seed, ()):
            if n1 not in seed_set and out.hops.get(n1, 3) > 1:
                out.hops[n1] = 1
        for n1 in adj.get(seed, ()):
            if n1 not in hop1 and n1 not in seeds:
                continue  # beyond the frontier bound: its links were not read
            for n2 in adj.get(n1, ()):
                if n2 not in seed_set and out.hops.get(n2, 3) > 2:
                    out.hops[n2] = 2
    out.contradicts = contra
    return out
