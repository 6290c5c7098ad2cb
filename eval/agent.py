"""Relevance of tiervault's rankings on the judged agent dev set (eval/agentset/).

    python eval/agent.py [--embedder local|hash|none] [--split tune|report|all]
                         [--json eval/results/agent.json] [--cache-dir DIR]

Loads a pack (default: the bundled starter pack, links included, through
``import_lines``) into one team tier, runs every query of ``queries.jsonl``
(with its ``filters``) and reports nDCG@10 and Recall@10 (trec_eval,
eval/metrics.py) overall and per query kind, for the ``tune`` and the
``report`` half, for:

* ``bm25``: plain FTS5 ``bm25()`` with tiervault's field weights (the tier's
  ``search_fts``, filters applied in SQL), nothing else;
* ``brain_fts``: ``Brain.search_intelligent`` without vectors (scan mode);
* ``brain_hybrid``: ``search_intelligent`` with the ``local`` embedder (offline
  MiniLM) attached through the production embeddings runtime.

Recall@10 is trec_eval's recall on the run cut to its first 10 entries.
The Brain's clock is fixed (``--now``, default 2026-01-01T00:00:00Z) so recency
is reproducible. Rankings become trec_eval scores by rank, so ties never reorder.
``--split report`` is for the final figures only: constants are tuned on ``tune``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from eval.beir import DEFAULT_CACHE, LabQuery, attach_vectors, brain_settings, make_embedder  # noqa: E402
from eval.metrics import per_query  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEFAULT_SET = HERE / "agentset"
DEFAULT_PACK = ROOT / "vault" / "packs" / "starter.jsonl"
DEFAULT_NOW = "2026-01-01T00:00:00+00:00"
TIER = "team"
DEPTH = 100
METHODS = ("bm25", "brain_fts", "brain_hybrid")
KINDS = ("question", "keyword", "paraphrase", "symptom", "filter")
Ranked = dict[str, list[str]]


def load_set(directory: Path) -> tuple[list[dict[str, Any]], dict[str, dict[str, int]]]:
    """(queries, qrels) of a dev set directory (queries.jsonl + qrels.tsv)."""
    queries = [json.loads(line) for line in (directory / "queries.jsonl").read_text(
        encoding="utf-8").splitlines() if line.strip()]
    qrels: dict[str, dict[str, int]] = {q["id"]: {} for q in queries}
    for n, line in enumerate((directory / "qrels.tsv").read_text(encoding="utf-8").splitlines()):
        if n == 0 or not line.strip():
            continue  # header
        qid, eid, grade = line.split("\t")
        qrels.setdefault(qid, {})[eid] = int(grade)
    return queries, qrels


@dataclass(frozen=True)
class DevSetHalf:
    """One agent dev set cut to a split half: its pack, queries, grades and clock."""

    pack: Path
    queries: list[dict[str, Any]]  # the half's queries, in file order
    qrels: dict[str, dict[str, int]]  # their grades by entry id
    now: float  # DEFAULT_NOW as a timestamp (recency is reproducible)

    @property
    def items(self) -> list[LabQuery]:
        """The half's queries as (id, text, filters)."""
        return [LabQuery(q["id"], q["text"], q.get("filters", {})) for q in self.queries]


def dev_set_half(name: str, half: str) -> DevSetHalf:
    """The ``"agent"`` set (the starter pack's, :data:`DEFAULT_SET`) or the ``"ops"`` set
    (``ops/pack.jsonl``'s) cut to ``half`` ("tune", "report" or "all")."""
    if name not in ("agent", "ops"):
        raise ValueError(f"dev set {name!r}: use 'agent' or 'ops'")
    if half not in ("tune", "report", "all"):
        raise ValueError(f"half {half!r}: use 'tune', 'report' or 'all'")
    set_dir = DEFAULT_SET if name == "agent" else DEFAULT_SET / "ops"
    pack = DEFAULT_PACK if name == "agent" else set_dir / "pack.jsonl"
    queries, qrels = load_set(set_dir)
    queries = [q for q in queries if half == "all" or q["split"] == half]
    return DevSetHalf(pack, queries, {q["id"]: qrels[q["id"]] for q in queries},
                      datetime.fromisoformat(DEFAULT_NOW).timestamp())


