"""Progress on stderr for bulk operations: tqdm when installed (extra ``progress``).

Without tqdm, or when stderr is not a terminal, only the final summary line of
the command is printed; stdout is never touched (it may carry JSON or MCP).
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["Progress"]


class Progress:
    """``with Progress("import") as p: p.update_to(n)``."""

    def __init__(self, label: str, *, total: int | None = None, unit: str = "it") -> None:
        self._bar: Any = None
        if not sys.stderr.isatty():
            return
        try:
            from tqdm import tqdm
        except ImportError:
            return
        self._bar = tqdm(total=total, desc=label, unit=unit, file=sys.stderr, leave=False)

    def update_to(self, n: int) -> None:
        if self._bar is not None:
            self._bar.update(n - self._bar.n)

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.close()
