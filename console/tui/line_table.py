"""A dense Line-API table: a fixed header line, one line per row, only visible lines are drawn.

Rows are arbitrary objects; the table asks for their key, cells and style only for the lines on
screen, so a 4,096-row table costs what its ~40 visible rows cost (docs/domain.md §7: a
DataTable repaint is 50-100 ms at that size whatever changed). Strips are cached by content.

Columns fit the width they get: on a narrow screen the columns with the highest ``drop`` rank
are hidden first (decoration before data) so the flexible last column keeps ``min`` cells; on a
wide one columns with ``grow`` widen to their content; a cell that still does not fit is cut
with "…", never silently.
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any, Generic, TypeVar

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.events import Click, MouseScrollDown, MouseScrollUp
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget

T = TypeVar("T")


def row_is_key(row: str) -> str:
    """The ``key`` of a table whose rows are their own keys (strings)."""
    return row


@dataclass(frozen=True)
class Column:
    title: str
    key: str
    width: int
    """0: take the rest of the line."""
    right: bool = False
    grow: int = 0
    """Widen up to this many cells to fit the content when the screen has room (0: never)."""
    drop: int = 0
    """Hidden on a narrow screen, highest rank first (0: always shown)."""
    min: int = 0
    """For the flexible column: the cells it keeps before other columns are hidden."""
    shrink: bool = False
    """Narrow to the content (never below the title) when the screen has room to grow the
    others: its ``width`` is for the widest value it may hold (a job's checkpoint ``400
    (30m00s)``), which most rows do not (``-``)."""


FLEX_MIN = 20
"""Cells the flexible column keeps (unless its ``min`` says otherwise) before columns drop."""
GROW_KEEP = 40
"""Growing columns never take the flexible column below this."""
MEASURE_ROWS = 500
"""Rows measured for the content width of growing columns."""
ELLIPSIS = "…"


def fit(text: str, width: int, right: bool = False) -> str:
    """``text`` padded to exactly ``width`` cells, or cut with "…" when it is longer."""
    if width <= 0:
        return ""
    if text.isascii():
        n = len(text)
        if n > width:
            return text[:width - 1] + ELLIPSIS
        return text.rjust(width) if right else text.ljust(width)
    n = cell_len(text)
    if n > width:
        return set_cell_size(text, width - 1) + ELLIPSIS
    pad = " " * (width - n)
    return pad + text if right else text + pad


BLANK = Style()
"""For padding: never a segment without a style (NO_COLOR's monochrome filter cannot take one)."""
OVERLAYS = ("cursor", "mark")
"""Styles applied over a whole row: only their background counts."""
STYLES = ("text", "muted", "ok", "degraded", "failed", "stale", "offline", "drain", "info",
          "warn", "error", "done", "header", "cursor", "mark", "sorted", "lastknown")


class LineTable(Widget, Generic[T], can_focus=True):
    COMPONENT_CLASSES = {f"linetable--{s}" for s in STYLES}
    BINDINGS = [
        Binding("up,k", "cursor(-1)", "Up", show=False),
        Binding("down,j", "cursor(1)", "Down", show=False),
        Binding("pageup,ctrl+b", "page(-1)", "Page up", show=False),
        Binding("pagedown,ctrl+f", "page(1)", "Page down", show=False),
        Binding("home,g", "cursor_to(0)", "Top", show=False),
        Binding("end,G", "cursor_to(-1)", "Bottom", show=False),
        Binding("enter", "select", "Open", show=False),
    ]

    class Selected(Message):
        def __init__(self, table: "LineTable[Any]", key: str) -> None:
            super().__init__()
            self.table = table
            self.key = key

        @property
        def control(self) -> "LineTable[Any]":
            return self.table

    class CursorMoved(Message):
        def __init__(self, table: "LineTable[Any]", key: str | None) -> None:
            super().__init__()
            self.table = table
            self.key = key

        @property
        def control(self) -> "LineTable[Any]":
            return self.table

    def __init__(
        self,
        columns: list[Column],
        *,
        key: Callable[[T], str],
        cells: Callable[[T], Sequence[str]],
        style: Callable[[T], str] = lambda _r: "text",
        cell_styles: Callable[[T], Mapping[str, str]] | None = None,
        markable: bool = False,
        open_label: str = "",
        move_label: str = "",
        id: str | None = None,
    ) -> None:
        """``open_label``, ``move_label``: what enter and ↑↓ do in this view, said in the
        footer (``⏎ Its nodes``, ``↑↓ Timeline``), as the overview's and the fabric's say
        theirs; '' keeps the key out of it. The jobs view's footer named only ``r Restart``
        and the incidents view's nothing of its own (a newcomer's run)."""
        super().__init__(id=id)
        # This table's own copy of the class's bindings (Textual's DOMNode.__init__ copies
        # them): a new list per key, never the class's list, which every table shares.
        shown = self._bindings.key_to_bindings
        if open_label:
            del shown["enter"]
            shown["enter"] = [Binding("enter", "select", open_label)]
        if move_label:
            del shown["up"]
            shown["up"] = [Binding("up", "cursor(-1)", move_label, key_display="↑↓")]
        self.columns = columns
        self._key = key
        self._cells = cells
        self._row_style = style
        self._cell_styles = cell_styles
        """A row's cells that differ from its style: ``{column key: style}``."""
        self.markable = markable
        self.rows: Sequence[T] = []
        self.marks: set[str] = set()
        self.cursor = 0
        self.touched = False
        """The cursor was moved (a key, a click, a jump to a row). Until then it stays on the
        first row as rows reorder: the jobs view opened on a job that had been first and kept
        it while a held-up job rose above it (a 3 a.m. drive)."""
        self.top = 0
        self.sort_key = ""
        self.sort_reverse = False
        self.empty_text = "nothing to show"
        self._strips: dict[tuple[Any, ...], Strip] = {}
        self._palette: dict[str, Style] = {}
        self._content: tuple[int, ...] = ()
        """Widest cell per column over the measured rows (growing columns only)."""
        self._shrunk_widest: dict[int, int] = {}
        """Per ``shrink`` column, the widest cell it has had: it narrows to that, so it does
        not move the columns after it each time a checkpoint's age crosses a minute."""
        self._layout: tuple[tuple[object, ...], list[int | None]] | None = None

    # --- data ---------------------------------------------------------------------------------

    def set_rows(self, rows: Sequence[T]) -> None:
        """Replace the rows; a cursor that was moved stays on the same key when it is still
        there, else on the next row still there; one never moved on the first row."""
        current = self.current_key if self.touched else None
        resized = len(rows) != len(self.rows)
        before, self.rows = self.rows, rows
        if any(c.grow for c in self.columns):
            self._measure()
        if current is not None and (self.cursor >= len(rows)
                                    or self._key(rows[self.cursor]) != current):
            i = self._find(current)
            self.cursor = self._next_left(before, self.cursor) if i is None else i
        self.cursor = max(0, min(self.cursor, len(rows) - 1))
        self._clamp_top()
        if len(self._strips) > 4096:
            self._strips.clear()
        self.refresh(layout=resized and self.styles.height is not None
                     and self.styles.height.is_auto)

    def show_head(self) -> None:
        """Scroll to the first row, the cursor kept on its row (scrolled only as far as it
        needs to stay in sight)."""
        self.top = 0
        self._clamp_top()
        self.refresh()

    def relayout(self) -> None:
        """Forget the layout (after ``columns`` changed)."""
        self._layout = None
        self._strips.clear()
        self.refresh()

    def _measure(self) -> None:
        # Only when this width leaves room to grow: measuring asks for cells row by row.
        widths = layout(self.columns, self.size.width - 2)
        flex = [w for c, w in zip(self.columns, widths, strict=True) if not c.width]
        if not flex or (flex[0] or 0) <= GROW_KEEP:
            if self._content:
                self._content = ()
                self._strips.clear()
            return
        content = [0] * len(self.columns)
        # The flexible column too: when its cells are short (a jobs table where nothing holds
        # a job up) the growing ones may take what it does not need (NODES was cut under an
        # empty HELD UP: a 3 a.m. drive).
        grow = [i for i, c in enumerate(self.columns) if c.grow or c.shrink or not c.width]
        for row in self.rows[:MEASURE_ROWS]:
            cells = self._cells(row)
            for i in grow:
                if i < len(cells):
                    content[i] = max(content[i], cell_len(cells[i]))
        for i, c in enumerate(self.columns):
            if c.shrink:
                content[i] = self._shrunk_widest[i] = max(content[i],
                                                          self._shrunk_widest.get(i, 0))
        if tuple(content) != self._content:
            self._content = tuple(content)
            self._strips.clear()

    def get_content_height(self, container: Any, viewport: Any, width: int) -> int:
        """``height: auto`` is the header and one line per row (the CSS caps it)."""
        return 1 + max(1, len(self.rows))

    @property
    def current_key(self) -> str | None:
        if 0 <= self.cursor < len(self.rows):
            return self._key(self.rows[self.cursor])
        return None

    @property
    def current_row(self) -> T | None:
        if 0 <= self.cursor < len(self.rows):
            return self.rows[self.cursor]
        return None

    def toggle_mark(self) -> None:
        key = self.current_key
        if key is None:
            return
        self.marks.symmetric_difference_update({key})
        self.action_cursor(1)
        self.refresh()

    def clear_marks(self) -> None:
        self.marks.clear()
        self.refresh()

    def _next_left(self, before: Sequence[T], at: int) -> int:
        """The index in ``rows`` of the first row after ``before[at]`` (the cursor's row, gone)
        that is still there, or past the last: the node list's cursor on a node retired
        (docs/protocol.md), left at its index, skipped one row for each row gone above it."""
        where = {self._key(row): i for i, row in enumerate(self.rows)}
        return next((where[k] for k in map(self._key, islice(before, at + 1, None))
                     if k in where), len(self.rows))

    def _find(self, key: str) -> int | None:
        """The index of the row with ``key``, or None."""
        rows = self.rows
        if self._key is row_is_key and isinstance(rows, (list, tuple)):
            # Rows that are their keys (the node list's 16,384 ids): .index in C, not a
            # key call per row (~4 ms after a reversed sort moved the cursor's node to the end).
            try:
                return rows.index(key)
            except ValueError:
                return None
        return next((i for i, row in enumerate(rows) if self._key(row) == key), None)

    def move_to_key(self, key: str) -> bool:
        i = self._find(key)
        if i is None:
            return False
        self.cursor = i
        self.touched = True
        self._clamp_top()
        self.refresh()
        return True

    # --- drawing ------------------------------------------------------------------------------

    def on_mount(self) -> None:
        self._palette.clear()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._palette.clear()
        self._strips.clear()

    def _style(self, name: str) -> Style:
        # Full (not partial) styles: theme colours with alpha or "auto" ($text-muted,
        # $boost …) are only resolved against the background there; partial ones came out
        # white, which made the header white on white and muted or stale rows look like text.
        style = self._palette.get(name)
        if style is None:
            full = self.get_component_rich_style(f"linetable--{name}")
            if name in OVERLAYS:
                full = Style(bgcolor=full.bgcolor)  # laid over a row: keep the row's colour
            style = self._palette[name] = full
        return style

    def _widths(self, width: int) -> list[int | None]:
        """Each column's width for a line of ``width`` cells; None for a hidden column."""
        sig = (width, self._content, self.sort_key)
        if self._layout is not None and self._layout[0] == sig:
            return self._layout[1]
        widths = self._room_for_arrow(layout(self.columns, width - 2, self._content))
        self._layout = (sig, widths)
        return widths

    def _room_for_arrow(self, widths: list[int | None]) -> list[int | None]:
        """The sorted column's ▼/▲ is all that says how the table is sorted: a column whose
        title fills its width (GPUS, UTIL) takes the cell it needs from the flexible column
        when that can spare it (a UX audit saw the arrow cut off there). Every such column
        takes its cell whichever is sorted, when the flexible column can spare them all, so
        the columns do not move a cell when the sort changes (an audit saw the rows shift);
        else the sorted one alone does."""
        flex = next((i for i, c in enumerate(self.columns) if not c.width), None)
        rest = None if flex is None else widths[flex]
        if flex is None or rest is None:
            return widths
        spare = rest - (self.columns[flex].min or FLEX_MIN)
        needs = {i: cell_len(c.title) + 1 - w for i, (c, w) in
                 enumerate(zip(self.columns, widths, strict=True))
                 if w is not None and i != flex and cell_len(c.title) + 1 > w}
        at = next((i for i, c in enumerate(self.columns) if c.key == self.sort_key), None)
        if sum(needs.values()) > spare:
            needs = {at: needs[at]} if at in needs and needs[at] <= spare else {}
        if not needs:
            return widths
        out = [None if w is None else w + needs.get(i, 0) for i, w in enumerate(widths)]
        out[flex] = rest - sum(needs.values())
        return out

    @property
    def hidden(self) -> list[str]:
        """Titles of the columns the current width hides."""
        widths = self._widths(self.size.width)
        return [c.title for c, w in zip(self.columns, widths, strict=True) if w is None]

    @property
    def visible_rows(self) -> int:
        return max(1, self.size.height - 1)

    def _clamp_top(self) -> None:
        h = self.visible_rows
        if self.cursor < self.top:
            self.top = self.cursor
        elif self.cursor >= self.top + h:
            self.top = self.cursor - h + 1
        self.top = max(0, min(self.top, max(0, len(self.rows) - h)))

    def on_resize(self) -> None:
        self._clamp_top()
        self._strips.clear()
        self._layout = None

    def _header(self, width: int) -> Strip:
        widths = self._widths(width)
        style = self._style("header")
        sorted_style = self._style("sorted")
        segs = [Segment("  ", style)]
        titles_end = 2  # where the last title's text ends: the position counter goes after it
        x = 2
        for col, w in zip(self.columns, widths, strict=True):
            if w is None:
                continue
            title = col.title
            is_sorted = col.key == self.sort_key
            if is_sorted:
                # Too narrow for both (no cell to spare, _room_for_arrow): the title gives way.
                if cell_len(title) + 1 > w:
                    title = set_cell_size(title, max(0, w - 1))
                title += "▲" if self.sort_reverse else "▼"
            text = fit(title, w, col.right) + " "
            segs.append(Segment(text, sorted_style if is_sorted else style))
            titles_end = x + len(text.rstrip())
            x += len(text)
        position = f" {self.cursor + 1 if self.rows else 0}/{len(self.rows)} "
        hidden = sum(w is None for w in widths)
        note = f" {hidden} hidden ·{position}" if hidden else position
        strip = Strip(segs).crop_extend(0, width, style)
        for shown in (note, position):
            if width - len(shown) > titles_end + 1:
                strip = Strip.join([strip.crop(0, width - len(shown)),
                                    Strip([Segment(shown, style)])])
                break
        return strip

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y == 0:
            return self._header(width)
        index = self.top + y - 1
        if index >= len(self.rows):
            if index == 0 and not self.rows:
                return Strip([Segment(f"  {self.empty_text}", self._style("muted"))]
                             ).crop_extend(0, width, BLANK)
            return Strip.blank(width, BLANK)
        row = self.rows[index]
        key = self._key(row)
        cells = tuple(self._cells(row))
        row_style = self._row_style(row)
        own = self._cell_styles(row) if self._cell_styles is not None else {}
        selected = index == self.cursor and self.has_focus_within_screen
        marked = key in self.marks
        cache_key = (cells, row_style, tuple(own.items()), selected, marked, width,
                     self.sort_key)  # the sorted column may be a cell wider (_room_for_arrow)
        cached = self._strips.get(cache_key)
        if cached is not None:
            return cached
        style = self._style(row_style)
        gutter = "+ " if marked else "  "
        segs = [Segment(gutter, self._style("mark") if marked else style)]
        for col, w, cell in zip(self.columns, self._widths(width), cells, strict=False):
            if w is None:
                continue
            cell_style = self._style(own[col.key]) if col.key in own else style
            segs.append(Segment(fit(cell, w, col.right) + " ", cell_style))
        pad = BLANK
        if marked or selected:
            # Over the row's own style (its background included), not under it.
            overlay = self._style("cursor") if selected else self._style("mark")
            segs = list(Segment.apply_style(segs, post_style=overlay))
            pad = style + overlay
        strip = Strip(segs).crop_extend(0, width, pad)
        self._strips[cache_key] = strip
        return strip

    @property
    def has_focus_within_screen(self) -> bool:
        return self.has_focus or (self.screen.focused is None)

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()

    # --- actions ------------------------------------------------------------------------------

    def _moved(self) -> None:
        self.touched = True
        self._clamp_top()
        self.refresh()
        self.post_message(self.CursorMoved(self, self.current_key))

    def action_cursor(self, delta: int) -> None:
        if self.rows:
            self.cursor = max(0, min(len(self.rows) - 1, self.cursor + delta))
            self._moved()

    def action_page(self, direction: int) -> None:
        self.action_cursor(direction * max(1, self.visible_rows - 1))

    def action_cursor_to(self, index: int) -> None:
        if self.rows:
            self.cursor = index if index >= 0 else len(self.rows) - 1
            self._moved()

    def action_select(self) -> None:
        key = self.current_key
        if key is not None:
            self.post_message(self.Selected(self, key))

    def on_click(self, event: Click) -> None:
        if event.y >= 1:
            index = self.top + event.y - 1
            if 0 <= index < len(self.rows):
                self.cursor = index
                self._moved()
                if event.chain >= 2:
                    self.action_select()

    def on_mouse_scroll_down(self, event: MouseScrollDown) -> None:
        self.action_cursor(3)

    def on_mouse_scroll_up(self, event: MouseScrollUp) -> None:
        self.action_cursor(-3)


def layout(columns: Sequence[Column], avail: int, content: Sequence[int] = ()
           ) -> list[int | None]:
    """Column widths for ``avail`` cells (one space follows each column); None = hidden.

    Narrow: hide columns by ``drop`` rank (highest first) until the flexible column has its
    ``min`` (or FLEX_MIN) cells. Wide: growing columns widen to their content while the flexible
    column keeps at least GROW_KEEP cells (and its ``min``)."""
    flex = next((i for i, c in enumerate(columns) if not c.width), None)
    flex_min = 0 if flex is None else (columns[flex].min or FLEX_MIN)
    widths: list[int | None] = [c.width if c.width else 0 for c in columns]

    def used() -> int:
        return sum(w + 1 for i, w in enumerate(widths) if w is not None and i != flex)

    droppable = sorted((c.drop, i) for i, c in enumerate(columns) if c.drop and c.width)
    while used() + flex_min > avail and droppable:
        _rank, i = droppable.pop()
        widths[i] = None
    # At 160 columns the jobs table cut NODES (gpu[0009,0011-00…) and what held a job up
    # while CKPT kept 14 cells for "-" and JOBID 8 for "4101" (a 3 a.m. drive): columns sized
    # for their widest value give back what their cells do not use, to the names and the
    # flexible column. Only where the content was measured, i.e. where there is room to grow.
    for i, c in enumerate(columns):
        w = widths[i]
        if c.shrink and w is not None and i != flex and i < len(content):
            widths[i] = min(w, max(cell_len(c.title), content[i]))
    # Names and node lists are what a row is found by: at 160 columns the jobs table cut
    # "llama-70b-pretrain" to "llama-70b-p…" beside "llama-70b" while the flexible column kept
    # a third of the line (an operator's walkthrough). They grow first; the flexible column
    # keeps GROW_KEEP cells, where what holds a job up names its node first.
    keep = max(flex_min, GROW_KEEP)
    if flex is not None and flex < len(content):
        # What its cells need (its title at least), when that is less; never below its min.
        keep = max(flex_min, min(keep, max(content[flex], len(columns[flex].title))))
    budget = avail - used() - 1 - keep if flex is not None else avail - used()
    for i, c in enumerate(columns):
        w = widths[i]
        if budget <= 0:
            break
        if not c.grow or w is None or i >= len(content) or content[i] <= w:
            continue
        extra = min(budget, min(c.grow, content[i]) - w)
        if extra > 0:
            widths[i] = w + extra
            budget -= extra
    if flex is not None:
        widths[flex] = max(0, avail - used() - 1)
    return widths
