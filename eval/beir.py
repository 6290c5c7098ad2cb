"""Relevance of tiervault's rankings on a BEIR-format collection.

    python eval/beir.py --data ../shared/data/beir/scifact [--embedder hash|local|none]
                        [--split odd|even|all] [--json out.json] [--limit-queries N]
                        [--cache-dir DIR]

``--split odd`` keeps the judged queries with an odd (numeric) query id, ``even`` the
others: constants are chosen on ``odd`` and reported on ``even`` (issue 16); ``all``
(the default) is every judged query. ``--qrels`` names the qrels file (default ``test``).

Loads the collection into one tier through the project API (title -> title,
text -> description; ``VaultManager.capture_many``), runs every judged query of
the split and reports nDCG@10, Recall@100 and MRR@10 (trec_eval, eval/metrics.py)
for each method, all retrieving ``--depth`` (100) documents:

* ``bm25``: FTS5 ``bm25()`` alone, the tier's ``search_fts`` (field weights included);
* ``tfidf``: TF-IDF cosine alone over the search mirror (``Postings.tfidf_scores`` of the SQLite tier, all docs);
* ``brain_fts``: ``Brain.search_intelligent`` without vectors (scan mode, limit 100);
* ``vector``: dense retrieval alone (the embeddings runtime's federated vector recall);
* ``brain_hybrid``: ``search_intelligent`` with the runtime as its vector source;
* ``rrf``: reciprocal-rank fusion (k=60, ``brain.fusion.rrf``) of ``bm25`` and ``vector``.

A method that cannot run (no embedder, runtime not available yet) is reported as
null with the reason, never approximated. Rankings become trec_eval scores by
rank (``depth - rank``), so trec_eval's tie-breaking never reorders a method's list.
Vectors take the production path (``attach_embeddings``; document texts are
the pipeline's embedding inputs, stored with its input hashes). Document
embeddings are cached under ``--cache-dir`` (default ``~/.cache/tiervault-eval``),
keyed by model and a hash of the exact texts.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from eval.beir_data import BeirCollection, load  # noqa: E402
from eval.metrics import METRICS, evaluate  # noqa: E402

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "beir" / "scifact"
DEFAULT_CACHE = Path("~/.cache/tiervault-eval").expanduser()
METHODS = ("bm25", "tfidf", "brain_fts", "vector", "brain_hybrid", "rrf")
TIER = "project"
Ranked = dict[str, list[str]]  # query id -> entry ids, best first


# -- embeddings ------------------------------------------------------------------------------
def make_embedder(name: str, dim: int, local_model: str | None = None) -> tuple[Any | None, str | None]:
    """(embedder, None) or (None, why it is unavailable); ``local_model`` picks the packaged variant."""
    if name == "none":
        return None, "no embedder (--embedder none)"
    try:
        if name == "hash":
            from tiervault.embeddings.providers.hash import HashEmbedder

            return HashEmbedder(dim), None
        from tiervault.embeddings.providers.local import LocalEmbedder

        return LocalEmbedder(model=local_model), None
    except Exception as exc:  # noqa: BLE001 - reported in the output, never hidden
        return None, f"embedder {name!r} unavailable: {exc}"


def embed_cached(embedder: Any, texts: list[str], kind: str, cache_dir: Path | None,
                 input_type: str = "document", batch: int = 256) -> tuple[Any, bool]:
    """Embeddings of ``texts``, read from / written to the cache; (matrix, from_cache)."""
    import numpy as np

    h = hashlib.sha256()
    h.update(f"{embedder.model}\0{input_type}\0{len(texts)}\0".encode())
    for t in texts:
        h.update(t.encode("utf-8", "surrogatepass") + b"\0")
    slug = "".join(c if c.isalnum() or c in "-._" else "_" for c in embedder.model)
    path = cache_dir / f"{kind}-{slug}-{h.hexdigest()[:24]}.npy" if cache_dir else None
    if path is not None and path.exists():
        try:
            m = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            print(f"ignoring unreadable embedding cache {path} ({exc})", file=sys.stderr)
        else:
            if m.ndim == 2 and m.shape[0] == len(texts) and m.dtype == np.float32:
                return m, True
    parts = [embedder.embed(texts[i:i + batch], input_type) for i in range(0, len(texts), batch)]
    m = np.ascontiguousarray(np.vstack(parts) if parts else np.zeros((0, embedder.dim)),
                             dtype=np.float32)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        # A private temporary name: two evaluations may fill the same cache at once.
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            np.save(fh, m)
        os.replace(tmp, path)
    return m, False


def attach_vectors(manager: Any, tier: str, db_path: Path, ids: list[str], embedder: Any,
                   cache_dir: Path | None, workdir: Path) -> tuple[Any, dict[str, Any]]:
    """Switch the production embeddings runtime on over ``manager`` and store the vector
    of every entry in ``ids`` (of ``tier``); returns (runtime, info).

    The texts are the pipeline's own embedding inputs, stored with the
    pipeline's input hashes, so the runtime treats them as up to date; they
    come from the on-disk cache when this model has embedded these texts before.
    """
    from tiervault.config import load_settings
    from tiervault.embeddings.pipeline import input_hash
    from tiervault.embeddings.runtime import attach_embeddings

    config = workdir / "agent.yaml"
    config.write_text(f"tiers:\n  {tier}: {json.dumps(str(db_path))}\n"
                      f"embedding:\n  provider: {embedder.name}\n"
                      "features:\n  embedding-enabled: true\n", encoding="utf-8")
    runtime = attach_embeddings(manager, load_settings(config, env={}), embedder=embedder,
                                strict=True)
    store = manager.store(tier)
    found = store.get_many(ids)
    entries = [found[i] for i in ids]
    texts = [runtime.pipeline.text(e) for e in entries]
    t0 = time.perf_counter()
    docs, cached = embed_cached(embedder, texts, "docs", cache_dir)
    embed_s = time.perf_counter() - t0
    key = runtime.model_key
    for i in range(0, len(entries), 2_000):
        store.put_vectors(key, [(e.id, input_hash(key, t), v) for e, t, v in
                          zip(entries[i:i + 2_000], texts[i:i + 2_000], docs[i:i + 2_000])])
    runtime.recall.warm([tier])
    return runtime, {"model_key": key, "dim": int(docs.shape[1]), "doc_embeddings_cached": cached,
                     "doc_embed_s": round(embed_s, 1),
                     "doc_input": "the pipeline's template: title, tags, description, context"}


def brain_settings(overrides: dict[str, Any]) -> Any:
    """Settings whose ``brain`` is BrainConfig() with ``overrides`` (None when there are none)."""
    if not overrides:
        return None
    from dataclasses import replace

    from tiervault.config import BrainConfig, Settings

    return Settings(agent_id="eval", tiers=(), embedding=None, features=frozenset(),
                    brain=replace(BrainConfig(), **overrides), config_path=None)


# -- methods ---------------------------------------------------------------------------------
class Runner:
    """The collection loaded into one tier, and every method over it."""

    def __init__(self, coll: BeirCollection, queries: dict[str, str], workdir: Path,
                 depth: int) -> None:
        from tiervault.vault.entry import Entry
        from tiervault.vault.manager import VaultManager

        self.coll, self.queries, self.depth = coll, queries, depth
        self.entries = list(coll.entries())
        self.manager = VaultManager.at({TIER: str(workdir / f"{TIER}.db")})
        t0 = time.perf_counter()
        self.manager.capture_many([Entry.from_dict(e) for e in self.entries], TIER)
        self.manager.store(TIER).postings()  # build the mirror outside the timed methods
        self.load_s = time.perf_counter() - t0
        self.timings: dict[str, float] = {}
        self.runtime: Any = None
        self.brain_config: dict[str, Any] = {}  # BrainConfig overrides (--brain)

    def close(self) -> None:
        self.manager.close()

    def _each(self, name: str, fn: Callable[[str], list[str]]) -> Ranked:
        t0 = time.perf_counter()
        out = {qid: fn(text) for qid, text in self.queries.items()}
        self.timings[name] = (time.perf_counter() - t0) * 1e3 / max(len(self.queries), 1)
        return out

    def bm25(self) -> Ranked:
        from tiervault.vault.filters import Filters
        from tiervault.vault.query import query_terms

        store, everything = self.manager.store(TIER), Filters(include_expired=True, include_future=True)
        return self._each("bm25", lambda t: store.search_fts(query_terms(t), everything, self.depth).ids)

    def tfidf(self) -> Ranked:
        from tiervault.vault.query import query_terms
        from tiervault.vault.scoring import top_k

        store = self.manager.store(TIER)  # an SQLite tier: its mirror is read directly

        def one(text: str) -> list[str]:
            p = store.postings()
            scores = p.tfidf_scores(query_terms(text))
            return [p.ids[i] for i in top_k(scores, self.depth, p.alive & (scores > 0))]
        return self._each("tfidf", one)

    def brain(self, name: str, vectors: Any = None) -> Ranked:
        from tiervault.brain.brain import Brain

        b = Brain(self.manager, brain_settings(self.brain_config), vectors=vectors)
        return self._each(name, lambda t: [r["id"] for r in b.search_intelligent(
            t, mode="scan", limit=self.depth)])

    def attach(self, embedder: Any, cache_dir: Path | None, workdir: Path) -> dict[str, Any]:
        """Switch the production embeddings runtime on (see :func:`attach_vectors`)."""
        self.runtime, info = attach_vectors(self.manager, TIER, workdir / f"{TIER}.db",
                                            [e["id"] for e in self.entries], embedder,
                                            cache_dir, workdir)
        return info

    def vector(self) -> Ranked:
        rt = self.runtime
        return self._each("vector", lambda t: [h.id for h in rt.search(rt.embed_query(t), self.depth)])

    def rrf(self, *runs: Ranked) -> Ranked:
        from tiervault.brain.fusion import rrf

        t0 = time.perf_counter()
        out = {q: list(rrf([r[q] for r in runs]))[: self.depth] for q in self.queries}
        self.timings["rrf"] = (time.perf_counter() - t0) * 1e3 / max(len(self.queries), 1)
        return out


def to_run(coll: BeirCollection, ranked: Ranked, depth: int) -> dict[str, dict[str, float]]:
    """Entry-id rankings -> doc-id scores by rank (depth - rank: distinct, best highest)."""
    return coll.run_to_doc_ids({q: {e: float(depth - i) for i, e in enumerate(ids[:depth])}
                                for q, ids in ranked.items()})


# -- report ----------------------------------------------------------------------------------
def evaluate_all(coll: BeirCollection, queries: dict[str, str], *, embedder_name: str, dim: int,
                 cache_dir: Path | None, depth: int = 100,
                 local_model: str | None = None,
                 brain: dict[str, Any] | None = None) -> dict[str, Any]:
    qrels = {q: coll.qrels[q] for q in queries}
    results: dict[str, Any] = {}
    reasons: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="tiervault-beir-") as tmp:
        runner = Runner(coll, queries, Path(tmp), depth)
        runner.brain_config = dict(brain or {})
        try:
            ranked: dict[str, Ranked] = {"bm25": runner.bm25(), "tfidf": runner.tfidf(),
                                         "brain_fts": runner.brain("brain_fts")}
            embedder, why = make_embedder(embedder_name, dim, local_model)
            info: dict[str, Any] = {"embedder": embedder_name}
            if embedder is not None:
                info["model"] = embedder.model
            if embedder is None:
                for m in ("vector", "brain_hybrid", "rrf"):
                    reasons[m] = why or "no embedder"
            else:
                try:
                    info.update(runner.attach(embedder, cache_dir, Path(tmp)))
                except ImportError as exc:
                    for m in ("vector", "brain_hybrid", "rrf"):
                        reasons[m] = f"embeddings runtime not available: {exc}"
                else:
                    ranked["vector"] = runner.vector()
                    ranked["rrf"] = runner.rrf(ranked["bm25"], ranked["vector"])
                    ranked["brain_hybrid"] = runner.brain("brain_hybrid", runner.runtime)
            for m in METHODS:
                results[m] = (evaluate(to_run(coll, ranked[m], depth), qrels)
                              if m in ranked else None)
            info.update(load_s=round(runner.load_s, 1),
                        ms_per_query={k: round(v, 2) for k, v in runner.timings.items()})
        finally:
            runner.close()
    return {"dataset": coll.name, "queries": len(queries), "brain": dict(brain or {}),
            "results": results,
            "unavailable": reasons, "info": info, "depth": depth, "docs": len(coll.docs)}


def table(report: dict[str, Any]) -> str:
    lines = [f"{report['dataset']}: {report['docs']:,} docs, {report['queries']} queries, "
             f"embedder {report['info']['embedder']}",
             "| method | nDCG@10 | Recall@100 | MRR@10 | ms/query |", "|---|---|---|---|---|"]
    ms = report["info"].get("ms_per_query", {})
    for m in METHODS:
        r = report["results"][m]
        if r is None:
            lines.append(f"| {m} | n/a | n/a | n/a | ({report['unavailable'].get(m, '')}) |")
        else:
            lines.append(f"| {m} | " + " | ".join(f"{r[k]:.4f}" for k in METRICS)
                         + f" | {ms.get(m, 0):.1f} |")
    return "\n".join(lines)


class LabQuery(NamedTuple):
    """One query as a lab runs it: id, text, filters (``Filters.build`` keywords)."""

    id: str
    text: str
    filters: dict[str, Any]


@dataclass(frozen=True)
class BeirHalf:
    """A BEIR collection with its test queries cut to one half (:func:`half`)."""

    coll: BeirCollection
    queries: dict[str, str]  # id -> text

    @property
    def items(self) -> list[LabQuery]:
        """The half's queries as (id, text, no filters)."""
        return [LabQuery(q, t, {}) for q, t in self.queries.items()]

    @property
    def qrels(self) -> dict[str, dict[str, int]]:
        """The half's grades by document id."""
        return {q: self.coll.qrels[q] for q in self.queries}


