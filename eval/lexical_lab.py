"""Offline grids over lexical-leg features on captured candidate pools (issue 10, round 3).

    python eval/lexical_lab.py agent   --half tune --json eval/results/lexical-grid-agent-tune.json
    python eval/lexical_lab.py scifact --half odd  --json bench/results/lexical-grid-scifact-odd.json

Captures each query's pool through the Brain's own stages (eval/relevance_lab.py
``capture``; FTS-only and hybrid with the ``local`` embedder) with the query's
function words dropped (``query_stopwords`` "function", today's default) and the
proximity signal OFF, plus, per candidate, its FTS5-field stems and its raw BM25
under every query stem alone (BM25 is a sum over terms, so these add up to the
pool's BM25 exactly; checked). Then re-scores, with ``relevance_lab.rescore``:

- ``proximity``: lex_q + mu * prox (tiervault.brain.proximity), over windows 4 / 8 / 12,
  ordered or not, pairs counted flat or idf-weighted ((idf_a + idf_b) / 2), mu 0-0.5;
- ``term_idf``: BM25 re-weighted per query term, sum_t (idf_t / max idf)^alpha * bm25_t
  (alpha > 0 favours rare terms, < 0 flattens), and query reduction (drop terms with
  idf < theta * max idf when the query has >= 4 terms);
- ``title``: lex_q + mu * (idf share of the query's content stems found in the title).

Only the agent set's **tune** half and SciFact **odd** ids are for choosing.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval.metrics import per_query  # noqa: E402
from eval.relevance_lab import DEPTH, Captured, capture, rescore  # noqa: E402
from tiervault.brain import combine  # noqa: E402
from tiervault.brain.proximity import FIELDS, query_pairs  # noqa: E402
from tiervault.vault.function_words import FUNCTION_WORDS  # noqa: E402
from tiervault.vault.query import query_terms  # noqa: E402
from tiervault.vault.tokenizer import STEMMER, split_words  # noqa: E402

CAPTURE = {"query_stopwords": "function", "proximity_weight": 0.0,
           "hybrid_proximity_weight": 0.0}


def field_stems(entry: Any) -> list[list[str]]:
    out = []
    for f in FIELDS:
        v = getattr(entry, f, "") or ""
        words = split_words(" ".join(v) if isinstance(v, (list, tuple)) else str(v))
        st = STEMMER.stems(words)
        out.append([st[w] for w in words])
    return out


def capture_all(data: str, half: str, scifact: Path) -> dict[str, Any]:
    from eval.beir import DEFAULT_CACHE, make_embedder
    from tiervault.brain.brain import Brain
    from tiervault.config import BrainConfig, Settings

    settings = Settings(agent_id="lab", tiers=(), embedding=None, features=frozenset(),
                        brain=replace(BrainConfig(), **CAPTURE), config_path=None)
    emb, why = make_embedder("local", 384)
    if emb is None:
        raise SystemExit(why)
    tmp = Path(tempfile.mkdtemp(prefix="tiervault-lexlab-"))
    idmap: dict[str, str] = {}
    if data == "scifact":
        from eval.beir import Runner, beir_half

        bh = beir_half(scifact, half)
        coll, items, qrels, now = bh.coll, bh.items, bh.qrels, None
        runner = Runner(coll, bh.queries, tmp, DEPTH)
        runner.attach(emb, DEFAULT_CACHE, tmp)
    else:
        from eval import agent as A

        ds = A.dev_set_half(data, half)
        items, qrels, now = ds.items, ds.qrels, ds.now
        runner = A.AgentRunner(ds.pack, tmp, now)
        runner.attach(emb, DEFAULT_CACHE)
        coll = None
    clock = {"clock": (lambda: now)} if now is not None else {}
    fts = Brain(runner.manager, settings, **clock)
    hyb = Brain(runner.manager, settings, vectors=runner.runtime, **clock)
    caps: dict[str, Any] = {}
    m = runner.manager
    for q, t, f in items:
        cf, ch = capture(fts, t, f), capture(hyb, t, f)
        ids = list(dict.fromkeys(cf.ids + ch.ids))
        got = m.get_many(ids)
        docs = {i: field_stems(got[i][0]) for i in ids if i in got}
        lq = m.lexical_query(" ".join(w for w in query_terms(t) if w not in FUNCTION_WORDS)
                             or t)
        per: dict[str, tuple[float, dict[str, float]]] = {}
        for w in lq.words:
            st = STEMMER.stem(w)
            if not st or st in per:
                continue
            tlq = m.lexical_query(w)
            sc = {}
            for tier in tlq.tiers:
                for i, (v, _) in m.lexical_scores(tlq, tier, ids).items():
                    sc[i] = v * tlq.bound
            per[st] = (float(tlq.stats.idf()[0]) if tlq.stems else 0.0, sc)
        caps[q] = {"text": t, "f": cf, "h": ch, "docs": docs, "per": per}
        if coll is not None:
            idmap.update({i: coll.ids.doc_id(i) for i in ids})
    runner.close()
    return {"caps": caps, "qrels": qrels, "idmap": idmap}


def prox_feature(c: dict[str, Any], cap: Captured, window: int, ordered: bool,
                 weight: str) -> np.ndarray:
    pairs = query_pairs(c["text"])
    if not pairs:
        return np.zeros(len(cap.ids))
    idf = {st: v[0] for st, v in c["per"].items()}
    ws = [(idf.get(a, 0.0) + idf.get(b, 0.0)) / 2 if weight == "idf" else 1.0 for a, b in pairs]
    tot = sum(ws) or 1.0
    out = np.zeros(len(cap.ids))
    for k, i in enumerate(cap.ids):
        fields = c["docs"].get(i) or []
        pos = []
        for toks in fields:
            p: dict[str, list[int]] = {}
            for j, s in enumerate(toks):
                p.setdefault(s, []).append(j)
            pos.append(p)
        hit = 0.0
        for (a, b), w in zip(pairs, ws):
            for p in pos:
                if a in p and b in p and any(
                        (0 < y - x <= window) if ordered else (0 < abs(y - x) <= window)
                        for x in p[a] for y in p[b]):
                    hit += w
                    break
        out[k] = hit / tot
    return out


def term_lexical(c: dict[str, Any], cap: Captured, alpha: float, theta: float) -> np.ndarray:
    per = c["per"]
    if not per:
        return cap.lexical
    mx = max(v[0] for v in per.values()) or 1.0
    keep = [st for st in per if per[st][0] >= theta * mx] if len(per) >= 4 else list(per)
    out = np.zeros(len(cap.ids))
    for st in keep:
        idf, sc = per[st]
        out += (max(idf, 1e-6) / mx) ** alpha * np.array([sc.get(i, 0.0) for i in cap.ids])
    return out


def title_feature(c: dict[str, Any], cap: Captured) -> np.ndarray:
    st = list(c["per"])
    tot = sum(max(c["per"][s][0], 0.0) for s in st) or 1.0
    out = np.zeros(len(cap.ids))
    for k, i in enumerate(cap.ids):
        fields = c["docs"].get(i)
        if fields:
            title = set(fields[1])
            out[k] = sum(max(c["per"][s][0], 0.0) for s in st if s in title) / tot
    return out


def with_lexical(cap: Captured, lexical: np.ndarray) -> Captured:
    return replace(cap, lexical=lexical)


def score(d: dict[str, Any], which: str, change) -> float:
    run = {}
    for q, c in d["caps"].items():
        cap = change(q, c, which)
        ranked = rescore(cap, {"tfidf_share": 0.3, "hybrid_tfidf_share": 0.2,
                               "proximity_weight": 0.0, "hybrid_proximity_weight": 0.0},
                         which == "h")
        run[q] = {d["idmap"].get(e, e): float(DEPTH - i) for i, e in enumerate(ranked)}
    pq = per_query(run, d["qrels"])
    return round(float(np.mean([v["ndcg@10"] for v in pq.values()])), 4)


def grids(d: dict[str, Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []

    def cell(kind: str, knobs: dict[str, Any], change) -> None:
        row = {"grid": kind, **knobs, "fts": score(d, "f", change), "hybrid": score(d, "h", change)}
        rows.append(row)
        print(json.dumps(row), flush=True)

    cell("none", {}, lambda q, c, k: c[k])
    for w, o, wt in itertools.product((4, 8, 12), (True, False), ("flat", "idf")):
        feats = {k: {q: prox_feature(c, c[k], w, o, wt) for q, c in d["caps"].items()}
                 for k in ("f", "h")}
        for mu in (0.2, 0.3, 0.5):
            def change(q, c, k, mu=mu, feats=feats):
                return with_lexical(c[k], combine.per_query_scale(c[k].lexical) + mu * feats[k][q])
            cell("proximity", {"window": w, "ordered": o, "weight": wt, "mu": mu}, change)
    for alpha, theta in [(a, 0.0) for a in (-1, -0.5, -0.25, 0.5, 1, 2)] + \
                        [(0.0, t) for t in (0.2, 0.3, 0.5)]:
        cell("term_idf", {"alpha": alpha, "theta": theta},
             lambda q, c, k, a=alpha, t=theta: with_lexical(c[k], term_lexical(c, c[k], a, t)))
    for mu in (0.1, 0.2, 0.4):
        cell("title", {"mu": mu}, lambda q, c, k, mu=mu: with_lexical(
            c[k], combine.per_query_scale(c[k].lexical) + mu * title_feature(c, c[k])))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", choices=("scifact", "agent", "ops"))
    ap.add_argument("--half", required=True)
    ap.add_argument("--scifact", type=Path, default=Path("/work/shared/data/beir/scifact"))
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    d = capture_all(args.data, args.half, args.scifact)
    c = next(iter(d["caps"].values()))
    total = sum(np.array([sc.get(i, 0.0) for i in c["f"].ids]) for _, sc in c["per"].values())
    rows = grids(d)
    if args.json:
        args.json.write_text(json.dumps({"data": args.data, "half": args.half,
                                         "queries": len(d["caps"]), "capture_config": CAPTURE,
                                         "first_query_per_term_sum_max": float(np.max(total))
                                         if np.size(total) else 0.0,
                                         "cells": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
