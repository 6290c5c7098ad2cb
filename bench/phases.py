"""Measurement phases of ``bench/run.py``; each runs in its own process.

* :func:`build_phase` (one process per corpus size): generate the corpus, time
  the JSONL import and the store-only import, add the links, build the search
  mirrors for the first time, embed every entry (hash embedder), file sizes.
* :func:`search_phase` (a fresh process over the built tiers): cold open + first
  query, then ``search_intelligent`` scan / full FTS-only and the raw FTS5
  ``bm25()`` baseline, round-robin per query; peak RSS; then single-capture
  latency (last: it writes).
* :func:`hybrid_phase` (another fresh process): cold open + first hybrid query,
  hybrid scan / full, peak RSS, the NumPy top-k baseline paired with hybrid
  scans, capture with embed-on-write.

Only the standard library is imported at module level, so the cold-start timing
of :func:`search_phase` includes importing NumPy, SciPy and tiervault.
"""

from __future__ import annotations

import json
import resource
import shutil
import sqlite3
import time
from pathlib import Path
from typing import Any, Callable

TIERS = ("agent", "project", "team")
FILTER_KEYS = ("domain", "type", "severity", "tags")
WARMUP_QUERIES = 30
CAPTURE_WARMUP = 10
#: The raw FTS5 baseline: one statement per tier file, field weights as the store's.
BASELINE_SQL = ("SELECT id, bm25(entries_fts, {w}) AS s FROM entries_fts "
                "WHERE entries_fts MATCH ? ORDER BY s LIMIT 30")


# -- helpers -------------------------------------------------------------------------------
def stats_ms(samples_ns: list[int], cpu_ns: list[int] | None = None) -> dict[str, Any]:
    """p50 / p95 / mean / max in milliseconds of wall-clock nanosecond samples, plus the
    p50 / p95 of the process CPU time of the same calls (less sensitive to a busy machine)."""
    import numpy as np

    if not samples_ns:
        return {"p50_ms": None, "p95_ms": None, "mean_ms": None, "max_ms": None, "n": 0}
    a = np.asarray(samples_ns, dtype=np.float64) / 1e6
    out = {"p50_ms": round(float(np.percentile(a, 50)), 3),
           "p95_ms": round(float(np.percentile(a, 95)), 3),
           "mean_ms": round(float(a.mean()), 3), "max_ms": round(float(a.max()), 3),
           "n": int(a.size)}
    if cpu_ns:
        c = np.asarray(cpu_ns, dtype=np.float64) / 1e6
        out.update(cpu_p50_ms=round(float(np.percentile(c, 50)), 3),
                   cpu_p95_ms=round(float(np.percentile(c, 95)), 3))
    return out


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far (Linux reports KiB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)


def tier_paths(workdir: Path) -> dict[str, Path]:
    return {t: workdir / "tiers" / f"{t}.db" for t in TIERS}


def write_config(workdir: Path, embedding: dict[str, Any] | None = None) -> Path:
    """An agent.yaml naming the bench tiers (and an embedding block for hybrid runs)."""
    paths = tier_paths(workdir)
    lines = ["agent_id: bench", "tiers:"]
    lines += [f"  {t}: {json.dumps(str(p))}" for t, p in paths.items()]
    if embedding:
        lines.append("embedding:")
        lines += [f"  {k}: {json.dumps(v)}" for k, v in embedding.items()]
        lines += ["features:", "  embedding-enabled: true"]
    name = "agent-hybrid.yaml" if embedding else "agent.yaml"
    path = workdir / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def query_kwargs(q: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in q["filters"].items() if k in FILTER_KEYS}


