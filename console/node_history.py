"""A node's per-minute history from the store, as charts show it: which series, over which
span, and what a time cursor reads.

Node detail's history charts (console/tui/history_view.py) and ``fleetdeck history --plot``
(console/cli/plot.py) both draw from here, so what a chart means is decided once. Everything
but :func:`load` is pure and works on the rows ``Store.gpu_history`` / ``Store.port_history``
return (one row per GPU, or per IB port, per minute; docs/architecture.md, "The store").
"""

import asyncio
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from fleetdeck.console.rows import IB_SCALE, IB_UNIT, gbit_text
from fleetdeck.console.store import Store
from fleetdeck.hostlist import natural_key


@dataclass(frozen=True)
class Span:
    label: str
    seconds: int

    @property
    def minutes(self) -> int:
        return self.seconds // 60


SPANS = (Span("15 min", 900), Span("1 h", 3600), Span("24 h", 86_400))
"""What node detail's span key cycles through, shortest first."""


def next_span(span: Span) -> Span:
    """The span after ``span`` in :data:`SPANS` (after the longest, the shortest again)."""
    i = SPANS.index(span) if span in SPANS else -1
    return SPANS[(i + 1) % len(SPANS)]


@dataclass(frozen=True)
class Chart:
    key: str
    title: str
    unit: str
    table: Literal["gpu", "port"]
    """Which store table the series come from: one series per GPU, or per IB port."""
    column: str
    scale: float = 1.0
    digits: int = 0
    """Decimals when a value is printed (at the cursor, in a table)."""
    counter: bool = False
    """A count per minute (errors): its axis starts at 0."""
    fold: Literal["max", "min", "mean"] = "max"
    """How minutes that share one plotted column are drawn (:func:`thin`): the direction that
    is bad for this metric (hottest, slowest clock), so a thinned chart never hides a spike."""

    fmt: Callable[[float], str] | None = None
    """Formats a scaled value instead of ``digits`` (IB throughput: as the live table)."""

    def text(self, value: float | None) -> str:
        if value is None:
            return "-"
        return self.fmt(value) if self.fmt is not None else f"{value:.{self.digits}f}"


CHARTS = (
    Chart("util", "GPU utilisation", "%", "gpu", "util", fold="mean"),
    Chart("temp", "GPU temperature (max)", "°C", "gpu", "temp_max"),
    Chart("power", "GPU power", "W", "gpu", "power"),
    Chart("clock", "SM clock (min)", "MHz", "gpu", "sm_clock_min", fold="min"),
    # Gb/s as the live port table and the link rate (rows.IB_UNIT), not GB/s: a UX audit
    # read 25 GB/s here against 200 Gb/s live for the same traffic.
    Chart("ib_tx", "IB transmit", IB_UNIT, "port", "xmit_Bps", scale=IB_SCALE, fmt=gbit_text,
          fold="mean"),
    Chart("ib_rx", "IB receive", IB_UNIT, "port", "rcv_Bps", scale=IB_SCALE, fmt=gbit_text,
          fold="mean"),
    Chart("ib_symbol", "IB symbol errors", "per min", "port", "symbol_errors", counter=True),
    Chart("ib_downed", "IB link downed", "per min", "port", "link_downed", counter=True),
)
BY_KEY = {c.key: c for c in CHARTS}

Points = list[tuple[int, float]]
"""``[(minute, value), ...]`` in minute order; a minute is ``unix seconds // 60``."""


def series(rows: Iterable[dict[str, Any]], chart: Chart) -> dict[str, Points]:
    """``{label: points}`` of one chart, labels in natural order (gpu2 before gpu10), minutes
    without a value (None: not reported that minute) left out."""
    key = "dev" if chart.table == "port" else "gpu"
    out: dict[str, Points] = {}
    for r in sorted(rows, key=lambda r: r["minute"]):
        value = r[chart.column]
        if value is None:
            continue
        label = str(r[key]) if chart.table == "port" else f"gpu{r[key]}"
        out.setdefault(label, []).append((int(r["minute"]), float(value) * chart.scale))
    return dict(sorted(out.items(), key=lambda kv: natural_key(kv[0])))


def thin(points: Points, first: int, minutes: int, columns: int,
         fold: Literal["max", "min", "mean"]) -> Points:
    """At most ``columns`` points: the minutes of a window ``minutes`` long from ``first`` fall
    into ``columns`` equal buckets, each drawn as one point at its first minute with the
    ``fold`` of its values. A day is 1,440 points per series; a plot 70 cells wide cannot show
    more than 140 (braille), and drawing all of them costs a second per refresh."""
    if columns <= 0 or len(points) <= columns:
        return points
    width = minutes / columns
    buckets: dict[int, list[float]] = {}
    for minute, value in points:
        buckets.setdefault(int((minute - first) / width), []).append(value)
    out: Points = []
    for b, values in sorted(buckets.items()):
        v = (max(values) if fold == "max" else min(values) if fold == "min"
             else sum(values) / len(values))
        out.append((first + int(b * width), v))
    return out


