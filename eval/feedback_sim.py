"""Feedback simulation: does accept/dismiss improve ranking for queries the vault has not seen?

    python eval/feedback_sim.py [--split report|tune] [--adaptation learned seed]
                                [--agentset eval/agentset/ops] [--pack PACK.jsonl]
                                [--json eval/results/feedback_sim.json]
                                [--plot docs/feedback_learning.png] [--set NAME=VALUE ...]
                                [--embedder none|local|hash]

The starter pack is loaded into a team tier (``import_lines``, links included) and
an empty agent tier receives the feedback, through the real ``Brain.feedback``
(signals recomputed and stored, weights refitted as in production). The Brain's
clock is fixed (2026-01-01) so recency is reproducible. FTS-only by default;
``--embedder local`` runs every search (and the re-rank inside ``feedback()``) in
hybrid mode: the pack's vectors are stored through the production embeddings
runtime (as eval/agent.py does, cached in ~/.cache/tiervault-eval) and the Brain
gets the runtime as its vector source, so the hybrid base weights are fitted.

Halves (eval/agentset/, split by its README):
* ``--split report`` (the figures): feedback on the 35 ``tune`` queries, the 33
  ``report`` queries are the unseen half — never used to choose a constant.
* ``--split tune`` (for choosing constants): the ``tune`` queries only, odd
  positions get feedback, even ones are the unseen half.

Policies, each run from a fresh agent tier, cycling over the fed queries in rounds
(order shuffled per round with a fixed seed) until 400 events:
* ``judged``: search (top 10); accept every judged-relevant entry (grade >= 1) in
  the top 10, dismiss every judged-irrelevant one in the top 3 (the issue's protocol);
* ``random``: the same list, judgements ignored: each top-10 entry accepted with
  probability 0.3, each other top-3 entry dismissed with probability 0.3 (seed 7);
* ``noisy``: a careless agent: each entry's verdict is the ``judged`` one, except
  with probability 0.3 where it is the ``random`` one (seed 7).

nDCG@10 (trec_eval) of the fed and the unseen half is measured after 0, 50, 100,
200 and 400 events; the summary gives each half's headroom (1 - nDCG@10 before), the
share of it closed, and the ceilings of a perfect reorder of the first ranking's top
10 / top 20. ``--set learning.DEFAULT_C=0.3`` overrides a module constant
of tiervault.brain.{learning,feedback} for tuning runs (recorded in the JSON).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from eval.metrics import per_query  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SET_DIR = HERE / "agentset"
PACK = ROOT / "vault" / "packs" / "starter.jsonl"
NOW = datetime.fromisoformat("2026-01-01T00:00:00+00:00").timestamp()
CHECKPOINTS = (0, 50, 100, 200, 400)
POLICIES = ("judged", "random", "noisy")
RANDOM_P = 0.3
NOISE_P = 0.3
RANDOM_SEED = 7
EVAL_DEPTH = 20


def load_set(directory: Path = SET_DIR) -> tuple[list[dict[str, Any]], dict[str, dict[str, int]]]:
    queries = [json.loads(line) for line in (directory / "queries.jsonl").read_text().splitlines()
               if line.strip()]
    qrels: dict[str, dict[str, int]] = {}
    for line in (directory / "qrels.tsv").read_text().splitlines()[1:]:
        if line.strip():
            qid, eid, grade = line.split("\t")
            qrels.setdefault(qid, {})[eid] = int(grade)
    return queries, qrels


def halves(queries: list[dict[str, Any]], split: str) -> tuple[list[dict], list[dict]]:
    """(fed, unseen) for ``split`` (see the module docstring)."""
    if split == "report":
        return ([q for q in queries if q["split"] == "tune"],
                [q for q in queries if q["split"] == "report"])
    tune = [q for q in queries if q["split"] == "tune"]
    return tune[0::2], tune[1::2]


def apply_overrides(pairs: list[str]) -> dict[str, float]:
    """``module.NAME=value`` for tiervault.brain.learning / feedback constants."""
    from tiervault.brain import feedback, learning

    modules = {"learning": learning, "feedback": feedback}
    done = {}
    for item in pairs:
        key, value = item.split("=", 1)
        mod, name = key.split(".", 1)
        if mod not in modules or not hasattr(modules[mod], name):
            raise SystemExit(f"--set {item}: unknown constant (use learning.NAME or feedback.NAME)")
        setattr(modules[mod], name, float(value))
        done[key] = float(value)
    return done


class Sim:
    """One fresh vault (pack in team, empty agent tier) and a Brain over it."""

    def __init__(self, workdir: Path, adaptation: str, pack: Path = PACK,
                 embedder: Any = None, cache_dir: Path | None = None) -> None:
        from tiervault.brain.brain import Brain
        from tiervault.config import BrainConfig, Settings
        from tiervault.vault.jsonl import import_lines
        from tiervault.vault.manager import VaultManager

        self.manager = VaultManager.at({"agent": str(workdir / "agent.db"),
                                        "team": str(workdir / "team.db")})
        import_lines(self.manager, "team", pack.read_text(encoding="utf-8").splitlines(), strict=True)
        settings = Settings(agent_id="sim", tiers=(), embedding=None, features=frozenset(),
                            brain=BrainConfig(adaptation=adaptation), config_path=None)
        self.runtime: Any = None
        self.embedding: dict[str, Any] = {}
        if embedder is not None:
            from eval.beir import attach_vectors

            ids = [json.loads(line)["id"] for line in pack.read_text(encoding="utf-8").splitlines()
                   if line.strip()]
            self.runtime, self.embedding = attach_vectors(self.manager, "team", workdir / "team.db",
                                                          ids, embedder, cache_dir, workdir)
        self.brain = Brain(self.manager, settings, vectors=self.runtime, clock=lambda: NOW)

    def close(self) -> None:
        self.brain.close()

    def ranked(self, q: dict[str, Any], limit: int) -> list[str]:
        return [r["id"] for r in self.brain.search_intelligent(q["text"], limit=limit,
                                                               **q.get("filters", {}))]

    def ndcg(self, queries: list[dict[str, Any]], qrels: dict[str, dict[str, int]],
             reorder: int = 0) -> float:
        """Mean nDCG@10 of the current ranking; with ``reorder`` = k, of the ranking
        whose top k are put in the judged order (a ceiling for feedback on that list)."""
        run = {}
        for q in queries:
            ids = self.ranked(q, EVAL_DEPTH)
            grades = qrels.get(q["id"], {})
            ids = sorted(ids[:reorder], key=lambda e: -grades.get(e, 0)) + ids[reorder:]
            run[q["id"]] = {eid: float(len(ids) - i) for i, eid in enumerate(ids)}
        vals = per_query(run, {q["id"]: qrels.get(q["id"], {}) for q in queries})
        return sum(v["ndcg@10"] for v in vals.values()) / len(vals)


def actions(policy: str, ids: list[str], grades: dict[str, int], rng: random.Random) -> list[tuple[str, str]]:
    """(entry id, action) for one result list under ``policy``."""
    out = []
    for rank, eid in enumerate(ids[:10]):
        mode = policy
        if policy == "noisy":
            mode = "random" if rng.random() < NOISE_P else "judged"
        if mode == "judged":
            if grades.get(eid, 0) >= 1:
                out.append((eid, "accepted"))
            elif rank < 3:
                out.append((eid, "dismissed"))
        else:
            if rng.random() < RANDOM_P:
                out.append((eid, "accepted"))
            elif rank < 3 and rng.random() < RANDOM_P:
                out.append((eid, "dismissed"))
    return out


def run_policy(adaptation: str, policy: str, fed: list[dict], unseen: list[dict],
               qrels: dict[str, dict[str, int]],
               checkpoints: tuple[int, ...] = CHECKPOINTS, pack: Path = PACK,
               embedder: Any = None, cache_dir: Path | None = None,
               seed: int = RANDOM_SEED) -> dict[str, Any]:
    """The learning curve of one (adaptation, policy) from a fresh vault. ``seed`` drives
    the random verdicts and the order of the fed queries in each round (the default
    keeps the committed figures' order: round r shuffled with seed r)."""
    with tempfile.TemporaryDirectory(prefix="tv-fbsim-") as tmp:
        sim = Sim(Path(tmp), adaptation, pack, embedder, cache_dir)
        try:
            curve = []

            def measure(events: int) -> None:
                ws = sim.brain.weights()
                trust = sim.brain.nudge_trust()
                curve.append({"events": events, "fed": round(sim.ndcg(fed, qrels), 4),
                              "unseen": round(sim.ndcg(unseen, qrels), 4),
                              "weights": ws.as_dict(), "adapted": ws.adapted,
                              "nudge_trust": None if trust is None else round(trust, 4)})

            measure(0)
            ceiling = {half: {f"top{k}": round(sim.ndcg(qs, qrels, reorder=k), 4) for k in (10, 20)}
                       for half, qs in (("fed", fed), ("unseen", unseen))}
            rng = random.Random(seed)
            events, rnd, todo = 0, 0, [c for c in checkpoints if c > 0]
            while todo:
                order = list(fed)
                random.Random(rnd + 1000 * (seed - RANDOM_SEED)).shuffle(order)
                rnd += 1
                for q in order:
                    for eid, action in actions(policy, sim.ranked(q, 10), qrels.get(q["id"], {}), rng):
                        sim.brain.feedback(q["text"], eid, action)
                        events += 1
                        if todo and events == todo[0]:
                            measure(events)
                            todo.pop(0)
                        if not todo:
                            break
                    if not todo:
                        break
            return {"curve": curve, "rounds": rnd, "ceiling": ceiling, "embedding": sim.embedding}
        finally:
            sim.close()


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, half in zip(axes, ("fed", "unseen")):
        for adaptation, runs in report["runs"].items():
            for policy, run in runs.items():
                xs = [p["events"] for p in run["curve"]]
                ys = [p[half] for p in run["curve"]]
                style = {"judged": "-", "random": "--"}.get(policy, ":")
                ax.plot(xs, ys, marker="o", linestyle=style,
                        label=f"{adaptation} / {policy} feedback")
        ceiling = next(iter(next(iter(report["runs"].values())).values())).get("ceiling")
        if ceiling:
            ax.axhline(ceiling[half]["top10"], color="grey", linestyle=":",
                       label="ceiling: first top 10 in judged order")
        mode = "hybrid" if report.get("embedder", "none") != "none" else "FTS-only"
        ax.set_title(f"{'queries given feedback' if half == 'fed' else 'unseen queries'} "
                     f"({report['set']}, {report['split']} run, {mode})", fontsize=10)
        ax.set_xlabel("feedback events")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("nDCG@10")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def summary(report: dict[str, Any]) -> dict[str, Any]:
    """Deltas at 200 events (and 400) per adaptation: fed, unseen, random cost; and the
    headroom (1 - nDCG@10 before any feedback) of each half with the share of it closed,
    beside the ceilings of reordering the first ranking's top 10 / top 20 perfectly
    (what the judged feedback on the top 10 could reach without new entries surfacing)."""
    out = {}
    for adaptation, runs in report["runs"].items():
        at = {p["events"]: p for p in runs["judged"]["curve"]}
        rnd = {p["events"]: p for p in runs.get("random", {"curve": []})["curve"]}
        noisy = {p["events"]: p for p in runs.get("noisy", {"curve": []})["curve"]}
        row = {}
        for half in ("fed", "unseen"):
            room = 1.0 - at[0][half]
            row[f"{half}_headroom"] = round(room, 4)
            for k, v in runs["judged"]["ceiling"][half].items():
                row[f"{half}_ceiling_reorder_{k}"] = v
            for n in (200, 400):
                gain = at[n][half] - at[0][half]
                row[f"{half}_headroom_closed@{n}"] = round(gain / room, 3) if room > 0 else None
        for n in (200, 400):
            row[f"fed_gain@{n}"] = round(at[n]["fed"] - at[0]["fed"], 4)
            row[f"unseen_gain@{n}"] = round(at[n]["unseen"] - at[0]["unseen"], 4)
            if rnd:
                row[f"random_cost_unseen@{n}"] = round(rnd[0]["unseen"] - rnd[n]["unseen"], 4)
                row[f"random_cost_fed@{n}"] = round(rnd[0]["fed"] - rnd[n]["fed"], 4)
            if noisy:
                row[f"noisy_gain_fed@{n}"] = round(noisy[n]["fed"] - noisy[0]["fed"], 4)
                row[f"noisy_gain_unseen@{n}"] = round(noisy[n]["unseen"] - noisy[0]["unseen"], 4)
        out[adaptation] = row
    return out


def _rel(path: Path) -> str:
    path = path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split", choices=("report", "tune"), default="report")
    ap.add_argument("--agentset", type=Path, default=SET_DIR,
                    help="judged set directory (queries.jsonl, qrels.tsv); eval/agentset/ops "
                         "for the ops pack")
    ap.add_argument("--pack", type=Path, help="JSONL pack (default: the set's pack.jsonl if "
                    "it has one, else the starter pack)")
    ap.add_argument("--adaptation", nargs="+", default=["learned", "seed"],
                    choices=("learned", "seed"))
    ap.add_argument("--policy", nargs="+", default=list(POLICIES), choices=POLICIES)
    ap.add_argument("--json", type=Path, help="write the report here")
    ap.add_argument("--plot", type=Path, help="write the learning-curve PNG here")
    ap.add_argument("--set", nargs="*", default=[], help="override constants (tuning)")
    ap.add_argument("--embedder", choices=("none", "local", "hash"), default="none",
                    help="local = hybrid mode with the offline MiniLM embedder (default: FTS-only)")
    ap.add_argument("--seed", type=int, default=RANDOM_SEED,
                    help="random verdicts and round order (default 7: the committed figures)")
    ap.add_argument("--cache-dir", type=Path, default=None,
                    help="document-embedding cache (default: eval/beir.py's, ~/.cache/tiervault-eval)")
    args = ap.parse_args(argv)
    overrides = apply_overrides(args.set)
    embedder = None
    if args.embedder != "none":
        from eval.beir import DEFAULT_CACHE, make_embedder

        embedder, why = make_embedder(args.embedder, 384)
        if embedder is None:
            raise SystemExit(f"--embedder {args.embedder}: {why}")
    cache_dir = (args.cache_dir or DEFAULT_CACHE).expanduser() if embedder is not None else None
    queries, qrels = load_set(args.agentset)
    pack = args.pack or (args.agentset / "pack.jsonl" if (args.agentset / "pack.jsonl").exists()
                         else PACK)
    fed, unseen = halves(queries, args.split)
    t0 = time.perf_counter()
    report: dict[str, Any] = {"set": _rel(args.agentset), "pack": _rel(pack), "split": args.split,
                              "fed": [q["id"] for q in fed],
                              "unseen": [q["id"] for q in unseen], "checkpoints": list(CHECKPOINTS),
                              "overrides": overrides, "embedder": args.embedder, "seed": args.seed,
                              "embedder_model": getattr(embedder, "model", None), "runs": {}}
    for adaptation in args.adaptation:
        report["runs"][adaptation] = {}
        for policy in args.policy:
            report["runs"][adaptation][policy] = run_policy(adaptation, policy, fed, unseen, qrels,
                                                            pack=pack, embedder=embedder,
                                                            cache_dir=cache_dir, seed=args.seed)
            curve = report["runs"][adaptation][policy]["curve"]
            print(f"{adaptation:8s} {policy:7s} " + "  ".join(
                f"{p['events']}: fed {p['fed']:.3f} unseen {p['unseen']:.3f}" for p in curve),
                file=sys.stderr)
    if "judged" in args.policy:
        report["summary"] = summary(report)
        print(json.dumps(report["summary"], indent=1))
    report["seconds"] = round(time.perf_counter() - t0, 1)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    if args.plot:
        plot(report, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
