"""Fabric: IB ports grouped by leaf switch; down, flapping, erroring; switch-level hints."""

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding

from fleetdeck.console.rows import FabricCache, FleetRevision, LeafRow, PortRow, fabric
from fleetdeck.console.tui.line_table import Column, LineTable
from fleetdeck.console.tui.screens.base import FleetView, Readout
from fleetdeck.console.tui.text import esc, plural

LEAF_COLUMNS = [
    Column("LEAF", "leaf", 14, grow=32), Column("NODES", "nodes", 5, right=True, drop=2),
    Column("PORTS", "ports", 5, right=True, drop=3), Column("UP", "up", 5, right=True, drop=1),
    Column("DOWN", "down", 4, right=True), Column("FLAP", "flapping", 4, right=True),
    Column("ERR", "erroring", 4, right=True), Column("HINT", "hint", 0, min=40),
]
PORT_COLUMNS = [
    Column("LEAF", "leaf", 14, grow=32, drop=1), Column("NODE", "node", 10, grow=24),
    Column("PORT", "port", 11, grow=20), Column("STATUS", "status", 8),
    Column("STATE", "state", 6, drop=2), Column("PHYS", "phys", 9, drop=3),
    Column("RATE", "rate", 4, right=True, drop=4),
    Column("COUNTERS / FINDINGS", "errors", 0, min=30),
]
PORT_STYLE = {"down": "failed", "flapping": "failed", "erroring": "degraded"}


class FabricScreen(FleetView):
    VIEW = "fabric"
    BINDINGS = [
        Binding("tab", "switch_table", "Leaves/ports"),
        Binding("enter", "open", "Open", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.leaves: list[LeafRow] = []
        self.ports: list[PortRow] = []
        self._cache: FabricCache = {}
        self._shown: FleetRevision | None = None

    def compose_body(self) -> ComposeResult:
        yield Readout(id="fabric-hints")
        yield LineTable(LEAF_COLUMNS, key=lambda r: r.leaf, cells=_leaf_cells,
                        style=_leaf_style, id="leaf-table")
        yield LineTable(PORT_COLUMNS, key=lambda r: f"{r.node}/{r.port}", cells=_port_cells,
                        style=lambda r: PORT_STYLE.get(r.status, "text"), id="port-table")

    def on_mount(self) -> None:
        self.leaf_table.focus()

    @property
    def leaf_table(self) -> LineTable[LeafRow]:
        return self.query_one("#leaf-table", LineTable)

    @property
    def port_table(self) -> LineTable[PortRow]:
        return self.query_one("#port-table", LineTable)

    def update_body(self, now: float) -> None:
        # A fleet-wide pass (per-node summaries cached): only when some node changed.
        if self.fleet.shown_revision == self._shown:
            return
        self._shown = self.fleet.shown_revision
        self.leaves, self.ports = fabric(self.fleet.state, self._cache)
        hints = [r.hint for r in self.leaves if r.hint]
        if hints:
            text = "\n".join(f"[$error b]⚠ {esc(h)}[/]" for h in hints[:3])
        else:
            bad = sum(r.down + r.flapping + r.erroring for r in self.leaves)
            text = ("[$success]no correlated port failures under any leaf switch[/]"
                    f"  [$text-muted]{bad} bad ports in total[/]")
        self.query_one("#fabric-hints", Readout).show(text)
        self.leaf_table.empty_text = "no nodes yet"
        self.leaf_table.set_rows(self.leaves)
        self.port_table.empty_text = "every IB port is ACTIVE/LinkUp without errors"
        self.port_table.set_rows(self.ports)

    def info(self) -> str:
        ports = sum(r.ports for r in self.leaves)
        return (f"{plural(len(self.leaves), 'leaf', 'leaves')}  {plural(ports, 'port')}  "
                f"{len(self.ports)} not ok  [$text-muted]tab: leaves/ports · enter[/]")

    def action_switch_table(self) -> None:
        if self.leaf_table.has_focus:
            self.port_table.focus()
        else:
            self.leaf_table.focus()

    def action_open(self) -> None:
        if self.port_table.has_focus and self.port_table.current_row is not None:
            self.fleet.open_node(self.port_table.current_row.node)

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
            str(r.flapping or ""), str(r.erroring or ""), r.hint)


def _leaf_style(r: LeafRow) -> str:
    if r.hint:
        return "failed"
    return "degraded" if r.down or r.flapping or r.erroring else "text"


def _port_cells(r: PortRow) -> tuple[str, ...]:
    extra = f"{r.errors}  {r.detail}".strip()
    return (r.leaf, r.node, r.port, r.status, r.state, r.phys, r.rate, extra)
