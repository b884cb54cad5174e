"""Nodes: sinfo-style state, health, reasons, jobs and GPU/IB summaries; sort, filter, mark."""

import time
from dataclasses import replace

from textual import on
from textual.actions import SkipAction
from textual.app import ComposeResult
from textual.binding import Binding
from textual.reactive import reactive
from textual.widgets import Input

from fleetdeck.console.commands import jobs_by_node, jobs_on, scheduled_jobs_by_node
from fleetdeck.console.health import Verdict
from fleetdeck.console.node_order import NodeOrder
from fleetdeck.console.rows import (
    NODE_COLUMNS,
    NodeFilter,
    NodeRow,
    node_row,
    sort_step_said,
    waiting,
)
from fleetdeck.console.state import NodeState
from fleetdeck.console.tui.line_table import Column, LineTable, row_is_key
from fleetdeck.console.tui.screens.base import (
    FleetView,
    age_text,
    dialog_key,
    filter_said,
    last_known,
)
from fleetdeck.console.tui.text import Part, cells, fit_parts

RowSig = tuple[object, ...]
DROP = {"power": 6, "age": 5, "ib": 4, "temp": 3, "gpus": 2, "util": 1}
"""Which columns a narrow screen hides first (the reasons keep REASONS_MIN cells)."""
NODE_WIDTH_MAX = 32
"""The NODE column widens to the longest node id up to this (ids are measured when the fleet's
size changes, never per tick: the table's own content measure would rebuild rows)."""
REASONS_MIN = 24


FIGURES = ("gpus", "util", "temp", "power", "ib")
"""The columns that hold a node's figures: last known, not live, for an offline or stale node."""
LAST_KNOWN = dict.fromkeys(FIGURES, "lastknown")
LIVE: dict[str, str] = {}


def _age(last_rx: float | None, now: float) -> str:
    return "-" if last_rx is None else age_text(now - last_rx)


