"""The timed JSONL import (``tiervault import`` of every tier file into fresh tiers),
shared by ``bench/run.py`` (through ``phases.py``) and the A/B worker of ``write_ab.py``.

It imports nothing from ``bench`` itself: the A/B worker loads it from the script's own
folder while ``tiervault`` comes from the checkout under test, so both checkouts are
timed by the same harness.
"""

from __future__ import annotations

import gc
import time
from pathlib import Path
from typing import NamedTuple

__all__ = ["JsonlImport", "time_jsonl_import"]


class JsonlImport(NamedTuple):
    """Entries written, wall and process-CPU seconds of one timed import."""

    written: int
    wall_s: float
    cpu_s: float


def time_jsonl_import(tiers: dict[str, Path], src: Path) -> JsonlImport:
    """Import ``src/<tier>.jsonl`` into the tier file ``tiers[tier]`` for every tier, timed;
    a line the import refuses stops the run (the corpus is valid: it is a bench bug)."""
    from tiervault.vault.jsonl import import_lines
    from tiervault.vault.manager import VaultManager

    gc.collect()
    t0, c0 = time.perf_counter(), time.process_time()
    written = 0
    with VaultManager.at({t: str(p) for t, p in tiers.items()}) as manager:
        for t in tiers:
            with open(src / f"{t}.jsonl", encoding="utf-8") as fh:
                report = import_lines(manager, t, fh)
            if report.errors:
                raise RuntimeError(f"JSONL import of {t}: {report.errors[:3]}")
            written += report.written
    return JsonlImport(written, time.perf_counter() - t0, time.process_time() - c0)