def time_interleaved(fns: dict[str, Callable[[dict[str, Any]], Any]], qs: list[dict[str, Any]],
                     warmup: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Time several systems on the same queries, round-robin per query.

    Each query is answered by every system in turn before the next query, so a
    burst of load from other processes hits all of them alike (their ratio is
    what a shared machine measures best). ``warmup`` queries run first, untimed.
    Returns {name: stats + ``hits_per_query``}.
    """
    for q in warmup:
        for fn in fns.values():
            fn(q)
    wall: dict[str, list[int]] = {name: [] for name in fns}
    cpu: dict[str, list[int]] = {name: [] for name in fns}
    hits = dict.fromkeys(fns, 0)
    for q in qs:
        for name, fn in fns.items():
            c0 = time.process_time_ns()
            t0 = time.perf_counter_ns()
            out = fn(q)
            wall[name].append(time.perf_counter_ns() - t0)
            cpu[name].append(time.process_time_ns() - c0)
            hits[name] += len(out)
    return {name: {**stats_ms(wall[name], cpu[name]),
                   "hits_per_query": round(hits[name] / max(len(qs), 1), 2)} for name in fns}


def progress(msg: str) -> None:
    """A progress line on stderr (the parent passes it through)."""
    import sys

    print(f"    {msg}", file=sys.stderr, flush=True)


def _children_cpu() -> float:
    """CPU seconds of this process's finished children (the mirror build workers)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _dir_bytes(paths: list[Path]) -> int:
    total = 0
    for p in paths:
        for f in (p, Path(f"{p}-wal")):
            if f.exists():
                total += f.stat().st_size
    return total


# -- build ---------------------------------------------------------------------------------
def build_phase(n: int, seed: int, workdir: Path, *, dim: int, jsonl: bool = True) -> dict[str, Any]:
    """Generate, import (JSONL end to end, then store-only), link, build mirrors, embed."""
    import gc

    from bench.corpus import generate, write_jsonl
    from bench.import_timing import time_jsonl_import
    from tiervault.vault.entry import Entry
    from tiervault.vault.manager import VaultManager
    from tiervault.vault.mirror_workers import build_missing

    out: dict[str, Any] = {"entries": n}
    t0 = time.perf_counter()
    corpus = generate(n, seed)
    out["generate_s"] = round(time.perf_counter() - t0, 2)
    imp: dict[str, Any] = {}
    if jsonl:
        src = workdir / "jsonl"
        src.mkdir(parents=True, exist_ok=True)
        for t in TIERS:
            write_jsonl(corpus, src / f"{t}.jsonl", t)
        written, dt, cpu = time_jsonl_import({t: workdir / "e2e" / f"{t}.db" for t in TIERS}, src)
        # CPU seconds of this process too: on a shared machine the wall-clock rate
        # mostly measures the other jobs.
        imp.update(jsonl_s=round(dt, 2), jsonl_rate=round(written / dt, 1),
                   jsonl_cpu_s=round(cpu, 2), jsonl_cpu_rate=round(written / cpu, 1) if cpu else None)
        progress(f"JSONL import end to end: {written:,} entries in {dt:.1f} s")
        shutil.rmtree(workdir / "e2e")
        out["profile"] = profile_import(src / "team.jsonl", workdir / "profiled")
        shutil.rmtree(src)
    # Store-only: entries validated before the clock starts.
    entries = {t: [Entry.from_dict(d) for d in corpus.tiers[t]] for t in TIERS}
    paths = tier_paths(workdir)
    gc.collect()
    t0 = time.perf_counter()
    written = 0
    with VaultManager.at({t: str(p) for t, p in paths.items()}) as manager:
        for t in TIERS:
            written += manager.capture_many(entries[t], t)
        dt = time.perf_counter() - t0
        imp.update(store_s=round(dt, 2), store_rate=round(written / dt, 1), rows=written)
        progress(f"store-only import: {written:,} entries in {dt:.1f} s")
        del entries
        links = corpus.links_by_tier()
        t0 = time.perf_counter()
        n_links = 0
        for t, rows in links.items():
            store = manager.store(t)
            for s, tgt, ty in rows:
                store.link(s, tgt, ty)
                n_links += 1
        dt = time.perf_counter() - t0
        imp.update(links=n_links, links_s=round(dt, 2),
                   links_rate=round(n_links / dt, 1) if dt else None)
        out["import"] = imp
        # First-ever mirror build (also writes the <tier>.postings.mirror caches), as a first
        # search makes it: in worker processes where there are enough bytes to build
        # (vault/mirror_workers.py; "workers": their wall clock, then each tier maps its
        # file), else in this process (each tier's build time); CPU includes the workers'.
        build: dict[str, float] = {}
        c0, k0 = time.process_time(), _children_cpu()
        t0 = time.perf_counter()
        built = [o.name for o in build_missing(manager.store(t) for t in TIERS) if o.ok]
        if built:
            build["workers"] = round(time.perf_counter() - t0, 2)
        for t in TIERS:
            t0 = time.perf_counter()
            manager.store(t).postings()
            build[t] = round(time.perf_counter() - t0, 2)
        out["mirror_build_s"] = {**build, "total": round(sum(build.values()), 2),
                                 "cpu": round(time.process_time() - c0 + _children_cpu() - k0, 2),
                                 "worker_tiers": built}
        progress(f"links: {n_links:,} in {imp['links_s']:.1f} s; first mirror build "
                 f"{out['mirror_build_s']['total']:.1f} s; embedding every entry ...")
        out["vectors"] = backfill_vectors(manager, workdir, dim)
    del corpus
    gc.collect()
    db = list(paths.values())
    out["file_mb"] = round(_dir_bytes(db) / 2**20, 1)
    out["file_mb_per_tier"] = {t: round(_dir_bytes([p]) / 2**20, 1) for t, p in paths.items()}
    out["mirror_cache_mb"] = round(sum(Path(f"{p}.postings.mirror").stat().st_size
                                       for p in db if Path(f"{p}.postings.mirror").exists()) / 2**20, 1)
    out["rss_build_mb"] = peak_rss_mb()
    return out


def profile_import(jsonl: Path, scratch: Path) -> dict[str, Any]:
    """cProfile of a JSONL import of the first ``PROFILE_IMPORT_ROWS`` lines of ``jsonl``
    into a scratch tier, then of that tier's first mirror build (untimed figures)."""
    from itertools import islice

    from bench.profiling import profile_calls
    from tiervault.vault.jsonl import import_lines
    from tiervault.vault.manager import VaultManager

    scratch.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {"rows": PROFILE_IMPORT_ROWS}
    with VaultManager.at({"team": str(scratch / "team.db")}) as manager:
        with open(jsonl, encoding="utf-8") as fh:
            lines = list(islice(fh, PROFILE_IMPORT_ROWS))
        out["import_jsonl"] = profile_calls(lambda ls: import_lines(manager, "team", ls), [lines])
        out["mirror_build"] = profile_calls(lambda st: st.postings(), [manager.store("team")])
    shutil.rmtree(scratch)
    return out


def numpy_topk(n: int, dim: int, seed: int, k: int = 10,
               kernel: str = "matmul") -> Callable[[dict[str, Any]], Any]:
    """A brute-force top-k over ``n`` random unit vectors (``M @ q`` + argpartition);
    the query vector is a random unit vector derived from the query's text.
    ``kernel="einsum"``: the product as NumPy's single-thread ``einsum`` (what
    tiervault's vector index uses) instead of BLAS (threaded, spin-waiting)."""
    import zlib

    import numpy as np

    rng = np.random.default_rng(seed)
    m = rng.standard_normal((n, dim), dtype=np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)

    def top(q: dict[str, Any]) -> Any:
        v = np.random.default_rng(zlib.crc32(q["text"].encode())).standard_normal(dim).astype(np.float32)
        v /= np.linalg.norm(v)
        s = np.einsum("ij,j->i", m, v) if kernel == "einsum" else m @ v
        idx = np.argpartition(s, n - k)[n - k:] if n > k else np.arange(n)
        return idx[np.argsort(-s[idx])]

    return top


NUMPY_NOTE = "random unit float32 vectors, M @ q + argpartition, top 10"
NUMPY_1T_NOTE = ("random unit float32 vectors, einsum('ij,j->i') on one thread + argpartition, "
                 "top 10 (the kernel tiervault's index uses)")
PROFILE_QUERIES = 100  # queries run under cProfile per search phase (after the timed ones)
PROFILE_IMPORT_ROWS = 20_000  # JSONL lines imported under cProfile in the build phase


# -- search (fresh process) ----------------------------------------------------------------
def search_phase(t_start: float, workdir: Path, first_query: dict[str, Any], *, n_queries: int,
                 seed: int, captures: int, warmup: int = WARMUP_QUERIES) -> dict[str, Any]:
    """Cold open + first query, FTS-only latencies, RSS, FTS5 baseline, capture latency.

    ``t_start``: ``time.perf_counter()`` taken before anything heavy was imported;
    ``first_query``: a query dict (text, filters) made by the parent, so building
    the query set is not part of the cold start.
    """
    t_imp = time.perf_counter()
    from tiervault.brain.brain import Brain

    t_open = time.perf_counter()
    brain = Brain.open(write_config(workdir))
    t_query = time.perf_counter()
    first = brain.search_intelligent(first_query["text"], mode="scan", **query_kwargs(first_query))
    t_end = time.perf_counter()
    cold = {"import_ms": round((t_open - t_imp) * 1e3, 1),
            "open_ms": round((t_query - t_open) * 1e3, 1),
            "first_query_ms": round((t_end - t_query) * 1e3, 1),
            "total_ms": round((t_end - t_start) * 1e3, 1),
            "first_query_hits": len(first)}
    from bench.corpus import queries

    qs = queries(n_queries, seed)
    warm = queries(warmup, seed + 1)
    out: dict[str, Any] = {"cold": cold}
    baseline, close = fts5_baseline(workdir)
    try:
        out.update(time_interleaved({
            "scan_fts": lambda q: brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q)),
            "full_fts": lambda q: brain.search_intelligent(q["text"], mode="full", **query_kwargs(q)),
            "baseline_fts5": baseline}, qs, warm))
    finally:
        close()
    out["baseline_fts5"]["note"] = FTS5_NOTE
    out["rss_mb"] = peak_rss_mb()  # before the captures
    from bench.profiling import profile_calls

    out["profile"] = {"scan_fts": profile_calls(
        lambda q: brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q)),
        qs[:PROFILE_QUERIES])}
    out["capture"] = capture_latency(brain.manager, captures, seed)
    brain.close()
    return out


