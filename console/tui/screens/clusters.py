"""The fleet of fleets: one line per cluster (context) with its counts; enter switches to it.

``fleetdeck console --cluster a,b`` watches each cluster through its own console core; this view
compares them (the rows come from ``console/contexts.py``, the same ones ``status --cluster a,b``
prints), and ``:ctx NAME`` or enter here makes one the context every other view shows.
"""

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding

from fleetdeck.console.contexts import ClusterRow, cluster_row, combined, worst_first
from fleetdeck.console.rows import fleet_revision
from fleetdeck.console.tui.line_table import Column, LineTable
from fleetdeck.console.tui.screens.base import FleetView
from fleetdeck.console.tui.text import plural

CLUSTER_COLUMNS = [
    Column("", "active", 1), Column("CLUSTER", "cluster", 10, grow=24),
    Column("NODES", "nodes", 6, right=True), Column("OK", "ok", 6, right=True),
    Column("DEGR", "degraded", 5, right=True), Column("FAIL", "failed", 5, right=True),
    Column("STALE", "stale", 5, right=True, drop=3), Column("OFFL", "offline", 5, right=True),
    Column("GPUS USABLE", "gpus", 13, right=True, drop=4), Column("IB UP", "ib", 13, right=True,
                                                           drop=5),
    Column("JOBS R", "jobs", 7, right=True, drop=2), Column("INC", "incidents", 4, right=True),
    Column("LINK", "connection", 10, drop=1), Column("TOP INCIDENT", "top", 0, min=24),
]


class ClustersScreen(FleetView):
    VIEW = "clusters"
    BINDINGS = [Binding("enter", "use", "Use context")]

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[ClusterRow] = []
        self._computed: dict[str, tuple[object, ClusterRow]] = {}

    def compose_body(self) -> ComposeResult:
        yield LineTable(CLUSTER_COLUMNS, key=lambda r: r.cluster, cells=self._cells,
                        style=_style, id="cluster-table")

    def on_mount(self) -> None:
        self.table.focus()

    @property
    def table(self) -> LineTable[ClusterRow]:
        return self.query_one("#cluster-table", LineTable)

    def update_body(self, now: float) -> None:
        rows = []
        for name, session in self.fleet.sessions.items():
            conn = session.feed.conn.state if session.feed is not None else ""
            # A cluster's row is recomputed only when its fleet changed (a pass over its nodes
            # and its incidents: milliseconds at 16,384 nodes, not worth every tick).
            sig = (fleet_revision(session.state), tuple(session.state.jobs.values()), conn)
            hit = self._computed.get(name)
            if hit is None or hit[0] != sig:
                hit = self._computed[name] = (sig, cluster_row(session.state, connection=conn))
            rows.append(hit[1])
        ordered = worst_first(rows)
        self.rows = [*ordered, combined(ordered)] if len(ordered) > 1 else ordered
        self.table.empty_text = "no clusters"
        self.table.set_rows(self.rows)

    def _cells(self, r: ClusterRow) -> tuple[str, ...]:
        v = r.by_verdict
        total = r.cluster not in self.fleet.sessions
        if r.unheard and not total:
            # Zeros read as a healthy empty cluster (a newcomer's run): `status` says "?".
            return ("●" if r.cluster == self.fleet.active else "", r.cluster, *("?" * 10),
                    r.connection or "-", r.top_incident or "-")
        return ("●" if r.cluster == self.fleet.active else "",
                "all" if total else r.cluster, f"{r.nodes:,}", f"{v.get('ok', 0):,}",
                *(f"{v.get(k, 0):,}" for k in ("degraded", "failed", "stale", "offline")),
                f"{r.gpus_usable:,}/{r.gpus:,}", f"{r.ib_ports_up:,}/{r.ib_ports:,}",
                f"{r.jobs_running}/{r.jobs_total}", str(r.incidents),
                "" if total else r.connection or "-", r.top_incident or "-")

    def info(self) -> str:
        clusters = len(self.fleet.sessions)
        attention = sum(r.attention for r in self.rows if r.cluster in self.fleet.sessions)
        text = plural(clusters, "cluster")
        if attention:
            # The count is every cluster's: after "context demo" it read as demo's 32 nodes
            # not ok, while demo's row said all 32 ok (a newcomer run).
            text += f", [$warning]{plural(attention, 'node')} not ok in all[/]"
        return text + f"  context [b]{self.fleet.active}[/]  [$text-muted]enter: use context[/]"

    def action_use(self) -> None:
        row = self.table.current_row
        if row is not None:
            self._use(row.cluster)

    @on(LineTable.Selected, "#cluster-table")
    def _selected(self, event: LineTable.Selected) -> None:
        self._use(str(event.key))

    def _use(self, cluster: str) -> None:
        if cluster in self.fleet.sessions:
            self.fleet.use_context(cluster)


def _style(r: ClusterRow) -> str:
    v = r.by_verdict
    if v.get("failed", 0) or v.get("offline", 0):
        return "failed"
    if r.unheard or r.attention:
        return "degraded"
    if r.connection and r.connection != "connected":
        return "offline"
    return "ok"
