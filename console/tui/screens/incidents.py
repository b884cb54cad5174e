"""Incidents: one root-cause line per incident (console/incidents.py), the selected one's
timeline, and job interruptions by cause with the effective training time ratio."""

from dataclasses import replace

from rich.cells import cell_len
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding

from fleetdeck.console.eventlog import EventLine
from fleetdeck.console.incidents import Incident, incidents
from fleetdeck.console.interruptions import InterruptionTracker
from fleetdeck.console.judgements import utc_hms
from fleetdeck.console.rows import (
    FleetRevision,
    IncidentRow,
    incident_age,
    incident_row,
    interruption_text,
)
from fleetdeck.console.tui.line_table import Column, LineTable
from fleetdeck.console.tui.screens.base import FleetView, Readout
from fleetdeck.console.tui.text import esc, fit_parts, plural

INCIDENT_COLUMNS = [
    Column("SEV", "severity", 5), Column("KIND", "kind", 6, drop=3),
    Column("AGE", "age", 4, right=True, drop=2), Column("NODES", "nodes", 14, grow=32, drop=1),
    Column("JOBS", "jobs", 6, grow=16, drop=4), Column("INCIDENT", "title", 0, min=40),
]
SEV_STYLE = {"error": "failed", "warn": "degraded"}
REPORT_EVERY_S = 30.0
"""The interruption report is a store query: refreshed this often while the view is shown."""
TIMELINE_SHOWN = 8
"""Timeline lines shown before the pane has a size (it then shows what its height holds)."""


class IncidentDetail(Readout):
    """The selected incident: its line, what to do, and as much of its timeline (newest last)
    as the pane's height holds; the pane takes the room the incident list leaves (a UX audit
    found it cut to 8 lines under a half-empty list at 160x48)."""

    incident: Incident | None = None

    def set_incident(self, inc: Incident | None) -> None:
        self.incident = inc
        self._draw()

    def on_resize(self) -> None:
        self._draw()

    def _draw(self) -> None:
        inc = self.incident
        if inc is None:
            self.show("", layout=False)
            return
        where = "the node" if len(inc.nodes) == 1 else "its nodes"
        more = (f"({plural(inc.findings, 'finding')} on {plural(len(inc.nodes), 'node')}; "
                f"enter: {where})")
        action = inc.action_for(views=True)
        head = [(f"[b]{esc(inc.title)}[/]", inc.title),
                (f"[$accent]do:[/] {esc(action)}  [$text-muted]{more}[/]",
                 f"do: {action}  {more}")]
        width = max(1, self.content_size.width)
        room = self.content_size.height
        used = sum(_height(plain, width) for _m, plain in head)
        if room <= 0:  # not laid out yet: resized later
            room = used + TIMELINE_SHOWN
        picked: list[str] = []
        events = inc.timeline
        for n, e in enumerate(reversed(events)):
            markup, plain = _timeline_line(e)
            h = _height(plain, width)
            earlier = 1 if n + 1 < len(events) else 0  # the "… earlier" line, if any left
            if used + h + earlier > room and picked:
                break
            picked.append(markup)
            used += h
        picked.reverse()
        lines = [m for m, _p in head]
        if len(picked) < len(events):
            lines.append(f"  [$text-muted]… {len(events) - len(picked)} earlier[/]")
        lines += picked
        if not events:
            lines.append("[$text-muted]no events about its nodes in the log yet[/]")
        self.show("\n".join(lines), layout=False)