class NodesScreen(FleetView):
    VIEW = "nodes"
    BINDINGS = [
        Binding("slash", "filter", "Filter", priority=True),  # see action_filter
        Binding("ctrl+z", "unhealthy", "Unhealthy"),
        Binding("space", "mark", "Mark"),  # and moves down, as mc's Insert: marking a run of rows
        Binding("ctrl+backslash", "clear_marks", "Clear marks", show=False),
        Binding("o", "sort(1)", "Sort"),
        Binding("O", "sort_reverse", "Reverse", show=False),
        *dialog_key("r", "drain", "Drain"),
        *dialog_key("u", "resume", "Resume"),
        Binding("enter", "open", "Detail", show=False),
    ]

    # UI state: changing any of these redraws the view (the watchers below), so actions only
    # set state and never call a redraw themselves.
    filter: reactive[NodeFilter] = reactive(lambda: NodeFilter(""), always_update=True,
                                            init=False)
    unhealthy_only: reactive[bool] = reactive(False, init=False)
    sort_key: reactive[str] = reactive("verdict", init=False)
    sort_reverse: reactive[bool] = reactive(False, init=False)

    def __init__(self) -> None:
        super().__init__()
        self._rows: dict[str, tuple[RowSig, NodeRow]] = {}
        self._sorted = NodeOrder()
        self._scheduled: dict[str, list[str]] = {}
        self._jobs: tuple[object, dict[str, list[str]]] = (None, {})
        self._now = time.time()
        self._drilled: str | None = None
        """The filter text a drill-down set (a job's nodes, an incident's), until the view is
        left for another: Esc goes back while the filter is still that text."""
        self.shown: tuple[str, ...] = ()
        """A tuple, not a list: the GC stops tracking it (see console/node_order.py)."""
        self._n_nodes = -1
        self._jobs_from: tuple[object, ...] = ()
        self._shown_from: tuple[object, ...] = ()
        self._resorted = False
        """The operator changed the sort since the last redraw (``update_body``)."""

    def compose_body(self) -> ComposeResult:
        columns = [Column(h, a, w, right=a in ("util", "temp", "power", "age"),
                          drop=DROP.get(a, 0),
                          min=REASONS_MIN if not w else 0)
                   for h, a, w in NODE_COLUMNS]
        table: LineTable[str] = LineTable(columns, key=row_is_key, cells=self._cells,
                                          style=self._style, cell_styles=self._cell_styles,
                                          markable=True, id="node-table")
        table.sort_key = self.sort_key
        yield table
        yield Input(placeholder="filter: regex, hostlist gpu[0010-0020], !inverse; "
                    "applies as you type; esc closes, esc again clears", id="filter")

    def on_mount(self) -> None:
        self.query_one("#filter", Input).display = False
        self.table.focus()

    @property
    def table(self) -> LineTable[str]:
        return self.query_one("#node-table", LineTable)

    # --- rows ---------------------------------------------------------------------------------

    def row(self, st: NodeState) -> NodeRow:
        jobs = jobs_on(st, self._scheduled, self.fleet.state)
        sig = (st.revision, st.shape_rev, tuple(jobs))
        hit = self._rows.get(st.node_id)
        if hit is not None and hit[0] == sig:
            return hit[1]
        row = node_row(st, self._now, jobs)
        self._rows[st.node_id] = (sig, row)
        return row

    def _cells(self, node_id: str) -> tuple[str, ...]:
        st = self.fleet.state.nodes.get(node_id)
        if st is None:
            return (node_id,)
        r = self.row(st)
        return (r.node, r.state, r.verdict, r.gpus, r.util, r.temp, r.power, r.ib, r.job,
                _age(st.last_rx, self._now), r.reasons)

    def _style(self, node_id: str) -> str:
        st = self.fleet.state.nodes.get(node_id)
        if st is None:
            return "muted"
        if st.drain.state.value != "none" and st.verdict is Verdict.OK:
            return "drain"
        if (st.verdict is Verdict.OK and waiting(st)) or st.unread_talking:
            return "muted"
        return st.verdict.value

    def _cell_styles(self, node_id: str) -> dict[str, str]:
        st = self.fleet.state.nodes.get(node_id)
        return LAST_KNOWN if st is not None and last_known(st) else LIVE

    def update_body(self, now: float) -> None:
        self._now = now
        state = self.fleet.state
        if len(state.nodes) != self._n_nodes:
            self._n_nodes = len(state.nodes)
            self._fit_node_column(max(map(len, state.nodes), default=0))
        # Rows are cached per node (``row``), with their jobs from the scheduler's map (done
        # again when a job changed) and the node's own sample: no fleet-wide pass for them. The
        # order is kept by NodeOrder, asked again when a node, a job or what the operator asked
        # for changed.
        jobs_from = tuple(state.jobs.values())
        if jobs_from != self._jobs_from:
            self._jobs_from = jobs_from
            self._scheduled = scheduled_jobs_by_node(state)
        shown_from = (self.fleet.shown_revision, jobs_from, self.filter.text,
                      self.unhealthy_only, self.sort_key, self.sort_reverse)
        if shown_from != self._shown_from or self._sorted.held:
            self._shown_from = shown_from
            self.shown = self._order()
        table = self.table
        table.sort_key, table.sort_reverse = self.sort_key, self.sort_reverse
        if table.marks:
            table.marks &= state.nodes.keys()
        table.empty_text = ("no nodes match the filter" if self.filter.active
                            or self.unhealthy_only
                            else "no nodes yet: waiting for births and telemetry")
        table.set_rows(self.shown)
        if self._resorted:
            # The operator's re-sort starts the list at its head: the rows kept their old
            # scroll, and after a reversed sort left at its far end, HEALTH showed its 5th
            # failed node as the first row, the 4 worst above it out of sight (an SRE run).
            self._resorted = False
            table.show_head()

    def _order(self) -> tuple[str, ...]:
        """The nodes shown, filtered and sorted (``NodeOrder`` keeps each column's order until
        a node changes: a re-sort at 16,384 nodes costs what changed, not the fleet)."""
        state = self.fleet.state
        key = self.sort_key
        ids = self._sorted.ids(state, key, self._jobs_by_node() if key == "job" else None,
                               now=self.fleet.clock())
        nodes = state.nodes
        if self.unhealthy_only:
            ok = Verdict.OK
            ids = tuple([n for n in ids if nodes[n].verdict is not ok])
        f = self.filter
        if f.hosts is not None:
            hosts, invert = f.hosts, f.invert
            ids = tuple([n for n in ids if (n in hosts) != invert])
        elif f.active:
            ids = tuple([n for n in ids if f.match_row(self.row(nodes[n]))])
        # Reversed is the ascending order backwards, ties included (node_sort_key's order,
        # reversed): no sort of its own.
        return ids[::-1] if self.sort_reverse else ids

    def _jobs_by_node(self) -> dict[str, list[str]]:
        """Every node's jobs (the JOBS column's sort), kept while no node or job changed."""
        since = (self.fleet.shown_revision, self._jobs_from)
        if self._jobs[0] != since:
            self._jobs = (since, jobs_by_node(self.fleet.state))
        return self._jobs[1]

    def _fit_node_column(self, longest: int) -> None:
        table = self.table
        col = table.columns[0]
        width = max(NODE_COLUMNS[0][2], min(NODE_WIDTH_MAX, longest))
        if col.width != width:
            table.columns = [replace(col, width=width), *table.columns[1:]]
            table.relayout()

    def info(self) -> str:
        # What hides nodes first, the sort last: at 80 columns the line is cut, and "1/64
        # nodes" with the filter cut off hid 63 nodes for no visible reason (a newcomer's run).
        shown = f"{len(self.shown)}/{len(self.fleet.state.nodes)}"
        parts: list[Part] = [(f"{shown} nodes", shown if self.filter.active else "", 0)]
        parts += filter_said(self.filter)
        if self.unhealthy_only:
            parts.append(("[$warning]unhealthy only[/]", "", 0))
        marks = len(self.table.marks) if self.is_mounted else 0
        if marks:
            parts.append((f"[$accent]{marks} marked[/]", "", 0))
        # The column's own header: "sort verdict" named a column headed HEALTH (a newcomer's
        # run). Given up first on a short line, where the header's ▼ says it: at 80 columns it
        # read "s…" (a 3 a.m. drive).
        header = next((h for h, a, _w in NODE_COLUMNS if a == self.sort_key), self.sort_key)
        arrow = " ▲" if self.sort_reverse else ""
        room = self.info_room()
        steps = sort_step_said(self.sort_key)
        if steps:
            # A metric sorts in steps, 95 % above 99 % (one step, then by name), which read as
            # a bug where the line said only "sort UTIL" (a walk-through). On a short line the
            # step outlives "sort" and the keys: the column's ▼ says which column sorts.
            said = f"{header}{arrow} in {steps}"
            left = room - cells(fit_parts(parts, 0)) - 2
            sort = next((s for s in (f"sort {said} (o/O)", f"sort {said}")
                         if not room or cells(s) <= left), said)
            parts.append((sort, "", 1))
        else:
            parts.append((f"sort {header}{arrow} (o/O)", f"sort {header}{arrow}", 1))
        return fit_parts(parts, room)

    def _redraw(self) -> None:
        if self.is_mounted:
            self.fleet.refresh_view()

    def watch_filter(self) -> None:
        self._redraw()

    def watch_unhealthy_only(self) -> None:
        self._redraw()

    def watch_sort_key(self) -> None:
        self._resorted = True
        self._redraw()

    def watch_sort_reverse(self) -> None:
        self._resorted = True
        self._redraw()

    # --- actions ------------------------------------------------------------------------------

    def targets(self) -> list[str]:
        """Marked nodes, or the cursor's node when none is marked (k9s)."""
        table = self.table
        if table.marks:
            return sorted(table.marks)
        key = table.current_key
        return [key] if key is not None else []

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        if self.focused is box:  # a priority binding (as ':'): in the box, '/' is typed
            raise SkipAction()
        box.display = True
        box.value = self.filter.text
        # At once, not by Widget.focus (a callback after the keys already read): a filter
        # typed straight after '/' went to the table and its keys (r drains).
        self.set_focus(box)
        box.focus()  # again once a view switch's own focus (overview's '/') has landed

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        event.input.display = False
        self.set_focus(self.table)
        self.filter = NodeFilter(event.value)

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        # Live filtering while typing: cheap (hostlist sets, cached rows).
        self.filter = NodeFilter(event.value)

    def on_escape(self) -> bool:
        box = self.query_one("#filter", Input)
        if box.display:
            box.display = False
            self.set_focus(self.table)
            return True
        if self.filter.active:
            drilled = self.filter.text == self._drilled
            self.filter = NodeFilter("")
            if not drilled:
                return True  # a filter the operator typed is cleared first; the view stays
            # Esc from a job's or an incident's nodes goes back there, as k9s does, with the
            # drill-down's filter gone; it took two Esc (a 3 a.m. drive). Marks made there
            # go too: kept, a later `r` drained them from the whole fleet's list (a review).
            self._drilled = None
            self.table.clear_marks()
            return False
        if self.table.marks:
            self.table.clear_marks()
            self.fleet.refresh_view()
            return True
        return False

    def action_unhealthy(self) -> None:
        self.unhealthy_only = not self.unhealthy_only

    def action_mark(self) -> None:
        self.table.toggle_mark()
        self.fleet.refresh_view()

    def action_clear_marks(self) -> None:
        self.table.clear_marks()
        self.fleet.refresh_view()

    def action_sort(self, step: int) -> None:
        keys = [a for _h, a, _w in NODE_COLUMNS]
        i = keys.index(self.sort_key) if self.sort_key in keys else -1
        key = keys[(i + step) % len(keys)]
        if key != self.sort_key:
            # The new column's watcher redraws: one redraw for the key press, not two.
            self.set_reactive(NodesScreen.sort_reverse, False)
        else:
            self.sort_reverse = False
        self.sort_key = key

    def action_sort_reverse(self) -> None:
        self.sort_reverse = not self.sort_reverse

    def action_drain(self) -> None:
        self.not_typing()
        self.fleet.request_drain(self.targets())

    def action_resume(self) -> None:
        self.not_typing()
        self.fleet.request_resume(self.targets())

    def action_open(self) -> None:
        key = self.table.current_key
        if key is not None:
            self.fleet.open_node(key)

    @on(LineTable.Selected, "#node-table")
    def _selected(self, event: LineTable.Selected) -> None:
        self.fleet.open_node(event.key)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return not (action in ("drain", "resume") and self.fleet.read_only)

    def set_filter(self, text: str) -> None:
        """Show exactly these nodes (a job's, an incident's, a filter typed on the overview):
        an "unhealthy only" left on from earlier hid the drained, healthy one asked for (an
        operator's walkthrough: "1/48")."""
        self.filter = NodeFilter(text)
        self._drilled = self.filter.text
        self.unhealthy_only = False

    def leaving(self) -> None:
        super().leaving()
        self._drilled = None  # back by its key later, Esc clears a filter left and stays
