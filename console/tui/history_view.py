"""Node detail's history: the store's per-minute rows of one node as charts (textual-plotext)
over 15 min / 1 h / 24 h, with a time cursor whose values are printed above each chart.

What is charted and what the cursor reads is console/node_history.py; this module only lays
it out. The store is read in a worker (aiosqlite: the query runs in its own thread), for the
one node and span shown, when the view opens, when the span changes and every ``RELOAD_S``
while it is shown: a new row lands once a minute, so a faster rate would only cost reads.
"""

import math
import sqlite3
import time
from typing import TYPE_CHECKING, cast

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.color import Color
from textual.containers import Grid, Vertical, VerticalScroll
from textual.widgets import Static
from textual_plotext import PlotextPlot

from fleetdeck.console.node_history import (
    CHARTS,
    SPANS,
    Chart,
    Cursor,
    NodeHistory,
    Span,
    hhmm,
    load,
    next_span,
    short_labels,
    thin,
    time_ticks,
)

if TYPE_CHECKING:
    from fleetdeck.console.tui.app import FleetdeckApp

RELOAD_S = 20.0
WIDE = 120
"""From this many columns the charts go two abreast."""
MIN_CHART_ROWS = 10
"""Rows per chart, its values line included, below which a plot stops being readable."""
SERIES_COLOURS = (39, 208, 41, 170, 226, 51, 203, 147, 250, 130)
"""256-colour codes, one per series (GPU or port), used by the plot and by the value labels
above it (so the labels are the legend); chosen apart at 256 colours."""
BIG_STEP = 10
PLOT_AFTER_S = 0.15
"""A moving cursor updates the printed values at once and the plots (their cursor line) once
it has stood still this long: redrawing eight plots costs 100 ms or more."""
PLOT_CHECK_S = 0.05
"""How often the view looks whether a plot is due (``HistoryView._plot_if_due``): an interval,
not a one-shot timer per move. Textual 8.2's one-shot timer can end without calling back on a
loaded host, and the charts kept the old cursor's line until the next reload, ``RELOAD_S`` on
(docs/reliability.md, "The console's tick")."""
Y_LABELS = 8
"""Columns of a plot taken by its y-axis labels and frame."""
Y_TICKS = 6
"""The most y-axis labels a chart gets (fewer when it has fewer rows)."""
PLOT_FRAME_ROWS = 3
"""Rows of a plot that are not its canvas: the frame above and below, the time labels."""


class ChartBox(Vertical):
    """One chart: a line naming it with the values at the cursor, then the plot."""

    DEFAULT_CSS = """
    ChartBox { height: 100%; }
    ChartBox > .chart-values { height: auto; max-height: 3; }
    ChartBox > PlotextPlot { height: 1fr; }
    """

    def __init__(self, chart: Chart) -> None:
        super().__init__(id=f"chart-{chart.key}")
        self.chart = chart

    def compose(self) -> ComposeResult:
        yield Static(classes="chart-values")
        yield PlotextPlot()

    def draw_values(self, hist: NodeHistory, at: int | None) -> None:
        chart = self.chart
        per = hist.charts.get(chart.key, {})
        short = short_labels(list(per))
        line = Text()
        line.append(chart.title, "bold")
        line.append(f" {chart.unit}")
        if at is not None and per:
            # The values at the cursor (its time is in the line above the charts), each label
            # in its series' colour: the legend. "label:value" has no space in it, so a narrow
            # chart that wraps the line never parts a value from its label. One space between
            # values: with two, eight GPUs' clocks overran an 80-column chart by a value.
            for i, label in enumerate(per):
                line.append(" " if i else "  ")
                line.append(short[label], f"bold color({_colour(i)})")
                line.append(f":{chart.text(hist.value(chart.key, label, at))}")
        if not per:
            line.append("  no values in this span", "dim")
        self.query_one(".chart-values", Static).update(line)

    def draw_plot(self, hist: NodeHistory, at: int | None) -> None:
        chart = self.chart
        per = hist.charts.get(chart.key, {})
        plot = self.query_one(PlotextPlot)
        plt = plot.plt
        plt.clear_figure()
        # One point per cell (braille draws the line between): plotext's cost grows with the
        # points, about 17 ms a chart for a day thinned so, a second unthinned.
        columns = max(10, plot.size.width - Y_LABELS)
        for i, (_label, pts) in enumerate(per.items()):
            shown = thin(pts, hist.first, hist.span.minutes, columns, chart.fold)
            plt.plot([m - hist.first for m, _ in shown], [v for _, v in shown],
                     marker="braille", color=_colour(i))
        plt.xlim(0, hist.span.minutes)
        ticks = time_ticks(hist.first, hist.last, 7)
        plt.xticks([t for t, _ in ticks], [label for _, label in ticks])
        values = [v for pts in per.values() for _, v in pts]
        if values:
            # Our own y ticks: plotext's drop a label that falls on a row already labelled
            # (1980, 1707.5, 1435, 890 … with 1162.5 missing), so the axis read unevenly.
            lo = 0.0 if chart.counter else min(values)
            hi = max(1.0, *values) if chart.counter else max(values)
            rows = plot.size.height - PLOT_FRAME_ROWS
            levels, labels = y_ticks(lo, hi, rows)
            plt.ylim(levels[0], levels[-1])
            plt.yticks(levels, labels)
        if at is not None:
            # The theme's own text colour: white would vanish on a light theme.
            fg = Color.parse(self.app.theme_variables.get("foreground", "white")).rgb
            plt.vline(at - hist.first, fg)
        plot.refresh()


