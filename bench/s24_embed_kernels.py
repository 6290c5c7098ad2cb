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

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from s23_embed_kernels import fused_graph, script  # noqa: E402

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
    return script(argv, __doc__ or "", FORMS, Path("/tmp/s24/embed/models"), build,
                  lambda form: _session(form[0], **form[1]), lambda form: 1, against="v3")


if __name__ == "__main__":
    raise SystemExit(main())