FTS5_NOTE = "3 tier files, LIMIT 30 each, no filters, OR of the query terms"


def fts5_baseline(workdir: Path) -> tuple[Callable[[dict[str, Any]], Any], Callable[[], None]]:
    """(query function, close): one raw ``bm25()`` statement per tier file, plain sqlite3."""
    from tiervault.vault.query import match_expression, query_terms
    from tiervault.vault.scoring import FTS_WEIGHTS

    sql = BASELINE_SQL.format(w=", ".join(f"{w:g}" for w in FTS_WEIGHTS))
    conns = [sqlite3.connect(f"file:{p}?mode=ro", uri=True) for p in tier_paths(workdir).values()]

    def run(q: dict[str, Any]) -> list[tuple]:
        expr = match_expression(query_terms(q["text"]))
        rows: list[tuple] = []
        if expr:
            for c in conns:
                rows.extend(c.execute(sql, (expr,)).fetchall())
        return rows

    def close() -> None:
        for c in conns:
            c.close()

    return run, close


def capture_latency(manager: Any, n: int, seed: int) -> dict[str, Any]:
    """``manager.capture`` of new entries into the populated agent tier, one at a time
    (write hooks included: embed-on-write when embeddings are attached)."""
    from bench.corpus import generate
    from tiervault.vault.entry import Entry

    rows = list(generate(n + CAPTURE_WARMUP, seed + 1000, duplicate_fraction=0).entries())
    entries = [Entry.from_dict({**d, "id": f"cap{seed}-{i:05d}-{d['id']}"[:100]})
               for i, d in enumerate(rows)]
    rows_e = [{"entry": e} for e in entries]
    stats = time_interleaved({"capture": lambda r: [manager.capture(r["entry"], "agent")]},
                             rows_e[CAPTURE_WARMUP:], rows_e[:CAPTURE_WARMUP])["capture"]
    stats.pop("hits_per_query")
    return {**stats, "tier": "agent"}


