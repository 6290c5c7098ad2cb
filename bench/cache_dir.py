"""A bench run's own directory for the tiers' mirror / recall caches.

The caches of a bench tier set are large (hundreds of MB at 1M entries) and belong to the
run that built them: when the caller set no ``TIERVAULT_CACHE_DIR``, the run gets a fresh
temporary directory, removed (and the variable unset) when the run ends; a directory the
caller named is used as it is and kept.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["run_cache_dir"]

VARIABLE = "TIERVAULT_CACHE_DIR"


@contextmanager
def run_cache_dir(prefix: str) -> Iterator[Path]:
    """``TIERVAULT_CACHE_DIR`` for the block: the caller's, or a new ``prefix*`` temporary
    directory that is removed afterwards (even when the block raises)."""
    given = os.environ.get(VARIABLE)
    if given:
        yield Path(given)
        return
    own = tempfile.mkdtemp(prefix=prefix)
    os.environ[VARIABLE] = own
    try:
        yield Path(own)
    finally:
        os.environ.pop(VARIABLE, None)
        shutil.rmtree(own, ignore_errors=True)
