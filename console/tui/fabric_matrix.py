"""The fabric matrix: rail switches x nodes, one glyph per port, drawn with the Line API.

The layout (which leaf groups side by side, how many nodes a cell stands for) is
``fabric_map.plan``; this widget only draws it: per band a header line naming the leaf groups,
then one line per rail (``r2 ■■✖✖✖■ ■■■■■■ …``), each block of a line being one switch. A
suspected switch's row is marked (▶) and drawn on a red background. Only visible lines are
drawn and lines are cached by content, so a repaint costs what the screen shows, not the fleet.
"""

from collections.abc import Iterable

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.cache import LRUCache
from textual.events import Click, MouseScrollDown, MouseScrollUp
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget

from fleetdeck.console.fabric_map import (
    BAD,
    GAP,
    PORT_NAMES,
    Block,
    Column,
    FabricMap,
    MatrixPlan,
    NodeFabric,
    Port,
    block_width,
    column_codes,
    label_width,
    plan,
    suspected,
    worst_node,
)
from fleetdeck.console.tui.line_table import fit
from fleetdeck.console.tui.theme import PORT_GLYPHS, PORT_WORDS, SUSPECT_MARK


def _short(label: str, width: int) -> str:
    """A leaf group's name, or its number when the block is narrower (``leaf31`` -> ``31``)."""
    if len(label) <= width:
        return label
    digits = label[len(label.rstrip("0123456789")):]
    return digits if digits and len(digits) <= width else label


BLANK = Style()
"""For gaps and padding: never a segment without a style (NO_COLOR's filter cannot take one)."""
LEGEND = (Port.OK, Port.ERRORS, Port.ERRORING, Port.FLAPPING, Port.DOWN, Port.SILENT,
          Port.WAITING)


