"""A module imported only when something first reads from it (a mirror build worker's
``scipy.stats``).

Why: every scikit-learn import runs ``sklearn.utils.fixes``, which imports ``scipy.stats``
at its top (for one helper, ``_mode``, that the build never calls). In a build worker
that import is ~0.4-0.5 s of the ~1 s the worker spends before it can fork its shares,
on the first search's critical path (issue 16, session 17, bench/README.md). A
:class:`DeferredModule` stands in for the module in ``sys.modules`` (and on its
package): ``import scipy.stats`` and ``from scipy import stats`` then bind the stand-in
without running the module, and the first attribute read from it (``stats.mode``, its
``__path__`` for a submodule import, ``from scipy.stats import x``) imports the real
module and answers from it. Nothing that uses the module sees a difference but when the
import happens.

Not :class:`importlib.util.LazyLoader`: on Python 3.11 the import statement itself reads
the module's ``__spec__`` when the module is in ``sys.modules`` already, which makes a
lazy module load at the next ``import scipy.stats`` -- the very statement to defer.
The stand-in holds ``__spec__`` (found without running the module) as its own attribute.

Meant for a process of our own (a build worker) before it imports what would import the
module: loading is not guarded against two threads reading the stand-in at once.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Any

__all__ = ["DeferredModule", "defer"]


class DeferredModule(types.ModuleType):
    """Stands in for a module not imported yet; the first attribute it lacks imports
    the module (:func:`load`) and is read from it."""

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.load(), attr)

    def load(self) -> types.ModuleType:
        """Import the module now (once) and make the stand-in answer as the module."""
        name = self.__dict__["__name__"]
        module = sys.modules.get(name)
        if module is not None and module is not self:
            return module  # loaded already
        sys.modules.pop(name, None)  # so that the import below runs the module
        module = importlib.import_module(name)  # (sets the package's attribute to it)
        # the stand-in's own attributes become the module's: names bound to the stand-in
        # (``from scipy import stats`` before the load) then find them without another hop
        self.__dict__.update(module.__dict__)
        return module


def defer(name: str) -> types.ModuleType:
    """``name``'s module: itself when imported already, else a :class:`DeferredModule`
    put in its place (in ``sys.modules`` and on its package, whose import this runs)
    until something reads from it. Raises ModuleNotFoundError for a missing module."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)  # imports the package, not the module
    if spec is None:
        raise ModuleNotFoundError(f"no module named {name!r}", name=name)
    stand_in = DeferredModule(name)
    stand_in.__spec__ = spec
    sys.modules[name] = stand_in
    package, _, child = name.rpartition(".")
    if package:
        setattr(sys.modules[package], child, stand_in)
    return stand_in
