"""Brain configurations timed against each other on the same queries (the cost scripts'
shared part: ``lsa_cost.py``, ``prf_cost.py``, ``lexical_leg_cost.py``).

Every variant answers every query in turn (``phases.time_interleaved``), so a burst of
load hits them alike; a variant's cost is reported as its ratio to a baseline variant
timed in the same run.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.phases import build_phase, query_kwargs, time_interleaved

__all__ = ["built_corpus", "emit", "parse_args", "ratios", "time_brains"]


def parse_args(doc: str, argv: list[str] | None) -> argparse.Namespace:
    """The cost scripts' options: ``--entries`` (10,000), ``--queries`` (200), ``--seed``
    (7), ``--json`` (where to write the result); the description is ``doc``'s first
    paragraph."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--entries", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", type=Path)
    return ap.parse_args(argv)


@contextmanager
def built_corpus(args: argparse.Namespace, prefix: str) -> Iterator[Path]:
    """A temporary folder holding the bench corpus's three tiers (``args.entries``,
    ``args.seed``; 8-d hash vectors, no JSONL import), removed afterwards."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        work = Path(tmp)
        build_phase(args.entries, args.seed, work, dim=8, jsonl=False)
        yield work


def time_brains(brains: dict[str, Any], qs: list[dict[str, Any]], warm: list[dict[str, Any]],
                modes: tuple[str, ...] = ("scan", "full")) -> dict[str, dict[str, Any]]:
    """Time ``search_intelligent`` of every Brain in every mode; keys ``<mode>_<name>``.
    The Brains are closed afterwards."""
    def run(brain: Any, mode: str):
        return lambda q: brain.search_intelligent(q["text"], mode=mode, **query_kwargs(q))
    try:
        return time_interleaved({f"{mode}_{name}": run(brain, mode)
                                 for name, brain in brains.items() for mode in modes}, qs, warm)
    finally:
        for brain in brains.values():
            brain.close()


def ratios(results: dict[str, dict[str, Any]], pairs: dict[str, tuple[str, str]],
           stat: str) -> dict[str, float]:
    """``{label: results[a][stat] / results[b][stat]}`` for ``pairs = {label: (a, b)}``."""
    return {label: round(results[a][stat] / results[b][stat], 3) for label, (a, b) in pairs.items()}


def emit(out: dict[str, Any], path: Path | None) -> None:
    """Print the result JSON and, if ``path`` is given, write it there too."""
    text = json.dumps(out, indent=1)
    print(text)
    if path:
        path.write_text(text + "\n")
