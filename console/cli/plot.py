"""``fleetdeck history NODE --plot``: the store's per-minute history as a terminal chart.

Drawn by plotext (a maintained terminal plotting library; textual-plotext wraps the same one for
the TUI), not hand-made axes. One line per GPU (or per IB port); without colour (piped, NO_COLOR)
each line gets its own marker so the series stay apart.
"""

from datetime import UTC, datetime
from typing import Any

import plotext as plt

COLUMN = {"util": "util", "temp": "temp_max", "power": "power", "clock": "sm_clock_min",
          "ib": "xmit_Bps"}
UNIT = {"util": "%", "temp": "°C (max)", "power": "W", "clock": "MHz (min)",
        "ib": "GB/s transmitted"}
MARKERS = ("•", "+", "x", "o", "*", "#", "@", "%", "&", "=")
XTICKS = 6


def series(rows: list[dict[str, Any]], metric: str) -> dict[str, list[tuple[int, float]]]:
    """``{label: [(minute, value), ...]}`` in minute order, gaps (None) left out."""
    key = "dev" if metric == "ib" else "gpu"
    scale = 1e-9 if metric == "ib" else 1.0
    out: dict[str, list[tuple[int, float]]] = {}
    for r in sorted(rows, key=lambda r: r["minute"]):
        value = r[COLUMN[metric]]
        if value is None:
            continue
        label = str(r[key]) if metric == "ib" else f"gpu{r[key]}"
        out.setdefault(label, []).append((int(r["minute"]), float(value) * scale))
    return dict(sorted(out.items(), key=lambda kv: _natural(kv[0])))


def _natural(label: str) -> tuple[str, int]:
    head = label.rstrip("0123456789")
    tail = label[len(head):]
    return head, int(tail) if tail else -1


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
    span = minutes[-1] - minutes[0]
    step = max(1, span // (XTICKS - 1)) if span else 1
    ticks = list(range(0, span + 1, step))
    plt.xticks(ticks, [_hhmm(minutes[0] + t) for t in ticks])
    plt.title(f"{node} {metric} per minute (UTC)")
    plt.ylabel(UNIT[metric])
    text: str = plt.build()
    return text if color else plt.uncolorize(text)


def _hhmm(minute: int) -> str:
    return datetime.fromtimestamp(minute * 60, UTC).strftime("%H:%M")