def y_ticks(lo: float, hi: float, rows: int) -> tuple[list[float], list[str]]:
    """Y ticks for a plot ``rows`` rows high, and their labels: evenly spaced round values
    (1, 2, 2.5, 4 or 5 times a power of ten apart) from at or below ``lo`` to at or above
    ``hi``, the first and the last at the ends of the axis, at most ``Y_TICKS`` of them, and
    as many as put each on a row of its own, the same number of rows apart (plotext drops a
    label that falls on a row already labelled, and rounds the others unevenly)."""
    if hi - lo < 1e-9:
        pad = max(1.0, abs(hi) * 0.05)
        lo, hi = lo - pad, hi + pad
    rows = max(2, rows)
    counts = [n for n in range(min(Y_TICKS, rows), 1, -1) if (rows - 1) % (n - 1) == 0]
    best: tuple[float, int, float, int] | None = None
    """(range wasted, -count, step, first multiple) of the best fit so far."""
    for n in counts:
        power = 10.0 ** math.floor(math.log10((hi - lo) / (n - 1)))
        for size in (nice * power * 10 ** k for k in range(3)
                     for nice in (1.0, 2.0, 2.5, 4.0, 5.0)):
            first = math.floor(lo / size + 1e-9)
            if (first + n - 1) * size >= hi - 1e-9:
                fit = ((n - 1) * size - (hi - lo), -n, size, first)
                if best is None or fit[:2] < best[:2]:
                    best = fit
                break
    assert best is not None  # n = 2 always fits
    _waste, minus_n, size, first = best
    ticks = [round((first + i) * size, 9) for i in range(-minus_n)]
    decimals = 0 if size >= 1 and size == int(size) else max(0, -math.floor(math.log10(size)) + 1)
    if decimals and all(abs(t * 10 ** (decimals - 1) - round(t * 10 ** (decimals - 1))) < 1e-6
                        for t in ticks):
        decimals -= 1  # 0.5 steps: "0.5", not "0.50"
    return ticks, [f"{t:.{decimals}f}" for t in ticks]


def _colour(i: int) -> int:
    return SERIES_COLOURS[i % len(SERIES_COLOURS)]


