"""tiervault.embeddings: providers, the vector index, embed-on-write and vector recall.

Switch vectors on for a manager with :func:`attach_embeddings`; the returned
:class:`EmbeddingRuntime` is the Brain's vector source.
"""

from tiervault.embeddings.base import Embedder, InputType
from tiervault.embeddings.factory import PROVIDERS, make_embedder
from tiervault.embeddings.index import VectorIndex
from tiervault.embeddings.pipeline import (
    DEFAULT_TEMPLATE,
    EmbeddingPipeline,
    embedding_input,
    input_hash,
    model_key_for,
)
from tiervault.embeddings.recall import VectorRecall
from tiervault.embeddings.runtime import EmbeddingRuntime, attach_embeddings

__all__ = [
    "Embedder",
    "InputType",
    "PROVIDERS",
    "make_embedder",
    "VectorIndex",
    "DEFAULT_TEMPLATE",
    "EmbeddingPipeline",
    "embedding_input",
    "input_hash",
    "model_key_for",
    "VectorRecall",
    "EmbeddingRuntime",
    "attach_embeddings",
]
