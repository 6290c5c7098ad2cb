"""Grid over BrainConfig knobs on the agent dev set, TUNE half only (never the report half).

    python eval/tune_agent.py '{"prior_strength": [0, 0.1, 0.2], "vector_floor": [0.0, 0.05]}'

Prints nDCG@10 overall and per kind for the Brain FTS-only and hybrid (local
embedder) under each combination of BrainConfig fields; the grid behind the
defaults is in eval/results/agent-tune-grid.txt.
"""
import sys, json, itertools, tempfile
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from datetime import datetime
from eval import agent as A
from eval.beir import make_embedder
from tiervault.config import BrainConfig, Settings
from tiervault.brain.brain import Brain

queries, qrels = A.load_set(A.DEFAULT_SET)
queries = [q for q in queries if q["split"] == "tune"]
qrels = {q["id"]: qrels[q["id"]] for q in queries}
now = datetime.fromisoformat(A.DEFAULT_NOW).timestamp()
tmp = tempfile.mkdtemp()
r = A.AgentRunner(A.DEFAULT_PACK, Path(tmp), now)
emb, _ = make_embedder("local", 384)
r.attach(emb, A.DEFAULT_CACHE)

def run(cfg, vectors):
    s = Settings(agent_id="t", tiers=(), embedding=None, features=frozenset(), brain=cfg, config_path=None)
    b = Brain(r.manager, s, vectors=vectors, clock=lambda: now)
    ranked = {q["id"]: [x["id"] for x in b.search_intelligent(q["text"], mode="scan", limit=100, **q.get("filters", {}))] for q in queries}
    pq = A.scores(ranked, qrels)
    summ = A.summarise(pq, queries)["tune"]
    return summ
grid = json.loads(sys.argv[1])
keys = list(grid)
for combo in itertools.product(*grid.values()):
    kw = dict(zip(keys, combo))
    cfg = BrainConfig(**kw)
    f = run(cfg, None); h = run(cfg, r.runtime)
    print(kw, "fts %.4f hyb %.4f" % (f["all"]["ndcg@10"], h["all"]["ndcg@10"]),
          " | fts " + " ".join(f"{k[:4]}={f[k]['ndcg@10']:.3f}" for k in A.KINDS),
          " | hyb " + " ".join(f"{k[:4]}={h[k]['ndcg@10']:.3f}" for k in A.KINDS), flush=True)
