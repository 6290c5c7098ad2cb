"""Does an IDF-weighted query-term coverage factor help FTS-only ordering? (issue 10)

    python eval/term_coverage.py agent tune [--json eval/results/term-coverage-tune.json]

coverage(d) = sum of idf(t) over the query's non-stop-word stems t found in entry d,
divided by the sum over all of them (stems from FTS5's porter tokenizer, idf from
the pack). Two forms on the Brain's own FTS-only candidate pools (captured with
eval/relevance_lab.py): "mul" R' = R * coverage^g, "mix" R' = (1-g) R + g coverage.
Tried on the starter TUNE half only; neither form beat g = 0, so nothing was adopted
and the report half was never scored with it.
"""
import sys, json, math, tempfile
from pathlib import Path
import numpy as np
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from eval import agent as A
from eval.relevance_lab import capture, DEPTH
from eval.metrics import per_query
from tiervault.config import BrainConfig, Settings
from tiervault.brain.brain import Brain
from tiervault.brain import combine, signals
from tiervault.vault.tokenizer import split_words, STEMMER, STOP_WORDS

which = sys.argv[1]  # agent|ops
half = sys.argv[2]
out_json = Path(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[3] == "--json" else None
results = []
ds = A.dev_set_half(which, half)
pack, queries, qrels, now = ds.pack, ds.queries, ds.qrels, ds.now
tmp = Path(tempfile.mkdtemp())
runner = A.AgentRunner(pack, tmp, now)
settings = Settings(agent_id="lab", tiers=(), embedding=None, features=frozenset(), brain=BrainConfig(), config_path=None)
fts = Brain(runner.manager, settings, clock=lambda: now)
docs = {}
for line in open(pack):
    d = json.loads(line)
    text = " ".join([d.get("title",""), d.get("id","").replace("-"," "), d.get("description",""), " ".join(d.get("tags",[])), d.get("context","")])
    ws = split_words(text)
    st = STEMMER.stems(ws)
    docs[d["id"]] = {st[w] for w in ws if st[w]}
N = len(docs)
df = {}
for s in docs.values():
    for t in s: df[t] = df.get(t, 0) + 1
stop = STOP_WORDS.get()
def qterms(text):
    ws = [w for w in split_words(text) if w.lower() not in stop]
    st = STEMMER.stems(ws)
    return list(dict.fromkeys(st[w] for w in ws if st[w]))
caps = {q["id"]: (capture(fts, q["text"], q.get("filters", {})), qterms(q["text"])) for q in queries}
def run_with(gamma, mode):
    run = {}
    for qid, (c, terms) in caps.items():
        idf = np.array([math.log(1 + N / df.get(t, 0.5)) for t in terms]) if terms else np.zeros(0)
        cov = np.array([ (idf[[t in docs.get(i, ()) for t in terms]].sum() / idf.sum()) if idf.size else 1.0 for i in c.ids])
        lex_q = combine.per_query_scale(c.lexical)
        sem = signals.semantic(combine.per_query_scale(c.tfidf), lex_q, 0.3)
        if mode == "mul":
            rel = sem * (cov ** gamma)
        else:
            rel = (1 - gamma) * sem + gamma * cov * (sem > 0)
        rel = combine.per_query_scale(rel)
        beta = combine.prior_strength(0.2, c.w_text)
        raw = combine.combine(rel, c.prior, beta, c.tier_factor, c.nudge)
        score = combine.below_direct(raw, rel > 0, c.prior)
        order = sorted(range(len(c.ids)), key=lambda i: (-score[i], i))
        run[qid] = {c.ids[i]: float(DEPTH - k) for k, i in enumerate(order[:DEPTH])}
    pq = per_query(run, qrels)
    return round(float(np.mean([v["ndcg@10"] for v in pq.values()])), 4)
for mode, gs in (("mul", [0, 0.25, 0.5, 1, 1.5, 2, 3]), ("mix", [0.1, 0.2, 0.3, 0.5])):
    for g in gs:
        score = run_with(g, mode)
        results.append({"form": mode, "g": g, "ndcg@10": score})
        print(which, half, mode, g, score, flush=True)
if out_json:
    out_json.write_text(json.dumps({"set": which, "half": half, "queries": len(queries),
                                    "cells": results}, indent=1) + "\n")
