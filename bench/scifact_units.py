"""100,000 real texts from SciFact without network: sentences and sentence windows.

    python bench/scifact_units.py [--data ../shared/data/beir/scifact] [--n 100000]
                                  [--cache /tmp/tv-scifact-units]   # embeds and caches

SciFact has only 5,183 abstracts; a 100K-entry tier of *real* embeddings is made
from their parts, deterministically (the data is read where it lies, never copied):

1. every abstract (``corpus.jsonl.gz``, file order) is split into sentences at
   ``[.!?]`` followed by whitespace and an upper-case letter, digit, ``(`` or ``[``
   (:data:`SENTENCE_SPLIT`); empty pieces are dropped;
2. the units, in this order, each in corpus order: every sentence, every window of
   2 consecutive sentences (stride 1), then windows of 3 consecutive sentences
   (stride 1) until ``n`` units are reached; a text already seen (same string) is
   skipped, so no two entries have the same text. For n = 100,000: 44,979
   sentences (of 45,132 pieces), 39,928 2-sentence windows (of 39,949) and the
   first 15,093 3-sentence windows (of 34,766);
3. an entry per unit: id ``sf<doc id>-s<i>`` / ``-w2-<i>`` / ``-w3-<i>`` (``i`` = index
   of the first sentence), title = the unit's first 10 words, description = the
   unit, domain ``scifact``, type ``reference``. The embedded text is the
   pipeline's template over that entry (title, empty tags, description).

Embeddings: the ``local`` embedder (all-MiniLM-L6-v2-int8-dynamic, 384-d),
written in chunks of :data:`CHUNK` texts to ``--cache`` (``/tmp``, never the
repository) so a killed run resumes and later runs reuse them. Queries: every
SciFact query (``queries.jsonl.gz``: 1,109, train and test; recall against an
exact search needs no judgments), embedded as queries, cached the same way.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.embedder import DEFAULT_DATA  # noqa: E402

SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\[])")
TITLE_WORDS = 10
CHUNK = 5_000
DEFAULT_CACHE = Path("/tmp/tv-scifact-units")


@dataclass(frozen=True)
class Unit:
    """One text of the 100K set: its entry id and the text."""

    id: str
    text: str


def _docs(data: Path) -> list[dict[str, Any]]:
    with gzip.open(data / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def units(data: Path, n: int = 100_000) -> list[Unit]:
    """The first ``n`` units by the rule of the module docstring."""
    sentences = []
    for doc in _docs(data):
        parts = [s.strip() for s in SENTENCE_SPLIT.split(doc.get("text", "").strip())]
        sentences.append((doc["_id"], [p for p in parts if p]))
    out: list[Unit] = []
    seen: set[str] = set()
    for width, tag in ((1, "s"), (2, "w2-"), (3, "w3-")):
        for doc_id, sents in sentences:
            for i in range(len(sents) - width + 1):
                text = " ".join(sents[i:i + width])
                if text in seen:
                    continue
                seen.add(text)
                slug = re.sub(r"[^a-z0-9_.-]", "_", str(doc_id).lower())
                out.append(Unit(f"sf{slug}-{tag}{i}", text))
                if len(out) == n:
                    return out
    return out


def entry_dict(unit: Unit) -> dict[str, Any]:
    return {"id": unit.id, "title": " ".join(unit.text.split()[:TITLE_WORDS]),
            "description": unit.text, "domain": "scifact", "type": "reference"}


def queries(data: Path) -> dict[str, str]:
    """Every SciFact query, id -> text, in file order."""
    with gzip.open(data / "queries.jsonl.gz", "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return {str(r["_id"]): r["text"] for r in rows}


def _key(model: str, kind: str, texts: list[str]) -> str:
    h = hashlib.sha256(f"{model}\0{kind}\0{len(texts)}\0".encode())
    for t in texts:
        h.update(t.encode("utf-8", "surrogatepass") + b"\0")
    return h.hexdigest()[:20]


def embed_cached(embedder: Any, texts: list[str], kind: str, cache: Path,
                 log: Any = print) -> tuple[np.ndarray, dict[str, Any]]:
    """The embeddings of ``texts`` (``kind``: "document" or "query"), chunk-cached under
    ``cache``; (matrix float32 (n, dim), info: seconds, chunks embedded now / cached)."""
    folder = cache / f"{kind}-{_key(embedder.model, kind, texts)}"
    folder.mkdir(parents=True, exist_ok=True)
    parts, fresh, t0, c0 = [], 0, time.perf_counter(), time.process_time()
    for k, start in enumerate(range(0, len(texts), CHUNK)):
        path = folder / f"chunk-{k:04d}.npy"
        block = texts[start:start + CHUNK]
        if path.exists():
            m = np.load(path, allow_pickle=False)
            if m.shape[0] == len(block):
                parts.append(m)
                continue
        m = np.ascontiguousarray(embedder.embed(block, kind), dtype=np.float32)
        tmp = path.with_suffix(".tmp.npy")
        np.save(tmp, m)
        tmp.replace(path)  # whole chunks only: a killed run resumes at the next chunk
        parts.append(m)
        fresh += 1
        log(f"{kind}: {start + len(block):,} / {len(texts):,} embedded "
            f"({time.perf_counter() - t0:.0f} s)")
    matrix = np.vstack(parts) if parts else np.zeros((0, embedder.dim), dtype=np.float32)
    return matrix, {"chunks_embedded_now": fresh, "chunks": len(parts),
                    "seconds": round(time.perf_counter() - t0, 1),
                    "cpu_s": round(time.process_time() - c0, 1), "folder": str(folder)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    args = parser.parse_args(argv)
    from tiervault.embeddings.pipeline import embedding_input
    from tiervault.embeddings.providers.local import LocalEmbedder
    from tiervault.vault.entry import Entry

    us = units(args.data, args.n)
    kinds = {"s": sum("-s" in u.id for u in us), "w2": sum("-w2-" in u.id for u in us),
             "w3": sum("-w3-" in u.id for u in us)}
    print(f"{len(us):,} units {kinds}", file=sys.stderr)
    texts = [embedding_input(Entry.from_dict(entry_dict(u))) for u in us]
    emb = LocalEmbedder()
    _, qinfo = embed_cached(emb, list(queries(args.data).values()), "query", args.cache)
    _, dinfo = embed_cached(emb, texts, "document", args.cache,
                            log=lambda m: print(m, file=sys.stderr, flush=True))
    print(json.dumps({"units": len(us), "kinds": kinds, "queries": qinfo, "docs": dinfo}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
