"""Request limits of the server and the per-token rate limiter.

Limits are checked before any vault work starts: the body size while it is
read (413), the query length and the number of ids per call (413), and a token
bucket per token (429 with ``Retry-After``). ``body_timeout_s`` bounds how long
a client may take to send its body: the body is read completely *before* the
vault lock is taken, and responses are built after it is released, so a slow
or abandoned client never holds the writer. ``lock_timeout_s`` bounds how long
a request waits for the vault (503 "busy" after that).
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass

__all__ = ["Limits", "RateLimiter"]


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds of one server (all configurable from ``tiervault serve``)."""

    max_body_bytes: int = 1_048_576
    max_query_chars: int = 4_096
    max_ids: int = 100
    max_capture: int = 500
    max_limit: int = 1_000
    rate_per_s: float = 50.0
    burst: int = 100
    body_timeout_s: float = 10.0
    lock_timeout_s: float = 30.0


class RateLimiter:
    """A token bucket per key: ``rate`` requests per second, bursts up to ``burst``."""

    def __init__(self, rate: float, burst: int, clock=time.monotonic) -> None:
        self.rate = rate
        self.burst = burst
        self.clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, key: str) -> float:
        """0.0 when the request may go; otherwise the seconds to wait before retrying."""
        if self.rate <= 0:
            return 0.0
        now = self.clock()
        with self._lock:
            level, then = self._buckets.get(key, (float(self.burst), now))
            level = min(float(self.burst), level + (now - then) * self.rate)
            if level >= 1.0:
                self._buckets[key] = (level - 1.0, now)
                return 0.0
            self._buckets[key] = (level, now)
            return (1.0 - level) / self.rate

    @staticmethod
    def retry_after(wait: float) -> str:
        """The ``Retry-After`` header value (whole seconds, at least 1)."""
        return str(max(1, math.ceil(wait)))