# -- hybrid --------------------------------------------------------------------------------
HASH_EMBEDDING = {"provider": "hash"}


def open_hybrid_brain(workdir: Path, dim: int) -> Any:
    """A Brain over a ``bench/run.py`` build with the hash embedder of ``dim``
    dimensions; exits with a message naming the work directory when it holds no vectors."""
    from tiervault.brain.brain import Brain

    brain = Brain.open(write_config(workdir, {**HASH_EMBEDDING, "dim": dim}))
    if brain.vectors is None:
        raise SystemExit(f"{workdir} opens no vectors: build it with them first")
    return brain


def backfill_vectors(manager: Any, workdir: Path, dim: int) -> dict[str, Any]:
    """Embed every entry with the offline ``hash`` embedder through the production
    pipeline (``attach_embeddings`` + ``backfill``, which also persists the indexes)."""
    try:
        from tiervault.config import load_settings
        from tiervault.embeddings.runtime import attach_embeddings
    except ImportError as exc:
        return {"available": False, "reason": f"not yet available: {exc}"}
    settings = load_settings(write_config(workdir, {**HASH_EMBEDDING, "dim": dim}), env={})
    runtime = attach_embeddings(manager, settings, strict=True)
    t0 = time.perf_counter()
    counts = {t: runtime.backfill(t) for t in TIERS}
    dt = time.perf_counter() - t0
    embedded = sum(c["embedded"] for c in counts.values())
    return {"available": True, "source": f"hash embedder (offline signed feature hashing), dim {dim}",
            "model_key": runtime.model_key, "embedded": embedded, "backfill_s": round(dt, 2),
            "embed_rate": round(embedded / dt, 1) if dt else None,
            "failed": sum(c["failed"] + c["pending"] for c in counts.values())}