def short_labels(labels: Sequence[str]) -> dict[str, str]:
    """Each label without what all of them start with (``gpu3`` -> ``3``, ``mlx5_ib2`` ->
    ``2``), so eight values fit on one line; unchanged when that would leave one empty."""
    if len(labels) < 2:
        return {label: label for label in labels}
    prefix = labels[0]
    for label in labels[1:]:
        while not label.startswith(prefix):
            prefix = prefix[:-1]
    # Never cut inside a number: gpu10 and gpu11 are "10" and "11", not "0" and "1".
    prefix = prefix.rstrip("0123456789")
    if any(len(label) == len(prefix) for label in labels):
        return {label: label for label in labels}
    return {label: label[len(prefix):] for label in labels}


def hhmm(minute: int) -> str:
    return datetime.fromtimestamp(minute * 60, UTC).strftime("%H:%M")


TICK_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 180, 240, 360, 720)
"""Minutes between x-axis ticks: round clock times (04:15, 04:30), never 04:04, 04:19."""


def time_ticks(first: int, last: int, count: int = 6) -> list[tuple[int, str]]:
    """At most about ``count`` x-axis ticks between two minutes, on round clock times, as
    ``(minutes after first, "HH:MM")``."""
    span = max(1, last - first)
    step = next((s for s in TICK_STEPS if span / s <= max(1, count - 1)), TICK_STEPS[-1])
    start = -(-first // step) * step  # the first multiple of step at or after first
    return [(m - first, hhmm(m)) for m in range(start, last + 1, step)]


@dataclass
class NodeHistory:
    """What the store holds for one node over one span, ready to chart."""

    node: str
    span: Span
    first: int
    """The window's first minute (``now`` minus the span)."""
    last: int
    """The minute ``now`` falls in (its row is written once it is over)."""
    charts: dict[str, dict[str, Points]] = field(default_factory=dict)
    minutes: list[int] = field(default_factory=list)
    """Minutes with at least one row, in order: where the cursor can stand."""
    rows: int = 0
    _values: dict[str, dict[str, dict[int, float]]] = field(default_factory=dict, repr=False)

    @property
    def signature(self) -> tuple[object, ...]:
        """Equal for two reads that would draw the same charts (the store adds whole minutes)."""
        return (self.node, self.span, self.first, self.rows,
                self.minutes[-1] if self.minutes else None)

    @property
    def empty(self) -> bool:
        return not self.minutes

    def labels(self, chart: str) -> list[str]:
        return list(self.charts.get(chart, {}))

    def value(self, chart: str, label: str, minute: int) -> float | None:
        """The value of one series at one minute; None when that minute has none."""
        return self._values.get(chart, {}).get(label, {}).get(minute)

    def at(self, minute: int) -> dict[str, dict[str, float | None]]:
        """Every chart's values at ``minute``: ``{chart: {label: value or None}}``."""
        return {key: {label: self.value(key, label, minute) for label in per}
                for key, per in self.charts.items()}


def build(node: str, span: Span, now: float, gpu_rows: Sequence[dict[str, Any]],
          port_rows: Sequence[dict[str, Any]]) -> NodeHistory:
    last = int(now // 60)
    first = last - span.minutes
    gpu_rows = [r for r in gpu_rows if r["minute"] >= first]
    port_rows = [r for r in port_rows if r["minute"] >= first]
    hist = NodeHistory(node, span, first, last)
    for chart in CHARTS:
        per = series(gpu_rows if chart.table == "gpu" else port_rows, chart)
        hist.charts[chart.key] = per
        hist._values[chart.key] = {label: dict(pts) for label, pts in per.items()}
    hist.minutes = sorted({int(r["minute"]) for r in (*gpu_rows, *port_rows)})
    hist.rows = len(gpu_rows) + len(port_rows)
    return hist


async def load(store: Store, node: str, span: Span, now: float) -> NodeHistory:
    """One node's rows over one span: two indexed queries (in aiosqlite's thread), then the
    series built in a thread too (a day of a node is 23,000 rows, tens of milliseconds), so
    the event loop that calls this never waits on either."""
    since = now - span.seconds
    gpus = await store.gpu_history(node, since)
    ports = await store.port_history(node, since)
    return await asyncio.to_thread(build, node, span, now, gpus, ports)


@dataclass
class Cursor:
    """A time cursor over a :class:`NodeHistory`: it stands on a minute that has data, or
    follows the newest one (``minute`` None) so new rows move it along."""

    minute: int | None = None

    @property
    def following(self) -> bool:
        return self.minute is None

    def where(self, hist: NodeHistory) -> int | None:
        """The minute the cursor reads: its own, moved onto the nearest minute with data at or
        before it (the span may have changed under it), or the newest."""
        if hist.empty:
            return None
        if self.minute is None:
            return hist.minutes[-1]
        i = bisect_left(hist.minutes, self.minute)
        if i < len(hist.minutes) and hist.minutes[i] == self.minute:
            return self.minute
        return hist.minutes[max(0, i - 1)]

    def move(self, hist: NodeHistory, steps: int) -> None:
        """``steps`` minutes-with-data later (positive) or earlier; past the newest it follows
        again, before the oldest it stays on the oldest."""
        here = self.where(hist)
        if here is None:
            return
        i = hist.minutes.index(here) + steps
        if i >= len(hist.minutes) - 1:
            self.minute = None
        else:
            self.minute = hist.minutes[max(0, i)]

    def newest(self) -> None:
        self.minute = None

    def oldest(self, hist: NodeHistory) -> None:
        if not hist.empty:
            self.minute = hist.minutes[0] if len(hist.minutes) > 1 else None
