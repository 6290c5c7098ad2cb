"""A bench script's result: printed as JSON on stdout and, if asked, written to a file.

Every script under ``bench/`` ends the same way so that a run's figures can be committed
under ``bench/results/`` exactly as they were printed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["emit"]


def emit(result: Any, path: Path | None) -> None:
    """Print ``result`` as indented JSON; also write it (with a final newline) to ``path``."""
    text = json.dumps(result, indent=1)
    if path:
        path.write_text(text + "\n", encoding="utf-8")
    print(text)
