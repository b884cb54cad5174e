"""Fabric: a matrix of rail switches x nodes (one glyph per port, the suspected switch marked),
then the IB ports grouped by leaf switch; down, flapping, erroring; switch-level hints.

On a tall screen the matrix and the tables are stacked (``tab`` moves between them); on a short
one they are two pages of the view and ``tab`` turns the page."""

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding

from fleetdeck.console.fabric_map import (
    PORT_NAMES,
    FabricMap,
    FabricMapCache,
    fabric_map,
    nodes_text,
    plan,
    recovered,
    suspected,
)
from fleetdeck.console.judgements import RECOVERED
from fleetdeck.console.rows import IB_UNIT, FleetRevision, LeafRow, PortRow, fabric
from fleetdeck.console.tui.fabric_matrix import FabricMatrix
from fleetdeck.console.tui.line_table import Column, LineTable
from fleetdeck.console.tui.screens.base import FleetView, Readout
from fleetdeck.console.tui.text import esc, fit_parts, plural
from fleetdeck.console.tui.theme import PORT_WORDS

LEAF_COLUMNS = [
    # "OK", as the matrix's ■ok: the clean ports, apart from ERR and FLAP, so a row sums to
    # PORTS. Headed "UP", 487 of them beside status's "IB up 504/512 (erroring 17)", which
    # counts an erroring port's link up (a 3 a.m. drive on the demo).
    Column("LEAF", "leaf", 14, grow=32), Column("NODES", "nodes", 5, right=True, drop=2),
    Column("PORTS", "ports", 5, right=True, drop=3), Column("OK", "up", 5, right=True, drop=1),
    Column("DOWN", "down", 4, right=True), Column("FLAP", "flapping", 4, right=True),
    Column("ERR", "erroring", 4, right=True),
    Column("SILENT", "silent", 6, right=True, drop=2), Column("HINT", "hint", 0, min=40),
]
PORT_COLUMNS = [
    Column("LEAF", "leaf", 14, grow=32, drop=1), Column("NODE", "node", 10, grow=24),
    Column("PORT", "port", 11, grow=20), Column("STATUS", "status", 8),
    Column("STATE", "state", 6, drop=2), Column("PHYS", "phys", 9, drop=3),
    Column(f"RATE {IB_UNIT}", "rate", 9, right=True, drop=4),
    Column("COUNTERS / FINDINGS", "errors", 0, min=30),
]
PORT_STYLE = {"down": "failed", "flapping": "failed", "erroring": "degraded"}
TABLES_MIN = 7
"""Lines the tables keep when stacked under the matrix (else they are a page of their own)."""
CHROME = 6
"""Header, tabs, footer, legend (up to 2 lines) and the cursor's line around the matrix."""


