"""Health: entries per tier / type / severity / domain, feedback and how the weights
adapted, embedding coverage, tier problems — as SVG bar charts.

Counts come from each tier's `facet_counts` (the backends answer from their mirrors: no table scan); the weights from
``Brain.stats()`` (whatever the feedback module reports) next to the base set
they adapted from. The SQLite + FTS5 integrity check reads the whole file, so
it runs only when asked (``?check=<tier>``).
"""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from tiervault.brain import SIGNALS
from tiervault.brain.weights import base_weights
from tiervault.web.call import Call
from tiervault.web.charts import bar_chart

__all__ = ["health"]

_SEVERITY_CSS = {"critical": "bad", "warning": "warn", "suggestion": "ok"}
_FEEDBACK_CSS = {"accepted": "ok", "modified": "warn", "dismissed": "bad", "failed": "muted"}
_COVERAGE_CSS = {"ok": "ok", "pending": "warn", "error": "bad", "missing": "muted"}


def _embedding(call: Call, readable: list[str]) -> dict[str, Any] | None:
    vectors = call.brain.vectors
    model = getattr(vectors, "model_key", None)
    if vectors is None or model is None:
        return None
    embedder = getattr(vectors, "embedder", None)
    coverage = [call.catalog.coverage(t, model) for t in readable]
    charts = [bar_chart(f"{c.tier}", {"ok": c.ok, "pending": c.pending, "error": c.error,
                                      "missing": c.missing}, css=_COVERAGE_CSS) for c in coverage]
    return {"model": model, "dim": getattr(embedder, "dim", None), "coverage": coverage,
            "charts": charts}


def health(call: Call) -> Response:
    readable = call.readable()
    stats = call.brain.stats()
    dists = [call.catalog.distribution(t) for t in readable]
    per_tier = bar_chart("Entries per tier", {d.tier: d.total for d in dists})
    by_type: dict[str, int] = {}
    by_sev: dict[str, int] = {}
    by_domain: dict[str, int] = {}
    for d in dists:
        for src, dst in ((d.by_type, by_type), (d.by_severity, by_sev), (d.by_domain, by_domain)):
            for k, v in src.items():
                dst[k] = dst.get(k, 0) + v
    by_domain = dict(sorted(by_domain.items(), key=lambda kv: (-kv[1], kv[0])))
    weights = stats["weights"]
    hybrid = stats.get("weightSet") == "hybrid"
    base = dict(zip(SIGNALS, base_weights(hybrid, call.brain.config.weights).tolist()))
    change = {s: round(float(weights[s]) - base[s], 3) + 0.0 for s in SIGNALS}  # + 0.0: no "-0.000"
    feedback = stats.get("feedback", {})
    problems = [(name, info.get("problem") or "unavailable")
                for name, info in stats["tiers"].items()
                if not info.get("available", True) or info.get("problem")]
    check = call.params.get("check") or ""
    integrity: list[str] | None = None
    if check:
        call.require_read(check)
        integrity = call.manager.store(check).integrity_problems()
    tiers = {name: info for name, info in stats["tiers"].items() if name in readable}
    return call.render(
        "health.html", nav="health", tiers=tiers, per_tier=per_tier,
        by_type=bar_chart("By type", by_type),
        by_severity=bar_chart("By severity", by_sev, css=_SEVERITY_CSS),
        by_domain=bar_chart("By domain" if len(by_domain) <= 15 else
                            f"By domain (top 15 of {len(by_domain)})", by_domain),
        feedback=bar_chart("Feedback recorded", feedback, css=_FEEDBACK_CSS),
        feedback_total=sum(feedback.values()), feedback_pool=stats.get("feedbackPool", "agent"),
        agent_feedback_total=sum(stats.get("agentFeedback", feedback).values()), weights=weights, base=base, change=change,
        signals=SIGNALS,
        weights_chart=bar_chart("Weights in force", weights),
        adapted=stats.get("adapted", False), weight_set=stats.get("weightSet", ""),
        adaptation=stats.get("adaptation", ""), weight_events=stats.get("weightEvents", 0),
        history=list(reversed(stats.get("weightHistory", [])[-10:])),
        extra={k: v for k, v in stats.items()
               if k not in ("tiers", "weights", "weightSet", "adapted", "feedback", "agentFeedback",
                            "adaptation",
                            "weightEvents", "weightHistory")},
        embedding=_embedding(call, readable), problems=problems, check=check, integrity=integrity)
