"""Overview: counts, the worst problems first, and the per-GPU fleet grid."""

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding

from fleetdeck.console.health import VERDICT_ORDER, Verdict
from fleetdeck.console.rows import (
    WAITING,
    CountsCache,
    FleetCounts,
    fleet_counts,
    top_problems,
)
from fleetdeck.console.tui.fleet_grid import FleetGrid
from fleetdeck.console.tui.screens.base import FleetView, Readout
from fleetdeck.console.tui.text import esc, plural
from fleetdeck.console.tui.theme import state_markup, verdict_markup

STATE_ORDER = ("idle", "alloc", "mix", "drng", "drain", "down", "stale")


class OverviewScreen(FleetView):
    VIEW = "overview"
    BINDINGS = [
        Binding("m", "metric", "Colour by"),
        Binding("slash", "filter_nodes", "Filter nodes"),
        Binding("enter", "open", "Detail", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._counts_cache = CountsCache()
        self._shown: tuple[object, ...] = ()
        """What the counts and problems were last computed from (fleet revision, jobs, lines)."""
        self._ids: list[str] = []
        self._n_nodes = -1

    def compose_body(self) -> ComposeResult:
        yield Readout(id="counts")
        yield Readout(id="problems")
        yield Readout(id="legend")
        yield FleetGrid(lambda: self.fleet.state, id="grid")
        yield Readout(id="grid-status")

    def on_mount(self) -> None:
        self.query_one(FleetGrid).focus()

    @property
    def grid(self) -> FleetGrid:
        return self.query_one(FleetGrid)

    def info(self) -> str:
        return f"grid: one cell per GPU, colour by [b]{self.grid.metric}[/] (m)"

    def update_body(self, now: float) -> None:
        state = self.fleet.state
        limit = 3 if self.size.height < 40 else 6
        # Counts and problems are fleet-wide passes (tens of ms at 16,384 nodes): only when a
        # node or a job changed since they were last shown.
        shown = (self.fleet.shown_revision, limit, tuple(state.jobs.values()))
        if shown != self._shown:
            self._shown = shown
            self._update_summary(limit)
        if len(state.nodes) != self._n_nodes:
            self._n_nodes = len(state.nodes)
            self._ids = sorted(state.nodes)
        self.grid.set_nodes(self._ids)
        self._update_status()
        self._update_legend()

    def _update_summary(self, limit: int) -> None:
        state = self.fleet.state
        counts = fleet_counts(state, self._counts_cache)
        self.query_one("#counts", Readout).show(self._counts_text(counts))
        problems, total = top_problems(state, limit)
        if problems:
            need = "needs" if total == 1 else "need"
            lines = [f"[b]Top problems[/] ({plural(total, 'node')} {need} attention, worst first; "
                     f"[$text-muted]2: node list[/])"]
            for p in problems:
                colour = verdict_markup(p.verdict.value)
                lines.append(f" [{colour}]{p.verdict.value:<8}[/] {esc(p.node):<10} "
                             f"{p.state:<6} {esc(p.text)}")
            text = "\n".join(lines)
        elif counts.verdicts.get(WAITING):
            text = (f"[b]Top problems[/] none so far: no telemetry yet from "
                    f"{plural(counts.verdicts[WAITING], 'node')}")
        else:
            text = "[b]Top problems[/] [$success]none: every node reports healthy[/]"
        self.query_one("#problems", Readout).show(text)

    def _counts_text(self, c: FleetCounts) -> str:
        states = "  ".join(f"[{state_markup(s)}]{s} {c.states[s]}[/]" for s in STATE_ORDER
                           if c.states.get(s))
        parts = [f"[{verdict_markup(v.value)}]{v.value} {c.verdicts[v.value]}[/]"
                 for v in sorted(Verdict, key=lambda v: VERDICT_ORDER[v])
                 if c.verdicts.get(v.value)]
        if c.verdicts.get(WAITING):
            parts.append(f"[$text-muted]{WAITING} {c.verdicts[WAITING]}[/]")
        verdicts = "  ".join(parts)
        jobs = "  ".join(f"{k} {n}" for k, n in sorted(c.jobs.items())) or "none"
        failed = f"[$error]failed {c.gpus_failed}[/]" if c.gpus_failed else "failed 0"
        if c.gpus_waiting:
            failed += f"  [$text-muted]waiting {c.gpus_waiting}[/]"
        down = f"[$error]down {c.ports_down}[/]" if c.ports_down else "down 0"
        err = f"[$warning]erroring {c.ports_erroring}[/]" if c.ports_erroring else "erroring 0"
        return (f"[b]Nodes[/] {c.nodes}  {states}   [b]Health[/] {verdicts or '-'}\n"
                f"[b]GPUs[/] {c.gpus}  in use {c.gpus_in_use}  free {c.gpus_free}  {failed}  "
                f"out {c.gpus_out}   [b]IB ports[/] {c.ports}  {down}  {err}   "
                f"[b]Jobs[/] {jobs}")

    def _update_legend(self) -> None:
        self.query_one("#legend", Readout).show(self.grid.legend())

    def _update_status(self) -> None:
        grid = self.grid
        node = grid.current_node
        if node is None:
            self.query_one("#grid-status", Readout).show("[$text-muted]no nodes yet[/]")
            return
        st = self.fleet.state.nodes.get(node)
        text = f"[b]{esc(node)}[/] gpu{grid.cursor_gpu}"
        if st is not None:
            t = st.telemetry
            g = next((x for x in t.gpus if x.index == grid.cursor_gpu), None) if t else None
            if g is not None and g.present:
                text += (f"  util {g.util_pct if g.util_pct is not None else '-'}%  "
                         f"{g.power_w if g.power_w is not None else '-'} W  "
                         f"{g.temp_c if g.temp_c is not None else '-'} °C")
            elif g is not None:
                text += "  [$error]not present[/]"
            mine = [f for f in st.all_findings
                    if f.component in ("", f"gpu{grid.cursor_gpu}")
                    or f"gpu{grid.cursor_gpu}" in f.component.split(",")]
            colour = verdict_markup(st.verdict.value)
            text += f"  node [{colour}]{st.verdict.value}[/]"
            if mine:
                text += "  " + esc("; ".join(str(f) for f in mine[:2]))
        text += "   [$text-muted]enter: detail · arrows/hjkl move[/]"
        self.query_one("#grid-status", Readout).show(text)

    @on(FleetGrid.CursorMoved)
    def _cursor_moved(self) -> None:
        self._update_status()
        self._update_legend()
        self.query_one("#tabs", Readout).show(self._tabs())

    @on(FleetGrid.Selected)
    def _selected(self, event: FleetGrid.Selected) -> None:
        self.fleet.open_node(event.node_id, event.gpu)

    async def action_filter_nodes(self) -> None:
        """``/`` here filters nodes: the nodes view with its filter box open, ready for what is
        typed next (the overview has nothing of its own to filter)."""
        from fleetdeck.console.tui.screens.nodes import NodesScreen

        fleet = self.fleet
        switching = fleet.action_view("nodes")
        if switching is not None:
            await switching
        while len(fleet.screen_stack) > 1 and not isinstance(fleet.screen, NodesScreen):
            await fleet.pop_screen()  # a node detail left open on the nodes view
        screen = fleet.screen
        if isinstance(screen, NodesScreen):
            screen.action_filter()

    def action_metric(self) -> None:
        self.grid.action_cycle_metric()

    def action_open(self) -> None:
        self.grid.action_select()
