"""Overview: counts, the worst problems first, the per-GPU fleet grid, and what the on-call
wants next in panels under it: jobs with their progress and stragglers, fabric health by
switch (suspected switches first), the last events.

The panels take the room the grid leaves, laid out by width (three side by side from
``COLS3_MIN`` columns, jobs beside fabric-over-events from ``COLS2_MIN``, stacked below) and
dropped, least needed first, when the screen is short. Everything they show is computed once
per fleet change (``shown_revision``) or event-log change, never per tick of a quiet fleet.
"""

from collections.abc import Callable
from itertools import islice

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container
from textual.content import Content
from textual.css.query import NoMatches

from fleetdeck.console.eventlog import EventLine
from fleetdeck.console.fabric_map import (
    SwitchHealthCache,
    SwitchRow,
    SwitchSummary,
    leaf_grouped,
    switch_health,
)
from fleetdeck.console.health import VERDICT_ORDER, Verdict, reason_line
from fleetdeck.console.judgements import RECOVERED, suspect_switches, utc_hms
from fleetdeck.console.node_order import NodeOrder
from fleetdeck.console.retained_burst import BURST_CUT_TEXT
from fleetdeck.console.rows import (
    FleetCounts,
    JobRow,
    fleet_counts,
    gpu_findings,
    gpu_less,
    job_row,
    jobs_to_act_on_first,
    node_findings,
    progress_bar,
    sorted_jobs,
    top_problems_cut,
    top_problems_said,
)
from fleetdeck.console.state import WAITING, jobs_unheard_text
from fleetdeck.console.tui.fleet_grid import FleetGrid
from fleetdeck.console.tui.line_table import fit
from fleetdeck.console.tui.screens.base import FleetView, Readout, age_text, last_known
from fleetdeck.console.tui.text import esc, fit_parts, job_count_parts, plural
from fleetdeck.console.tui.theme import state_markup, verdict_markup

COLS3_MIN = 200
"""From this width the three panels stand side by side."""
COLS2_MIN = 120
"""From this width jobs stand beside fabric and events (stacked under each other)."""
PANELS_MIN = 6
"""Lines the panels need at least (else the grid keeps the room: the essentials only)."""
PANELS_SHARE = 0.4
"""A grid taller than the screen leaves the panels this share of the room (tall screens)."""
PROBLEMS_SHARE = 0.2
"""From 40 rows the top problems list as many as this share of the screen's rows (6 at least):
six at 250x70 left ~24 empty rows under the panels (a newcomer's run)."""


def problem_rows(height: int) -> int:
    """How many top problems the overview lists on a screen ``height`` rows tall: 3 under 40
    rows (the essentials only), else a fifth of them (9 at 48 rows, 14 at 70)."""
    return 3 if height < 40 else max(6, int(height * PROBLEMS_SHARE))
JOB_STATE_STYLE = {"R": "$success", "F": "$error", "NF": "$error", "TO": "$error",
                   "RQ": "$warning", "CG": "$text", "PD": "$text-muted", "CA": "$text-muted",
                   "CD": "$success"}
FABRIC_LINES = 8
"""Lines of the fabric panel when it stands above the events."""
SEV_STYLE = {"error": "$error", "warn": "$warning", "done": "$success"}

RAIL_GLYPH = {"ok": "[$success]■[/]", "errors": "[$warning]△[/]", "erroring": "[$warning b]▲[/]",
              "flapping": "[$error]↯[/]", "down": "[$error b]✖[/]",
              "suspect": "[$error b reverse]✖[/]", "silent": "[$text-muted]·[/]"}
"""The overview's one-line picture of a leaf group: the fabric matrix's glyphs
(theme.PORT_GLYPHS), a suspected switch reversed."""


def _bad_ports(r: SwitchRow) -> str:
    """A switch's bad ports with their unit, "3 of 16 ports down" ("of 16 ports: 1 down, 2
    erroring" for several kinds): "3 down of 16" read as 3 of 16 somethings, nodes or rails,
    beside a hostlist (a UX pass at 3 a.m.)."""
    parts = [(n, what) for n, what in ((r.down, "down"), (r.flapping, "flapping"),
                                       (r.erroring, "erroring")) if n]
    if len(parts) == 1:
        n, what = parts[0]
        return f"{n} of {r.ports} ports {what}"
    return f"of {r.ports} ports: " + ", ".join(f"{n} {what}" for n, what in parts)


