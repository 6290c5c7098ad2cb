"""Search by filters alone: an empty query with filters lists the matching entries,
newest first (by ``updated_at``), in the same row shapes as a ranked search.

Nothing is ranked, so ``score`` is 0 and every signal of a full row's breakdown
is 0; the rows are in time order, newest first.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from tiervault.brain.shapes import SIGNALS
from tiervault.vault.filters import Filters

__all__ = ["filtered_rows"]


def filtered_rows(manager: Any, filters: Filters, *, mode: str, limit: int,
                  tiers: Sequence[str] | None) -> list[dict[str, Any]]:
    """Scan or full rows of the ``limit`` newest entries matching ``filters``."""
    page = manager.list_entries(filters=filters, tiers=tiers, sort="updated", limit=limit)
    rows: list[dict[str, Any]] = []
    for entry, tier in page.rows:
        if mode == "full":
            breakdown = {k: 0.0 for k in SIGNALS}
            breakdown["total"] = 0.0
            rows.append({"entry": entry.to_dict(), "score": 0.0, "breakdown": breakdown,
                         "tier": tier})
            continue
        chars = sum(len(getattr(entry, k)) for k in ("title", "description", "context",
                                                      "example", "counter_example", "why"))
        rows.append({"id": entry.id, "title": entry.title, "score": 0.0, "type": entry.type,
                     "domain": entry.domain, "severity": entry.severity, "tags": list(entry.tags),
                     "snippet": entry.description[:120], "tokenEstimate": math.ceil(chars / 4),
                     "tier": tier})
    return rows
