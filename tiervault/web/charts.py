"""Geometry of the server-drawn SVG charts: bar charts, the score breakdown, the link graph.

Only numbers are computed here; the templates draw them, so every label an
agent wrote passes through Jinja2's autoescaping like any other text. Colours
come from CSS classes (the Content-Security-Policy allows no inline styles).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

__all__ = ["Bar", "BarChart", "bar_chart", "SignalBar", "Breakdown", "breakdown_chart",
           "GraphNode", "GraphEdge", "LinkGraph", "link_graph"]

LABEL_W = 120  # bar charts
BAR_W = 220
ROW_H = 22
SIGNAL_LABEL_W = 150  # the score breakdown (its template draws the same geometry)
SIGNAL_BAR_W = 300


@dataclass(frozen=True, slots=True)
class Bar:
    label: str
    value: float
    text: str
    y: int
    width: float
    css: str = ""


@dataclass(frozen=True, slots=True)
class BarChart:
    title: str
    bars: list[Bar]
    width: int
    height: int
    label_w: int = LABEL_W


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:.3f}"


def bar_chart(title: str, values: Mapping[str, float], *, css: Mapping[str, str] | None = None,
              limit: int = 15) -> BarChart:
    """Horizontal bars scaled to the largest value (the first ``limit`` items)."""
    items = list(values.items())[:limit]
    top = max((v for _, v in items), default=0) or 1
    bars = [Bar(label, float(v), _fmt(v), 4 + i * ROW_H, BAR_W * float(v) / top,
                (css or {}).get(label, "")) for i, (label, v) in enumerate(items)]
    return BarChart(title, bars, LABEL_W + BAR_W + 70, 8 + len(bars) * ROW_H)


@dataclass(frozen=True, slots=True)
class SignalBar:
    """One signal: its value in [0, 1], its weight, and what it added to the score."""

    name: str
    value: float
    weight: float
    contribution: float
    y: int
    value_w: float
    contribution_w: float


@dataclass(frozen=True, slots=True)
class Breakdown:
    signals: list[SignalBar]
    tier_weight: float
    weighted_sum: float
    feedback: float
    total: float
    width: int
    height: int
    feedback_x: float
    feedback_w: float


def breakdown_chart(values: Mapping[str, float], weights: Mapping[str, float], signals: Sequence[str],
                    tier_weight: float, weighted_sum: float, feedback: float, total: float) -> Breakdown:
    """Bars for each signal (value, and weight x value), then the feedback nudge.

    The nudge is in [-0.1, 0.1]; it is drawn from the centre of its own track,
    to the left when negative.
    """
    rows = []
    for i, name in enumerate(signals):
        v = float(values.get(name, 0.0))
        w = float(weights.get(name, 0.0))
        rows.append(SignalBar(name, v, w, v * w, 4 + i * ROW_H, SIGNAL_BAR_W * min(max(v, 0.0), 1.0),
                              SIGNAL_BAR_W * min(max(v * w, 0.0), 1.0)))
    centre = SIGNAL_LABEL_W + SIGNAL_BAR_W / 2
    half = SIGNAL_BAR_W / 2 * min(abs(feedback) / 0.1, 1.0)
    x = centre - half if feedback < 0 else centre
    return Breakdown(rows, tier_weight, weighted_sum, feedback, total,
                     SIGNAL_LABEL_W + SIGNAL_BAR_W + 120,
                     8 + (len(rows) + 1) * ROW_H, x, half)


@dataclass(frozen=True, slots=True)
class GraphNode:
    id: str
    title: str
    x: float
    y: float
    centre: bool
    readable: bool


@dataclass(frozen=True, slots=True)
class GraphEdge:
    x1: float
    y1: float
    x2: float
    y2: float
    link_type: str
    note: str
    outgoing: bool
    label_x: float
    label_y: float


@dataclass(frozen=True, slots=True)
class LinkGraph:
    nodes: list[GraphNode]
    edges: list[GraphEdge]
    width: int
    height: int


def link_graph(centre_id: str, centre_title: str,
               links: Sequence[tuple[str, str, str, bool]], titles: Mapping[str, str],
               *, width: int = 720) -> LinkGraph:
    """The entry in the middle, its neighbours on an ellipse around it.

    ``links``: (other id, link type, note, outgoing?). An edge stops short of
    the neighbour's circle so the arrowhead stays visible. One or two
    neighbours sit beside the entry on a short canvas; more go round it.
    """
    others = list(dict.fromkeys(other for other, _, _, _ in links))
    height = 150 if len(others) <= 2 else 360
    cx, cy = width / 2, height / 2
    rx, ry = width / 2 - 110, height / 2 - 45
    nodes = [GraphNode(centre_id, centre_title, cx, cy, True, True)]
    pos: dict[str, tuple[float, float]] = {}
    for i, other in enumerate(others):
        # Start at 3 o'clock so one or two neighbours sit level with the entry.
        angle = 2 * math.pi * i / max(len(others), 1)
        x, y = cx + rx * math.cos(angle), cy + ry * math.sin(angle)
        pos[other] = (x, y)
        nodes.append(GraphNode(other, titles.get(other, other), x, y, False, other in titles))
    edges = []
    seen_pairs: dict[str, int] = {}
    for other, link_type, note, outgoing in links:
        ox, oy = pos[other]
        (x1, y1), (x2, y2) = ((cx, cy), (ox, oy)) if outgoing else ((ox, oy), (cx, cy))
        dx, dy = x2 - x1, y2 - y1
        dist = math.hypot(dx, dy) or 1.0
        shrink = 16 / dist
        # Several links to one neighbour: offset each one's label so they do not overlap.
        k = seen_pairs.get(other, 0)
        seen_pairs[other] = k + 1
        edges.append(GraphEdge(x1 + dx * shrink, y1 + dy * shrink, x2 - dx * shrink, y2 - dy * shrink,
                               link_type, note, outgoing, (x1 + x2) / 2, (y1 + y2) / 2 - 4 + 14 * k))
    return LinkGraph(nodes, edges, width, height)
