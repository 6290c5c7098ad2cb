"""Where the time goes: cProfile over a benchmark phase, and growth exponents.

* :func:`profile_calls` runs a callable over items under ``cProfile`` and returns
  the top functions by their own time (``tottime``) — the ``profile`` key of the
  bench JSON (one list per phase).
* :class:`CallTimers` wraps named functions in wall-clock timers (nanoseconds and
  calls by name) for the probes that split a scan into its parts.
* :func:`growth` fits ``time ~ N^k`` between consecutive corpus sizes for every
  figure of the bench JSON — its ``growth`` key. ``k`` near 1 is linear; a
  latency with ``k`` well above 1 is a defect to explain or fix.

cProfile adds a cost per Python call, so the profile's absolute times are
inflated for call-heavy code; compare its rows with each other, not with the
wall-clock figures.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, Iterable

__all__ = ["profile_calls", "growth", "GROWTH_FIGURES", "CallTimers"]


class CallTimers:
    """Wall time (``spent``, ns) and ``calls`` of wrapped functions, by name."""

    def __init__(self) -> None:
        from collections import defaultdict

        self.spent: dict[str, int] = defaultdict(int)
        self.calls: dict[str, int] = defaultdict(int)

    def wrap(self, fn: Callable[..., Any], name: str | Callable[..., str]) -> Callable[..., Any]:
        """``fn`` timed under ``name``, or under ``name(*args, **kwargs)`` when it is a
        callable (one kind of call or another: the same function split by its arguments)."""
        import time

        spent, calls = self.spent, self.calls

        def wrapper(*a: Any, **kw: Any) -> Any:
            key = name(*a, **kw) if callable(name) else name
            t0 = time.perf_counter_ns()
            try:
                return fn(*a, **kw)
            finally:
                spent[key] += time.perf_counter_ns() - t0
                calls[key] += 1
        return wrapper

    def clear(self) -> None:
        self.spent.clear()
        self.calls.clear()


def profile_calls(fn: Callable[[Any], Any], items: Iterable[Any], top: int = 15) -> list[dict[str, Any]]:
    """``fn(item)`` for each item under cProfile; the ``top`` functions by own time:
    ``{"function", "calls", "tottime_ms", "cumtime_ms", "share"}`` (share of the total)."""
    import cProfile
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    for item in items:
        fn(item)
    prof.disable()
    stats = pstats.Stats(prof)
    total = stats.total_tt or 1e-12  # type: ignore[attr-defined]
    rows = []
    for (file, line, name), (_cc, ncalls, tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        rows.append({"function": f"{_short(file)}:{line}({name})", "calls": ncalls,
                     "tottime_ms": round(tt * 1e3, 2), "cumtime_ms": round(ct * 1e3, 2),
                     "share": round(tt / total, 3)})
    rows.sort(key=lambda r: -r["tottime_ms"])
    return rows[:top]


def _short(file: str) -> str:
    """A file name short enough to read: package-relative when possible."""
    if file.startswith("~") or file.startswith("<"):
        return file
    parts = Path(file).parts
    for anchor in ("site-packages", "lib"):
        if anchor in parts:
            i = len(parts) - 1 - parts[::-1].index(anchor)
            return "/".join(parts[i + 1:])
    return "/".join(parts[-2:])


#: (name, how to read it from one size's row). Rates are turned into times per size
#: (N / rate), so every exponent reads "cost ~ N^k".
GROWTH_FIGURES: dict[str, Callable[[dict[str, Any]], float | None]] = {
    "import_jsonl_s": lambda s: s["import"].get("jsonl_s"),
    "import_store_s": lambda s: s["import"].get("store_s"),
    "import_jsonl_cpu_s": lambda s: s["import"].get("jsonl_cpu_s"),
    "mirror_build_s": lambda s: s["mirror_build_s"]["total"],
    "mirror_build_cpu_s": lambda s: s["mirror_build_s"].get("cpu"),
    "cold_first_query_ms": lambda s: s["cold_first_query_ms"],
    "scan_fts_p50_ms": lambda s: s["scan_fts"].get("p50_ms"),
    "scan_fts_cpu_p50_ms": lambda s: s["scan_fts"].get("cpu_p50_ms"),
    "full_fts_p50_ms": lambda s: s["full_fts"].get("p50_ms"),
    "scan_hybrid_p50_ms": lambda s: s["scan_hybrid"].get("p50_ms"),
    "scan_hybrid_cpu_p50_ms": lambda s: s["scan_hybrid"].get("cpu_p50_ms"),
    "baseline_fts5_p50_ms": lambda s: s["baseline_fts5"].get("p50_ms"),
    "baseline_numpy_topk_p50_ms": lambda s: s["baseline_numpy_topk"].get("p50_ms"),
    "capture_p50_ms": lambda s: s["capture"].get("p50_ms"),
    "rss_mb": lambda s: s["rss_mb"],
    "rss_hybrid_mb": lambda s: s["hybrid"].get("rss_mb"),
    "file_mb": lambda s: s["file_mb"],
    "mirror_cache_mb": lambda s: s["mirror_cache_mb"],
}


def growth(sizes: list[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """``{"10000->100000": {figure: k}}`` with ``k = ln(t2 / t1) / ln(N2 / N1)``
    between consecutive sizes (null where a figure is missing or zero)."""
    rows = sorted(sizes, key=lambda s: s["entries"])
    out: dict[str, dict[str, float | None]] = {}
    for a, b in zip(rows, rows[1:]):
        span = math.log(b["entries"] / a["entries"])
        if span <= 0:
            continue
        ks: dict[str, float | None] = {}
        for name, read in GROWTH_FIGURES.items():
            try:
                x, y = read(a), read(b)
            except (KeyError, TypeError):
                x = y = None
            ks[name] = round(math.log(y / x) / span, 2) if x and y and x > 0 and y > 0 else None
        out[f"{a['entries']}->{b['entries']}"] = ks
    return out
