"""The ``local`` embedder's int8 model, session 24 forms: one intra-op thread, entries per CPU-second.

    python bench/s24_embed_kernels.py [--n 128] [--rounds 3] [--work /tmp/s24/embed/models]
                                      [--only v3,fastgelu,...] [--json bench/results/s24-embed-kernels.json]

(``--rounds 0`` builds the forms only: run it first, outside the timing lock.)

Times the forms in interleaved rounds in this process, as ``s23_embed_kernels.py`` does:
every entry of ``bench/embedder.py``'s 60-word SciFact set runs alone through one
onnxruntime session (one intra-op thread, all graph optimisations, SkipLayerNormFusion
off as in ``local.py``); the figure is entries per CPU-second of the calling thread.
Each form's vectors (mean-pooled, unit) are compared with ``fp32``'s and ``v3``'s.

Forms:

* ``fp32``: the fused float32 graph (the reference of the vectors' cosines);
* ``v3``: session 23's int8 model (QAttention, no padding mask), built by
  ``local_model.packaged_model_file`` with ``RECIPE`` v3's steps (erf GELU);
* ``fastgelu``: ``v3`` with each ``Gelu`` replaced by ``com.microsoft.FastGelu``
  (the tanh approximation; ``local_graph.approximate_gelu``);
* ``v3-no-mem-pattern`` / ``v3-no-arena``: ``v3`` with onnxruntime's memory pattern or
  CPU arena switched off (texts of varying length: each new shape plans its memory anew).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from embedder import DEFAULT_DATA, entries  # noqa: E402
from s23_embed_kernels import fused_graph, passes, run  # noqa: E402

HEADS = 12
FORMS = ("fp32", "v3", "fastgelu", "v3-no-mem-pattern", "v3-no-arena")


def _session(path: Path, **settings: Any) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    for name, value in settings.items():
        setattr(options, name, value)
    return ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"],
                                disabled_optimizers=["SkipLayerNormFusion"])


def _int8(fp32: Path, dst: Path, *, tanh_gelu: bool) -> Path:
    """The v3 build's steps on the fused graph: QAttention without mask, quantize_dynamic."""
    import onnx
    from onnxruntime import quantization as q

    from tiervault.embeddings.providers import local_graph

    if not dst.is_file():
        graph = onnx.load(str(fp32))
        local_graph.quantize_attention(graph, num_heads=HEADS, padding_mask=False)
        if tanh_gelu:
            local_graph.approximate_gelu(graph)
        staged = dst.with_suffix(".fp32.onnx")
        onnx.save(graph, str(staged))
        q.quantize_dynamic(str(staged), str(dst), per_channel=True, weight_type=q.QuantType.QInt8,
                           op_types_to_quantize=["MatMul"], extra_options={"MatMulConstBOnly": True})
    return dst


def build(work: Path) -> dict[str, tuple[Path, dict[str, Any]]]:
    """Model file and session settings of each form."""
    work.mkdir(parents=True, exist_ok=True)
    fp32 = fused_graph(work)
    v3 = _int8(fp32, work / "v3.onnx", tanh_gelu=False)
    return {"fp32": (fp32, {}), "v3": (v3, {}),
            "fastgelu": (_int8(fp32, work / "fastgelu.onnx", tanh_gelu=True), {}),
            "v3-no-mem-pattern": (v3, {"enable_mem_pattern": False}),
            "v3-no-arena": (v3, {"enable_cpu_mem_arena": False})}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3, help="0: build the forms only")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--work", type=Path, default=Path("/tmp/s24/embed/models"))
    parser.add_argument("--only", default=",".join(FORMS), help="comma-separated forms (default: all)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)

    from tiervault.embeddings.providers.local import LocalEmbedder

    files = build(args.work)
    if args.rounds < 1:
        return 0
    texts, origin = entries(args.data, args.n)
    ids = LocalEmbedder(threads=1).tokenize(texts)
    forms = [f for f in args.only.split(",") if f]
    sessions = {f: _session(files[f][0], **files[f][1]) for f in forms}
    groups = passes(ids, 1)
    rates: dict[str, list[float]] = {f: [] for f in forms}
    vectors: dict[str, np.ndarray] = {}
    for form in forms:
        run(sessions[form], groups[0])  # warm-up
    load_before = os.getloadavg()
    for _ in range(args.rounds):
        for form in forms:
            start = time.thread_time()
            rows = [run(sessions[form], group) for group in groups]
            rates[form].append(len(ids) / (time.thread_time() - start))
            vectors[form] = np.vstack(rows)
    load_after = os.getloadavg()
    result: dict[str, Any] = {"entries": origin, "n": len(ids), "rounds": args.rounds,
                              "load_avg_before": [round(x, 2) for x in load_before],
                              "load_avg_after": [round(x, 2) for x in load_after], "forms": {}}
    for form in forms:
        row: dict[str, Any] = {"entries_per_cpu_s": round(float(np.median(rates[form])), 1),
                               "rounds": [round(r, 1) for r in rates[form]]}
        for other in ("fp32", "v3"):
            if other in vectors and other != form:
                cos = (vectors[form] * vectors[other]).sum(axis=1)
                row[f"cosine_vs_{other}"] = {"mean": round(float(cos.mean()), 5), "min": round(float(cos.min()), 5)}
        if "v3" in vectors and form != "v3":
            row["max_abs_diff_vs_v3"] = float(np.abs(vectors[form] - vectors["v3"]).max())
        result["forms"][form] = row
        print(form, json.dumps(row))
    print(f"load average {load_before[0]:.2f} -> {load_after[0]:.2f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
