"""Node detail: per-GPU state with sparklines, per-port IB state and counters, the timeline;
``h`` swaps them for the node's history charts from the store (console/tui/history_view.py)."""

from collections.abc import Callable

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import ContentSwitcher, Static

from fleetdeck.console.eventlog import event_text
from fleetdeck.console.health import Severity, describe_clock_events, worst_xid
from fleetdeck.console.judgements import (
    findings_worst_first,
    own_job,
    recommended_action,
    straggler,
    utc_hms,
)
from fleetdeck.console.recent import sparkline
from fleetdeck.console.rows import (
    IB_UNIT,
    drain_reason,
    drain_unsaved,
    gpu_less,
    ib_rate_text,
    ib_throughput_text,
    port_error_text,
    slurm_state,
)
from fleetdeck.console.session import ConsoleSession
from fleetdeck.console.state import NodeState
from fleetdeck.console.tui.fit_table import FitColumn, FitTable
from fleetdeck.console.tui.history_view import HistoryView
from fleetdeck.console.tui.line_table import fit
from fleetdeck.console.tui.screens.base import FleetView, dialog_key, last_known
from fleetdeck.console.tui.text import esc
from fleetdeck.console.tui.theme import verdict_style

SPARK_WIDTH = 16
HOT_C = 87
"""GPU temperature shown as hot (H100 slowdown is near 90 °C)."""
GPU_COLUMNS = (("GPU", 0), ("UTIL", 0), ("POWER", 0), ("TEMP", 0), ("MEM°", 7), ("SM MHz", 5),
               ("CLOCK EVENTS", 1), ("ECC dbe/sbe", 3), ("REMAP", 6), ("NVLINK", 4),
               ("XID", 2))
"""Data columns in order, with the rank at which a narrow screen hides them (0: never; the
sparklines after UTIL and POWER go before any of these)."""
RATE, TX, RX = f"RATE {IB_UNIT}", f"TX {IB_UNIT}", f"RX {IB_UNIT}"
ERRORS = "ERRORS"
"""Titled with the agent's interval (``ERRORS (+in 1 s)``): the counters are totals, the "+"
the delta over the last sample; "(+delta)" left over what to guess, against N4's rates per
second (a newcomer's run)."""
PORT_COLUMNS = (("PORT", 0), ("STATE", 0), ("PHYS", 0), (RATE, 2), (TX, 1), (RX, 1),
                (ERRORS, 0))


def _v(value: float | int | None, fmt: str = "{:.0f}") -> str:
    return "-" if value is None else fmt.format(value)


def ports_title(st: NodeState, reported: int) -> str:
    """The ports table's title: the ports the node should have beside those it reports, as
    ``status`` counts them (``NodeState.ib_ports``, N1 "0/8 IB ports found"); "no IB ports
    reported" of a node whose SKU has eight read as a node without InfiniBand (a review)."""
    expected = st.ib_ports
    if reported >= expected:
        return "InfiniBand ports"
    return f"InfiniBand ports: {reported} of {expected} found"


