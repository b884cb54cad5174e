"""Jobs: squeue codes, progress, step time, ETA, nodes, last checkpoint, and what holds a job
up (a node that stalls it, its straggler) or the scheduler's reason."""

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Input

from fleetdeck.console.rows import (
    JobRow,
    job_row,
    jobs_to_act_on_first,
    progress_bar,
    sorted_jobs,
)
from fleetdeck.console.state import jobs_unheard_text
from fleetdeck.console.tui.line_table import Column, LineTable
from fleetdeck.console.tui.screens.base import FilteredView, dialog_key, filter_said
from fleetdeck.console.tui.text import esc, fit_parts, job_count_parts, plural

BAR = 12
JOB_COLUMNS = [
    # The progress bar is decoration (the percentage is the data): it is the first to go.
    # Where there is room, JOBID, USER, STEP, ETA and CKPT narrow to their cells so NODES
    # and what holds a job up get the cells those do not use.
    Column("JOBID", "job_id", 8, grow=16, shrink=True), Column("NAME", "name", 12, grow=40),
    Column("USER", "user", 8, grow=16, drop=4, shrink=True), Column("ST", "state", 2),
    Column("DONE", "progress", 4, right=True), Column("PROGRESS", "bar", BAR, drop=6),
    Column("STEP", "step", 11, right=True, drop=3, shrink=True),
    Column("STEP T", "step_time", 6, right=True, drop=2),
    Column("ETA", "eta", 7, right=True, shrink=True), Column("NODES", "nodes", 14, grow=48),
    # What holds a running job up (a node that stalls it, its straggler), or why the
    # scheduler holds or ended a job: a job has one or the other, so they share the line's
    # rest; squeue's NODELIST(REASON) habit shows which is which.
    Column("CKPT", "checkpoint", 14, drop=5, shrink=True),
    Column("HELD UP (REASON)", "problem", 0, min=28),
]
STATE_STYLE = {"R": "ok", "PD": "muted", "CG": "info", "CD": "done", "F": "failed",
               "NF": "failed", "RQ": "warn", "CA": "muted", "TO": "failed"}


class JobsScreen(FilteredView):
    FILTER_BOX = "job-filter"
    VIEW = "jobs"
    BINDINGS = [
        Binding("slash", "filter", "Filter", priority=True),  # see action_filter
        *dialog_key("r", "restart", "Restart"),
        Binding("enter", "nodes", "Nodes", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[JobRow] = []
        self.total = 0
        """Jobs known, filtered or not (the line says how many of them are shown)."""

    def compose_body(self) -> ComposeResult:
        yield LineTable(JOB_COLUMNS, key=lambda r: r.job_id, cells=_cells, style=_style,
                        cell_styles=_cell_styles, open_label="Its nodes", id="job-table")
        yield Input(placeholder="filter jobs: regex over id, name, user, state, nodes and what "
                    "holds them up; hostlist gpu[0010-0020]: the jobs on them; !inverse; "
                    "esc closes, esc again clears", id="job-filter")

    def on_mount(self) -> None:
        self.query_one("#job-filter", Input).display = False
        self.table.focus()

    @property
    def table(self) -> LineTable[JobRow]:
        return self.query_one("#job-table", LineTable)

    def update_body(self, now: float) -> None:
        state = self.fleet.state
        jobs = sorted_jobs(state)
        f = self.filter
        self.total = len(jobs)
        rows = [job_row(j, state, now) for j in jobs]
        if f.active:
            rows = [r for r, j in zip(rows, jobs, strict=True) if f.match_job(r, j.nodes)]
        self.rows = jobs_to_act_on_first(rows)
        unheard = [] if self.total else state.jobs_unheard()
        self.table.empty_text = (
            "no jobs match the filter" if f.active and self.total
            else jobs_unheard_text(unheard, state.jobs_unheard_why(now)) if unheard
            else "no jobs: the scheduler has not published any job status (job/<id>/status)")
        self.table.set_rows(self.rows)

    def info(self) -> str:
        running = sum(1 for r in self.rows if r.state == "R")
        slow = sum(1 for r in self.rows if r.straggler)
        by_switch = sum(1 for r in self.rows if r.sick_switch)
        sick = sum(1 for r in self.rows if r.sick) - by_switch
        stalled = sum(1 for r in self.rows if r.stalled and not r.sick)
        failed = sum(1 for r in self.rows if r.failed and not r.failed_lapsed)
        f = self.filter
        # What hides jobs first, as the nodes view says it: at 80 columns the line is cut.
        shown = (f"{len(self.rows)}/{plural(self.total, 'job')}" if f.active
                 else plural(len(self.rows), "job"))
        said = filter_said(f)
        counts = (running, sick, by_switch, stalled, failed, slow)
        # Unfiltered, the table's own "1/12" says how many jobs there are: the line too short
        # for its counts gives that up before it cuts what holds jobs up.
        return fit_parts([(shown, "", 0), *said, *job_count_parts(*counts)],
                         self.info_room(), hint="[$text-muted]enter: its nodes[/]",
                         last=[(shown, "", 0 if f.active else 3), *said,
                               *job_count_parts(*counts, merged=True)])

    def action_restart(self) -> None:
        self.not_typing()
        row = self.table.current_row
        if row is not None:
            self.fleet.request_restart(row.job_id)

    def action_nodes(self) -> None:
        row = self.table.current_row
        if row is not None:
            self._show_nodes(row)

    @on(LineTable.Selected, "#job-table")
    def _selected(self, event: LineTable.Selected) -> None:
        row = next((r for r in self.rows if r.job_id == event.key), None)
        if row is not None:
            self._show_nodes(row)

    def _show_nodes(self, row: JobRow) -> None:
        # A job that holds no node (pending, ended) opened nothing and said nothing under
        # "⏎ Its nodes" (a 3 a.m. drive: enter on job 4106, F on gpu0059): a failed one opens
        # the nodes it failed on, any other says why nothing opens.
        hosts = row.nodes if row.nodes != "-" else row.failed_on
        if hosts:
            self.fleet.show_nodes(hosts)
        else:
            why = f": {row.reason}" if row.reason else ""
            self.notify(esc(f"job {row.job_id} ({row.state}{why}) holds no nodes now"),
                        timeout=3)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return not (action == "restart" and self.fleet.read_only)


def _cells(r: JobRow) -> tuple[str, ...]:
    return (r.job_id, r.name, r.user, r.state, f"{r.progress * 100:3.0f}%",
            progress_bar(r.progress, BAR), r.step, r.step_time, r.eta, r.nodes, r.checkpoint,
            r.held_up or r.quiet or (f"({r.reason})" if r.reason else ""))


def _cell_styles(r: JobRow) -> dict[str, str]:
    """A step standing still, not hung yet, is said muted: not an alarm (a checkpoint save
    looks the same)."""
    return {"problem": "muted"} if r.quiet and not r.held_up else {}


def _style(r: JobRow) -> str:
    if r.sick or r.stalled or (r.failed and not r.failed_lapsed):
        return "failed"
    if r.straggler and r.state == "R":
        return "degraded"
    return STATE_STYLE.get(r.state, "text")
