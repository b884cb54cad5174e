"""The operator console: k9s-style views over the live fleet, and drain/resume/restart commands.

Data flow: LiveFeed (MQTT, in this loop) -> Ingest (validate, latest per node) -> on each tick
FleetState.apply, the command tracker and the recent-history ring buffer -> the visible view
redraws what is on screen. Nothing here runs per MQTT message.

Views are Textual modes (one screen per module under ``screens/``): ``1`` overview, ``2`` nodes,
``3`` jobs, ``4`` fabric, ``5`` events; ``:`` command mode, ``?`` help, ``esc`` back. Commands
go through a confirmation naming every target with its blast radius, are published as protocol
``Command`` messages, tracked to done/rejected/timed out, and written to the audit log.
"""

import asyncio
import sqlite3
import time
from collections import deque
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiomqtt
from textual import work
from textual.app import App
from textual.binding import Binding

from fleetdeck.brokerurl import BrokerURL
from fleetdeck.console.audit import AuditLog, AuditRecord, AuditSink, TeeAudit
from fleetdeck.console.commands import (
    BlastRadius,
    CommandTracker,
    Phase,
    Request,
    Transition,
    audit_fields,
    blast_radius,
    job_blast_radius,
)
from fleetdeck.console.ingest import Batch, Ingest
from fleetdeck.console.live import LiveFeed
from fleetdeck.console.recent import RecentHistory
from fleetdeck.console.recording import RecordingWriter
from fleetdeck.console.replay import human_bytes
from fleetdeck.console.rows import EventLine, event_line
from fleetdeck.console.state import FleetState
from fleetdeck.console.state import Transition as StateTransition
from fleetdeck.console.store import Store
from fleetdeck.console.tui.palette import FleetCommands
from fleetdeck.console.tui.screens.base import FleetView
from fleetdeck.console.tui.screens.events import EventsScreen
from fleetdeck.console.tui.screens.fabric import FabricScreen
from fleetdeck.console.tui.screens.jobs import JobsScreen
from fleetdeck.console.tui.screens.nodes import NodesScreen
from fleetdeck.console.tui.screens.overview import OverviewScreen
from fleetdeck.console.tui.text import esc
from fleetdeck.protocol import codec
from fleetdeck.protocol.messages import Command, CommandOp, DrainMode, Event, Status
from fleetdeck.protocol.topics import Kind, topic_for
from fleetdeck.runtime import tune_gc

Publisher = Callable[[Kind, str, bytes], Awaitable[None]]
EVENT_LOG = 5000
VIEWS = ("overview", "nodes", "jobs", "fabric", "events")
ALIASES = {
    "overview": "overview", "o": "overview", "ov": "overview", "home": "overview",
    "nodes": "nodes", "node": "nodes", "no": "nodes", "n": "nodes",
    "jobs": "jobs", "job": "jobs", "j": "jobs", "squeue": "jobs",
    "fabric": "fabric", "links": "fabric", "ib": "fabric", "f": "fabric",
    "events": "events", "ev": "events", "e": "events", "log": "events",
}


