"""Retry pacing for a tier whose storage cannot be reached: exponential backoff.

A tier whose server is down is left out of answers and retried on later calls
(not only after a restart). Retrying on *every* call would cost each search a
connect attempt -- up to a connect timeout when the host is gone -- so failed
attempts space the next one out: ``first_s``, then twice as long after each
further failure, up to ``max_s``. Losing a connection that worked is not a
failed attempt: the first reconnect is tried at once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

__all__ = ["Backoff", "RETRY_FIRST_S", "RETRY_MAX_S"]

#: Wait after the first failed attempt; doubled after each further failure.
RETRY_FIRST_S = 0.5
#: The longest wait between two attempts (a server back up is noticed within this).
RETRY_MAX_S = 30.0


@dataclass(slots=True)
class Backoff:
    """When the next attempt may run, and why the last one failed."""

    first_s: float = RETRY_FIRST_S
    max_s: float = RETRY_MAX_S
    failures: int = 0
    retry_at: float = 0.0
    last_error: str = ""

    def ready(self) -> bool:
        """True when an attempt may run now."""
        return time.monotonic() >= self.retry_at

    def wait_s(self) -> float:
        """Seconds until the next attempt may run (0 when it may run now)."""
        return max(self.retry_at - time.monotonic(), 0.0)

    def failed(self, error: str) -> None:
        """An attempt failed: wait longer before the next one."""
        self.failures += 1
        self.last_error = error
        delay = min(self.first_s * 2 ** (self.failures - 1), self.max_s)
        self.retry_at = time.monotonic() + delay

    def succeeded(self) -> None:
        """An attempt worked: the next failure starts from ``first_s`` again."""
        self.failures = 0
        self.retry_at = 0.0
        self.last_error = ""
