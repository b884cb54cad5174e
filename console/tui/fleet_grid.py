"""The fleet grid: one character per GPU, eight per node, drawn with the Line API.

Each line is ``<first node of the line> ■■■■□□□□ ■■■▲■■■■ …``. Cell codes come from
``console.rows.gpu_cells`` (cached per node until its telemetry, verdict or drain changes) and map
to a palette of styles built once from the theme, so a full repaint of 4,096 nodes (32,768 cells)
costs a few milliseconds, and only visible lines are ever drawn.

Every cell state has a glyph of its own as well as a colour (GLYPHS): at 256 or 16 colours,
on a monochrome terminal (``NO_COLOR``) and for colour-blind operators the shape still tells
busy from idle and failed from offline. Metric buckets are bar heights (▁ … █) for the same
reason. The cursor shows the glyph under it, reversed.
"""

from collections.abc import Sequence
from itertools import islice
from typing import TYPE_CHECKING

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.cache import LRUCache
from textual.events import Click, MouseScrollDown, MouseScrollUp
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget

from fleetdeck.console.health import Verdict
from fleetdeck.console.judgements import worst_first
from fleetdeck.console.rows import HEAT_LEVELS, METRIC_RANGE, Cell, gpu_cells

if TYPE_CHECKING:
    from collections.abc import Callable

    from fleetdeck.console.state import FleetState, NodeState

GLYPHS = {
    Cell.OK: "■", Cell.IDLE: "□", Cell.DEGRADED: "▲", Cell.FAILED: "✖", Cell.DRAINING: "◐",
    Cell.DRAINED: "○", Cell.STALE: "·", Cell.OFFLINE: "⊘", Cell.MISSING: "x", Cell.EMPTY: "?",
    Cell.RAIL_FAILED: "↯", Cell.RAIL_DEGRADED: "≈", Cell.OUT: "⊟", Cell.NO_GPU: "-",
}
"""One glyph per cell state: distinct shapes, so no state depends on colour alone."""
HEAT_GLYPHS = "▁▂▃▄▅▆▇█"
"""Metric buckets, low to high: the height reads without colour."""
BLANK = Style()
"""For gaps and padding: never a segment without a style (NO_COLOR's filter cannot take one)."""
LINE_CACHE = 4096
"""Rendered grid lines kept (least recently used go first)."""
HEALTH_NAMES = {
    Cell.OK: "ok", Cell.IDLE: "idle", Cell.DEGRADED: "degraded", Cell.FAILED: "failed",
    Cell.STALE: "stale", Cell.OFFLINE: "offline", Cell.DRAINED: "drained",
    Cell.DRAINING: "draining", Cell.MISSING: "missing", Cell.EMPTY: "empty",
    Cell.RAIL_FAILED: "rail-failed", Cell.RAIL_DEGRADED: "rail-degraded", Cell.OUT: "out",
    Cell.NO_GPU: "no-gpu",
}
METRICS = ("health", "util", "temp", "power")
LEGEND = ((Cell.OK, "busy"), (Cell.IDLE, "idle"), (Cell.OUT, "out"),
          (Cell.DEGRADED, "degraded"), (Cell.FAILED, "failed"), (Cell.RAIL_FAILED, "IB fault"),
          (Cell.RAIL_DEGRADED, "IB warn"),
          (Cell.DRAINING, "draining"), (Cell.DRAINED, "drained"),
          (Cell.STALE, "stale"), (Cell.OFFLINE, "offline"), (Cell.MISSING, "missing"),
          (Cell.EMPTY, "waiting"), (Cell.NO_GPU, "no GPU"))


CELL_BADNESS = {Cell.FAILED: 0, Cell.MISSING: 1, Cell.RAIL_FAILED: 2, Cell.DEGRADED: 3,
                Cell.RAIL_DEGRADED: 4, Cell.OFFLINE: 5, Cell.STALE: 6, Cell.DRAINING: 7,
                Cell.DRAINED: 8}
"""Which GPU of a node the cursor lands on when jumping to it: the worst cell first."""


