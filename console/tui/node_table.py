"""A dense, Line-API node table: one line per node, only visible lines are drawn.

A DataTable repaint costs 50-100 ms at 4,096 rows whatever changed (../shared/STYLE.md); drawing
visible lines from a prebuilt style palette keeps a tick in a few milliseconds.
"""

from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from console.rows import NodeRow

COLUMNS: list[tuple[str, str, int]] = [
    # (header, NodeRow attribute, width)
    ("NODE", "node", 10),
    ("VERDICT", "verdict", 9),
    ("STATE", "state", 7),
    ("GPUS", "gpus", 5),
    ("UTIL", "util", 5),
    ("TEMP", "temp", 6),
    ("POWER", "power", 7),
    ("IB UP", "ib", 6),
    ("JOB", "job", 8),
    ("GAPS", "gaps", 5),
    ("AGE", "age", 5),
    ("REASONS", "reasons", 0),
]


def header_text() -> str:
    return " ".join(h.ljust(w) if w else h for h, _a, w in COLUMNS)


class NodeTable(ScrollView, can_focus=True):
    DEFAULT_CSS = """
    NodeTable { height: 1fr; }
    NodeTable > .nodetable--ok { color: $success; }
    NodeTable > .nodetable--degraded { color: $warning; }
    NodeTable > .nodetable--failed { color: $error; text-style: bold; }
    NodeTable > .nodetable--offline { color: $error; }
    NodeTable > .nodetable--stale { color: $text-muted; }
    NodeTable > .nodetable--cursor { background: $accent 40%; }
    NodeTable > .nodetable--text { color: $text; }
    """
    COMPONENT_CLASSES = {
        "nodetable--ok", "nodetable--degraded", "nodetable--failed", "nodetable--offline",
        "nodetable--stale", "nodetable--cursor", "nodetable--text",
    }
    BINDINGS = [
        Binding("up,k", "cursor(-1)", "Up", show=False),
        Binding("down,j", "cursor(1)", "Down", show=False),
        Binding("pageup", "cursor(-20)", "Page up", show=False),
        Binding("pagedown", "cursor(20)", "Page down", show=False),
        Binding("home", "cursor_to(0)", "Top", show=False),
        Binding("end", "cursor_to(-1)", "Bottom", show=False),
        Binding("enter", "select", "Detail", show=False),
    ]

    cursor: reactive[int] = reactive(0)

    class Selected(Message):
        def __init__(self, node_id: str) -> None:
            super().__init__()
            self.node_id = node_id

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rows: list[NodeRow] = []
        self._strips: dict[tuple[NodeRow, bool, int], Strip] = {}

    def set_rows(self, rows: list[NodeRow]) -> None:
        current = self.current_node
        self.rows = rows
        if current is not None:
            for i, row in enumerate(rows):
                if row.node == current:
                    self.cursor = i
                    break
        self.cursor = min(self.cursor, max(0, len(rows) - 1))
        self.virtual_size = Size(self.size.width, len(rows))
        if len(self._strips) > 4 * max(64, len(rows)):
            self._strips.clear()
        self.refresh()

    @property
    def current_node(self) -> str | None:
        if 0 <= self.cursor < len(self.rows):
            return self.rows[self.cursor].node
        return None

    def _style(self, verdict: str) -> Style:
        return self.get_component_rich_style(f"nodetable--{verdict}", partial=True)

    def render_line(self, y: int) -> Strip:
        index = y + self.scroll_offset.y
        width = self.size.width
        if index >= len(self.rows):
            return Strip.blank(width)
        row = self.rows[index]
        selected = index == self.cursor
        key = (row, selected, width)
        cached = self._strips.get(key)
        if cached is not None:
            return cached
        text_style = self._style("text")
        verdict_style = self._style(row.verdict)
        segments: list[Segment] = []
        for _header, attr, w in COLUMNS:
            value: str = getattr(row, attr)
            cell = (value[:w].ljust(w) if w else value) + " "
            style = verdict_style if attr in ("node", "verdict", "reasons") else text_style
            segments.append(Segment(cell, style))
        strip = Strip(segments).crop_extend(0, width, None)
        if selected:
            strip = strip.apply_style(self._style("cursor"))
        self._strips[key] = strip
        return strip

    def watch_cursor(self, old: int, new: int) -> None:
        self.refresh()
        self.scroll_to_region_if_needed(new)

    def scroll_to_region_if_needed(self, index: int) -> None:
        top = self.scroll_offset.y
        height = self.size.height
        if index < top:
            self.scroll_to(y=index, animate=False)
        elif index >= top + height:
            self.scroll_to(y=index - height + 1, animate=False)

    def action_cursor(self, delta: int) -> None:
        if self.rows:
            self.cursor = max(0, min(len(self.rows) - 1, self.cursor + delta))

    def action_cursor_to(self, index: int) -> None:
        if self.rows:
            self.cursor = index if index >= 0 else len(self.rows) - 1

    def action_select(self) -> None:
        node = self.current_node
        if node is not None:
            self.post_message(self.Selected(node))