class FleetdeckApp(App[int]):
    TITLE = "fleetdeck"
    CSS_PATH = "fleetdeck.tcss"
    ENABLE_COMMAND_PALETTE = True
    COMMANDS = {FleetCommands}
    MODES = {
        "overview": OverviewScreen,
        "nodes": NodesScreen,
        "jobs": JobsScreen,
        "fabric": FabricScreen,
        "events": EventsScreen,
    }
    DEFAULT_MODE = "overview"

    BINDINGS = [
        Binding("1", "view('overview')", "Overview", show=False),
        Binding("2", "view('nodes')", "Nodes", show=False),
        Binding("3", "view('jobs')", "Jobs", show=False),
        Binding("4", "view('fabric')", "Fabric", show=False),
        Binding("5", "view('events')", "Events", show=False),
        Binding("colon", "command_line", ":cmd"),
        Binding("question_mark", "help", "Help"),
        Binding("escape", "go_back", "Back", show=False),
        Binding("q", "quit", "Quit"),
        Binding("R", "toggle_recording", "Record", show=False),
    ]

    def __init__(
        self,
        *,
        cluster: str,
        url: BrokerURL | None = None,
        broker_label: str = "",
        tick_s: float = 0.5,
        read_only: bool = False,
        operator: str = "operator",
        ingest: Ingest | None = None,
        clock: Callable[[], float] = time.time,
        connect: bool = True,
        audit: AuditSink | None = None,
        audit_path: Path | str | None = None,
        publisher: Publisher | None = None,
        auto_tick: bool = True,
        ack_timeout_s: float | None = None,
        effect_timeout_s: float | None = None,
        command_key: bytes | None = None,
        store_path: Path | None = None,
    ) -> None:
        super().__init__()
        self.cluster = cluster
        self.url = url
        self.broker_label = broker_label
        self.tick_s = tick_s
        self.read_only = read_only
        self.operator = operator
        self.clock = clock
        self.ingest = ingest or Ingest(cluster)
        self.state = FleetState(cluster, self.ingest.malformed)
        self.recent = RecentHistory()
        self.feed = LiveFeed(url, self.ingest, client_id=f"fd-console-{id(self):x}",
                             clock=clock, command_key=command_key) \
            if url is not None and connect else None
        self.store_path = store_path
        self.store: Store | None = None
        self._store_busy = False
        self.recorder: RecordingWriter | None = None
        self.record_dir = Path.cwd()
        self._rec_flushed = 0.0
        self._pending_store: list[tuple[Batch, list[StateTransition]]] = []
        self.audit: AuditSink = audit if audit is not None else AuditLog(audit_path)
        self.publisher = publisher
        tracker_kw: dict[str, float] = {}
        if ack_timeout_s is not None:
            tracker_kw["ack_timeout_s"] = ack_timeout_s
        if effect_timeout_s is not None:
            tracker_kw["effect_timeout_s"] = effect_timeout_s
        self.tracker = CommandTracker(cluster, operator, **tracker_kw)
        self.event_log: deque[tuple[int, EventLine]] = deque(maxlen=EVENT_LOG)
        self.event_seq = 0
        """How many lines were ever appended to ``event_log`` (views diff on it)."""
        self.auto_tick = auto_tick
        self.tick_ms = 0.0
        self.render_ms = 0.0
        self.ticks = 0
        self.history: list[str] = []
        self._last_event: Event | None = None
        self._stop = asyncio.Event()

    # --- lifecycle ----------------------------------------------------------------------------

    def on_mount(self) -> None:
        if self.store_path is not None:
            self.open_store()
        if self.feed is not None:
            self.run_feed()
        if self.auto_tick:
            self.set_interval(self.tick_s, self.tick)
        self.call_after_refresh(self.tick)

    @work(exclusive=True, group="feed", exit_on_error=False)
    async def run_feed(self) -> None:
        assert self.feed is not None
        await self.feed.run(self._stop)

    # --- recording (R) --------------------------------------------------------------------------

    def action_toggle_recording(self) -> None:
        """Record what this console receives (and the commands it sends) to a file."""
        if self.feed is None:
            self.notify("nothing to record: not connected to a broker", severity="warning")
            return
        if self.recorder is not None:
            rec, self.recorder = self.recorder, None
            self.feed.tap = None
            rec.close()
            self.notify(f"recorded {rec.messages} messages to {rec.path}", timeout=8)
            self.refresh_view()
            return
        now = self.clock()
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now))
        path = self.record_dir / f"fleetdeck-{self.cluster}-{stamp}.jsonl.gz"
        try:
            self.recorder = RecordingWriter(path, self.cluster, source=str(self.url),
                                            started=now)
        except OSError as err:
            self.notify(f"cannot record to {path}: {err.strerror}", severity="error")
            return
        for node_id, st in self.state.nodes.items():
            for kind, msg in ((Kind.BIRTH, st.birth), (Kind.TELEMETRY, st.telemetry)):
                if msg is not None:
                    self.recorder.seed(topic_for(self.cluster, kind, node_id), codec.encode(msg))
            status = Status(node=node_id, online=bool(st.online), bdSeq=max(st.bd_seq, 0),
                            ts=int(st.status_ts * 1000), drain=st.drain)
            self.recorder.seed(topic_for(self.cluster, Kind.STATUS, node_id),
                               codec.encode(status))
        for job_id, job in self.state.jobs.items():
            self.recorder.seed(topic_for(self.cluster, Kind.JOB, job_id), codec.encode(job))
        self.feed.tap = self.recorder.write
        self.notify(f"recording to {path} (R stops)", timeout=5)
        self.refresh_view()

    async def on_unmount(self) -> None:
        if self.recorder is not None:
            self.recorder.close()
        self._stop.set()
        if self.store is not None:
            await self.store.close()

    # --- history store (SQLite) ------------------------------------------------------------

    @work(exclusive=True, group="store", exit_on_error=False)
    async def open_store(self) -> None:
        assert self.store_path is not None
        try:
            store = await Store.open(self.store_path)
            restored = await store.restore(self.state)
        except (OSError, sqlite3.Error) as err:
            self.notify(f"history store {self.store_path} unavailable: {err}", severity="error")
            return
        self.store = store
        self.audit = TeeAudit(self.audit, store)
        if restored:
            self._collect_events()

    def _queue_store(self, batch: Batch) -> None:
        transitions = self.state.take_transitions()
        if self.store is None:
            return
        self._pending_store.append((batch, transitions))
        if not self._store_busy:
            self.write_store()

    @work(group="store-write", exit_on_error=False)
    async def write_store(self) -> None:
        # One writer at a time; ticks queue behind it (the UI never waits on SQLite).
        self._store_busy = True
        try:
            while self._pending_store and self.store is not None:
                batch, transitions = self._pending_store.pop(0)
                await self.store.write_tick(batch, transitions)
        except sqlite3.Error as err:
            self.notify(f"history store write failed: {err}", severity="error")
        finally:
            self._store_busy = False

    @work(group="resend", exclusive=True, exit_on_error=False)
    async def follow_up(self, now: float) -> None:
        """Re-send unacknowledged commands and ask agents for events we missed."""
        if self.feed is None:
            return
        for kind, subject, cmd, progress in self.tracker.due_for_retry(now):
            try:
                await self.feed.send_command(kind, subject, cmd)
                progress.sent_at = now
            except aiomqtt.MqttError:
                return
        await self.feed.request_resends(self.state.missing_events(now), self.operator)

    # --- the tick -----------------------------------------------------------------------------

    def tick(self) -> None:
        """Apply what arrived since the last tick, follow commands, redraw the visible view.

        Public so tests and the benchmark drive it themselves."""
        t0 = time.perf_counter()
        now = self.clock()
        batch = self.ingest.take_batch()
        self.state.apply(batch, now)
        self._record_history(batch)
        self._collect_events()
        acks = [ack for _rx, ack in batch.acks]
        for tr in self.tracker.observe(self.state, acks, now):
            self._on_transition(tr)
        self._queue_store(batch)
        if self.recorder is not None and time.monotonic() - self._rec_flushed > 2.0:
            # Each flush ends a gzip member: every 2 s keeps the file readable while recording
            # without costing compression.
            self.recorder.flush()
            self._rec_flushed = time.monotonic()
        if self.feed is not None and self.feed.client is not None:
            self.follow_up(now)
        t1 = time.perf_counter()
        self.refresh_view(now)
        t2 = time.perf_counter()
        self.ticks += 1
        self.render_ms = (t2 - t1) * 1000
        self.tick_ms = (t2 - t0) * 1000

    def refresh_view(self, now: float | None = None) -> None:
        """Redraw the view on top (and the one under a modal)."""
        now = self.clock() if now is None else now
        for screen in reversed(self.screen_stack):
            if isinstance(screen, FleetView):
                if screen.is_mounted:
                    screen.refresh_view(now)
                break

    def _record_history(self, batch: Batch) -> None:
        nodes = self.state.nodes
        for node_id, (_rx, tel) in batch.telemetry.items():
            st = nodes.get(node_id)
            if st is not None and st.telemetry is tel:
                self.recent.record(node_id, tel)

    def _collect_events(self) -> None:
        events = self.state.events
        if not events or events[-1] is self._last_event:
            return
        new: list[Event] = []
        for ev in reversed(events):
            if ev is self._last_event:
                break
            new.append(ev)
        self._last_event = events[-1]
        for ev in reversed(new):
            self.log_event(event_line(ev))

    def log_event(self, line: EventLine) -> None:
        self.event_seq += 1
        self.event_log.append((self.event_seq, line))

    # --- header -------------------------------------------------------------------------------

    def header_text(self, now: float) -> str:
        mode = "[$warning]\\[R][/]" if self.read_only else "[$success]\\[RW][/]"
        if self.feed is None:
            conn = "[$text-muted]no broker[/]"
        else:
            c = self.feed.conn
            colour = {"connected": "$success", "connecting": "$warning"}.get(c.state, "$error")
            conn = f"[{colour}]{c.state}[/]"
            if c.state != "connected" and c.detail:
                conn += f" ({esc(c.detail[:60])})"
        broker = self.broker_label or (
            f"{self.url.host}:{self.url.port}" if self.url is not None else "")
        last = self.state.last_update
        age = "never" if last is None else f"{max(0.0, now - last):.1f}s ago"
        bad = self.state.malformed.total
        malformed = f"[$error]malformed {bad}[/]" if bad else "malformed 0"
        active = len(self.tracker.active)
        cmds = f"  [$warning]cmds {active} open[/]" if active else ""
        audit_err = getattr(self.audit, "errors", 0)
        audit = "  [$error]AUDIT LOG FAILING[/]" if audit_err else ""
        rec = ""
        if self.recorder is not None:
            rec = f"  [$error]● RECORDING {human_bytes(self.recorder.size)}[/]"
        behind = self.state.behind_s
        lagging = f"  [$error]BEHIND {behind:.1f}s[/]" if behind > BEHIND_WARN_S else ""
        return (f"[b]fleetdeck[/] [b]{esc(self.cluster)}[/] {mode}  {esc(broker)} {conn}  "
                f"upd {age}{lagging}  {malformed}  op {esc(self.operator)}{cmds}{audit}{rec}")

    # --- navigation ---------------------------------------------------------------------------

    def action_view(self, view: str) -> None:
        if view not in VIEWS:
            return
        if self.current_mode != view:
            self.history.append(self.current_mode)
            del self.history[:-20]
        self._switch(view)

    def _switch(self, view: str) -> None:
        # Leave any node detail pushed on the current view's stack where it is (k9s keeps it).
        self.switch_mode(view)
        self.call_after_refresh(self.refresh_view)

    def action_go_back(self) -> None:
        if len(self.screen_stack) > 1 and not isinstance(self.screen, FleetView):
            self.pop_screen()
            return
        if isinstance(self.screen, FleetView) and self.screen.on_escape():
            return
        if len(self.screen_stack) > 1:
            self.pop_screen()
            self.call_after_refresh(self.refresh_view)
            return
        if self.history:
            self._switch(self.history.pop())

    def action_help(self) -> None:
        from fleetdeck.console.tui.modals import HelpScreen

        self.push_screen(HelpScreen(self.read_only))

    def action_command_line(self) -> None:
        from fleetdeck.console.tui.modals import CommandLine

        self.push_screen(CommandLine(), self.run_command_line)

    def run_command_line(self, text: str | None) -> None:
        """``:nodes``, ``:jobs``, ``:node gpu0012``, ``:drain gpu[1-4]``, ``:resume …``,
        ``:restart 41``, ``:q``."""
        if not text:
            return
        words = text.strip().lstrip(":").split()
        if not words:
            return
        verb, rest = words[0].lower(), words[1:]
        if verb in ("q", "quit", "q!"):
            self.exit(0)
        elif verb in ALIASES and not rest:
            self.action_view(ALIASES[verb])
        elif verb in ("node", "no", "nodes") and rest:
            self.open_node(rest[0])
        elif verb in ("drain", "resume") and rest:
            from fleetdeck.hostlist import HostlistError, expand

            try:
                targets = expand(",".join(rest))
            except HostlistError as err:
                self.notify(str(err), severity="error")
                return
            if verb == "drain":
                self.request_drain(targets)
            else:
                self.request_resume(targets)
        elif verb in ("restart", "restart-job", "requeue") and rest:
            self.request_restart(rest[0])
        elif verb == "help":
            self.action_help()
        else:
            self.notify(f"unknown command ':{esc(text.strip())}' (try :nodes, :jobs, :fabric, "
                        ":events, :node NAME, :drain HOSTLIST, :restart JOB)", severity="warning")

    def open_node(self, node_id: str, gpu: int | None = None) -> None:
        from fleetdeck.console.tui.screens.node_detail import NodeDetailScreen

        if node_id not in self.state.nodes:
            self.notify(f"no node named {esc(node_id)}", severity="warning")
            return
        self.push_screen(NodeDetailScreen(node_id, gpu))
        self.call_after_refresh(self.refresh_view)

    # --- commands -----------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return not (self.read_only and action in MUTATING_ACTIONS)

    def _unknown(self, targets: list[str]) -> list[str]:
        return [t for t in targets if t not in self.state.nodes]

    def request_drain(self, targets: list[str]) -> None:
        if self.read_only or not targets:
            return
        from fleetdeck.console.tui.modals import DrainScreen

        unknown = self._unknown(targets)
        if unknown:
            self.notify(f"unknown nodes: {esc(', '.join(unknown[:8]))}", severity="error")
            return

        def radius(mode: DrainMode) -> BlastRadius:
            return blast_radius(self.state, CommandOp.DRAIN, targets, self.clock(), mode)

        def done(result: tuple[str, DrainMode] | None) -> None:
            if result is not None:
                reason, mode = result
                self.send(self.tracker.drain(targets, reason, self.clock(), mode))

        self.push_screen(DrainScreen(radius), done)

    def request_resume(self, targets: list[str]) -> None:
        if self.read_only or not targets:
            return
        from fleetdeck.console.tui.modals import ConfirmScreen

        unknown = self._unknown(targets)
        if unknown:
            self.notify(f"unknown nodes: {esc(', '.join(unknown[:8]))}", severity="error")
            return
        radius = blast_radius(self.state, CommandOp.RESUME, targets, self.clock())

        def done(ok: bool | None) -> None:
            if ok:
                self.send(self.tracker.resume(targets, self.clock()))

        self.push_screen(ConfirmScreen("Resume", radius), done)

    def request_restart(self, job_id: str) -> None:
        if self.read_only:
            return
        from fleetdeck.console.tui.modals import ConfirmScreen

        if job_id not in self.state.jobs:
            self.notify(f"no job {esc(job_id)}", severity="error")
            return
        radius = job_blast_radius(self.state, job_id, self.clock())

        def done(ok: bool | None) -> None:
            if ok:
                self.send(self.tracker.restart_job(job_id, self.clock(),
                                                   job=self.state.jobs.get(job_id)))

        self.push_screen(ConfirmScreen(f"Restart job {job_id}", radius), done)

    def send(self, req: Request) -> None:
        """Audit, log and publish a request (in a worker: the UI never waits on the broker)."""
        self._audit(req, "requested", "")
        self.log_event(EventLine(self.clock(), "console", "command", "info",
                                 f"{self.operator} requested {req.describe()}"
                                 + (f" reason: {req.reason}" if req.reason else "")))
        self.notify(f"{req.op.value.replace('_', ' ')} {esc(req.target_text)}: requested",
                    timeout=3)
        self.publish_request(req)
        for screen in self.screen_stack:
            if isinstance(screen, NodesScreen) and screen.is_mounted:
                screen.action_clear_marks()  # k9s: marks are spent by the action
        self.refresh_view()

    @work(group="commands", exit_on_error=False)
    async def publish_request(self, req: Request) -> None:
        try:
            for (kind, subject, cmd), progress in zip(req.commands(), req.targets, strict=True):
                await self._publish(kind, subject, cmd)
                progress.sent_at = self.clock()
        except Exception as err:
            for tr in self.tracker.publish_failed(req, str(err) or type(err).__name__,
                                                  self.clock()):
                self._on_transition(tr)
            self.refresh_view()

    async def _publish(self, kind: Kind, subject: str, cmd: Command) -> None:
        if self.publisher is not None:
            await self.publisher(kind, subject, codec.encode(cmd))
            return
        if self.feed is None:
            raise ConnectionError("no broker connection")
        await self.feed.send_command(kind, subject, cmd)

    def _on_transition(self, tr: Transition) -> None:
        req = tr.request
        severity = {Phase.DONE: "done", Phase.REJECTED: "error", Phase.FAILED: "error",
                    Phase.TIMED_OUT: "error"}.get(tr.new, "info")
        what = req.op.value.replace("_", " ")
        self.log_event(EventLine(tr.ts, "console", "command", severity,
                                 f"{what} {tr.target} [{req.request_id}]: {tr.new.value}"
                                 + (f" ({tr.detail})" if tr.detail else "")))
        if req.finished_at is not None and req.finished_at == tr.ts and tr.new.terminal:
            outcome = req.phase
            details = "; ".join(sorted({f"{t.target}: {t.detail}" for t in req.targets
                                        if t.phase is not Phase.DONE}))[:500]
            self._audit(req, outcome.value, details)
            text = f"{what} {esc(req.target_text)}: {outcome.value.replace('_', ' ')}"
            if details:
                text += f" ({esc(details[:120])})"
            self.notify(text, severity="information" if outcome is Phase.DONE else "error",
                        timeout=6)

    def _audit(self, req: Request, outcome: str, detail: str) -> None:
        self.audit.write(AuditRecord(
            ts=self.clock(), who=self.operator, what=req.op.value, targets=req.target_text,
            why=req.reason, outcome=outcome, request_id=req.request_id, cluster=self.cluster,
            detail=detail, args=audit_fields(req),
        ))


BEHIND_WARN_S = 2.0
"""Telemetry queued longer than this (beyond each node's normal delay) is shown as BEHIND."""

MUTATING_ACTIONS = frozenset({"drain", "resume", "restart"})


def run_replay_console(path: Path, *, speed: float = 1.0, tick_s: float = 0.5) -> int:
    """Replay a recording in the console (read-only by construction)."""
    from fleetdeck.console.tui.replay_app import ReplayApp

    tune_gc()
    app = ReplayApp(path, speed=speed, tick_s=tick_s)
    app.run()
    return 0


def run_console(url: BrokerURL, cluster: str, *, tick_s: float = 0.5, read_only: bool = False,
                operator: str = "operator", broker_label: str = "",
                audit_path: Path | str | None = None, command_key: bytes | None = None,
                store_path: Path | None = None) -> int:
    tune_gc()
    app = FleetdeckApp(cluster=cluster, url=url, broker_label=broker_label, tick_s=tick_s,
                       read_only=read_only, operator=operator, audit_path=audit_path,
                       command_key=command_key, store_path=store_path)
    app.run()
    return 0
