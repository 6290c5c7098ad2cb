"""The signal registry: one (n, 7) matrix of candidate signals, addressed by name.

Every module reads and writes signals through :class:`SignalMatrix` by name
(``m["severity"]``), never by column number, so the column order lives in one
place (:data:`~tiervault.brain.shapes.SIGNALS`, also the weight-vector order).
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from tiervault.brain.shapes import SIGNALS

__all__ = ["SignalMatrix", "SIGNAL_INDEX", "TEXT_SIGNALS", "PRIOR_SIGNALS", "pick"]

SIGNAL_INDEX = {name: i for i, name in enumerate(SIGNALS)}
#: Signals that say whether an entry matches the query (they gate the score).
TEXT_SIGNALS = ("semantic", "vector")
#: Signals that order relevant entries among themselves.
PRIOR_SIGNALS = tuple(s for s in SIGNALS if s not in TEXT_SIGNALS)


class SignalMatrix:
    """Candidate signals: ``values[i, SIGNAL_INDEX[name]]``, each in [0, 1]."""

    __slots__ = ("values",)

    def __init__(self, n: int) -> None:
        self.values = np.zeros((n, len(SIGNALS)), dtype=np.float64)

    def __len__(self) -> int:
        return self.values.shape[0]

    def __getitem__(self, name: str) -> np.ndarray:
        return self.values[:, SIGNAL_INDEX[name]]

    def __setitem__(self, name: str, column: np.ndarray) -> None:
        self.values[:, SIGNAL_INDEX[name]] = column

    def columns(self, names: tuple[str, ...]) -> np.ndarray:
        """The (n, len(names)) sub-matrix of these signals, in that order."""
        return self.values[:, [SIGNAL_INDEX[k] for k in names]]

    def row(self, i: int) -> Iterator[tuple[str, float]]:
        """(name, value) of candidate ``i`` in SIGNALS order."""
        return zip(SIGNALS, (float(v) for v in self.values[i]))


def pick(weights: np.ndarray, names: tuple[str, ...]) -> np.ndarray:
    """The weights of ``names`` out of a 7-vector in SIGNALS order."""
    return np.asarray(weights, dtype=np.float64)[[SIGNAL_INDEX[k] for k in names]]