class NodeDetailScreen(FleetView):
    VIEW = "node"
    BINDINGS = [
        *dialog_key("r", "drain", "Drain"),
        *dialog_key("u", "resume", "Resume"),
        Binding("h", "history", "History"),
        Binding("escape", "app.go_back", "Back"),
    ]

    def __init__(self, node_id: str, gpu: int | None = None) -> None:
        super().__init__()
        self.node_id = node_id
        self.gpu = gpu
        self._watching: tuple[ConsoleSession, str] | None = None
        """The session asked for this node's raw samples, and the node (``watch_node``)."""

    def show_node(self, node_id: str, gpu: int | None, now: float) -> None:
        """Make this (mounted, closed) detail the detail of ``node_id``, as a new one would be,
        before it is pushed again: the app keeps one and reuses it (``FleetdeckApp.open_node``),
        as each new one left ~5,000 objects of cyclic garbage for the periodic sweep
        (docs/performance.md, "The node detail's garbage"). Every widget is redrawn here, so
        the first frame it is shown in is already the new node's."""
        self.node_id, self.gpu = node_id, gpu
        self._watch()
        switch = self.query_one(ContentSwitcher)
        switch.current = "detail"
        self.query_one(HistoryView).show_node(node_id)
        for part in ("#node-summary", "#gpus", "#ports", "#timeline"):
            self.query_one(part, Static).update("")
        self.query_one("#detail", VerticalScroll).scroll_home(animate=False, immediate=True)
        self.refresh_view(now)

    def _watch(self) -> None:
        # On digests the fleet-wide picture has no raw samples: this node's come while open.
        session = self.fleet.session
        if self._watching == (session, self.node_id):
            return
        self._unwatch()
        self._watching = (session, self.node_id)
        session.watch_node(self.node_id)

    def _unwatch(self) -> None:
        if self._watching is not None:
            session, node = self._watching
            self._watching = None
            session.unwatch_node(node)

    def on_mount(self) -> None:
        self._watch()

    def on_unmount(self) -> None:
        self._unwatch()

    def on_screen_suspend(self) -> None:
        # Closed (popped), not only covered by a dialog or left on another view's stack: the
        # reused detail stays mounted, so what a new one stopped on unmount stops here.
        # ``_screen_stacks`` is Textual's own (pyproject.toml pins textual 8.2.8).
        if not any(self in stack for stack in self.app._screen_stacks.values()):
            self._unwatch()

    def compose_body(self) -> ComposeResult:
        with ContentSwitcher(initial="detail", id="detail-switch"):
            with VerticalScroll(id="detail"):
                yield Static(id="node-summary")
                yield Static(id="gpus")
                yield Static(id="ports")
                yield Static(id="timeline")
            yield HistoryView(self.node_id)

    @property
    def showing_history(self) -> bool:
        return self.query_one(ContentSwitcher).current == "history"

    def info(self) -> str:
        if self.showing_history:
            return (f"node [b]{esc(self.node_id)}[/] history  [$text-muted]h or esc live · "
                    "s span · ←/→ cursor[/]")
        # A read-only console (a replay) does not offer what it refuses.
        # Nor drain or resume of a node no longer there (retired): both are refused.
        acts = ("" if getattr(self.app, "read_only", False)
                or self.node_id not in self.fleet.state.nodes else "r drain · u resume · ")
        return f"node [b]{esc(self.node_id)}[/]  [$text-muted]esc back · {acts}h history[/]"

    def action_history(self) -> None:
        """Swap the live tables for the history charts, or back."""
        switch = self.query_one(ContentSwitcher)
        switch.current = "detail" if self.showing_history else "history"
        self.query_one("#detail" if switch.current == "detail" else "#history").focus()
        self.fleet.refresh_view()

    def on_escape(self) -> bool:
        if self.showing_history:
            self.action_history()
            return True
        return False

    def update_body(self, now: float) -> None:
        if self.showing_history:
            return  # the charts read the store on their own clock (history_view.RELOAD_S)
        st = self.fleet.state.nodes.get(self.node_id)
        if st is None:
            # Retired (or gone) while open: its last GPU and port tables stayed under "not
            # known (yet)", read as live (a review). Only what the console said of it stays.
            retired = self.fleet.session.retired_text(self.node_id)
            self.query_one("#node-summary", Static).update(
                f"[$error]{esc(retired)}[/] [$text-muted](h)[/]" if retired
                else f"[$error]{esc(self.node_id)} is not known (yet)[/]")
            self.query_one("#gpus", Static).update("")
            self.query_one("#ports", Static).update("")
            self.query_one("#timeline", Static).update(self._timeline(None))
            return
        self.query_one("#node-summary", Static).update(self._summary(st, now))
        self.query_one("#gpus", Static).update(self._gpus(st))
        self.query_one("#ports", Static).update(self._ports(st))
        self.query_one("#timeline", Static).update(self._timeline(st))

    def _summary(self, st: NodeState, now: float) -> Text:
        b = st.birth
        t = Text()
        t.append(st.node_id, "bold")
        t.append(f"  {slurm_state(st)}  ")
        t.append(st.verdict_shown, verdict_style(self.app, st.verdict_shown))
        # "never" of a node the store knew from before this console started read as a node
        # that never reported (a 3 a.m. drive): it is only this console that has not heard it.
        age = ("none since this console started (h: its history)" if st.last_rx is None
               else f"{max(0.0, now - st.last_rx):.1f}s ago")
        t.append(f"  last telemetry {age}  seq {st.last_seq} gaps {st.seq_gaps}")
        if last_known(st) and st.telemetry is not None:
            t.append("  figures below: last known, not live", "bold italic")
        if st.digest is not None:
            # On digests: the verdict is this collector's; the figures below are raw while open.
            t.append(f"  judged by {st.digest.by}", "bold")
        if b is not None:
            topo = b.topology
            t.append(f"\n{b.sku or '?'}  driver {b.driver_version or '?'}  "
                     f"CUDA {b.cuda_version or '?'}  agent {b.agent_version} ({b.source})  "
                     f"rack {topo.rack or '-'} leaf {topo.leaf or '-'}")
        state = self.fleet.state
        running = [j for j in state.jobs.values()
                   if j.state.value in ("R", "CG") and self.node_id in j.nodes]
        jobs = ", ".join(j.job_id for j in running) or own_job(st, state) or ""
        t.append(f"\njobs: {jobs or 'none'}")
        for job in running:
            found = straggler(job, state)
            slow = None if found is None else found.of_node(self.node_id)
            if slow is not None:
                # The overview and the jobs view named the straggler; its own detail, where
                # the operator decides, did not (a 3 a.m. drive).
                gpus = len(job.nodes) * job.gpus_per_node
                t.append(f"  straggler of job {job.job_id}", "bold yellow")
                t.append(f", every step of its {gpus} GPUs waits for it: {slow.own_text}")
        reason = drain_reason(st.drain)
        if reason:
            t.append(f"\n{st.drain.state.value.upper()} ", "bold yellow")
            t.append(reason)
        unsaved = drain_unsaved(st.drain)
        if unsaved:
            t.append(f"\n{unsaved}", "bold red")
        if st.all_findings:
            t.append("\nfindings: ", "bold")
            for i, f in enumerate(findings_worst_first(st)):  # as its row and status list them
                style = "red" if f.severity.value == "drain" else "yellow"
                t.append(("; " if i else "") + str(f), style)
        action = recommended_action(st, state)
        if action != "none":
            # What incidents and status say to do: the detail, where the operator decides,
            # left it out (an operator's walkthrough).
            t.append("\ndo: ", "bold")
            if self.size.height and self.size.height < 30:
                # Two lines at most on a small terminal: a straggler's advice took three at
                # 80x24 and pushed the GPU table's rows off the screen; one line cut the
                # repair step of a failed node's ("… then reset gpu1 or re…": a newcomer's run).
                room = max(20, self.size.width - 10)
                action = fit(action, 2 * room).rstrip()
            t.append(action)
        return t

    def _gpus(self, st: NodeState) -> FitTable | Text:
        tel = st.telemetry
        if tel is None:
            return Text("no telemetry yet", "dim")
        if not tel.gpus:
            # An empty table under a GPU header said neither that the node has none nor
            # that it should have some (a fault drill).
            if gpu_less(st):
                return Text("no GPUs: a node without GPUs (its agent reads none)", "dim")
            return Text(f"no GPUs reported, {st.gpus_expected} expected", "bold red")
        recent = self.fleet.recent
        gpus = sorted(tel.gpus, key=lambda g: g.index)
        cols: dict[str, list[Text]] = {name: [] for name, _drop in GPU_COLUMNS}
        present: list[tuple[int, float]] = []  # (position in the series, power limit)
        for pos, g in enumerate(gpus):
            mark = "▶" if self.gpu == g.index else " "
            cols["GPU"].append(Text(f"{mark}{g.index}"))
            if not g.present:
                cols["UTIL"].append(Text("not present", "bold red"))
                for name in list(cols)[2:]:
                    cols[name].append(Text(""))
                present.append((-1, 0.0))
                continue
            present.append((pos, float(g.power_limit_w or 700)))
            events = describe_clock_events(g.clock_event_reasons or 0)
            ev_style = "yellow" if (g.clock_event_reasons or 0) & 0xE8 else ""
            nv = g.nvlink
            nv_text = f"{_v(nv.links_up)}/{_v(nv.links_total)}"
            if nv.crc_flit or nv.crc_data or nv.replay or nv.recovery:
                nv_text += f" crc {(nv.crc_flit or 0) + (nv.crc_data or 0)}"
            rr = g.row_remap
            remap = f"{_v(rr.correctable)}/{_v(rr.uncorrectable)}"
            if rr.pending:
                remap += " pending"
            if rr.failure:
                remap += " FAIL"
            shown = worst_xid(g, tel.ts)
            xid = "-" if shown is None else str(shown[0])
            xid_style = ("" if shown is None else "red" if shown[1] is Severity.DRAIN
                         else "yellow" if shown[1] is Severity.WARN else "dim")
            cols["UTIL"].append(Text(f"{_v(g.util_pct)}%"))
            cols["POWER"].append(Text(f"{_v(g.power_w)}W"))
            hot = (g.temp_c or 0) >= HOT_C  # "!" as well as red: it reads without colour
            cols["TEMP"].append(Text(f"{_v(g.temp_c)}°{'!' if hot else ''}", "red" if hot else ""))
            cols["MEM°"].append(Text(f"{_v(g.mem_temp_c)}°"))
            cols["SM MHz"].append(Text(f"{_v(g.sm_clock_mhz)}/{_v(g.sm_clock_max_mhz)}"))
            cols["CLOCK EVENTS"].append(Text(events, ev_style))
            cols["ECC dbe/sbe"].append(Text(f"{_v(g.ecc.dbe_vol)}/{_v(g.ecc.sbe_agg)}",
                                            "red" if g.ecc.dbe_vol else ""))
            cols["REMAP"].append(Text(remap, "red" if rr.pending or rr.failure else ""))
            cols["NVLINK"].append(Text(nv_text, "red" if (nv.links_up or 0) < (
                nv.links_total or 0) else ""))
            cols["XID"].append(Text(xid, xid_style))

        def spark(metric: str, style: str) -> Callable[[int], list[Text]]:
            def draw(width: int) -> list[Text]:
                out = []
                for pos, limit in present:
                    if pos < 0:
                        out.append(Text(""))
                        continue
                    hi = 100.0 if metric == "util" else limit
                    out.append(Text(sparkline(recent.series(st.node_id, pos, metric), 0, hi,
                                              width), style))
                return out
            return draw

        columns: list[FitColumn] = []
        for name, drop in GPU_COLUMNS:
            columns.append(FitColumn(name, cols[name], drop=drop))
            if name == "UTIL":
                columns.append(FitColumn("UTIL TREND", spark=SPARK_WIDTH,
                                         draw=spark("util", "cyan")))
            elif name == "POWER":
                columns.append(FitColumn("POWER TREND", spark=SPARK_WIDTH,
                                         draw=spark("power", "magenta")))
        # The samples' spacing is the agent's (1 s in the demo, 10 s a site's choice): "last 16
        # samples" alone left the trends' time scale to guess (a newcomer's run).
        every = f"{st.interval_s:g}"
        return FitTable("GPUs", columns, len(gpus),
                        note=f"trends: last {{n}} samples, {every} s apart")

    def _ports(self, st: NodeState) -> FitTable | Text:
        tel = st.telemetry
        if tel is None or not tel.ib_ports:
            # A sample without the ports its birth and SKU expect found none; no sample yet
            # (waiting) is no word on them: it read "0 of 8 found" in red before any telemetry.
            if tel is not None and st.ib_ports:
                return Text(ports_title(st, 0), "bold red")
            return Text("no IB ports reported", "dim")
        cols: dict[str, list[Text]] = {name: [] for name, _drop in PORT_COLUMNS}
        for p in tel.ib_ports:
            bad = p.state not in (None, "ACTIVE") or p.phys_state not in (None, "LinkUp")
            style = "bold red" if bad else ""
            errors = port_error_text(p)
            cols["PORT"].append(Text(f"{p.dev}:{p.port}"))
            cols["STATE"].append(Text(p.state or "?", style))
            cols["PHYS"].append(Text(p.phys_state or "?", style))
            cols[RATE].append(Text(ib_rate_text(p.rate_gbps)))
            cols[TX].append(Text(ib_throughput_text(p.xmit_Bps)))
            cols[RX].append(Text(ib_throughput_text(p.rcv_Bps)))
            cols[ERRORS].append(Text(errors or "0", "yellow" if errors else "dim"))
        titles = {ERRORS: f"{ERRORS} (+in {st.interval_s:g} s)"}
        return FitTable(ports_title(st, len(tel.ib_ports)),
                        [FitColumn(titles.get(name, name), cols[name], drop=drop,
                                   right=name in (RATE, TX, RX))
                         for name, drop in PORT_COLUMNS],
                        len(tel.ib_ports))

    def _timeline(self, st: NodeState | None) -> Text:
        """``st`` None: a node no longer in the state, with the console's lines of it only."""
        t = Text()
        t.append("Timeline", "bold")
        lines = []
        for ev in st.events if st is not None else ():
            style = {"error": "red", "warn": "yellow"}.get(ev.severity.value, "")
            lines.append((ev.ts / 1000, ev.kind, event_text(ev), style))
        for ln in self.fleet.event_log.for_node(self.node_id):
            # The console's own lines by their kind, as the events view names them: a job's
            # interruption read "command" here and "interruption" there (a 3 a.m. drive).
            if ln.source == "console" and ln.kind == "command":
                style = "cyan"
            else:
                style = {"error": "red", "warn": "yellow"}.get(ln.severity, "")
            lines.append((ln.ts, ln.kind, ln.text, style))
        # Oldest first, then reversed: by the time itself, not its HH:MM:SS, so a drain's
        # requested, acknowledged, drained and done of one second keep their order.
        lines.sort(key=lambda x: x[0])
        lines.reverse()
        if not lines:
            t.append("  no events from this node yet", "dim")
        for ts, kind, text, style in lines[:20]:
            t.append(f"\n {utc_hms(ts)} {kind:<13} ")  # ib_port_state
            t.append(text, style)
        return t

    def action_drain(self) -> None:
        self.not_typing()
        self.fleet.request_drain([self.node_id])

    def action_resume(self) -> None:
        self.not_typing()
        self.fleet.request_resume([self.node_id])

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return not (action in ("drain", "resume") and self.fleet.read_only)

