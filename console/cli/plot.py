"""``fleetdeck history NODE --plot``: the store's per-minute history as a terminal chart.

Drawn by plotext (a maintained terminal plotting library; textual-plotext wraps the same one for
the TUI), not hand-made axes. One line per GPU (or per IB port); without colour (piped, NO_COLOR)
each line gets its own marker so the series stay apart.
"""

from typing import Any

import plotext as plt

from fleetdeck.console.node_history import BY_KEY, Points, time_ticks
from fleetdeck.console.node_history import series as chart_series

CHART = {"util": "util", "temp": "temp", "power": "power", "clock": "clock", "ib": "ib_tx"}
"""``--metric`` to the chart it draws (console/node_history.py holds what each one means)."""
UNIT = {"util": "% (mean)", "temp": "°C (max)", "power": "W (mean)", "clock": "MHz (min)",
        "ib": f"{BY_KEY['ib_tx'].unit} transmitted (mean)"}
"""The y axis: unit, and how each minute's samples were folded (store.MINUTE_AGGREGATION)."""
MARKERS = ("•", "+", "x", "o", "*", "#", "@", "%", "&", "=")
XTICKS = 6


def series(rows: list[dict[str, Any]], metric: str) -> dict[str, Points]:
    """``{label: [(minute, value), ...]}`` in minute order, gaps (None) left out."""
    return chart_series(rows, BY_KEY[CHART[metric]])


def render(rows: list[dict[str, Any]], node: str, metric: str, *, width: int, height: int,
           color: bool) -> str:
    """The chart as text (ANSI colours when ``color``)."""
    lines = series(rows, metric)
    plt.clear_figure()
    plt.plot_size(max(40, width), max(10, height))
    plt.theme("pro" if color else "clear")
    minutes = sorted({m for pts in lines.values() for m, _ in pts})
    for i, (label, pts) in enumerate(lines.items()):
        xs = [m - minutes[0] for m, _ in pts]
        ys = [v for _, v in pts]
        if color:
            plt.plot(xs, ys, label=label)
        else:
            plt.plot(xs, ys, label=label, marker=MARKERS[i % len(MARKERS)])
    ticks = time_ticks(minutes[0], minutes[-1], XTICKS)
    plt.xticks([t for t, _ in ticks], [label for _, label in ticks])
    plt.title(f"{node} {metric} per minute (UTC)")
    plt.ylabel(UNIT[metric])
    text: str = plt.build()
    return text if color else plt.uncolorize(text)