class FleetGrid(Widget, can_focus=True):
    COMPONENT_CLASSES = {f"fleetgrid--{n}" for n in HEALTH_NAMES.values()} | {
        f"fleetgrid--heat-{i}" for i in range(HEAT_LEVELS)} | {
        "fleetgrid--label", "fleetgrid--cursor"}
    BINDINGS = [
        Binding("left,h", "move(0, -1)", "Left", show=False),
        Binding("right,l", "move(0, 1)", "Right", show=False),
        Binding("up,k", "move(-1, 0)", "Up", show=False),
        Binding("down,j", "move(1, 0)", "Down", show=False),
        Binding("pageup", "move(-10, 0)", "Page up", show=False),
        Binding("pagedown", "move(10, 0)", "Page down", show=False),
        # As the lists have them: 16,384 nodes are 1,024 rows of grid, and G to reach the
        # last node did nothing (a 16,384-node drive).
        Binding("home,g", "ends(-1)", "First node", show=False),
        Binding("end,G", "ends(1)", "Last node", show=False),
        Binding("enter", "select", "Detail"),
        Binding("m", "cycle_metric", "Colour by"),
        # One footer entry per pair (the first of each, its key_display naming both): a
        # Binding.Group would add three widgets per pair to every repaint of the footer.
        Binding("w", "worst(1)", "Worst", key_display="w/W"),
        Binding("W", "worst(-1)", "Previous worst", show=False),
        Binding("right_curly_bracket", "group('leaf', 1)", "Leaf", key_display="{/}"),
        Binding("left_curly_bracket", "group('leaf', -1)", "Previous leaf", show=False),
        Binding("right_parenthesis", "group('rack', 1)", "Rack", key_display="(/)"),
        Binding("left_parenthesis", "group('rack', -1)", "Previous rack", show=False),
    ]

    class Selected(Message):
        def __init__(self, node_id: str, gpu: int) -> None:
            super().__init__()
            self.node_id = node_id
            self.gpu = gpu

    class CursorMoved(Message):
        def __init__(self, node_id: str | None, gpu: int) -> None:
            super().__init__()
            self.node_id = node_id
            self.gpu = gpu

    def __init__(self, state: "Callable[[], FleetState]", *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._state = state
        self.node_ids: Sequence[str] = ()
        self.metric = "health"
        self.cursor_node = 0
        self.cursor_gpu = 0
        self.top = 0
        self.gpus_per_node = 8
        self._codes: dict[str, tuple[tuple[object, ...], tuple[int, ...]]] = {}
        self._palette: list[Style] = []
        self._line_cache: LRUCache[tuple[object, ...], Strip] = LRUCache(LINE_CACHE)
        self._where: dict[str, tuple[object, str, str]] = {}
        """node -> (its birth, leaf, rack): read again only when a new birth arrives."""
        self._worst_at: str | None = None
        """Where the last ``w``/``W`` put the cursor: only from there does ``w`` go on."""
        self._worst_passed: frozenset[str] = frozenset()
        """The nodes ``w``/``W`` had passed, the cursor's included: one ranked above the cursor
        now that is not among them is a worse one since, and ``w`` starts over from it."""

    # --- data ---------------------------------------------------------------------------------

    def set_nodes(self, node_ids: Sequence[str]) -> None:
        current = self.current_node
        if node_ids is not self.node_ids and node_ids != self.node_ids:
            before, self.node_ids = self.node_ids, node_ids
            if current is not None and current in node_ids:
                self.cursor_node = node_ids.index(current)
            elif current is not None:
                # Its node gone (retired): on the next one still there. Left at its index, it
                # skipped one node more for each node gone before it.
                left = set(node_ids)
                after = next((n for n in islice(before, self.cursor_node + 1, None)
                              if n in left), None)
                self.cursor_node = len(node_ids) if after is None else node_ids.index(after)
            self.cursor_node = max(0, min(self.cursor_node, len(node_ids) - 1))
        self._clamp_top()
        self.refresh()

    @property
    def current_node(self) -> str | None:
        if 0 <= self.cursor_node < len(self.node_ids):
            return self.node_ids[self.cursor_node]
        return None

    def codes(self, st: "NodeState") -> tuple[int, ...]:
        # Health colours follow the node's shape; metric colours follow every sample.
        sig = (st.shape_rev if self.metric == "health" else st.revision, self.metric)
        hit = self._codes.get(st.node_id)
        if hit is not None and hit[0] == sig:
            return hit[1]
        codes = gpu_cells(st, self.metric)
        self._codes[st.node_id] = (sig, codes)
        return codes

    # --- geometry -----------------------------------------------------------------------------

    @property
    def label_width(self) -> int:
        longest = max((len(n) for n in self.node_ids[:64]), default=7)
        return longest + 1

    @property
    def per_line(self) -> int:
        usable = self.size.width - self.label_width
        return max(1, usable // (self.gpus_per_node + 1))

    @property
    def lines(self) -> int:
        """Lines the whole grid takes."""
        return (len(self.node_ids) + self.per_line - 1) // self.per_line

    @property
    def rows_shown(self) -> int:
        """Lines of nodes on screen: all but the last when the grid does not fit, which says
        how many more there are (``_more_line``)."""
        h = max(1, self.size.height)
        return h - 1 if h >= 2 and self.lines > h else h

    def _clamp_top(self) -> None:
        h = self.rows_shown
        line = self.cursor_node // self.per_line
        if line < self.top:
            self.top = line
        elif line >= self.top + h:
            self.top = line - h + 1
        self.top = max(0, min(self.top, max(0, self.lines - h)))

    def _more_line(self, width: int) -> Strip:
        """The rows above and below the screen: at 80x24 the demo's grid showed 8 of its 10
        rows with nothing saying more existed (a fresh-clone walk-through)."""
        above = self.top
        below = max(0, self.lines - self.top - self.rows_shown)
        words = []
        if below:
            words.append(f"↓ {below} more row{'s' if below != 1 else ''}")
        if above:
            words.append(f"↑ {above} row{'s' if above != 1 else ''} above")
        text = " · ".join(words) + " (arrows, j/k or the wheel scroll)"
        style = self.get_component_rich_style("fleetgrid--label")
        return Strip([Segment(text, style)]).crop_extend(0, width, BLANK)

    def on_resize(self) -> None:
        self._line_cache.clear()
        self._clamp_top()

    # --- drawing ------------------------------------------------------------------------------

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._palette = []
        self._line_cache.clear()

    def _build_palette(self) -> list[Style]:
        palette = [Style()] * (Cell.HEAT0 + HEAT_LEVELS)
        # Full styles: colours with alpha or "auto" resolve only against the background.
        for code, name in HEALTH_NAMES.items():
            palette[code] = self.get_component_rich_style(f"fleetgrid--{name}")
        for i in range(HEAT_LEVELS):
            palette[Cell.HEAT0 + i] = self.get_component_rich_style(f"fleetgrid--heat-{i}")
        return palette

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y >= self.rows_shown:
            return self._more_line(width)
        per_line = self.per_line
        first = (self.top + y) * per_line
        if first >= len(self.node_ids):
            return Strip.blank(width, BLANK)
        if not self._palette:
            self._palette = self._build_palette()
        palette = self._palette
        nodes = self._state().nodes
        ids = self.node_ids[first:first + per_line]
        line_codes = []
        for node_id in ids:
            st = nodes.get(node_id)
            line_codes.append(self.codes(st) if st is not None else (Cell.EMPTY,) * 8)
        cursor = (self.cursor_node - first, self.cursor_gpu) if (
            first <= self.cursor_node < first + per_line and self.has_focus) else None
        key = (first, ids[0], tuple(line_codes), cursor, width, self.metric)
        cached = self._line_cache.get(key)
        if cached is not None:
            return cached
        label_style = self.get_component_rich_style("fleetgrid--label")
        segs = [Segment(ids[0].ljust(self.label_width), label_style)]
        for n, codes in enumerate(line_codes):
            run_code = -1
            run = 0
            for g, code in enumerate(codes):
                if cursor is not None and cursor == (n, g):
                    if run:
                        segs.append(Segment(_glyphs(run_code, run), palette[run_code]))
                        run = 0
                    cur = self.get_component_rich_style("fleetgrid--cursor", partial=True)
                    segs.append(Segment(_glyphs(code, 1), palette[code] + cur))
                    run_code = -1
                    continue
                if code == run_code:
                    run += 1
                else:
                    if run:
                        segs.append(Segment(_glyphs(run_code, run), palette[run_code]))
                    run_code, run = code, 1
            if run:
                segs.append(Segment(_glyphs(run_code, run), palette[run_code]))
            segs.append(Segment(" ", BLANK))
        strip = Strip(segs).crop_extend(0, width, BLANK)
        self._line_cache[key] = strip
        return strip

    def legend(self) -> Text:
        if not self._palette:
            self._palette = self._build_palette()
        p = self._palette
        text = Text()
        if self.metric == "health":
            for code, label in LEGEND:
                text.append(_glyphs(code, 1), p[code])
                text.append(f"{label} ")
            return text
        lo, hi = METRIC_RANGE[self.metric]
        unit = {"util": "%", "temp": "°C", "power": "W"}[self.metric]
        text.append(f"{self.metric} {lo:g}{unit} ")
        for i in range(HEAT_LEVELS):
            text.append(_glyphs(Cell.HEAT0 + i, 1), p[Cell.HEAT0 + i])
        text.append(f" {hi:g}{unit}  ")
        text.append(_glyphs(Cell.EMPTY, 1), p[Cell.EMPTY])
        text.append("no data ")
        text.append(_glyphs(Cell.MISSING, 1), p[Cell.MISSING])
        text.append("missing")
        return text

    # --- actions ------------------------------------------------------------------------------

    def _moved(self) -> None:
        self._clamp_top()
        self.refresh()
        self.post_message(self.CursorMoved(self.current_node, self.cursor_gpu))

    def action_move(self, lines: int, gpus: int) -> None:
        if not self.node_ids:
            return
        n = self.gpus_per_node
        pos = self.cursor_node * n + self.cursor_gpu + gpus
        pos = max(0, min(len(self.node_ids) * n - 1, pos))
        node, gpu = divmod(pos, n)
        node = max(0, min(len(self.node_ids) - 1, node + lines * self.per_line))
        self.cursor_node, self.cursor_gpu = node, gpu
        self._moved()

    def action_ends(self, step: int) -> None:
        """The first node's first GPU (``step`` < 0) or the last node's last one."""
        if self.node_ids:
            last = step > 0
            self.cursor_node = len(self.node_ids) - 1 if last else 0
            self.cursor_gpu = self.gpus_per_node - 1 if last else 0
            self._moved()

    def move_to(self, index: int, gpu: int | None = None) -> None:
        """Put the cursor on node ``index`` of the grid (its worst GPU unless ``gpu``)."""
        if not 0 <= index < len(self.node_ids):
            return
        if gpu is None:
            st = self._state().nodes.get(self.node_ids[index])
            cells = gpu_cells(st) if st is not None else ()
            gpu = min(range(len(cells)), key=lambda g: (CELL_BADNESS.get(cells[g], 9), g),
                      default=0)
        self.cursor_node, self.cursor_gpu = index, gpu
        self._moved()

    def worst(self) -> list[str]:
        """Nodes that are not OK, worst first: what ``w``/``W`` step through."""
        nodes = self._state().nodes
        bad = [st for node_id in self.node_ids
               if (st := nodes.get(node_id)) is not None and st.verdict is not Verdict.OK
               and not st.unread_talking]
        bad.sort(key=worst_first(self._state()))
        return [st.node_id for st in bad]

    def action_worst(self, step: int) -> None:
        """Jump to the worst node (and its worst GPU); again, the next worst (``W``: back)."""
        order = self.worst()
        if not order:
            self.notify("no node needs attention: every node is ok")
            return
        current = self.current_node
        # "Again" is a w after a w: from a sick node the cursor was moved to (or starts on),
        # w went to the node after it in the order, not to the worst (a 3 a.m. drive).
        # A worse node since the last w starts over from it, as the fabric view's w does; one
        # passed that got better, or two that swapped places, do not (a review: w went back
        # to nodes already seen each time the head of the order changed).
        again = (current is not None and current == self._worst_at and current in order
                 and self._worst_passed.issuperset(order[:order.index(current)]))
        at = order.index(current) if current is not None and again else (-1 if step > 0 else 0)
        i = (at + step) % len(order)
        target = order[i]
        self.move_to(self.node_ids.index(target))
        self._worst_at = target
        self._worst_passed = (self._worst_passed if again else frozenset()).union(order[:i + 1])

    def where(self, index: int, kind: str) -> str:
        """The leaf (``kind`` "leaf") or rack of node ``index``, from its birth."""
        node_id = self.node_ids[index]
        st = self._state().nodes.get(node_id)
        birth = st.birth if st is not None else None
        hit = self._where.get(node_id)
        if hit is None or hit[0] is not birth:
            topo = birth.topology if birth is not None else None
            hit = self._where[node_id] = (birth, (topo.leaf if topo else "") or "(no leaf)",
                                          (topo.rack if topo else "") or "(no rack)")
        return hit[1] if kind == "leaf" else hit[2]

    def place(self, index: int) -> str:
        """Where node ``index`` stands, "leaf40 rack157", for the line under the grid: on a
        1,024-node fleet `}` and `)` moved the cursor from leaf to leaf and rack to rack, and
        nothing on the screen said which one it had reached (a 21-node row starts mid-leaf).
        A name that does not say its kind gets it ("rack r04"); a node without a topology in
        its birth, nothing."""
        parts = []
        for kind in ("leaf", "rack"):
            name = self.where(index, kind)
            if name == f"(no {kind})":
                continue
            parts.append(name if name.startswith(kind) else f"{kind} {name}")
        return " ".join(parts)

    def action_group(self, kind: str, step: int) -> None:
        """Page by leaf or rack in grid order: forward, the first node of the next group;
        back, the first node of this group (of the previous one when already there)."""
        if not self.node_ids:
            return
        i = self.cursor_node
        here = self.where(i, kind)
        if step > 0:
            j = i + 1
            while j < len(self.node_ids) and self.where(j, kind) == here:
                j += 1
            if j >= len(self.node_ids):
                self.notify(f"last {kind}: {here}")
                return
        else:
            j = i
            while j > 0 and self.where(j - 1, kind) == here:
                j -= 1
            if j == i:
                if i == 0:
                    self.notify(f"first {kind}: {here}")
                    return
                prev = self.where(i - 1, kind)
                j = i - 1
                while j > 0 and self.where(j - 1, kind) == prev:
                    j -= 1
        self.move_to(j, self.cursor_gpu)

    def action_select(self) -> None:
        node = self.current_node
        if node is not None:
            self.post_message(self.Selected(node, self.cursor_gpu))

    def action_cycle_metric(self) -> None:
        self.metric = METRICS[(METRICS.index(self.metric) + 1) % len(METRICS)]
        self._line_cache.clear()
        self.refresh()
        self.post_message(self.CursorMoved(self.current_node, self.cursor_gpu))

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()

    def on_click(self, event: Click) -> None:
        x = event.x - self.label_width
        if x < 0:
            return
        per = self.gpus_per_node + 1
        if event.y >= self.rows_shown:
            return  # the line of rows above and below
        node = (self.top + event.y) * self.per_line + x // per
        gpu = x % per
        if gpu < self.gpus_per_node and node < len(self.node_ids):
            self.cursor_node, self.cursor_gpu = node, gpu
            self._moved()
            if event.chain >= 2:
                self.action_select()

    def on_mouse_scroll_down(self, event: MouseScrollDown) -> None:
        self.action_move(3, 0)

    def on_mouse_scroll_up(self, event: MouseScrollUp) -> None:
        self.action_move(-3, 0)


_GLYPH_OF = [GLYPHS.get(code, "■") for code in range(Cell.HEAT0)] + list(HEAT_GLYPHS)
_RUNS = [[glyph * i for i in range(65)] for glyph in _GLYPH_OF]


def _glyphs(code: int, n: int) -> str:
    """``n`` cells of state or bucket ``code``."""
    runs = _RUNS[code]
    return runs[n] if n < len(runs) else _GLYPH_OF[code] * n
