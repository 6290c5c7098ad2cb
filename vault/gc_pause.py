"""Pausing Python's cyclic garbage collector around allocation-heavy batch work.

Preparing or parsing a batch of entries allocates tens of thousands of short-lived
containers (decoded JSON objects, word lists, row tuples) that never form cycles;
every 700 allocations the collector walked the young generation anyway, and older
ones with them: ~6 of ~43 us of client CPU per entry of a PostgreSQL import at 100K,
~1-2 us of ~15 us per line of JSONL parsing (bench/README.md). Reference counting
still frees every one of them at once; only the cycle search waits until the
collector is back on.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator

__all__ = ["gc_paused"]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for the block (then restore it as it was).

    Left alone when it was already off (another import, or the application).
    """
    was_on = gc.isenabled()
    if was_on:
        gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