def beir_half(path: str | Path, split: str) -> BeirHalf:
    """The collection at ``path`` (its test split) cut to ``split`` ("odd", "even", "all")."""
    coll = load(path, "test")
    return BeirHalf(coll, half(coll.queries, split))


def half(queries: dict[str, str], split: str) -> dict[str, str]:
    """The queries of one half by query-id parity (``odd`` / ``even``), or all of them.

    Ids are compared as integers when they are (SciFact's are), else by their last
    character's code, so every collection splits deterministically.
    """
    if split == "all":
        return dict(queries)

    def odd(qid: str) -> bool:
        return (int(qid) if qid.isdigit() else ord(qid[-1]) if qid else 0) % 2 == 1
    return {q: t for q, t in queries.items() if odd(q) == (split == "odd")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA,
                        help="BEIR collection directory (default: %(default)s)")
    parser.add_argument("--qrels", default="test", help="qrels split file (default: test)")
    parser.add_argument("--split", choices=("odd", "even", "all"), default="all",
                        help="judged queries by query-id parity (default: all)")
    parser.add_argument("--embedder", choices=("hash", "local", "none"), default="hash",
                        help="embedder for vector / hybrid / rrf (default: hash, offline)")
    parser.add_argument("--local-model", default=None,
                        help="packaged variant for --embedder local (default: the embedder's default, "
                             "all-MiniLM-L6-v2-int8-tanh; all-MiniLM-L6-v2-int8-dynamic = erf GELU; "
                             "all-MiniLM-L6-v2-int8 = fp32 kernels)")
    parser.add_argument("--dim", type=int, default=384, help="hash embedder dimension (default 384)")
    parser.add_argument("--limit-queries", type=int, help="evaluate only the first N judged queries")
    parser.add_argument("--depth", type=int, default=100, help="documents retrieved per query")
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE,
                        help="document-embedding cache (default: %(default)s)")
    parser.add_argument("--no-cache", action="store_true", help="do not read or write the cache")
    parser.add_argument("--json", type=Path, help="also write the result as JSON here")
    parser.add_argument("--brain", type=json.loads, default={},
                        help="BrainConfig overrides as JSON, e.g. '{\"prf_terms\": 0}'")
    args = parser.parse_args(argv)
    if args.limit_queries is not None and args.limit_queries < 1:
        parser.error("--limit-queries must be >= 1")
    if not 1 <= args.depth <= 1000:
        parser.error("--depth must be from 1 to 1000")
    t0 = time.perf_counter()
    coll = load(args.data, args.qrels)
    queries = dict(list(half(coll.queries, args.split).items())[: args.limit_queries])
    report = evaluate_all(coll, queries, embedder_name=args.embedder, dim=args.dim,
                          cache_dir=None if args.no_cache else args.cache_dir.expanduser(),
                          depth=args.depth, local_model=args.local_model, brain=args.brain)
    report["info"]["elapsed_s"] = round(time.perf_counter() - t0, 1)
    report["split"] = args.split
    print(table(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
