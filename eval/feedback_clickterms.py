"""Click terms (document expansion from feedback), measured offline: do the words of the
queries an entry was judged for lift *other* queries? Rejected: not in the library.

    python eval/feedback_clickterms.py [--split tune|report] [--policy judged|random]
                                       [--json eval/results/feedback_clickterms_tune.json]

The mechanism (doc2query learned from clicks): when an agent accepts entry e for a
query, the query's content-word stems become a weak extra field of e; a dismissal, a
negative one. With the latest verdict per (query, entry)::

    C_e(t)  = sum over judged queries q' containing stem t of value(verdict on e for q')
              (accepted +1, modified +0.5, dismissed -1)
    match_e = sum_{t in q} idf(t) * C_e(t) / sum_{t in q} idf(t)    (idf: the vault's BM25 idf)
    score  *= 1 + trust * MAX_CLICK * tanh(match_e)

It would need nothing new from the tiers (the events come through
``feedback_events_for``, as the nudges' do), so it would have worked over SQLite,
PostgreSQL and remote tiers alike.

The fed half's verdicts are the simulation's protocol (eval/feedback_sim.py) on each
fed query's first top 10 (accept judged-relevant, dismiss judged-irrelevant in the top
3; ``random``: accept with p 0.3, dismiss a top-3 entry with p 0.3, seed 7), one round.
The unseen half's candidates are scored offline (eval/feedback_ceiling.py's
recomputation of the Brain's score, base weights) with the click term (trust 1) for
each MAX_CLICK of the grid; nDCG@10 of the unseen half is reported, with each unseen
query's content stems shared with a fed query and the grades of the top-20 candidates a
click term moves. Choose on ``--split tune``; ``--split report`` confirms.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path
import math
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from eval.feedback_ceiling import collect, ndcg, scores  # noqa: E402
from eval.feedback_sim import PACK, SET_DIR, Sim, halves, load_set  # noqa: E402
from tiervault.brain.learning import ACTION_VALUES, normalise_query  # noqa: E402
from tiervault.vault.query import query_terms  # noqa: E402
from tiervault.vault.rows import FeedbackEvent  # noqa: E402
from tiervault.vault.tokenizer import STEMMER, STOP_WORDS  # noqa: E402

GRID = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.8)


# -- the mechanism (not in the library: it did not win, docs/feedback.md) -------------------
#: The default bound of a click-term match (the grid below overrides it).
MAX_CLICK = 0.2
#: An entry keeps at most this many click terms (largest |C_e(t)| first, then by stem).
MAX_TERMS_PER_ENTRY = 64


def _stems(text: str) -> frozenset[str]:
    stop = STOP_WORDS.get()
    words = [w for w in query_terms(text) if w not in stop]
    return frozenset(s for s in STEMMER.stems(words).values() if s)


def click_bags(events: Iterable[FeedbackEvent]) -> dict[str, dict[str, float]]:
    """``{entry: {stem: C_e(stem)}}`` from feedback events (oldest first): the latest
    verdict per (normalised query, entry) counts; ``failed`` counts nothing."""
    latest: dict[tuple[str, str], tuple[str, float]] = {}
    for ev in events:
        key = (normalise_query(ev.query), ev.entry_id)
        latest.pop(key, None)
        latest[key] = (ev.query, ACTION_VALUES.get(ev.action, 0.0))
    bags: dict[str, dict[str, float]] = {}
    stems_of: dict[str, frozenset[str]] = {}
    for (norm, eid), (query, value) in latest.items():
        if value == 0.0:
            continue
        stems = stems_of.get(norm)
        if stems is None:
            stems = stems_of[norm] = _stems(query)
        bag = bags.setdefault(eid, {})
        for s in stems:
            bag[s] = bag.get(s, 0.0) + value
    for eid, bag in bags.items():
        if len(bag) > MAX_TERMS_PER_ENTRY:
            keep = sorted(bag.items(), key=lambda kv: (-abs(kv[1]), kv[0]))[:MAX_TERMS_PER_ENTRY]
            bags[eid] = dict(keep)
    return bags


def click_match(query_idf: Mapping[str, float], bag: Mapping[str, float]) -> float:
    """``match_e = sum_t idf(t) C_e(t) / sum_t idf(t)`` over the query's stems t."""
    total = sum(max(v, 0.0) for v in query_idf.values())
    if total <= 0 or not bag:
        return 0.0
    return sum(max(v, 0.0) * bag.get(t, 0.0) for t, v in query_idf.items()) / total