def _rail_glyph(state: str) -> str:
    return RAIL_GLYPH[state]


def pack_groups(groups: list[str], width: int) -> str:
    """Markup groups joined by three spaces, a new line where the next would not fit: at 80
    columns the counts wrapped inside a group ("IB ports 256  down 0  erroring" over "0").
    A width of 0 or less (not laid out yet) keeps one line."""
    lines: list[str] = []
    used = 0
    for g in groups:
        n = Content.from_markup(g).cell_length
        if lines and 0 < width < used + 3 + n:
            lines.append("\n" + g)
            used = n
        else:
            lines.append(("   " if lines else "") + g)
            used += (3 if used else 0) + n
    return "".join(lines)


def _held_up_lines(j: JobRow) -> int:
    """Lines under a job in the jobs panel: its failed node, its stall, its straggler
    elsewhere, a step standing still (not hung yet)."""
    return ((1 if j.sick else 0) + (1 if j.stalled else 0) + (1 if j.straggler_apart else 0)
            + (1 if j.quiet else 0) + (1 if j.failed else 0))


def _hosts(nodes: "tuple[str, ...]") -> str:
    from fleetdeck.hostlist import compress

    return compress(list(nodes)) if nodes else ""


CLOCK_REFRESH_S = 5.0
"""The overview's counts, problems and jobs are made again at least this often."""

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
        self._shown: tuple[object, ...] = ()
        """What the counts and problems were last computed from (fleet revision, jobs, lines)."""
        self._ids: tuple[str, ...] = ()
        """The grid's nodes: a tuple, which the GC stops tracking (console/node_order.py)."""
        self._order = NodeOrder()
        """Keeps ``_ids`` by the fleet's members, as the node list's order does: by their
        count, a node retired and another born between two redraws (the overview covered by
        a node detail) left the retired one in the grid and the new one out of it."""
        self.jobs: list[JobRow] = []
        self.switches = SwitchSummary(0)
        self._ports = (0, 0, 0)
        """(IB ports, unknown of them, of those on nodes not heard from yet) as the counts
        line has them: the fabric panel's rows come from findings, so silent nodes' ports need
        saying there too."""
        self._switch_cache = SwitchHealthCache()
        self._panels_shown: dict[str, object] = {}
        """What each panel's text was last made from (data and size)."""
        self._arranged: tuple[object, ...] = ()

    def compose_body(self) -> ComposeResult:
        yield Readout(id="counts")
        yield Readout(id="problems")
        yield Readout(id="legend")
        yield FleetGrid(lambda: self.fleet.state, id="grid")
        yield Readout(id="grid-status")
        with Container(id="panels"):
            yield Readout(id="jobs-panel", classes="panel")
            with Container(id="side"):
                yield Readout(id="fabric-panel", classes="panel")
                yield Readout(id="events-panel", classes="panel")

    def on_mount(self) -> None:
        self.query_one(FleetGrid).focus()

    @property
    def grid(self) -> FleetGrid:
        return self.query_one(FleetGrid)

    def info(self) -> str:
        # What the colour is, and the key that changes it, are what a short line keeps: at
        # 100 columns it read "colour by he…" (a 3 a.m. drive).
        by = f"colour by [b]{self.grid.metric}[/] (m)"
        return fit_parts([(f"grid: one cell per GPU, {by}", f"cell per GPU, {by}", 0)],
                         self.info_room(), last=[(f"[b]{self.grid.metric}[/] (m)", "", 0)])

    def update_body(self, now: float) -> None:
        state = self.fleet.state
        limit = problem_rows(self.size.height)
        # Its heading, the rows and the line that says what more there is.
        self.query_one("#problems").styles.max_height = limit + 2
        # Counts and problems are fleet-wide passes (tens of ms at 16,384 nodes): only when a
        # node or a job changed since they were last shown.
        feed = self.fleet.session.feed
        link = (feed.conn.state, feed.conn.detail) if feed is not None else None
        # And every few seconds all the same: what reads the clock (a checkpoint's age, a
        # hang, the scheduler's will once believed) moved with nothing received, and the jobs
        # panel kept "ckpt 100 (14s)" for minutes under a dead simulator (a drill).
        shown = (self.fleet.shown_revision, limit, tuple(state.jobs.values()), link,
                 state.blind, self.size.width, self.fleet.other_clusters,
                 int(now // CLOCK_REFRESH_S), self.fleet.quiet_s(now) is None,
                 self.fleet.session.burst_cut, len(state.births_unheard))
        if shown != self._shown:
            self._shown = shown
            self._update_summary(limit)
        self._ids = self._order.ids(state, "node")  # the same tuple while no node came or went
        self.grid.set_nodes(self._ids)
        self._update_status()
        self._update_legend()
        self._arrange()
        self._update_panels()

    def _update_summary(self, limit: int) -> None:
        state = self.fleet.state
        now = self.fleet.clock()
        counts = fleet_counts(state, self.fleet.summaries.counts)
        box = self.query_one("#counts", Readout)
        box.show(self._counts_text(counts, (box.size.width or self.size.width) - 2))
        self._ports = (counts.ports, counts.ports_unknown, counts.ports_waiting)
        suspects = suspect_switches(state)
        self.switches = switch_health(state, suspects, self._switch_cache)
        self.jobs = [job_row(j, state, now) for j in sorted_jobs(state)]
        problems, total, rows = top_problems_cut(state, limit, suspects)
        # The line ``problem_rows`` leaves under the rows (``#problems``' max height): three
        # rows under "11 nodes need attention" read as the whole list (a 3 a.m. drive). Keys
        # said as the title says them ("2: node list"): "3 more: 2 for the node list, 6 for
        # the incidents" read as counts, 2 nodes and 6 incidents (a 3 a.m. drive at 80x24).
        more = (f"\n [$text-muted]… {rows - len(problems)} more (2: node list, "
                f"6: incidents)[/]" if rows > len(problems) else "")
        blind = state.blind
        if blind is not None and blind[1] is None:
            # Cut off from the broker: nothing below is current (FleetState.blind).
            # This loss's start, not an earlier one it was joined to (FleetState.lost_at).
            since = utc_hms(state.outage_start())  # UTC, as every time the views show
            # A hung broker keeps the link up until the keepalive gives up: "lost its broker
            # connection" read under a header saying "connected, nothing heard for 19 s
            # (broker hung?)" (a 3 a.m. drive, the broker SIGSTOPped).
            feed = self.fleet.session.feed
            lost = ("its broker answers nothing, not even a ping: hung?"
                   if feed is not None and feed.conn.state == "connected"
                   else "this console lost its broker connection")
            text = (f"[b]Top problems[/] [$error]unknown: no data since {since} ({lost}); "
                    "what shows is as of then[/]")
            for p in problems:
                text += (f"\n [{verdict_markup(p.verdict.value)}]{p.verdict.value:<8}[/] "
                         f"{esc(p.node):<10} {p.state:<6} {esc(p.text)}")
            text += more
        elif problems:
            what = top_problems_said(state, problems, total, suspects)
            lines = [f"[b]Top problems[/] ({what}, worst first; [$text-muted]2: node list[/])"]
            for p in problems:
                colour = verdict_markup(p.verdict.value)
                lines.append(f" [{colour}]{p.verdict.value:<8}[/] {esc(p.node):<10} "
                             f"{p.state:<6} {esc(p.text)}")
            text = "\n".join(lines) + more
        elif not state.nodes:
            text = f"[b]Top problems[/] [$warning]{self._no_nodes()}[/]"
        elif counts.verdicts.get(WAITING):
            feed = self.fleet.session.feed
            if feed is not None and feed.conn.state != "connected":
                # Nodes known from the store, and a broker this console cannot reach: "none so
                # far" would read as a fleet about to report, not a console that hears nothing.
                text = (f"[b]Top problems[/] [$warning]unknown: {self._not_connected()}; "
                        f"no telemetry yet from "
                        f"{plural(counts.verdicts[WAITING], 'node')}[/]")
            else:
                # Nodes heard talking are not "no telemetry yet": their deltas come, their
                # keyframe does not (a viewer console's asks are dropped).
                talking = counts.talking_unread
                unheard = counts.verdicts[WAITING] - talking
                said = ([f"no telemetry yet from {plural(unheard, 'node')}"] if unheard
                        else []) + ([f"{plural(talking, 'node')} heard, "
                                     f"{'its' if talking == 1 else 'their'} keyframe awaited "
                                     "(30 s at most)"] if talking else [])
                text = f"[b]Top problems[/] none so far: {'; '.join(said)}"
        elif (quiet := self.fleet.quiet_s(now)) is not None:
            # Connected and hearing nothing (a hung broker, or the fleet's link): as of the
            # last sample, not now; "every node reports healthy" under the header's "nothing
            # heard for 15 s" (an SRE drill, the console's link frozen).
            text = (f"[b]Top problems[/] [$warning]none as of {quiet:.0f} s ago: nothing heard "
                    "since (see the header)[/]")
        elif (cut := self.fleet.session.burst_cut) is not None:
            # The broker dropped births at connect: nodes it dropped are in no count, so
            # "every node" is only every node listed (an SRE drill: 34 of 64 listed, healthy).
            listed = plural(len(state.nodes), "node")
            text = (f"[b]Top problems[/] [$warning]none among the {listed} listed: "
                    f"{BURST_CUT_TEXT.format(missing=cut[0], born=cut[1])}[/]")
        else:
            text = "[b]Top problems[/] [$success]none: every node reports healthy[/]"
        self.query_one("#problems", Readout).show(text)

    def _no_nodes(self) -> str:
        """Why there is nothing to judge: "healthy" of an empty fleet would hide a console that
        hears nothing (a broker down, a wrong --cluster)."""
        feed = self.fleet.session.feed
        if feed is None:
            return "unknown: no node in what this console has seen yet"
        if feed.conn.state != "connected":
            return f"unknown: {self._not_connected()}; no node heard yet"
        dropped = self.fleet.session.state.births_dropped_text()
        if dropped:
            return f"unknown: no node listed: {esc(dropped)}"
        others = self.fleet.other_clusters
        seen = (f"; clusters seen there: {esc(', '.join(others[:5]))} (wrong --cluster?)"
                if others else "")
        return f"unknown: no node of cluster {esc(self.fleet.cluster)} heard from yet{seen}"

    def _not_connected(self) -> str:
        """Why this console hears nothing, in markup: the connection's failure in full, as the
        header cuts it at 72 characters ("refused the credentials (not authorised): check
        the…", a drill) and this line has the width for the fix; else its state."""
        feed = self.fleet.session.feed
        if feed is not None and feed.conn.detail:
            return esc(self.fleet.link_why())
        state = feed.conn.state if feed is not None else "no broker"
        return f"not connected to the broker ({state})"

    def _counts_text(self, c: FleetCounts, width: int) -> str:
        states = "  ".join(f"[{state_markup(s)}]{s} {c.states[s]}[/]" for s in STATE_ORDER
                           if c.states.get(s) and s != "stale")
        if c.states.get("stale"):
            # sinfo's `*`: not responding is a mark on a state, not a state of its own ("down 2
            # stale 2" summed to 50 on a fleet of 48).
            states += f"  [{state_markup('stale')}](*not responding {c.states['stale']})[/]"
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
        if c.ports_unknown:
            err += f"  [$text-muted]unknown {c.ports_unknown}[/]"
        groups = [f"[b]Nodes[/] {c.nodes}  {states}", f"[b]Health[/] {verdicts or '-'}",
                  f"[b]GPUs[/] {c.gpus}  in use {c.gpus_in_use}  free {c.gpus_free}  {failed}"
                  f"  out {c.gpus_out}",
                  f"[b]IB ports[/] {c.ports}  {down}  {err}", f"[b]Jobs[/] {jobs}"]
        return pack_groups(groups[:2], width) + "\n" + pack_groups(groups[2:], width)

    def _update_legend(self) -> None:
        self.query_one("#legend", Readout).show(self.grid.legend())

    def _update_status(self) -> None:
        grid = self.grid
        node = grid.current_node
        if node is None:
            self.query_one("#grid-status", Readout).show("[$text-muted]no nodes yet[/]")
            return
        st = self.fleet.state.nodes.get(node)
        no_gpus = st is not None and gpu_less(st)
        text = f"[b]{esc(node)}[/] " + ("no GPUs" if no_gpus else f"gpu{grid.cursor_gpu}")
        place = grid.place(grid.cursor_node)
        if place:  # which leaf and rack `}`/`)` reached: the rows do not follow them
            text += f" [$text-muted]{esc(place)}[/]"
        if st is not None:
            t = st.telemetry
            g = next((x for x in t.gpus if x.index == grid.cursor_gpu), None) if t else None
            if g is not None and g.present:
                figures = (f"util {g.util_pct if g.util_pct is not None else '-'}%  "
                           f"{g.power_w if g.power_w is not None else '-'} W  "
                           f"{g.temp_c if g.temp_c is not None else '-'} °C")
                if last_known(st):
                    old = ("" if st.last_rx is None
                           else f" {age_text(self.fleet.clock() - st.last_rx)} ago")
                    figures = f"[$text-muted i]last known{old}: {figures}[/]"
                text += "  " + figures
            elif g is not None:
                text += "  [$error]not present[/]"
            mine = node_findings(st) if no_gpus else gpu_findings(st, grid.cursor_gpu)
            colour = verdict_markup(st.verdict_shown)
            text += f"  node [{colour}]{st.verdict_shown}[/]"
            if mine:
                text += "  " + esc("; ".join(map(reason_line, mine[:2])))
        text += "   [$text-muted]enter: detail · arrows/hjkl move[/]"
        self.query_one("#grid-status", Readout).show(text)

    # --- layout -------------------------------------------------------------------------------

    def on_resize(self) -> None:
        self.call_after_refresh(self._arrange_and_fill)

    def _arrange_and_fill(self) -> None:
        # After a resize, once laid out; the screen may be gone by then (the app exiting).
        try:
            self._arrange()
            self._update_panels()
        except NoMatches:
            pass

    def _arrange(self) -> None:
        """Give the grid the lines it needs and the panels the rest; on a short screen the
        panels go (the essentials stay); on a tall one a big grid leaves them a share."""
        if not self.is_mounted:
            return
        grid = self.grid
        used = sum(self.query_one(f"#{name}").outer_size.height
                   for name in ("header", "tabs", "counts", "problems", "legend",
                                "grid-status"))
        rest = self.size.height - used - 1  # the footer
        per_line = max(1, grid.per_line)
        need = max(1, -(-len(self._ids) // per_line))
        width = self.size.width
        key = (rest, need, width)
        if key == self._arranged:
            return
        self._arranged = key
        panels = self.query_one("#panels")
        if rest - need >= PANELS_MIN:
            grid_h = need
        elif rest >= 3 * PANELS_MIN and self.size.height >= 40:
            grid_h = rest - max(PANELS_MIN, int(rest * PANELS_SHARE))
        else:
            grid_h = 0
        if grid_h:
            grid.styles.height = grid_h
            panels.display = True
            room = rest - grid_h
        else:
            grid.styles.height = "1fr"
            panels.display = False
            room = 0
        cols = 3 if width >= COLS3_MIN else 2 if width >= COLS2_MIN else 1
        panels.set_classes(f"cols-{cols}")
        # Stacked, a panel needs a few lines of its own: the least needed goes first.
        events = self.query_one("#events-panel")
        side = self.query_one("#side")
        side.display = cols > 1 or room >= 2 * PANELS_MIN
        events.display = cols > 1 or room >= 3 * PANELS_MIN
        self._panels_shown = {}

    def _update_panels(self) -> None:
        panels = self.query_one("#panels")
        if not panels.display:
            return
        self._fill("jobs-panel", (self.fleet.shown_revision, tuple(self.jobs)),
                   self._jobs_text)
        self._fill("fabric-panel", (self.fleet.shown_revision, self.switches.rows, self._ports),
                   self._fabric_text)
        self._fill("events-panel", self.fleet.event_seq, self._events_text)

    def _fill(self, name: str, data: object,
              make: Callable[[int, int], str]) -> None:
        panel = self.query_one(f"#{name}", Readout)
        side = self.query_one("#side")
        if not panel.display or (panel.parent is side and not side.display):
            return
        width, height = panel.content_size.width, panel.content_size.height
        key = (data, width, height)
        if self._panels_shown.get(name) == key:
            return
        self._panels_shown[name] = key
        # Only the fabric panel above the events is as tall as its text; the others keep
        # their size whatever they show, so their text changing needs no layout pass.
        sized = name == "fabric-panel" and "cols-3" not in self.query_one("#panels").classes
        panel.show(make(max(20, width), max(1, height)), layout=sized)

    def _jobs_text(self, width: int, height: int) -> str:
        jobs = self.jobs
        panel = self.query_one("#jobs-panel", Readout)
        running = sum(1 for j in jobs if j.state == "R")
        slow = sum(1 for j in jobs if j.straggler)
        by_switch = sum(1 for j in jobs if j.sick_switch)
        sick = sum(1 for j in jobs if j.sick) - by_switch
        stalled = sum(1 for j in jobs if j.stalled and not j.sick)
        failed = sum(1 for j in jobs if j.failed and not j.failed_lapsed)
        # A border title: the panel's corners and a cell each side of the title.
        panel.border_title = "Jobs: " + fit_parts(
            job_count_parts(running, sick, by_switch, stalled, failed, slow),
            panel.size.width - 10, ", ", hint="[$text-muted]3: jobs[/]")
        if not jobs:
            state = self.fleet.state
            unheard = state.jobs_unheard()
            if unheard:
                why = state.jobs_unheard_why(state.judged_at)
                return f"[$warning]{esc(jobs_unheard_text(unheard, why))}[/]"
            return "[$text-muted]no jobs: the scheduler has published no job status[/]"
        order = jobs_to_act_on_first(jobs)
        name_w = max(8, min(24, max(len(j.name) for j in jobs), width // 3))
        bar_w = 10 if width >= 60 else 0
        # One width for every ETA, so the node lists after it start in one column: "ETA -"
        # beside "ETA 59m51s" put them a cell or five apart (a 3 a.m. drive at 2,048 nodes).
        eta_w = max((len(j.eta) for j in jobs if j.state in ("R", "CG", "RQ")), default=1)
        # With room, each job gets a line of detail (step, step time, checkpoint).
        detail = len(jobs) * 2 + sum(_held_up_lines(j) for j in jobs) <= height
        lines: list[str] = []
        shown = 0
        for j in order:
            need = 1 + _held_up_lines(j) + (1 if detail else 0)
            left = len(jobs) - shown
            if len(lines) + need > height - (1 if left > 1 else 0) and shown:
                break
            colour = JOB_STATE_STYLE.get(j.state, "$text")
            head = (f"{fit(j.job_id, 6)} {fit(j.name, name_w)} "
                    f"[{colour}]{fit(j.state, 2)}[/] ")
            used = 6 + 1 + name_w + 1 + 2 + 1
            if j.state in ("R", "CG", "RQ"):
                bar = f"{progress_bar(j.progress, bar_w)} " if bar_w else ""
                tail = f"{j.progress * 100:3.0f}% ETA {j.eta:<{eta_w}}  "
                used += len(bar) + len(tail)
                head += f"[$accent]{bar}[/]{tail}"
                if not detail:
                    head += esc(fit(j.nodes, max(0, width - used)).rstrip())
            else:
                # A pending job without a reason or nodes says nothing more ("PD" alone).
                what = j.reason or (j.nodes if j.nodes != "-" else "")
                head += esc(fit(what, max(0, width - used)).rstrip())
            lines.append(head)
            if j.sick:
                lines.append(f"  [$error]↳ {esc(fit(j.sick, width - 4))}[/]")
            if j.stalled:
                lines.append(f"  [$error]↳ {esc(fit(j.stalled, width - 4))}[/]")
            if j.failed:
                style = "$text-muted" if j.failed_lapsed else "$error"
                # The head line says the scheduler's reason: said again here, the same
                # sentence read twice, and pushed the restart off the line (a UX pass).
                lines.append(f"  [{style}]↳ {esc(fit(j.failed_where, width - 4))}[/]")
            if j.straggler_apart:
                lines.append(f"  [$warning]↳ straggler {esc(fit(j.straggler, width - 14))}[/]")
            if j.quiet:
                lines.append(f"  [$text-muted]↳ {esc(fit(j.quiet, width - 4))}[/]")
            if detail:
                info = (f"{j.nodes} · step {j.step} · {j.step_time}/step · ckpt {j.checkpoint}"
                        if j.state in ("R", "CG", "RQ")
                        else f"user {j.user}" + (f" · {j.nodes}" if j.nodes != "-" else ""))
                lines.append(f"  [$text-muted]{esc(fit(info, width - 2).rstrip())}[/]")
            shown += 1
        if shown < len(jobs):
            lines.append(f"[$text-muted]+{len(jobs) - shown} more (3: jobs)[/]")
        return "\n".join(lines)

    def _fabric_text(self, width: int, height: int) -> str:
        s = self.switches
        panel = self.query_one("#fabric-panel", Readout)
        sus = sum(1 for r in s.rows if r.failing)
        back = sum(1 for r in s.rows if r.recovered)
        title = "Fabric by switch"
        if sus or back:
            said = [f"[$error]{plural(sus, 'suspect')}[/]"] if sus else []
            said += [f"[$warning]{back} recovered[/]"] if back else []
            title += ": " + ", ".join(said)
        panel.border_title = title + "  [$text-muted]4: fabric[/]"
        if not s.switches:
            return "[$text-muted]no IB ports known yet[/]"
        lines: list[str] = []
        # Beside the events the panel is as tall as its text (up to FABRIC_LINES); in three
        # columns it has the full height.
        beside = "cols-3" not in self.query_one("#panels").classes
        room = max(1, (FABRIC_LINES if beside else height) - 1)
        rows = leaf_grouped(s)
        if len(rows) == room + 1:
            room += 1  # the line "+1 more" would take
        for r in rows[:room]:
            what = _bad_ports(r)
            if r.rails > 1:
                what = f"{r.rails} rails, {what}"
            nodes = esc(fit(_hosts(r.nodes), max(0, width - 14 - len(what) - 12)).rstrip())
            if r.recovered:
                # Its ports are up; N2 holds for its window: the matrix says the same.
                what = f"{RECOVERED}: {r.bad} of {r.ports} ports"
                if r.rails > 1:
                    what = f"{RECOVERED}: {r.rails} rails, {r.bad} of {r.ports} ports"
                nodes = esc(fit(_hosts(r.nodes), max(0, width - 14 - len(what))).rstrip())
                lines.append(f"  {fit(r.switch, 11)} [$warning]{what}[/] {nodes}")
            elif r.suspect:
                lines.append(f"[$error b]▶ {fit(r.switch, 11)}[/] [$error]suspect: {what}[/] "
                             f"{nodes}")
            else:
                lines.append(f"  {fit(r.switch, 11)} [$warning]{what}[/] {nodes}")
        if len(rows) > room:
            lines.append(f"[$text-muted]+{len(rows) - room} more switches (4: fabric)[/]")
        ok = s.switches - len(s.rows)
        ports, unknown, waiting = self._ports
        # A silent node's ports have no findings, so no row: without a word on them a fleet
        # whose agents all died read "every port up" under a header of "unknown 384". Nodes
        # that have not sent their first sample yet are not silent: agents at --interval 10
        # read "silent" for their first seconds (a newcomer's set-up).
        of = "" if unknown >= ports else f" of {ports}"
        no_data = f"? no data from {unknown}{of} ports"
        whys = (["their nodes are not heard from yet", "not heard from yet"] if waiting >= unknown
                else ["their nodes are silent"] if not waiting else
                [f"{unknown - waiting} on silent nodes, {waiting} on nodes not heard from yet"])
        # The panel is 58 cells beside the jobs at 120 columns: "(32 on silent nodes, 32 on…"
        # hid the count not heard from yet. A shorter word, else the split on a line of its own.
        why = next((w for w in whys if len(no_data) + len(w) + 3 <= width), "")
        silent = ([f"[$warning]{no_data}[/] ({why})"] if why
                  else [f"[$warning]{no_data}[/] ({whys[-1]})"] if waiting >= unknown or not waiting
                  else [f"[$warning]{no_data}:[/]", f"  {esc(fit(whys[0], width - 2).rstrip())}"])
        if not unknown:
            silent = []
        if not s.rows and not ports:
            lines.append("[$text-muted]no IB ports known yet[/]")
        elif not s.rows and unknown >= ports:
            lines.extend(silent)
        elif not s.rows and unknown:
            lines.append(f"[$success]✓ no bad port among the {ports - unknown} heard from[/]")
            lines.extend(silent)
        elif not s.rows:
            lines.append(f"[$success]✓ all {s.switches} rail switches ok[/]: every port up, "
                         "no errors")
        else:
            lines.append(f"[$success]✓ {ok} of {s.switches} rail switches ok[/]"
                         + (" (by the nodes heard from)" if unknown else ""))
            lines.extend(silent)
        limit = FABRIC_LINES if beside else height
        if len(lines) < limit - 2:
            # Under their own heading: right under the switches' lines, the leaf groups' read
            # as more of them, nested ("▶ leaf100 r0-7" under "▶ leaf100-r3"), and nothing
            # said a glyph was a rail switch (a UX pass at 3 a.m.).
            lines.append("[$text-muted]leaf groups, a glyph per rail switch:[/]")
            lines.extend(self._leaf_lines(limit - len(lines)))
        return "\n".join(lines)

    def _leaf_lines(self, room: int) -> list[str]:
        """One line per leaf group, a glyph per rail switch (its worst port), the groups with
        a bad switch first: the fabric matrix in one line per group."""
        s = self.switches
        worst: dict[str, dict[int, str]] = {}
        for r in s.rows:
            worst.setdefault(r.leaf, {})[r.rail] = "suspect" if r.failing else r.port_name
        order = [leaf for leaf in worst if leaf in s.leaves]
        order += [leaf for leaf in s.leaves if leaf not in worst]
        shown = order if len(order) <= room else order[:max(0, room - 1)]
        width = max((len(leaf) for leaf in shown), default=6)
        lines = []
        ports, unknown, _ = self._ports
        # No node heard from: a row of ■ read as every switch fine (a SIGKILLed simulator).
        fine = "silent" if ports and unknown >= ports else "ok"
        for leaf in shown:
            nodes, rails = s.leaves[leaf]
            bad = worst.get(leaf, {})
            cells = "".join(_rail_glyph(bad.get(rail, fine)) for rail in rails)
            mark = "[$error b]▶[/]" if "suspect" in bad.values() else " "
            span = f"r{rails[0]}-{rails[-1]}" if rails else "-"
            lines.append(f"{mark} [$text-muted]{esc(fit(leaf, width))} {span}[/] {cells}  "
                         f"[$text-muted]{plural(nodes, 'node')}[/]")
        if len(shown) < len(order):
            lines.append(f"[$text-muted]+{len(order) - len(shown)} more leaf groups "
                         "(4: fabric)[/]")
        return lines

    def _events_text(self, width: int, height: int) -> str:
        log = self.fleet.event_log
        panel = self.query_one("#events-panel", Readout)
        panel.border_title = (f"Last events ({len(log)})  "
                              "[$text-muted]5: events[/]")
        # Newest first by time, as the events view: arrival order put a verdict change (its
        # tick's time) above the agent's event that caused it, and a late event on top (a 3
        # a.m. drive). A few screens' worth of the newest arrivals holds the newest by time.
        picked: list[EventLine] = sorted(
            islice((line for _seq, line in reversed(log)), height * 4),
            key=lambda e: e.ts, reverse=True)[:height]
        if not picked:
            return "[$text-muted]no events yet[/]"
        kind_w = max(8, min(24, max(len(e.kind) for e in picked), width // 3))
        src_w = max(7, min(10, max(len(e.source) for e in picked)))
        lines = []
        for e in picked:
            colour = SEV_STYLE.get(e.severity, "$text")
            used = 8 + 1 + src_w + 1 + kind_w + 1
            lines.append(f"[$text-muted]{utc_hms(e.ts)}[/] {esc(fit(e.source, src_w))} "
                         f"[{colour}]{esc(fit(e.kind, kind_w))}[/] "
                         f"{esc(fit(e.text, max(0, width - used)).rstrip())}")
        return "\n".join(lines)

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
