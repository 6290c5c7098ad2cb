"""Latency vs corpus size from a ``bench/run.py`` result (matplotlib, the ``[bench]`` extra).

    python bench/plot.py results.json out.png
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["plot", "SERIES"]

#: (result key, legend label, line style) of every plotted latency.
SERIES = (
    ("scan_fts", "search_intelligent scan, FTS-only", "-"),
    ("full_fts", "search_intelligent full, FTS-only", "-"),
    ("scan_hybrid", "search_intelligent scan, hybrid", "-"),
    ("full_hybrid", "search_intelligent full, hybrid", "-"),
    ("capture", "single capture", "-."),
    ("baseline_fts5", "baseline: raw FTS5 bm25()", "--"),
    ("baseline_numpy_topk", "baseline: NumPy brute-force top-10", "--"),
)


def plot(result: dict[str, Any], path: str | Path) -> Path:
    """Write a log-log PNG: p50 as lines with markers, p95 as the top of a shaded band."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only; never needs a display
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError("--plot needs matplotlib: pip install 'tiervault[bench]'") from exc
    sizes = result["sizes"]
    fig, ax = plt.subplots(figsize=(8, 5), dpi=120)
    for key, label, style in SERIES:
        pts = [(s["entries"], s[key]["p50_ms"], s[key]["p95_ms"]) for s in sizes
               if isinstance(s.get(key), dict) and s[key].get("p50_ms") is not None]
        if not pts:
            continue
        xs, p50, p95 = zip(*pts)
        line, = ax.plot(xs, p50, style, marker="o", label=f"{label} (p50; band to p95)")
        ax.fill_between(xs, p50, p95, color=line.get_color(), alpha=0.15)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("entries (all tiers)")
    ax.set_ylabel("latency (ms)")
    m = result.get("machine", {})
    ax.set_title(f"tiervault latency vs corpus size\n{m.get('cpu', '?')}, {m.get('cores', '?')} cores, "
                 f"load {m.get('load_avg_start', ['?'])[0]}", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out)
    plt.close(fig)
    return out


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: python bench/plot.py results.json out.png")
    print(plot(json.loads(Path(sys.argv[1]).read_text()), sys.argv[2]))