def hybrid_phase(t_start: float, workdir: Path, first_query: dict[str, Any], *, entries: int,
                 n_queries: int, seed: int, dim: int, captures: int,
                 warmup: int = WARMUP_QUERIES) -> dict[str, Any]:
    """Cold open + first hybrid query, hybrid latencies, RSS, the NumPy baseline paired
    with hybrid scans, then capture with embed-on-write."""
    t_imp = time.perf_counter()
    from tiervault.brain.brain import Brain

    t_open = time.perf_counter()
    try:
        # Written afresh, as the search phase does: the build's own agent-hybrid.yaml names
        # the tier files of the directory it was built in, so a copy of a build (ab_phases)
        # searched -- and captured into -- the original's tiers through it.
        brain = Brain.open(write_config(workdir, {**HASH_EMBEDDING, "dim": dim}))  # the embeddings runtime
    except ImportError as exc:
        brain, why = None, f"not available: the embeddings runtime cannot be imported ({exc})"
    else:
        why = None if brain.vectors is not None else \
            "Brain.open did not attach the embeddings runtime (see the warning on stderr)"
    from bench.corpus import queries

    if brain is None or brain.vectors is None:
        qs, warm = queries(n_queries, seed), queries(warmup, seed + 1)
        top = numpy_topk(entries, dim, seed)
        base = time_interleaved({"baseline_numpy_topk": top}, qs, warm)["baseline_numpy_topk"]
        return {"available": False, "reason": why, "baseline_numpy_topk": {**base, "dim": dim,
                                                                            "note": NUMPY_NOTE}}
    manager, runtime = brain.manager, brain.vectors
    t_query = time.perf_counter()
    first = brain.search_intelligent(first_query["text"], mode="scan", explain=True,
                                     **query_kwargs(first_query))
    t_end = time.perf_counter()
    weight_set = first[0]["explain"]["weightSet"] if first else None
    if weight_set != "hybrid":
        raise RuntimeError(f"hybrid search ran with weight set {weight_set!r}, not 'hybrid'")
    out: dict[str, Any] = {
        "available": True, "weight_set": weight_set, "model_key": runtime.model_key,
        "cold": {"import_ms": round((t_open - t_imp) * 1e3, 1),
                 "open_ms": round((t_query - t_open) * 1e3, 1),
                 "first_query_ms": round((t_end - t_query) * 1e3, 1),
                 "total_ms": round((t_end - t_start) * 1e3, 1)}}

    qs, warm = queries(n_queries, seed), queries(warmup, seed + 1)

    def search(mode: str) -> Callable[[dict[str, Any]], Any]:
        return lambda q: brain.search_intelligent(q["text"], mode=mode, **query_kwargs(q))

    out.update(time_interleaved({"scan_hybrid": search("scan"), "full_hybrid": search("full")},
                                qs, warm))
    out["rss_mb"] = peak_rss_mb()  # before the NumPy baseline's matrix exists
    # The one-thread NumPy baseline, paired query by query with another pass of hybrid
    # scans. The multi-threaded BLAS baseline runs in a pass of its own: timed between
    # them, OpenBLAS's threads kept spinning after each M @ q, and that spin was counted
    # in the next call's process CPU (the one-thread baseline's CPU was ~8.8 ms against
    # its 4.95 ms alone at 100K: a CPU ratio of 0.9-1.0 that was 1.6-1.8 by wall).
    paired = time_interleaved({"scan_hybrid": search("scan"),
                               "baseline_numpy_topk_1t": numpy_topk(entries, dim, seed,
                                                                    kernel="einsum")}, qs, warm)
    blas = time_interleaved({"baseline_numpy_topk": numpy_topk(entries, dim, seed)}, qs, warm)
    out["baseline_numpy_topk"] = {**blas["baseline_numpy_topk"], "dim": dim, "note": NUMPY_NOTE}
    out["baseline_numpy_topk_1t"] = {**paired["baseline_numpy_topk_1t"], "dim": dim,
                                     "note": NUMPY_1T_NOTE}
    out["scan_hybrid_paired"] = paired["scan_hybrid"]
    from bench.profiling import profile_calls

    out["profile"] = {"scan_hybrid": profile_calls(search("scan"), qs[:PROFILE_QUERIES])}
    out["capture_embed_on_write"] = capture_latency(manager, captures, seed + 1)
    brain.close()
    return out


def main_worker(phase: str, params: dict[str, Any], t_start: float) -> dict[str, Any]:
    """Entry point used by ``bench/run.py --_phase``."""
    workdir = Path(params["workdir"])
    if phase == "build":
        return build_phase(params["entries"], params["seed"], workdir, dim=params["dim"],
                           jsonl=params["jsonl"])
    if phase == "search":
        return search_phase(t_start, workdir, params["first_query"], n_queries=params["queries"],
                            seed=params["seed"], captures=params["captures"],
                            warmup=params.get("warmup", WARMUP_QUERIES))
    if phase == "hybrid":
        out = hybrid_phase(t_start, workdir, params["first_query"], entries=params["entries"],
                           n_queries=params["queries"],
                           seed=params["seed"], dim=params["dim"], captures=params["captures"],
                           warmup=params.get("warmup", WARMUP_QUERIES))
        out.setdefault("rss_mb", peak_rss_mb())
        return out
    raise ValueError(f"unknown phase {phase!r}")


if __name__ == "__main__":  # pragma: no cover - use bench/run.py
    raise SystemExit("run bench/run.py")