class FabricScreen(FleetView):
    VIEW = "fabric"
    BINDINGS = [
        Binding("tab", "switch_table", "Matrix/leaves/ports"),
        Binding("enter", "open", "Open", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.leaves: list[LeafRow] = []
        self.ports: list[PortRow] = []
        self.map: FabricMap | None = None
        self.stacked = True
        """Matrix and tables on one page (a tall screen), else one of them at a time."""
        self._map_cache = FabricMapCache()
        self._shown: FleetRevision | None = None
        self._layout: tuple[object, ...] = ()

    def compose_body(self) -> ComposeResult:
        yield Readout(id="fabric-hints")
        yield Readout(id="matrix-legend")
        yield FabricMatrix(id="matrix")
        yield Readout(id="matrix-status")
        yield LineTable(LEAF_COLUMNS, key=lambda r: r.leaf, cells=_leaf_cells,
                        style=_leaf_style, id="leaf-table")
        yield LineTable(PORT_COLUMNS, key=lambda r: f"{r.node}/{r.port}", cells=_port_cells,
                        style=lambda r: PORT_STYLE.get(r.status, "text"), id="port-table")

    def on_mount(self) -> None:
        self.matrix.focus()

    @property
    def matrix(self) -> FabricMatrix:
        return self.query_one(FabricMatrix)

    @property
    def leaf_table(self) -> LineTable[LeafRow]:
        return self.query_one("#leaf-table", LineTable)

    @property
    def port_table(self) -> LineTable[PortRow]:
        return self.query_one("#port-table", LineTable)

    def update_body(self, now: float) -> None:
        # Fleet-wide passes (per-node summaries cached): only when some node changed.
        if self.fleet.shown_revision == self._shown:
            return
        self._shown = self.fleet.shown_revision
        self.leaves, self.ports = fabric(self.fleet.state, self.fleet.summaries.fabric)
        self.map = fabric_map(self.fleet.state, self._map_cache)
        self._arrange()
        self.matrix.set_map(self.map)
        self._update_matrix_text()
        hinted = [r for r in self.leaves if r.hint]
        # Failing switches first and in red; a switch that came back is said, not alarmed.
        hinted.sort(key=lambda r: r.recovered)
        if hinted:
            text = "\n".join(f"[$warning]✓ {esc(r.hint)}[/]" if r.recovered
                              else f"[$error b]⚠ {esc(r.hint)}[/]" for r in hinted[:3])
        else:
            bad = sum(r.down + r.flapping + r.erroring for r in self.leaves)
            text = ("[$success]no correlated port failures under any leaf switch[/]"
                    f"  [$text-muted]{plural(bad, 'bad port')} in total[/]")
        # Ports of nodes not heard now are neither up nor down as far as anyone knows: with
        # every agent stopped the table said "every IB port is ACTIVE/LinkUp without errors"
        # and the line above "0 not ok" (a newcomer's run).
        silent = sum(r.silent for r in self.leaves)
        if silent and not hinted:
            text += f"[$text-muted], {silent} silent[/]"
        self.query_one("#fabric-hints", Readout).show(text)
        self.leaf_table.empty_text = "no nodes yet"
        self.leaf_table.set_rows(self.leaves)
        self.port_table.empty_text = (
            f"no port reported a fault; {plural(silent, 'port')} silent (nodes not heard now: "
            "SILENT above)" if silent else "every IB port is ACTIVE/LinkUp without errors")
        self.port_table.set_rows(self.ports)

    # --- layout -------------------------------------------------------------------------------

    def on_resize(self) -> None:
        self._arrange()

    def _arrange(self) -> None:
        """Stack the matrix over the tables when the screen is tall enough, giving the matrix
        the lines its plan needs (the tables the rest); else show one page at a time."""
        fm = self.map
        hints = max(1, min(3, sum(1 for r in self.leaves if r.hint)))
        avail = self.size.height - CHROME - hints
        width = max(1, self.size.width - 2)
        on_matrix = not (self.leaf_table.has_focus or self.port_table.has_focus)
        key = (avail, width, on_matrix, None if fm is None else (
            tuple(fm.rails), tuple((leaf, len(fm.members[leaf])) for leaf in fm.leaves)))
        if key == self._layout:
            return
        self._layout = key
        budget = max(1, avail - TABLES_MIN)
        need = plan(fm, width, budget).lines if fm is not None else 1
        self.stacked = need <= budget
        matrix = self.matrix
        if self.stacked:
            matrix.styles.height = max(1, need)
            # The leaf table takes at most half of what is left, so bad ports still show.
            self.leaf_table.styles.max_height = max(3, min(12, (avail - need) // 2))
            for w in (matrix, self.leaf_table, self.port_table):
                w.display = True
        else:
            matrix.styles.height = "1fr"
            matrix.display = on_matrix
            self.leaf_table.display = self.port_table.display = not on_matrix
        self.query_one("#matrix-legend").display = matrix.display
        self.query_one("#matrix-status").display = matrix.display

    def _update_matrix_text(self) -> None:
        matrix = self.matrix
        fm, p = self.map, matrix.plan
        if fm is None or p is None:
            return
        switches = len(fm.leaves) * len(fm.rails)
        legend = matrix.legend()
        box = self.query_one("#matrix-legend", Readout)
        said = (f"  {plural(switches, 'switch', 'switches')} ({len(fm.leaves)} leaf "
                f"groups x {len(fm.rails)} rails), {p.describe()}")
        # Two lines at most (its max-height): at 80 columns the third, "shown)", was lost
        # without a mark (a 3 a.m. drive). The switches' count goes first: the matrix's own
        # header and rail labels show the leaf groups and rails; what a cell is stays. A
        # dozen cells spare for where the words wrap.
        room = 2 * ((box.size.width or self.size.width) - 2) - 12
        if legend.cell_len + len(said) > room:
            said = f"  {p.describe()}"
        legend.append(said)
        box.show(legend)
        self._update_status()

    def _update_status(self) -> None:
        matrix, fm = self.matrix, self.map
        here = matrix.cursor()
        if fm is None or here is None:
            self.query_one("#matrix-status", Readout).show("[$text-muted]no nodes yet[/]")
            return
        column, rail = here
        switches = ", ".join(f"{leaf}-r{rail}" for leaf in column.leaves[:3])
        if len(column.leaves) > 3:
            switches += f" … ({len(column.leaves)} switches)"
        text = f"[b]{esc(switches)}[/]"
        pick = matrix.selected_port()
        if len(column.nodes) > 1:
            text += f"  {esc(nodes_text(column.nodes))} ({len(column.nodes)} nodes)"
        if pick is not None:
            node, port = pick
            code = fm.code(node, rail)
            word = PORT_WORDS.get(PORT_NAMES[code], PORT_NAMES[code])
            where = f"{node} {port}" if port else f"{node} rail {rail}"
            lead = "worst " if len(column.nodes) > 1 else ""
            text += f"  {lead}[b]{esc(where)}[/] {esc(word)}"
            bad = fm.port(node, rail)
            if bad is not None and bad.text:
                text += f": {esc(bad.text)}"
        sus = suspected(fm, column, rail)
        if sus:
            text += "  [$error b]▶ suspected switch[/]"
        elif recovered(fm, column, rail):
            text += f"  [$warning]switch {RECOVERED}[/]"
        text += "   [$text-muted]enter: node · w: worst · tab: tables[/]"
        self.query_one("#matrix-status", Readout).show(text)

    @on(FabricMatrix.CursorMoved)
    def _matrix_moved(self) -> None:
        self._update_matrix_text()  # the plan may have changed with the size

    @on(FabricMatrix.Selected)
    def _matrix_selected(self, event: FabricMatrix.Selected) -> None:
        self.fleet.open_node(event.node_id)

    def info(self) -> str:
        ports = sum(r.ports for r in self.leaves)
        silent = sum(r.silent for r in self.leaves)
        # A short line gives up the hint whole, then the leaves, then how many ports in all:
        # at 100 columns the hint was cut mid-word ("ta…"; a 3 a.m. drive).
        quiet = [(f"{silent} silent", "", 0)] if silent else []
        bad = len(self.ports)
        return fit_parts([(plural(len(self.leaves), "leaf", "leaves"), "", 1),
                          (f"{plural(ports, 'port')}  {bad} not ok", f"{bad}/{ports} ports not ok",
                           0), *quiet], self.info_room(),
                         hint="[$text-muted]tab: matrix/leaves/ports · enter[/]",
                         last=[(f"{plural(bad, 'port')} not ok", "", 0), *quiet])

    def action_switch_table(self) -> None:
        """Matrix, then leaves, then ports (turning the page on a short screen)."""
        if self.matrix.has_focus:
            target: FabricMatrix | LineTable[LeafRow] | LineTable[PortRow] = self.leaf_table
        elif self.leaf_table.has_focus:
            target = self.port_table
        else:
            target = self.matrix
        if not self.stacked:
            on_matrix = target is self.matrix
            self.matrix.display = on_matrix
            self.query_one("#matrix-legend").display = on_matrix
            self.query_one("#matrix-status").display = on_matrix
            self.leaf_table.display = self.port_table.display = not on_matrix
        target.focus()
        self._layout = ()

    def action_open(self) -> None:
        if self.port_table.has_focus and self.port_table.current_row is not None:
            self.fleet.open_node(self.port_table.current_row.node)
        elif self.matrix.has_focus:
            self.matrix.action_select()

    @on(LineTable.Selected, "#leaf-table")
    def _leaf_selected(self, event: LineTable.Selected) -> None:
        for row in self.ports:
            if row.leaf == event.key:
                self.port_table.move_to_key(f"{row.node}/{row.port}")
                self.port_table.focus()
                return
        self.notify(f"no bad ports under {esc(event.key)}")

    @on(LineTable.Selected, "#port-table")
    def _port_selected(self, event: LineTable.Selected) -> None:
        self.fleet.open_node(event.key.split("/")[0])


def _leaf_cells(r: LeafRow) -> tuple[str, ...]:
    return (r.leaf, str(r.nodes), str(r.ports), str(r.up), str(r.down or ""),
            str(r.flapping or ""), str(r.erroring or ""), str(r.silent or ""), r.brief)


def _leaf_style(r: LeafRow) -> str:
    if r.hint:
        # A leaf whose switches all came back is said in the banner's colour (a ✓, warning),
        # not alarmed: its row read red beside the banner's "recovered" (a review).
        return "degraded" if r.recovered else "failed"
    return "degraded" if r.down or r.flapping or r.erroring else "text"


def _port_cells(r: PortRow) -> tuple[str, ...]:
    extra = f"{r.errors}  {r.detail}".strip()
    return (r.leaf, r.node, r.port, r.status, r.state, r.phys, r.rate, extra)