class FabricMatrix(Widget, can_focus=True):
    COMPONENT_CLASSES = {f"fabricmatrix--{n}" for n in PORT_NAMES.values()} | {
        "fabricmatrix--label", "fabricmatrix--header", "fabricmatrix--suspect",
        "fabricmatrix--suspect-label", "fabricmatrix--cursor"}
    BINDINGS = [
        Binding("left,h", "move(0, -1)", "Left", show=False),
        Binding("right,l", "move(0, 1)", "Right", show=False),
        Binding("up,k", "move(-1, 0)", "Up", show=False),
        Binding("down,j", "move(1, 0)", "Down", show=False),
        Binding("pageup", "band(-1)", "Page up", show=False),
        Binding("pagedown", "band(1)", "Page down", show=False),
        Binding("right_curly_bracket", "block(1)", "Leaf", key_display="{/}"),
        Binding("left_curly_bracket", "block(-1)", "Previous leaf", show=False),
        Binding("w", "worst(1)", "Worst", key_display="w/W"),
        Binding("W", "worst(-1)", "Previous worst", show=False),
        Binding("enter", "select", "Node"),
    ]

    class Selected(Message):
        def __init__(self, node_id: str, port: str) -> None:
            super().__init__()
            self.node_id = node_id
            self.port = port

    class CursorMoved(Message):
        pass

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.map: FabricMap | None = None
        self.plan: MatrixPlan | None = None
        self.band = 0
        self.rail_index = 0
        self.cell = 0
        """Cell index within the cursor's band."""
        self.top = 0
        self._worst_at: tuple[int, int, int] | None = None
        """Where the last ``w``/``W`` put the cursor: only from there does ``w`` go on."""
        self._worst_passed: frozenset[tuple[int, int, int]] = frozenset()
        """The cells ``w``/``W`` had passed, the cursor's included: one ranked above the cursor
        now that is not among them is a worse problem since, and ``w`` starts over from it."""
        self._codes: dict[int, tuple[int, ...]] = {}
        """``id(column)`` -> its codes, for the columns of the current plan (which keeps them
        alive). Not the Column: its hash is that of every node name in it, recomputed on each
        look-up, and each line looks up every column of its band."""
        self._column_of: dict[str, Column] | None = None
        """Node -> the plan's column holding it (built when a map moves some nodes)."""
        self._places: list[list[tuple[int, int, int]]] = []
        """Per band, per cell: (block, column, x)."""
        self._planned: tuple[object, ...] = ()
        self._planned_members: dict[str, tuple[str, ...]] | None = None
        self._palette: dict[int, Style] = {}
        self._line_cache: LRUCache[tuple[object, ...], Strip] = LRUCache(1024)

    # --- data ---------------------------------------------------------------------------------

    def set_map(self, fm: FabricMap) -> None:
        """A new picture of the fabric (after the fleet changed): the layout is kept while the
        members and the size are the same, the cells are recomputed."""
        here = self.cursor()
        old, self.map = self.map, fm
        if (old is not None and fm.nodes is old.nodes and fm.rails == old.rails
                and self._codes):
            # The same layout: only the columns of nodes whose state moved are worked out
            # again. A refresh of a 16,384-node fabric worked out every visible column
            # (~25 ms of the view's paint under a stream, bench/console_scale.py).
            self._forget(_moved_nodes(old.overrides, fm.overrides))
            if fm.suspects != old.suspects or fm.recovered != old.recovered:
                self._line_cache.clear()  # rail labels and cells are marked by them
        else:
            self._codes = {}
            self._line_cache.clear()
        self._replan()
        if here is not None:
            self._put_cursor(*here)
        self._clamp()
        self.refresh()

    def _replan(self) -> None:
        fm = self.map
        if fm is None:
            return
        key = (self.size.width, self.size.height, tuple(fm.rails),
               tuple((leaf, len(fm.members[leaf])) for leaf in fm.leaves))
        # The members themselves, not only how many: a node that leaves a leaf group as another
        # joins it keeps the count. fabric_map hands the same dict until a birth changes.
        if key == self._planned and fm.members is self._planned_members and (
                self.plan is not None):
            return
        self._planned = key
        self._planned_members = fm.members
        self.plan = plan(fm, self.size.width, max(1, self.size.height))
        self._codes = {}
        self._column_of = None
        self._line_cache.clear()
        self._places = []
        lw = label_width(self.plan.rails)
        cw = self.plan.cell_width
        for band in self.plan.bands:
            cells: list[tuple[int, int, int]] = []
            x = lw
            for bi, block in enumerate(band):
                x += GAP
                for ci in range(len(block.columns)):
                    cells.append((bi, ci, x + ci * cw))
                x += block_width(block, cw)
            self._places.append(cells)

    def codes(self, column: Column) -> tuple[int, ...]:
        hit = self._codes.get(id(column))
        if hit is None:
            assert self.map is not None and self.plan is not None
            hit = self._codes[id(column)] = column_codes(self.map, column, self.plan.rails)
        return hit

    def _forget(self, nodes: Iterable[str]) -> None:
        """Drop the codes of the columns holding ``nodes`` (the lines keyed by their codes
        miss the cache on their own)."""
        if self.plan is None:
            return
        column_of = self._column_of
        for node in nodes:
            if column_of is None:
                column_of = self._column_of = {
                    n: c for band in self.plan.bands for b in band for c in b.columns
                    for n in c.nodes}
            column = column_of.get(node)
            if column is not None:
                self._codes.pop(id(column), None)

    # --- the cursor ---------------------------------------------------------------------------

    def cursor(self) -> tuple[Column, int] | None:
        """The column and rail under the cursor."""
        p = self.plan
        if p is None or not p.bands or not self._places[self.band]:
            return None
        bi, ci, _x = self._places[self.band][self.cell]
        return p.bands[self.band][bi].columns[ci], p.rails[self.rail_index]

    def cursor_block(self) -> Block | None:
        p = self.plan
        if p is None or not p.bands or not self._places[self.band]:
            return None
        return p.bands[self.band][self._places[self.band][self.cell][0]]

    def _put_cursor(self, column: Column, rail: int) -> None:
        """Back on the cell holding ``column``'s first node (after a new plan), same rail."""
        p = self.plan
        if p is None:
            return
        first = column.nodes[0] if column.nodes else None
        for b, band in enumerate(p.bands):
            for c, (bi, ci, _x) in enumerate(self._places[b]):
                if first in band[bi].columns[ci].nodes or (
                        first is None and band[bi].columns[ci] == column):
                    self.band, self.cell = b, c
                    self.rail_index = p.rails.index(rail) if rail in p.rails else 0
                    return

    def move_to_node(self, node: str, rail: int) -> bool:
        p = self.plan
        if p is None:
            return False
        for b, band in enumerate(p.bands):
            for c, (bi, ci, _x) in enumerate(self._places[b]):
                if node in band[bi].columns[ci].nodes:
                    self.band, self.cell = b, c
                    self.rail_index = p.rails.index(rail) if rail in p.rails else 0
                    self._moved()
                    return True
        return False

    def _clamp(self) -> None:
        p = self.plan
        if p is None or not p.bands:
            self.band = self.cell = self.rail_index = self.top = 0
            return
        self.band = max(0, min(self.band, len(p.bands) - 1))
        self.cell = max(0, min(self.cell, len(self._places[self.band]) - 1))
        self.rail_index = max(0, min(self.rail_index, len(p.rails) - 1))
        per = 1 + len(p.rails)
        h = max(1, self.size.height)
        first = self.band * per
        line = first + 1 + self.rail_index
        if first < self.top:
            self.top = first
        elif line >= self.top + h:
            self.top = line - h + 1
        self.top = max(0, min(self.top, max(0, p.lines - h)))

    def _moved(self) -> None:
        self._clamp()
        self.refresh()
        self.post_message(self.CursorMoved())

    def action_move(self, rails: int, cells: int) -> None:
        p = self.plan
        if p is None or not p.bands:
            return
        if cells:
            c = self.cell + cells
            if c >= len(self._places[self.band]) and self.band + 1 < len(p.bands):
                self.band, c = self.band + 1, 0
            elif c < 0 and self.band > 0:
                self.band -= 1
                c = len(self._places[self.band]) - 1
            self.cell = c
        if rails:
            r = self.rail_index + rails
            if r >= len(p.rails) and self.band + 1 < len(p.bands):
                self.band, r = self.band + 1, 0
                self.cell = self._same_x(self.band - 1, self.band)
            elif r < 0 and self.band > 0:
                self.band, r = self.band - 1, len(p.rails) - 1
                self.cell = self._same_x(self.band + 1, self.band)
            self.rail_index = r
        self._moved()

    def _same_x(self, from_band: int, to_band: int) -> int:
        x = self._places[from_band][min(self.cell, len(self._places[from_band]) - 1)][2]
        cells = self._places[to_band]
        return min(range(len(cells)), key=lambda i: abs(cells[i][2] - x), default=0)

    def action_band(self, step: int) -> None:
        if self.plan is not None:
            self.band = max(0, min(len(self.plan.bands) - 1, self.band + step))
            self._moved()

    def action_block(self, step: int) -> None:
        """To the first cell of the next (previous) leaf group, across bands."""
        if self.plan is None or not self.plan.bands:
            return
        here = self._places[self.band][self.cell][0]
        order = [(b, c) for b in range(len(self._places))
                 for c, (bi, ci, _x) in enumerate(self._places[b]) if ci == 0]
        at = next(i for i, (b, c) in enumerate(order)
                  if b == self.band and self._places[b][c][0] == here)
        target = order[max(0, min(len(order) - 1, at + step))]
        if at + step >= len(order) or target == (self.band, self.cell):
            # Said, as the overview's grid says it: `}` on the last group did nothing, with
            # no word why (a newcomer's run).
            self.notify(f"{'last' if step > 0 else 'first'} leaf group")
            return
        self.band, self.cell = target
        self._moved()

    def bad_cells(self) -> list[tuple[int, int, int]]:
        """(band, cell, rail index) of every cell that is not ok: suspected switches first,
        each once (its first port: the arrows walk the rest of its row), then down, flapping,
        erroring; in reading order among equals. A switch's 16 down ports stood between the
        operator and the one flapping link elsewhere."""
        p, fm = self.plan, self.map
        if p is None or fm is None:
            return []
        found: list[tuple[tuple[int, int, int, int], tuple[int, int, int]]] = []
        switches: set[str] = set()
        for b, band in enumerate(p.bands):
            for c, (bi, ci, _x) in enumerate(self._places[b]):
                column = band[bi].columns[ci]
                for r, code in enumerate(self.codes(column)):
                    if code >= BAD:
                        sus = suspected(fm, column, p.rails[r])
                        if sus:  # the switch's own text: a band holds several leaf groups
                            if sus in switches:
                                continue
                            switches.add(sus)
                        found.append(((0 if sus else 1, -code, b, c), (b, c, r)))
        found.sort()
        return [where for _key, where in found]

    def action_worst(self, step: int) -> None:
        order = self.bad_cells()
        if not order:
            self.notify("every port is up and without errors")
            return
        here = (self.band, self.cell, self.rail_index)
        # "Again" is a w after a w, as on the overview's grid: from a bad port the cursor was
        # moved to, w went on past the suspected switch instead of to it (a 3 a.m. drive).
        # A worse problem since the last w (a rail switch died while the operator was
        # elsewhere) starts over from it: the demo's leaf04-r5 was skipped for the next
        # port after the one w had reached minutes before (a newcomer run).
        again = (here in order and here == self._worst_at
                 and self._worst_passed.issuperset(order[:order.index(here)]))
        at = order.index(here) if again else (-1 if step > 0 else 0)
        i = (at + step) % len(order)
        self.band, self.cell, self.rail_index = self._worst_at = order[i]
        self._worst_passed = (self._worst_passed if again else frozenset()).union(order[:i + 1])
        self._moved()

    def selected_port(self) -> tuple[str, str] | None:
        """(node, ``dev:port`` or '') that enter opens: the cell's worst port on its rail."""
        here, fm = self.cursor(), self.map
        if here is None or fm is None:
            return None
        column, rail = here
        node = worst_node(fm, column, rail)
        if node is None:
            return None
        bad = fm.port(node, rail)
        return node, bad.port if bad is not None else ""

    def action_select(self) -> None:
        hit = self.selected_port()
        if hit is not None:
            self.post_message(self.Selected(*hit))

    # --- drawing ------------------------------------------------------------------------------

    def on_resize(self) -> None:
        here = self.cursor()
        self._line_cache.clear()
        self._replan()
        if here is not None:
            self._put_cursor(*here)
        self._clamp()
        self.refresh()
        self.post_message(self.CursorMoved())

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._palette = {}
        self._line_cache.clear()

    def _style(self, name: str) -> Style:
        return self.get_component_rich_style(f"fabricmatrix--{name}")

    def _code_style(self, code: int) -> Style:
        if not self._palette:
            self._palette = {c: self._style(n) for c, n in PORT_NAMES.items()}
        return self._palette[code]

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        p, fm = self.plan, self.map
        if p is None or fm is None:
            return Strip.blank(width, BLANK)
        per = 1 + len(p.rails)
        line = self.top + y
        band, row = divmod(line, per)
        if band >= len(p.bands):
            return Strip.blank(width, BLANK)
        blocks = p.bands[band]
        cursor = (self.cell if self.band == band and self.has_focus
                  and row - 1 == self.rail_index else None)
        if row == 0:
            key: tuple[object, ...] = ("h", band, width, tuple(
                bool(self._suspect_rails(b)) for b in blocks))
        else:
            key = ("r", band, row, width, cursor,
                   tuple(self.codes(c) for b in blocks for c in b.columns))
        hit = self._line_cache.get(key)
        if hit is not None:
            return hit
        strip = (self._header(blocks, p) if row == 0
                 else self._rail_line(blocks, p, row - 1, cursor))
        strip = strip.crop_extend(0, width, BLANK)
        self._line_cache[key] = strip
        return strip

    def _suspect_rails(self, block: Block) -> set[int]:
        fm, p = self.map, self.plan
        assert fm is not None and p is not None
        # A recovered switch is not marked: its cells say what its ports are (the overview's
        # fabric panel reads the same judgement, SuspectSwitch.recovered).
        return {r for r in p.rails for leaf in block.leaves
                if (sw := f"{leaf}-r{r}") in fm.suspects and sw not in fm.recovered}

    def _header(self, blocks: list[Block], p: MatrixPlan) -> Strip:
        lw = label_width(p.rails)
        segs = []
        lead_before: str | None = None
        for i, block in enumerate(blocks):
            w = block_width(block, p.cell_width)
            hot = bool(self._suspect_rails(block))
            style = self._style("suspect-label" if hot else "header")
            before = (lw if i == 0 else 0) + GAP
            label = _short(block.label, w)
            digits = block.label[len(block.label.rstrip("0123456789")):]
            if len(label) > w and len(digits) > w:
                # A number longer than its block (leaf100 over 2 cells) reads as on a ruler:
                # whole where its leading digits change, over the room before it, then its
                # last digits ("99100 01 02"). Cut, it read "l…" from leaf100 on (a 3 a.m.
                # drive at 2,048 nodes in 128 leaf groups).
                lead = digits[:-w]
                whole = lead != lead_before and len(digits) <= before + w
                lead_before = lead
                if whole:
                    segs.append(Segment(" " * (before + w - len(digits)), BLANK))
                    segs.append(Segment(digits, style))
                    continue
                label = digits[-w:]
            segs.append(Segment(" " * before, BLANK))
            segs.append(Segment(fit(label, w), style))
        return Strip(segs)

    def _rail_line(self, blocks: list[Block], p: MatrixPlan, r: int,
                   cursor: int | None) -> Strip:
        rail = p.rails[r]
        lw = label_width(p.rails)
        hot_blocks = [rail in self._suspect_rails(b) for b in blocks]
        label_style = self._style("suspect-label" if any(hot_blocks) else "label")
        segs = [Segment(f"r{rail}".ljust(lw), label_style)]
        suspect_bg = self._style("suspect")
        cur = self.get_component_rich_style("fabricmatrix--cursor", partial=True)
        pad = " " * (p.cell_width - 1)
        n = 0
        for block, hot in zip(blocks, hot_blocks, strict=True):
            segs.append(Segment(SUSPECT_MARK if hot else " ",
                                self._style("suspect-label") if hot else BLANK))
            for column in block.columns:
                code = self.codes(column)[r]
                style = self._code_style(code)
                if hot:
                    style = style + Style(bgcolor=suspect_bg.bgcolor)
                if cursor == n:
                    style = style + cur
                segs.append(Segment(PORT_GLYPHS[PORT_NAMES[code]], style))
                if pad:
                    segs.append(Segment(pad, Style(bgcolor=suspect_bg.bgcolor) if hot
                                        else BLANK))
                n += 1
            extra = block_width(block, p.cell_width) - len(block.columns) * p.cell_width
            if extra > 0:
                segs.append(Segment(" " * extra, BLANK))
        return Strip(segs)

    def legend(self) -> Text:
        text = Text()
        for code in LEGEND:
            name = PORT_NAMES[code]
            text.append(PORT_GLYPHS[name], self._code_style(code))
            text.append(f"{PORT_WORDS[name]} ")
        text.append(SUSPECT_MARK, self._style("suspect-label"))
        text.append("suspect")
        return text

    # --- mouse --------------------------------------------------------------------------------

    def on_click(self, event: Click) -> None:
        p = self.plan
        if p is None:
            return
        per = 1 + len(p.rails)
        band, row = divmod(self.top + event.y, per)
        if band >= len(p.bands) or row == 0:
            return
        cw = p.cell_width
        for c, (_bi, _ci, x) in enumerate(self._places[band]):
            if x <= event.x < x + cw:
                self.band, self.cell, self.rail_index = band, c, row - 1
                self._moved()
                if event.chain >= 2:
                    self.action_select()
                return

    def on_mouse_scroll_down(self, event: MouseScrollDown) -> None:
        self.action_band(1)

    def on_mouse_scroll_up(self, event: MouseScrollUp) -> None:
        self.action_band(-1)

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()


def _moved_nodes(old: dict[str, NodeFabric], new: dict[str, NodeFabric]) -> list[str]:
    """Nodes whose override (bad ports, silent, waiting) is not the same between two maps."""
    moved = [n for n, nf in new.items() if old.get(n) is not nf]
    moved.extend(n for n in old if n not in new)
    return moved