class HistoryView(Vertical, can_focus=True):
    """The charts of one node, or one sentence saying why there are none."""

    DEFAULT_CSS = """
    HistoryView { height: 1fr; }
    HistoryView > #history-head {
        height: 1; padding: 0 1; background: $boost; text-wrap: nowrap; text-overflow: ellipsis;
    }
    HistoryView > #history-note { height: auto; padding: 1 2; }
    HistoryView > VerticalScroll { height: 1fr; }
    HistoryView #history-charts { height: auto; grid-gutter: 0 2; padding: 0 1; }
    """

    BINDINGS = [
        Binding("s", "span", "Span"),
        Binding("left", "cursor(-1)", "Earlier", key_display="←"),
        Binding("right", "cursor(1)", "Later", key_display="→"),
        Binding("shift+left", f"cursor(-{BIG_STEP})", show=False),
        Binding("shift+right", f"cursor({BIG_STEP})", show=False),
        Binding("home", "oldest", show=False),
        Binding("end", "newest", "Newest"),
        Binding("up", "scroll(-1)", show=False),
        Binding("down", "scroll(1)", show=False),
        Binding("pageup", "page(-1)", show=False),
        Binding("pagedown", "page(1)", show=False),
    ]

    def __init__(self, node_id: str, span: Span = SPANS[0]) -> None:
        super().__init__(id="history")
        self.node_id = node_id
        self.span = span
        self.cursor = Cursor()
        self.hist: NodeHistory | None = None
        self.loads = 0
        """Store reads finished (tests wait on it)."""
        self.error: str | None = None
        """Why the last read failed, shown instead of the charts."""
        self.plotted: tuple[object, ...] | None = None
        """What the plots show (history, cursor minute, size): a redraw of the same is skipped."""
        self._plot_due: float | None = None
        """``time.monotonic()`` from which the plots are due at the cursor (``_plot_later``)."""

    @property
    def fleet(self) -> "FleetdeckApp":
        return cast("FleetdeckApp", self.app)

    def compose(self) -> ComposeResult:
        yield Static(id="history-head")
        yield Static(id="history-note")
        with VerticalScroll(can_focus=False), Grid(id="history-charts"):
            for chart in CHARTS:
                yield ChartBox(chart)

    def show_node(self, node_id: str) -> None:
        """The charts of ``node_id`` from now on, as a new view's would be: its span and cursor
        from the start, nothing of the node shown before (the node detail is reused:
        ``NodeDetailScreen.show_node``). A read of the old node still running is dropped."""
        self.workers.cancel_group(self, "history")
        self._plot_due = None
        self.node_id, self.span, self.cursor = node_id, SPANS[0], Cursor()
        self.hist, self.error, self.plotted = None, None, None
        for plot in self.query(PlotextPlot):
            # A plot drawn later than its values (``_plot`` waits for a layout) would show the
            # old node's lines for a frame.
            plot.plt.clear_figure()
            plot.refresh()
        self.query_one(VerticalScroll).scroll_home(animate=False, immediate=True)
        self._show()

    def on_mount(self) -> None:
        self.set_interval(RELOAD_S, self._tick_reload)
        self.set_interval(PLOT_CHECK_S, self._plot_if_due)
        self._show()

    def on_resize(self) -> None:
        self._layout()
        # The plots thin their points to their width, known once the layout has run.
        self.call_after_refresh(self._plot)

    def on_show(self) -> None:
        self.reload()

    def _tick_reload(self) -> None:
        if self.display and self.is_on_screen:
            self.reload()

    # --- reading the store ---------------------------------------------------------------------

    def why_none(self) -> str | None:
        """Why there is nothing to chart (one plain sentence), or None when the store is there."""
        app = self.fleet
        if app.stores.get(app.cluster) is None:
            return ("No history store: this console keeps none (started with --no-store, or a "
                    "replay), so there is no history to chart. Without --no-store the console "
                    "keeps a per-minute history of every node; a 'fleetdeck collect' store is "
                    "charted by 'fleetdeck history NODE --plot --db FILE'.")
        if app.session.store is None:
            problem = app.session.problems.get("store")
            return (f"The history store {app.stores[app.cluster]} is not open"
                    + (f": {problem.detail}." if problem else " (yet)."))
        return None

    def reload(self) -> None:
        """Read the node's rows over the span shown, in a worker (never on the event loop)."""
        store = self.fleet.session.store
        if store is None:
            self._show()
            return
        node, span, now = self.node_id, self.span, self.fleet.clock()

        async def read() -> None:
            try:
                hist = await load(store, node, span, now)
            except (sqlite3.Error, ValueError) as err:
                # A store that fails (or was closed under us) is a sentence here, not a dead
                # worker in the header: the session reports its own store problems.
                self.error = f"Cannot read the history store: {err}."
            else:
                self.error = None
                if span is self.span and node == self.node_id:
                    self.hist = hist
            self.loads += 1
            self._show()

        self.run_worker(read(), group="history", exclusive=True, exit_on_error=False)

    # --- showing ---------------------------------------------------------------------------------

    def _head(self) -> Text:
        t = Text()
        t.append(f"History of {self.node_id}", "bold")
        t.append(" · last ")
        for i, span in enumerate(SPANS):
            t.append("/" if i else "")
            t.append(span.label, "reverse bold" if span == self.span else "")
        t.append(" (s)")
        hist = self.hist
        at = self.cursor.where(hist) if hist is not None else None
        if at is not None:
            t.append(" · cursor ")
            t.append(f"{hhmm(at)} UTC", "bold")
            t.append(" newest" if self.cursor.following else "")
            t.append(" (←/→, shift+←/→ 10, end newest)", "dim")
        t.append(" · one row per minute from the store", "dim")
        return t

    def _show(self, plots_now: bool = True) -> None:
        if not self.is_mounted:
            return
        note = self.query_one("#history-note", Static)
        charts = self.query_one(VerticalScroll)
        self.query_one("#history-head", Static).update(self._head())
        why = self.why_none() or self.error
        hist = self.hist if why is None else None
        if why is None and (hist is None or hist.span != self.span):
            why = "Reading the store…"
        elif why is None and hist is not None and hist.empty:
            why = (f"No history of {self.node_id} in the last {self.span.label} yet: the "
                   "store gets one row per GPU and per IB port when each minute is over"
                   + ("" if self.span == SPANS[-1] else "; s shows a longer span") + ".")
        note.update(why or "")
        note.display = why is not None
        charts.display = why is None
        if why is None and hist is not None:
            at = self.cursor.where(hist)
            for box in self.query(ChartBox):
                box.draw_values(hist, at)
            self._layout()
            if plots_now:
                self._plot_due = None
                self._plot()
            else:
                self._plot_later()

    def _plot_later(self) -> None:
        self._plot_due = time.monotonic() + PLOT_AFTER_S

    def _plot_if_due(self) -> None:
        if self._plot_due is not None and time.monotonic() >= self._plot_due:
            self._plot_due = None
            self._plot()

    def _plot(self) -> None:
        hist = self.hist
        if hist is None or not self.is_mounted:
            return
        at = self.cursor.where(hist)
        sizes = tuple(plot.size for plot in self.query(PlotextPlot))
        if not all(size.width and size.height for size in sizes):
            self.call_after_refresh(self._plot)  # not laid out yet: its width decides the points
            return
        key = (hist.signature, at, sizes)
        if key == self.plotted:
            return
        self.plotted = key
        for box in self.query(ChartBox):
            box.draw_plot(hist, at)

    def _layout(self) -> None:
        grid = self.query_one("#history-charts", Grid)
        width = self.size.width
        cols = 2 if width >= WIDE else 1
        rows = math.ceil(len(CHARTS) / cols)
        avail = max(0, self.size.height - self.query_one("#history-head", Static).size.height)
        height = max(MIN_CHART_ROWS, avail // rows)
        grid.styles.grid_size_columns = cols
        grid.styles.grid_rows = str(height)
        grid.styles.height = height * rows

    # --- keys -----------------------------------------------------------------------------------

    def action_span(self) -> None:
        self.span = next_span(self.span)
        self.reload()
        self._show()

    def action_cursor(self, steps: int) -> None:
        if self.hist is not None:
            self.cursor.move(self.hist, steps)
            self._show(plots_now=False)

    def action_oldest(self) -> None:
        if self.hist is not None:
            self.cursor.oldest(self.hist)
            self._show(plots_now=False)

    def action_newest(self) -> None:
        self.cursor.newest()
        self._show(plots_now=False)

    def action_scroll(self, lines: int) -> None:
        self.query_one(VerticalScroll).scroll_relative(y=lines, animate=False)

    def action_page(self, pages: int) -> None:
        charts = self.query_one(VerticalScroll)
        charts.scroll_relative(y=pages * charts.size.height, animate=False)