def _height(plain: str, width: int) -> int:
    """Lines ``plain`` takes wrapped at ``width``; one more for a wrapped one, as wrapping at
    words can take it (the newest entry, last, must not be the one cut off)."""
    rows = -(-cell_len(plain) // width)
    return 1 if rows <= 1 else rows + 1


class IncidentsScreen(FleetView):
    VIEW = "incidents"
    BINDINGS = [Binding("enter", "open", "Its nodes", show=False)]

    def __init__(self) -> None:
        super().__init__()
        self.found: list[Incident] = []
        self.rows: list[IncidentRow] = []
        self._shown: tuple[FleetRevision, int] | None = None
        self._report_at = float("-inf")
        self._report_seen: InterruptionTracker | None = None
        self._report_booked = 0
        self.report_text = ""

    def compose_body(self) -> ComposeResult:
        yield Readout(id="interruptions")
        yield LineTable(INCIDENT_COLUMNS, key=lambda r: r.key, cells=_cells,
                        style=lambda r: SEV_STYLE.get(r.severity, "text"),
                        open_label="Its nodes", move_label="Timeline", id="incident-table")
        yield IncidentDetail(id="incident-detail")

    def on_mount(self) -> None:
        self.table.focus()

    @property
    def table(self) -> LineTable[IncidentRow]:
        return self.query_one("#incident-table", LineTable)

    def update_body(self, now: float) -> None:
        # Asked again every REPORT_EVERY_S, at once when an interruption is found, and when
        # the picture is another (a replay's seek puts back an earlier one, its clock goes
        # back): after a seek back the line kept the interruptions still to come (a replay
        # audit).
        seen = self.fleet.session.interruptions
        if (now - self._report_at >= REPORT_EVERY_S or now < self._report_at
                or seen is not self._report_seen or seen.booked != self._report_booked):
            self._report_at, self._report_seen, self._report_booked = now, seen, seen.booked
            self._fetch_report()
        # Grouping is a fleet-wide pass: only when a node or the event log changed.
        shown = (self.fleet.shown_revision, self.fleet.event_seq)
        if shown == self._shown:
            # The ages move on without a change: a killed simulator's incidents read "25s"
            # for as long as the fleet stayed silent (a newcomer's run).
            ages = [incident_age(inc, now) for inc in self.found]
            if ages != [r.age for r in self.rows]:
                self.rows = [replace(r, age=age) for r, age in zip(self.rows, ages, strict=True)]
                self.table.set_rows(self.rows)
            return
        self._shown = shown
        self.found = incidents(self.fleet.state, self.fleet.event_log.lines())
        self.rows = [incident_row(inc, now) for inc in self.found]
        self.table.empty_text = "no incidents: every node is ok and no job has a straggler"
        self.table.set_rows(self.rows)
        self._show_detail()

    @work(exclusive=True, group="interruption-report")
    async def _fetch_report(self) -> None:
        rep = await self.fleet.session.interruption_report()
        self.report_text = interruption_text(rep)
        # The padding of the line's Readout.
        self.query_one("#interruptions", Readout).show(fit_parts(
            [(esc(self.report_text), esc(interruption_text(rep, short=True)), 0)],
            self.size.width - 2, hint="[$text-muted]fleetdeck report for the list[/]"))

    def _show_detail(self) -> None:
        key = self.table.current_key
        inc = next((i for i in self.found if i.key == key), None)
        self.query_one("#incident-detail", IncidentDetail).set_incident(inc)

    def info(self) -> str:
        errors = sum(1 for r in self.rows if r.losing_work)
        # The hint goes whole before the counts are cut: at 100 columns it read "wors…" (a
        # 3 a.m. drive).
        losing = ([(f"[$error]{errors} losing work now[/]", f"[$error]{errors} losing work[/]",
                    0)] if errors else [])
        count = plural(len(self.rows), "incident")
        # Shorter still, the work being lost before the count (the table's 1/4 says it).
        return fit_parts([(count, "", 0), *losing], self.info_room(),
                         hint="[$text-muted]worst first · enter: its nodes[/]",
                         last=[(count, "", 1 if errors else 0),
                               *[(p[1], "", 0) for p in losing]])

    @on(LineTable.CursorMoved, "#incident-table")
    def _moved(self, event: LineTable.CursorMoved) -> None:
        self._show_detail()

    @on(LineTable.Selected, "#incident-table")
    def _selected(self, event: LineTable.Selected) -> None:
        self.action_open()

    def action_open(self) -> None:
        row = self.table.current_row
        if row is None or row.count == 0:
            return
        if row.count == 1:
            self.fleet.open_node(row.nodes)
        else:
            self.fleet.show_nodes(row.nodes)


def _cells(r: IncidentRow) -> tuple[str, ...]:
    return (r.severity, r.kind, r.age, r.nodes, r.jobs, r.title)


def _timeline_line(e: EventLine) -> tuple[str, str]:
    """The entry as markup, and as the plain text it shows (to measure)."""
    colour = {"error": "$error", "warn": "$warning", "done": "$success"}.get(e.severity,
                                                                              "$text-muted")
    when = utc_hms(e.ts)
    return (f"  [$text-muted]{when}[/] [{colour}]{esc(e.source)} {esc(e.kind)}[/] "
            f"{esc(e.text)}", f"  {when} {e.source} {e.kind} {e.text}")