def click_boosts(query_idf: Mapping[str, float], entry_ids: Sequence[str],
                 events: Iterable[FeedbackEvent], trust: float | None,
                 max_click: float | None = None) -> np.ndarray:
    """``trust * MAX_CLICK * tanh(match_e)`` per candidate (zeros when ``trust`` is
    None or 0: unchecked or distrusted verdicts teach no words)."""
    out = np.zeros(len(entry_ids), dtype=np.float64)
    if not trust or not query_idf:
        return out
    bound = MAX_CLICK if max_click is None else max_click
    bags = click_bags(events)
    t = min(max(float(trust), 0.0), 1.0)
    for i, eid in enumerate(entry_ids):
        bag = bags.get(eid)
        if bag:
            out[i] = t * bound * math.tanh(click_match(query_idf, bag))
    return out


def verdicts(cs: list, texts: list[str], base: np.ndarray, policy: str) -> list[Any]:
    rng = random.Random(7)
    out, seq = [], 0
    for c, text in zip(cs, texts):
        order = np.argsort(-scores(c, base, 1.0), kind="stable")[:10]
        for rank, j in enumerate(order):
            action = None
            if policy == "judged":
                action = "accepted" if c.gain[j] >= 1 else ("dismissed" if rank < 3 else None)
            elif rng.random() < 0.3:
                action = "accepted"
            elif rank < 3 and rng.random() < 0.3:
                action = "dismissed"
            if action:
                seq += 1
                out.append(FeedbackEvent(seq, text, c.ids[j], action, 0.0, "sim", ""))
    return out


def query_idf(manager: Any, text: str) -> dict[str, float]:
    lq = manager.lexical_query(text)
    content = _stems(text)
    return {s: float(v) for s, v in zip(lq.stems, lq.stats.idf()) if s in content}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split", choices=("report", "tune"), default="tune")
    ap.add_argument("--agentset", type=Path, default=SET_DIR)
    ap.add_argument("--policy", choices=("judged", "random"), default="judged")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    from tiervault.brain.weights import base_weights

    queries, qrels = load_set(args.agentset)
    pack = args.agentset / "pack.jsonl" if (args.agentset / "pack.jsonl").exists() else PACK
    fed, unseen = halves(queries, args.split)
    base = base_weights(False, None)
    with tempfile.TemporaryDirectory(prefix="tv-fbclick-") as tmp:
        sim = Sim(Path(tmp), "learned", pack)
        try:
            cf, cu = collect(sim, fed, qrels), collect(sim, unseen, qrels)
            idfs = [query_idf(sim.manager, q["text"]) for q in unseen]
        finally:
            sim.close()
    events = verdicts(cf, [q["text"] for q in fed], base, args.policy)
    bags = click_bags(events)
    fed_stems = frozenset().union(*[_stems(q["text"]) for q in fed])
    moved = []
    for q, c, idf in zip(unseen, cu, idfs):
        order = np.argsort(-scores(c, base, 1.0), kind="stable")[:20]
        hits = [{"rank": r, "entry": c.ids[j], "match": round(click_match(idf, bags.get(c.ids[j], {})), 3),
                 "grade": int(c.gain[j])}
                for r, j in enumerate(order) if click_match(idf, bags.get(c.ids[j], {}))]
        moved.append({"query": q["id"], "shared_stems": sorted(set(idf) & fed_stems), "moved": hits})
    rows = {}
    for bound in GRID:
        nudges = [click_boosts(idf, c.ids, events, 1.0, bound) for idf, c in zip(idfs, cu)]
        rows[str(bound)] = round(ndcg(cu, base, 1.0, nudges), 4)
    report = {"split": args.split, "policy": args.policy, "events": len(events),
              "unseen_ndcg_by_max_click": rows,
              "unseen_with_a_shared_stem": sum(1 for m in moved if m["shared_stems"]),
              "moved_candidates_by_grade": {g: sum(1 for m in moved for h in m["moved"]
                                                   if h["grade"] == g) for g in (0, 1, 2)},
              "per_query": moved}
    print(json.dumps({k: v for k, v in report.items() if k != "per_query"}, indent=1))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