class AgentRunner:
    """The pack loaded into one tier, and every method over it."""

    def __init__(self, pack: Path, workdir: Path, now: float) -> None:
        from tiervault.vault.jsonl import import_lines
        from tiervault.vault.manager import VaultManager

        self.workdir, self.now = workdir, now
        self.db = workdir / f"{TIER}.db"
        self.manager = VaultManager.at({TIER: str(self.db)})
        lines = pack.read_text(encoding="utf-8").splitlines()
        import_lines(self.manager, TIER, lines, strict=True)
        self.ids = [json.loads(line)["id"] for line in lines if line.strip()]
        self.runtime: Any = None
        self.brain_config: dict[str, Any] = {}  # BrainConfig overrides (--brain)
        self.timings: dict[str, float] = {}

    def close(self) -> None:
        self.manager.close()

    def _each(self, name: str, queries: list[dict[str, Any]],
              fn: Callable[[dict[str, Any]], list[str]]) -> Ranked:
        t0 = time.perf_counter()
        out = {q["id"]: fn(q) for q in queries}
        self.timings[name] = round((time.perf_counter() - t0) * 1e3 / max(len(queries), 1), 2)
        return out

    def bm25(self, queries: list[dict[str, Any]]) -> Ranked:
        from tiervault.vault.filters import Filters
        from tiervault.vault.query import query_terms

        store = self.manager.store(TIER)
        return self._each("bm25", queries, lambda q: store.search_fts(
            query_terms(q["text"]), Filters.build(**q.get("filters", {}), now=self.now),
            DEPTH).ids)

    def brain(self, name: str, queries: list[dict[str, Any]], vectors: Any = None) -> Ranked:
        from tiervault.brain.brain import Brain

        b = Brain(self.manager, brain_settings(self.brain_config), vectors=vectors,
                  clock=lambda: self.now)
        return self._each(name, queries, lambda q: [r["id"] for r in b.search_intelligent(
            q["text"], mode="scan", limit=DEPTH, **q.get("filters", {}))])

    def attach(self, embedder: Any, cache_dir: Path | None) -> dict[str, Any]:
        self.runtime, info = attach_vectors(self.manager, TIER, self.db, self.ids, embedder,
                                            cache_dir, self.workdir)
        return info


def scores(ranked: Ranked, qrels: dict[str, dict[str, int]]) -> dict[str, dict[str, float]]:
    """Per query: nDCG@10 and Recall@10 (recall of the run cut to 10)."""
    full = {q: {e: float(DEPTH - i) for i, e in enumerate(ids[:DEPTH])} for q, ids in ranked.items()}
    top10 = {q: {e: float(DEPTH - i) for i, e in enumerate(ids[:10])} for q, ids in ranked.items()}
    nd = per_query(full, qrels)
    rc = per_query(top10, qrels)
    return {q: {"ndcg@10": nd[q]["ndcg@10"], "recall@10": rc[q]["recall@100"]} for q in qrels}


def summarise(per_q: dict[str, dict[str, float]], queries: list[dict[str, Any]]) -> dict[str, Any]:
    """Means overall and per kind, for each split present."""
    out: dict[str, Any] = {}
    for split in sorted({q["split"] for q in queries}):
        group = [q for q in queries if q["split"] == split]
        cell: dict[str, Any] = {"n": len(group)}
        for label, members in [("all", group)] + [(k, [q for q in group if q["kind"] == k])
                                                  for k in KINDS]:
            if members:
                cell[label] = {m: round(sum(per_q[q["id"]][m] for q in members) / len(members), 4)
                               for m in ("ndcg@10", "recall@10")}
        out[split] = cell
    return out


