"""``scipy.sparse``, imported when first used rather than with tiervault.

SciPy's import costs ~100 ms here (its array-API layer imports ``numpy.f2py`` and
``numpy.testing``; ``python -X importtime``), a quarter of a fresh process's import of
the Brain and an eighth of the 1M cold open + first query budget (issue 16, 0.8 s). A
search over caught-up mirrors whose latent rows were saved with the build (1,000,000
entries) calls none of it; a mirror build, a catch-up of new rows, a small base's LSA
projection or a test does, and imports it then. ``sp.csr_matrix`` etc. read as before.

Not :mod:`~tiervault.vault.deferred_module` (the build worker's stand-in for a module that
third-party code imports): that one takes the module's place in ``sys.modules`` for the
whole process and is meant for a single-threaded worker; this is our own modules' name
for ``scipy.sparse`` only, safe from any thread (``importlib`` serialises the import).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

__all__ = ["sp"]


class _Sparse:
    """Attribute access on ``scipy.sparse``, the module imported on the first one."""

    __slots__ = ("_module",)

    def __init__(self) -> None:
        self._module: ModuleType | None = None

    def __getattr__(self, name: str) -> Any:
        module = self._module
        if module is None:
            module = self._module = importlib.import_module("scipy.sparse")
        return getattr(module, name)


sp: Any = _Sparse()
