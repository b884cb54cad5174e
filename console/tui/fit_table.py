"""A rich renderable table that fits the width it is given, dropping decoration before data.

Rich's own ``Table`` shrinks every column alike when the line is short, so at 80 columns the GPU
number, util, watts and temperature turned into "…" while the sparklines stayed. Here each
width is chosen on purpose: sparklines (decoration) shrink, then go; then the data columns with
the highest ``drop`` rank; a column that still does not fit is cut with "…", never silently.
The title names what the width hides.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.text import Text

GAP = 2
SPARK_MIN = 6
"""A sparkline narrower than this is not worth its columns: it goes."""


@dataclass
class FitColumn:
    title: str
    cells: Sequence[Text] = ()
    """One cell per row (data columns)."""
    drop: int = 0
    """Data: hidden on a narrow line, highest rank first (0: always shown)."""
    right: bool = False
    spark: int = 0
    """Decoration: a sparkline of at most this many cells, drawn by ``draw(width)``."""
    draw: Callable[[int], Sequence[Text]] | None = field(default=None, repr=False)

    def natural(self) -> int:
        return max([len(self.title), *(c.cell_len for c in self.cells)])


@dataclass
class Fitted:
    widths: list[int | None]
    """Per column; None when hidden."""
    spark: int
    hidden: list[str]


def fit_columns(columns: Sequence[FitColumn], width: int) -> Fitted:
    data = [i for i, c in enumerate(columns) if not c.spark]
    deco = [i for i, c in enumerate(columns) if c.spark]
    widths: list[int | None] = [None] * len(columns)
    for i in data:
        widths[i] = columns[i].natural()

    def used() -> int:
        shown = [w for w in widths if w is not None]
        return sum(shown) + GAP * max(0, len(shown) - 1)

    droppable = sorted((columns[i].drop, i) for i in data if columns[i].drop)
    hidden: list[str] = []
    while used() > width and droppable:
        _rank, i = droppable.pop()
        widths[i] = None
        hidden.append(columns[i].title)
    spark = 0
    if deco:
        room = (width - used()) // len(deco) - GAP
        spark = min(room, *(columns[i].spark for i in deco))
        if spark < SPARK_MIN:
            spark = 0
            hidden.append("sparklines")
        else:
            for i in deco:
                widths[i] = max(spark, len(columns[i].title))
    over = used() - width
    if over > 0:
        # Only columns that are never dropped are left: cut the widest with "…".
        shown = [i for i, w in enumerate(widths) if w is not None]
        if shown:
            widest = max(shown, key=lambda i: widths[i] or 0)
            widths[widest] = max(1, (widths[widest] or 0) - over)
    return Fitted(widths, spark, hidden)


def _cell(text: Text, width: int, right: bool) -> Text:
    out = text.copy()
    if out.cell_len > width:
        out.truncate(width, overflow="ellipsis")
    pad = width - out.cell_len
    if pad > 0:
        if right:
            out = Text(" " * pad) + out
        else:
            out.append(" " * pad)
    return out


class FitTable:
    """Title, header and rows as plain lines of text laid out by ``fit_columns``."""

    def __init__(self, title: str, columns: Sequence[FitColumn], rows: int, note: str = ""
                 ) -> None:
        self.title = title
        self.columns = columns
        self.rows = rows
        self.note = note

    def lines(self, width: int) -> list[Text]:
        fitted = fit_columns(self.columns, width)
        cols: list[tuple[FitColumn, int, Sequence[Text]]] = []
        for c, w in zip(self.columns, fitted.widths, strict=True):
            if w is None:
                continue
            cells = c.cells if not c.spark or c.draw is None else c.draw(fitted.spark)
            cols.append((c, w, cells))
        title = Text(self.title, "bold")
        if self.note and fitted.spark:
            title.append(f"  {self.note.format(n=fitted.spark)}", "dim")
        if fitted.hidden:
            title.append(f"  (hidden at this width: {', '.join(fitted.hidden)})", "dim")
        title.truncate(width, overflow="ellipsis")
        out = [title]
        gap = Text(" " * GAP)
        header = gap.join(_cell(Text(c.title), w, c.right) for c, w, _cells in cols)
        header.stylize("bold")
        out.append(header)
        for r in range(self.rows):
            out.append(gap.join(_cell(cells[r] if r < len(cells) else Text(""), w, c.right)
                                for c, w, cells in cols))
        for line in out:
            line.rstrip()
            line.no_wrap = True
            line.overflow = "ellipsis"
        return out

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        text = Text("\n").join(self.lines(options.max_width))
        text.no_wrap = True
        yield text

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        full = max(sum(c.natural() if not c.spark else max(c.spark, len(c.title))
                       for c in self.columns) + GAP * (len(self.columns) - 1), len(self.title))
        return Measurement(min(20, full), full)