def evaluate_set(set_dir: Path, pack: Path, *, split: str, embedder_name: str,
                 cache_dir: Path | None, now: float,
                 brain: dict[str, Any] | None = None) -> dict[str, Any]:
    queries, qrels = load_set(set_dir)
    if split != "all":
        queries = [q for q in queries if q["split"] == split]
    qrels = {q["id"]: qrels[q["id"]] for q in queries}
    results: dict[str, Any] = {}
    per_query_out: dict[str, Any] = {}
    info: dict[str, Any] = {"embedder": embedder_name}
    with tempfile.TemporaryDirectory(prefix="tiervault-agent-") as tmp:
        runner = AgentRunner(pack, Path(tmp), now)
        runner.brain_config = dict(brain or {})
        try:
            ranked = {"bm25": runner.bm25(queries), "brain_fts": runner.brain("brain_fts", queries)}
            embedder, why = make_embedder(embedder_name, 384)
            if embedder is None:
                info["unavailable"] = why
            else:
                info.update(runner.attach(embedder, cache_dir))
                ranked["brain_hybrid"] = runner.brain("brain_hybrid", queries, runner.runtime)
            for m, r in ranked.items():
                pq = scores(r, qrels)
                results[m] = summarise(pq, queries)
                per_query_out[m] = {q: {k: round(v, 4) for k, v in s.items()} for q, s in pq.items()}
            info["ms_per_query"] = runner.timings
        finally:
            runner.close()
    return {"set": str(set_dir.relative_to(ROOT)) if set_dir.is_relative_to(ROOT) else str(set_dir),
            "pack": str(pack.relative_to(ROOT)) if pack.is_relative_to(ROOT) else str(pack),
            "queries": len(queries), "split": split, "brain": dict(brain or {}),
            "results": results, "info": info,
            "per_query": per_query_out}


def table(report: dict[str, Any]) -> str:
    lines = [f"{report['set']} over {report['pack']}: {report['queries']} queries "
             f"(split {report['split']}), embedder {report['info']['embedder']}",
             "| split | kind | n | " + " | ".join(f"{m} nDCG@10 / R@10" for m in METHODS) + " |",
             "|---" * (3 + len(METHODS)) + "|"]
    first = report["results"]["bm25"]
    for split, cell in first.items():
        for label in ("all", *KINDS):
            if label not in cell:
                continue
            row = [split, label, str(cell["n"]) if label == "all" else ""]
            for m in METHODS:
                r = report["results"].get(m, {}).get(split, {}).get(label)
                row.append("n/a" if r is None else f"{r['ndcg@10']:.3f} / {r['recall@10']:.3f}")
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", type=Path, default=DEFAULT_SET, help="dev set directory")
    parser.add_argument("--pack", type=Path, default=DEFAULT_PACK, help="JSONL pack to load")
    parser.add_argument("--split", choices=("tune", "report", "all"), default="tune")
    parser.add_argument("--embedder", choices=("local", "hash", "none"), default="local")
    parser.add_argument("--now", default=DEFAULT_NOW, help="the Brain's clock (ISO 8601)")
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--no-cache", action="store_true")
    parser.add_argument("--json", type=Path, help="also write the result as JSON here")
    parser.add_argument("--brain", type=json.loads, default={},
                        help="BrainConfig overrides as JSON, e.g. '{\"prf_terms\": 0}'")
    args = parser.parse_args(argv)
    now = datetime.fromisoformat(args.now).timestamp()
    report = evaluate_set(args.set, args.pack, split=args.split, embedder_name=args.embedder,
                          cache_dir=None if args.no_cache else args.cache_dir.expanduser(), now=now,
                          brain=args.brain)
    report["info"]["now"] = args.now
    print(table(report))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
