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
import contextlib
import dataclasses
import functools
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, Literal, ParamSpec

from textual import events
from textual.actions import SkipAction
from textual.app import App
from textual.await_complete import AwaitComplete
from textual.binding import Binding
from textual.content import Content
from textual.screen import ModalScreen
from textual.timer import Timer
from textual.widgets import Input
from textual.worker import Worker, WorkerState

from fleetdeck.brokerurl import DEFAULT_NOTE, BrokerURL
from fleetdeck.console.audit import AuditLog, AuditSink
from fleetdeck.console.commands import (
    BlastRadius,
    CommandTracker,
    Phase,
    Request,
    blast_radius,
    changed_while_open,
    clip_words,
    job_blast_radius,
    job_refusal,
    parse_targets,
    suggested_drain_mode,
    unknown_job_hint,
)
from fleetdeck.console.deaf_check import QUIET_LOOK_S, fleet_quiet_s
from fleetdeck.console.eventlog import EventLog
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.judgements import drain_reason_hint, restart_reason_hint
from fleetdeck.console.live import LiveFeed, clusters_seen
from fleetdeck.console.outbox import Publisher, finish_details
from fleetdeck.console.recent import RecentHistory
from fleetdeck.console.recording import RecordingWriter
from fleetdeck.console.replay import human_bytes
from fleetdeck.console.rows import FleetRevision, Summaries, fleet_revision
from fleetdeck.console.session import APPLY_BUDGET_S, ConsoleSession, TickReport
from fleetdeck.console.state import FleetState
from fleetdeck.console.store import StoreError
from fleetdeck.console.tui import render_cycles
from fleetdeck.console.tui.log_notice import NoticeHandler
from fleetdeck.console.tui.palette import FleetCommands
from fleetdeck.console.tui.screens.base import TABS, VIEWS, FleetView
from fleetdeck.console.tui.screens.clusters import ClustersScreen
from fleetdeck.console.tui.screens.events import EventsScreen
from fleetdeck.console.tui.screens.fabric import FabricScreen
from fleetdeck.console.tui.screens.incidents import IncidentsScreen
from fleetdeck.console.tui.screens.jobs import JobsScreen
from fleetdeck.console.tui.screens.nodes import NodesScreen
from fleetdeck.console.tui.screens.overview import OverviewScreen
from fleetdeck.console.tui.text import esc, plural
from fleetdeck.environment import unknown_variables
from fleetdeck.errors import UserError
from fleetdeck.hostlist import compress
from fleetdeck.logs import divert_from_terminal, file_handler
from fleetdeck.paths import recordings_dir, state_base
from fleetdeck.protocol.messages import CommandOp, DrainMode, JobStatus
from fleetdeck.runtime import force_exit, tune_gc, unsettle_later
from fleetdeck.transport import INTERACTIVE_BACKOFF_S

if TYPE_CHECKING:
    from fleetdeck.console.tui.screens.node_detail import NodeDetailScreen

log = logging.getLogger(__name__)
P = ParamSpec("P")
TICK_ERROR_EVERY_S = 60.0
"""A tick's CancelledError is logged in full the first time, then counted once this often."""


def _goes_on(step: Callable[Concatenate["FleetdeckApp", P], None]
             ) -> Callable[Concatenate["FleetdeckApp", P], None]:
    """A tick's step (the tick timer's, a backlog's slice or redraw) that logs a
    CancelledError raised inside it and returns, so the timers go on. Such a step is
    synchronous: the error is never its task's own cancellation (that comes at an await in
    Textual's loop) but a cancelled future's ``result()`` read by code the tick runs. Textual's
    timer loop takes a CancelledError for its own end and stops without a word: the console
    would apply nothing more while its header counted "nothing heard" (docs/reliability.md,
    "The console's tick")."""
    @functools.wraps(step)
    def run(app: "FleetdeckApp", /, *args: P.args, **kwargs: P.kwargs) -> None:
        try:
            step(app, *args, **kwargs)
        except asyncio.CancelledError:
            app.tick_errors += 1
            now = time.monotonic()
            if app.tick_errors == 1:
                log.exception("the console's tick met a CancelledError from inside; it goes on")
                app.tick_error_said = now
            elif now - app.tick_error_said >= TICK_ERROR_EVERY_S:
                # One that recurs at every tick wrote a traceback to the log twice a second.
                app.tick_error_said = now
                log.warning("the console's tick met a CancelledError from inside again "
                            "(%d times in all); it goes on", app.tick_errors)
    return run


ALIASES = {
    "overview": "overview", "o": "overview", "ov": "overview", "home": "overview",
    "nodes": "nodes", "node": "nodes", "no": "nodes", "n": "nodes",
    "jobs": "jobs", "job": "jobs", "j": "jobs", "squeue": "jobs",
    "fabric": "fabric", "links": "fabric", "ib": "fabric", "f": "fabric",
    "events": "events", "ev": "events", "e": "events", "log": "events",
    "incidents": "incidents", "incident": "incidents", "inc": "incidents", "i": "incidents",
}


STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
STOP_GRACE_S = 15.0
"""After SIGTERM or SIGHUP, the orderly exit (store flushed, recording closed) gets this long."""
TERMINAL_POLL_S = 1.0
"""How often a console on a terminal checks that it still has one (``_watch_terminal``)."""
STORE_WAIT_S = 5.0
"""How long a console's feed waits for its store to be read back before it starts anyway."""
BACKLOG_PAINT_S = 0.1
"""While a backlog is applied slice by slice, the screen is redrawn at most this often."""
SWITCH_MASK_S = 0.05
"""Textual's ``switch_mode`` holds the screen's updates this long to hide the change of screen
(``App.delay_update``). A view composed before has nothing to hide: its switch is painted
at once. Only a first visit, which composes the view, keeps the mask. At 16,384 nodes the mask
was most of a switch (p50 ~55 ms idle against a ~10 ms CPU cost; bench/console_scale.py)."""
RADIUS_WORK_S = 30.0
"""An open drain dialog's radius is taken again at least this often while its targets stand
still: the GPU-hours its jobs would lose since their checkpoints grow as it stays open."""
DETAIL_SCREEN = "node-detail"
"""The name the kept node detail is installed under (``FleetdeckApp._node_detail``)."""
STEP_LOST_S = 1.0
"""A backlog's slice or redraw (a one-shot Textual timer, ``_slice_later``, ``_paint_later``)
not run this long after it was due is taken for lost, and the tick timer ticks again. Textual
8.2's one-shot timer reads its clock twice in its task, and when they are more than its delay
apart (1 ms: the loop's thread preempted on a loaded host) it skips its only call and ends
without a word; the tick, waiting for that slice, never ticked again (docs/reliability.md, "The
console's tick"). A slice merely late (a long loop step) is harmless to drop: the tick takes
its place. So are two of Textual's own one-shot timers whose loss stopped something for good:
a view switch's mask (``delay_update``) and a resize's (``App._on_resize``)."""
KEY_FIRST_S = 0.1
"""A key gets the loop before the rest of a backlog: the next slice waits until the key's effect
has been painted, at most this long after the key (issue 12: a view switch within 100 ms while
ingesting; each slice between a key and its paint delayed it by up to APPLY_BUDGET_S plus a
view refresh). The samples wait in the carry; none is dropped."""


@dataclass(frozen=True, slots=True)
class Painted:
    """One screen refresh that showed new fleet state (``FleetdeckApp.painted``)."""

    wall: float
    """``time.time()`` when the refresh had been written out."""
    perf: float
    """``time.perf_counter()`` at the same moment (for intervals)."""
    revision: FleetRevision
    """The fleet revision the screen showed (``rows.fleet_revision``)."""
    tick: int
    """``FleetdeckApp.ticks`` of the tick whose state it showed."""


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
        "incidents": IncidentsScreen,
        "clusters": ClustersScreen,
    }
    DEFAULT_MODE = "overview"

    BINDINGS = [
        *(Binding(key, f"view('{name}')", name.capitalize(), show=False)
          for key, name in TABS),
        Binding("0", "contexts", "Clusters", show=False),
        Binding("colon", "command_line", ":cmd", priority=True),
        Binding("question_mark", "help", "Help"),
        Binding("escape", "go_back", "Back", show=False),
        Binding("q", "quit", "Quit"),
        # Textual 8 binds ctrl+c to a toast "Press ctrl+q to quit" (and to copy in a text
        # box): an operator's reflex is ctrl+c to leave, from anywhere (an SRE drill). Priority:
        # it quits from a dialog or the command line too, as q would (asking first while
        # commands are open: nothing unsent is lost, a dialog had sent nothing yet).
        Binding("ctrl+c", "interrupt", "Quit", show=False, priority=True),
        Binding("R", "toggle_recording", "Record", show=False),
        # A read-only console's views disable their command keys (check_action): the key then
        # comes here, and is answered rather than ignored.
        *(Binding(key, f"read_only('{key}')", show=False) for key in ("r", "u")),
    ]
    read_only_why = "read-only console (--read-only)"
    nothing_to_record = "nothing to record: not connected to a broker"
    HELP_EXTRA = ""
    """Help lines of a front end's own keys, shown first by ``?`` (the replay console's)."""
    """What a refused command says (a replay says it is one)."""

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
        record_dir: Path | None = None,
        session: ConsoleSession | None = None,
        contexts: Sequence[str] = (),
        stores: dict[str, Path | None] | None = None,
        digests: bool = False,
        log_path: Path | None = None,
    ) -> None:
        """``contexts``: more clusters to watch besides ``cluster``, one session each
        (k9s-style contexts: ``:ctx`` lists them, ``:ctx NAME`` switches). ``stores``: a
        store path per cluster (``store_path`` is the first cluster's). ``log_path``: where
        log records go while the console runs (never the terminal it draws on)."""
        super().__init__()
        self.log_path = log_path
        self.log_notices: NoticeHandler | None = None
        """The handler that shows log warnings as notifications (and counts them)."""
        self._restore_logging: Callable[[], None] | None = None
        self.active = cluster
        """The cluster (context) the views show."""
        self.url = url
        self.broker_label = broker_label
        self.tick_s = tick_s
        self.read_only = read_only
        self.operator = operator
        self.clock = clock
        shared_audit = audit if audit is not None else AuditLog(audit_path)

        def new_session(name: str, ingest: Ingest | None = None) -> ConsoleSession:
            return ConsoleSession(
                name, url=url if connect else None, clock=clock, operator=operator,
                audit=shared_audit, command_key=command_key,
                client_id=f"fd-console-{id(self):x}-{name}"[:64],
                publisher=publisher, ack_timeout_s=ack_timeout_s,
                effect_timeout_s=effect_timeout_s, ingest=ingest, digests=digests)

        self.sessions: dict[str, ConsoleSession] = {
            cluster: session or new_session(cluster, ingest)}
        """One console core per cluster, the active one first; all of them tick, so the
        clusters view and a context switch show live state."""
        for name in contexts:
            if name not in self.sessions:
                self.sessions[name] = new_session(name)
        for each in self.sessions.values():
            each.tick_s = tick_s
            if not read_only:
                # Whether the broker delivers this console's commands: [RW] said so of a
                # console logged in as a read-only broker user (an SRE drill).
                each.probe_commands()
                # What a console killed with a command open left in the audit log is settled
                # from what this one hears (docs/reliability.md).
                each.adopt_orphans()
            if each.feed is not None:
                each.feed.link.max_backoff_s = INTERACTIVE_BACKOFF_S
            if each.summaries is None:
                each.summaries = Summaries()
        self.stores: dict[str, Path | None] = dict(stores or {})
        if store_path is not None:
            self.stores[cluster] = store_path
        self.store_path = self.stores.get(cluster)
        self.record_dir = record_dir if record_dir is not None else recordings_dir()
        self.auto_tick = auto_tick
        self.tick_ms = 0.0
        self._last_paint = 0.0
        self._key_at: float | None = None
        """perf_counter of the key in flight (received, its effect not painted yet)."""
        self._keys = 0
        self._views_composed: set[str] = set()
        """Views switched to before (their screens are composed: no mask, SWITCH_MASK_S)."""
        self._mask_s = SWITCH_MASK_S
        self._next_slice: Timer | None = None
        self._backlog_left = 0
        """What the last tick left to apply (``TickReport.backlog``)."""
        self._tick_owed = False
        """The tick timer fired while a redraw was on its way (``timer_tick``): a slice
        follows that redraw, or what arrived would wait for the timer's next tick."""
        self._next_paint: Timer | None = None
        """A backlog's redraw, due between two slices (``_paint_later``)."""
        self._slice_due = 0.0
        self._paint_due = 0.0
        """perf_counter when ``_next_slice`` and ``_next_paint`` are due (``STEP_LOST_S``)."""
        self.lost_steps = 0
        """Slices or redraws whose timer never called back, dropped by the tick timer."""
        self._slice_gen = 0
        """Which scheduled slice is the live one (``_slice_later``): Textual's timer hands its
        callback to the app's queue (``call_next``), where a stopped timer's call already
        queued still runs; a stale one returns at once."""
        self._masks: dict[int, float] = {}
        """A view switch's mask (``delay_update``) not lifted yet: its number, and the
        perf_counter when it is due to lift (``STEP_LOST_S``)."""
        self._mask_gen = 0
        self._resize_seen: tuple[Timer | None, float] = (None, 0.0)
        """Textual's resize timer as the tick last saw it pending, and since when."""
        self._paint_gen = 0
        """Which scheduled redraw is the live one (``_paint_later``), as ``_slice_gen``: a
        redraw the tick dropped for lost whose call was queued already ran after the tick's
        own, took its place (``_next_paint`` cleared under the one on its way, so the next tick
        did not wait for it and scheduled a second) and redrew once more."""
        self._stop_asked = False
        self._stopped_by = ""
        """The signal that ended the console (SIGTERM, SIGHUP), for what it leaves open."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._old_handlers: dict[int, Any] = {}
        """The signal handlers before this app's (put back when it ends: tests run many)."""
        self.render_ms = 0.0
        self.ticks = 0
        self.tick_errors = 0
        """CancelledErrors the tick met from inside and went on after (``timer_tick``)."""
        self.tick_error_said = 0.0
        """When the last of them was logged (``TICK_ERROR_EVERY_S``)."""
        self.other_clusters: list[str] | None = None
        """Clusters with retained births on the broker, when this one had none for
        ``CLUSTERS_PROBE_AFTER_S`` (``_probe_clusters``): a mistyped --cluster."""
        self._empty_since: float | None = None
        self._said_dropped: dict[str, bool] = {}
        """Per context: whether the toast said the broker drops its commands."""
        self.history: list[str] = []
        self._detail: NodeDetailScreen | None = None
        """The node detail kept for reuse (``open_node``), installed so that closing it does
        not remove it."""
        self._stop = asyncio.Event()
        self.shown_revision: FleetRevision = (-1, -1, -1)
        """The fleet revision of the last view refresh: views compare it with what they last
        computed and skip fleet-wide work when nothing changed."""
        self.painted: Painted | None = None
        self.painted_hooks: list[Callable[[Painted], None]] = []
        self._painted_revision: FleetRevision | None = None
        self._paint_pending = False

    # --- the session, as the views read it ----------------------------------------------------

    @property
    def session(self) -> ConsoleSession:
        """The active context's console core."""
        return self.sessions[self.active]

    @property
    def summaries(self) -> Summaries:
        """The active context's fleet-wide tables, caught up by its ticks (the overview's
        counts, the fabric view's leaf and port tables)."""
        summaries = self.session.summaries
        assert summaries is not None  # every session gets its own in __init__
        return summaries

    @property
    def cluster(self) -> str:
        return self.active

    @property
    def state(self) -> FleetState:
        return self.session.state

    @property
    def ingest(self) -> Ingest:
        return self.session.ingest

    @property
    def recent(self) -> RecentHistory:
        return self.session.recent

    @property
    def tracker(self) -> CommandTracker:
        return self.session.tracker

    @property
    def feed(self) -> LiveFeed | None:
        return self.session.feed

    @property
    def audit(self) -> AuditSink:
        return self.session.audit

    @property
    def recorder(self) -> RecordingWriter | None:
        return self.session.recorder

    @property
    def event_log(self) -> EventLog:
        return self.session.log

    @property
    def event_seq(self) -> int:
        return self.session.log.seq

    # --- lifecycle ----------------------------------------------------------------------------

    def on_mount(self) -> None:
        self._take_logging()
        # Said on stderr before the screen took the terminal, where no one reads it: a
        # mistyped $FLEETDECK_BROKR read only "connection refused" in the header (a review).
        for first in list(self.sessions.values())[:1]:
            for sentence in unknown_variables(os.environ):
                first.note(sentence, severity="warn")
        for name, session in self.sessions.items():
            if self.stores.get(name) is not None:
                # The feed starts once the store is back (or after STORE_WAIT_S): a node
                # heard before its verdict was recalled read as changed at this console's
                # start, and an incident hours old said AGE 8s (an SRE drill).
                self.open_store(name, then_run=True)
            else:
                self.run_session(session)
            if self.auto_tick:
                # Live, a tick applies at most a time budget of what arrived and carries the
                # rest (docs/architecture.md, "The hot path"): keys and paints get the loop in
                # between.
                session.apply_budget_s = APPLY_BUDGET_S
        if self.auto_tick:
            self.set_interval(self.tick_s, self.timer_tick)
        self.call_after_refresh(self._first_tick)
        # A closed terminal (SIGHUP) or a SIGTERM ends the console as q does: the store is
        # flushed, a recording closed, the terminal restored, and a front end that started
        # a broker and a simulator (the demo) gets to stop them. A plain signal handler, not
        # the loop's: it runs even while the loop is blocked (Textual's writer thread dies on
        # a write to a hung-up terminal, and the next paint waits for ever on its full queue).
        self._loop = asyncio.get_running_loop()
        for sig in STOP_SIGNALS:
            with contextlib.suppress(ValueError, OSError):  # not the main thread
                self._old_handlers[sig] = signal.signal(sig, self._on_stop_signal)
        if not self.is_headless:
            threading.Thread(target=self._watch_terminal, name="fleetdeck-terminal-watch",
                             daemon=True).start()

    def _take_logging(self) -> None:
        """Log records to the log file and the notifications, not the terminal (log_notice)."""
        to_file = file_handler(self.log_path) if self.log_path is not None else None
        self.log_notices = NoticeHandler(self, self.log_path if to_file is not None else None)
        self._restore_logging = divert_from_terminal(
            *(h for h in (to_file, self.log_notices) if h is not None))

    def _watch_terminal(self) -> None:
        """A hung-up terminal sends SIGHUP to its session's leader only, and a leader that
        does not pass it on (``make demo`` under a tmux pane that is killed) leaves the console
        running with no screen, its broker and simulator with it. The process loses its
        controlling terminal all the same: then ``/dev/tty`` cannot be opened any more."""
        def have_tty() -> bool:
            try:
                os.close(os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY))
            except OSError:
                return False
            return True

        if not have_tty():
            return  # none to lose (started without a controlling terminal)
        while not self._stop.is_set():
            time.sleep(TERMINAL_POLL_S)
            if not have_tty() and not self._stop.is_set():
                os.kill(os.getpid(), signal.SIGHUP)  # as if the terminal had said so
                return

    def _on_stop_signal(self, signum: int, _frame: object) -> None:
        if self._stop_asked:
            return
        self._stop_asked = True
        self._stopped_by = signal.Signals(signum).name
        if signum == signal.SIGHUP:
            # The terminal is gone: Textual's shutdown would wait for ever on a hung-up tty
            # (its input thread and its last writes), and the console would live on with no
            # screen. On /dev/null it reads EOF and writes nowhere, and exits as q does.
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.close(null)
        # Should the orderly exit still hang, the process ends anyway (after what asked for a
        # last word: the demo's broker and simulator): a console nobody can see must not
        # outlive its terminal or the SIGTERM that asked it to stop.
        watchdog = threading.Timer(STOP_GRACE_S, force_exit, args=(128 + signum,))
        watchdog.daemon = True
        watchdog.start()
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self.exit, None, 128 + signum)

    def run_session(self, session: ConsoleSession) -> None:
        """The session's feed and store writer, as a worker of its own (one per context)."""
        name = ("feed and store writer" if len(self.sessions) == 1
                else f"feed and store writer of {session.state.cluster}")

        async def runner() -> None:
            await session.run(self._stop)

        self.run_worker(runner(), name=name, group=f"session-{session.state.cluster}",
                        exclusive=True, exit_on_error=False)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        # A worker that dies must show (header, event log), never leave a quietly stale
        # console behind.
        if event.state is WorkerState.ERROR:
            err = event.worker.error
            session = next((s for name, s in self.sessions.items()
                            if event.worker.group in (f"session-{name}", f"store-{name}")),
                           self.session)
            session.worker_failed(event.worker.name or "worker",
                                       f"{type(err).__name__}: {err}" if err else "error")
            self.refresh_view()

    # --- recording (R) --------------------------------------------------------------------------

    def action_toggle_recording(self) -> None:
        """Record what this console receives (and the commands it sends) to a file."""
        if self.session.feed is None:
            self.notify(self.nothing_to_record, severity="warning")
            return
        if self.session.recorder is not None:
            rec = self.session.stop_recording()
            if rec is not None:
                # The name and its folder on lines of their own: a toast's width broke the
                # whole path mid-word, awkward to copy (a 3 a.m. drive).
                self.notify(f"recorded {rec.messages} messages to\n{rec.path.name}\n"
                            f"in {rec.path.parent}", timeout=8)
            self.refresh_view()
            return
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(self.clock()))
        path = self.record_dir / f"fleetdeck-{self.cluster}-{stamp}.jsonl.gz"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            rec = self.session.start_recording(path)  # beside ``path`` if that exists
        except OSError as err:
            self.notify(f"cannot record to {path}: {err.strerror or err}", severity="error")
            return
        self.notify(f"recording to\n{rec.path.name}\nin {rec.path.parent} (R stops)", timeout=5)
        self.refresh_view()

    async def on_unmount(self) -> None:
        for sig, old in self._old_handlers.items():
            signal.signal(sig, old)
        self._old_handlers.clear()
        self._stop.set()
        by = f" ({self._stopped_by})" if self._stopped_by else ""
        for session in self.sessions.values():
            # Whatever ended the console (q asked and abandoned already), a command still
            # open gets an outcome in the audit: a SIGTERM or a dropped ssh session (SIGHUP)
            # left "requested" and nothing after it (an SRE drill).
            session.abandon(f"console ended{by} before an outcome was seen", Phase.ABANDONED)
            await session.close()
        if self._restore_logging is not None:
            self._restore_logging()
            self._restore_logging = None

    # --- history store (SQLite) ------------------------------------------------------------

    def open_store(self, cluster: str | None = None, *, then_run: bool = False) -> None:
        """Open the context's store in a worker; ``then_run``: start its session once the
        store is open, failed, or has taken STORE_WAIT_S (its restore needs the nodes not
        heard yet; a slow disk must not keep the console deaf)."""
        name = self.active if cluster is None else cluster
        path = self.stores.get(name)
        assert path is not None
        session = self.sessions[name]

        async def open_it() -> None:
            try:
                await session.open_store(path)
            except StoreError as err:
                session.store_unavailable(str(err))
                self.notify(f"{err} History is not kept while this console runs.",
                            severity="error")

        async def opener() -> None:
            if not then_run:
                await open_it()
                return
            task = asyncio.ensure_future(open_it())
            try:
                await asyncio.wait([task], timeout=STORE_WAIT_S)
            except asyncio.CancelledError:
                task.cancel()
                raise
            self.run_session(session)
            await task

        self.run_worker(opener(), group=f"store-{name}", exclusive=True, exit_on_error=False)

    # --- the tick -----------------------------------------------------------------------------

    def tick(self, paint_later: bool = False) -> TickReport:
        """One session tick, then redraw the visible view. Public so tests and the benchmark
        drive it themselves.

        ``paint_later`` (the tick timer's and the backlog's slices): the redraw is a loop step
        of its own, 1 ms on, after the I/O and timers due by then. In the tick's own step it
        made one step of both, a tick of 20-33 ms and a view's refresh of 25-50 at 16,384
        nodes under a feed: the 53-57 ms the stall rows missed by (docs/performance.md, "What
        the loop's longest steps are made of")."""
        t0 = time.perf_counter()
        self._cancel_slice()  # this tick is the slice: one tick per scheduled slot
        self._tick_owed = False
        report = self.session.tick()
        for req in {id(tr.request): tr.request for tr in report.commands
                    if tr.finished}.values():
            self._notify_finished(req)
        self._probe_clusters(report.now)
        self._say_commands_dropped()
        for name, other in self.sessions.items():
            # The contexts not shown tick too (their commands finish, their counts stay live
            # for the clusters view), each within its own apply budget.
            if name == self.active:
                continue
            for req in {id(tr.request): tr.request for tr in other.tick().commands
                        if tr.finished}.values():
                self._notify_finished(req, name)
        t1 = time.perf_counter()
        self.ticks += 1
        self._backlog_left = report.backlog
        if report.backlog:
            # The rest of a backlog gets the next slice right after the loop's other work (and
            # after a key in flight); the screen is redrawn when it is applied, or every
            # BACKLOG_PAINT_S meanwhile (not while a key's own refresh is on its way) in a
            # callback of its own between two slices: a slice and a view's refresh in one
            # callback held the loop 55-73 ms under a 16,384-node feed (bench/console_scale.py).
            if t1 - self._last_paint < BACKLOG_PAINT_S or self._key_waits(t1):
                self._slice_later(0.001)
            else:
                self._paint_later()
            self.tick_ms = (t1 - t0) * 1000
            return report
        if paint_later:
            self._paint_later()
            self.tick_ms = (t1 - t0) * 1000
            return report
        self._last_paint = t1
        self.refresh_view(report.now)
        t2 = time.perf_counter()
        self.render_ms = (t2 - t1) * 1000
        self.tick_ms = (t2 - t0) * 1000
        return report

    def _say_commands_dropped(self) -> None:
        """A toast when the broker is found to drop this console's commands (the header keeps
        saying it; the timeline has the sentence too)."""
        probe = self.session.probe
        dropped = probe is not None and probe.dropped
        if dropped != self._said_dropped.get(self.active, False):
            self._said_dropped[self.active] = dropped
            if probe is not None and dropped:
                self.notify(esc(probe.why()), severity="error", timeout=12)

    def _probe_clusters(self, now: float) -> None:
        """Once connected and hearing nothing of this cluster for ``CLUSTERS_PROBE_AFTER_S``,
        read which clusters the broker holds births of, once: a mistyped --cluster read "no
        node of cluster fdx heard from yet" for ever, where ``status`` names the clusters seen
        there (a drill)."""
        feed = self.session.feed
        if (self.other_clusters is not None or feed is None or self.state.nodes
                or self.url is None):
            return
        if feed.conn.state != "connected":
            self._empty_since = None
            return
        if self._empty_since is None:
            self._empty_since = now
        if now - self._empty_since < CLUSTERS_PROBE_AFTER_S:
            return
        self.other_clusters = []  # asked once
        url, cluster = self.url, self.session.state.cluster

        async def probe() -> None:
            try:
                found = await asyncio.wait_for(
                    clusters_seen(url, f"fd-console-probe-{os.getpid()}-{id(self):x}"[:64]),
                    10.0)
            except Exception:  # a hint only: nothing is said without it
                return
            self.other_clusters = [c for c in found if c != cluster]

        self.run_worker(probe(), group="clusters-probe", exit_on_error=False)

    @_goes_on
    def timer_tick(self) -> None:
        """The tick timer's tick: a key in flight goes first, as before a backlog's slices
        (KEY_FIRST_S): the tick waits until the key's effect is painted, at most that long.
        A new batch's first slice came in between a key and its paint and delayed view
        switches under a 16,384-node stream (bench/console_scale.py)."""
        now = time.perf_counter()
        self._drop_lost_steps(now)
        if self._key_waits(now):
            assert self._key_at is not None
            self._slice_later(self._key_at + KEY_FIRST_S - now)  # after the key's paint
            return
        if self._next_slice is not None or self._next_paint is not None:
            # A backlog's next slice (or its redraw, then a slice) is on its way and ticks:
            # Textual hands both timers' calls to the app's queue, which it runs without
            # yielding, so a slice and this tick made one loop step of two ticks (34 + 27 ms
            # under a 16,384-node feed; docs/performance.md, "What the loop's longest steps
            # are made of"). A redraw alone is followed by a slice (``_backlog_paint``).
            self._tick_owed = True
            return
        self.tick(paint_later=True)

    def _drop_lost_steps(self, now: float) -> None:
        """Forget a slice or redraw whose timer did not call back ``STEP_LOST_S`` after it was
        due, so that the tick waits for it no more; lift a view switch's mask and take a resize
        whose timer did not call back either (``STEP_LOST_S``)."""
        lost = []
        if self._next_paint is not None and now - self._paint_due > STEP_LOST_S:
            self._cancel_paint()
            lost.append(f"a redraw due {now - self._paint_due:.1f} s ago")
        if self._next_slice is not None and now - self._slice_due > STEP_LOST_S:
            self._cancel_slice()
            lost.append(f"a slice due {now - self._slice_due:.1f} s ago")
        for gen, due in list(self._masks.items()):
            if now - due > STEP_LOST_S:
                self._lift_mask(gen)
                lost.append(f"a view switch's mask due to lift {now - due:.1f} s ago")
        # Textual's own one-shot timer for a resize (``App._on_resize``, 8 ms): while it is
        # set, a later resize waits for it, so a lost one kept the layout of the old size
        # for the rest of the run. Its ``_check_resize`` is harmless when the call comes after.
        pending = self._resize_timer
        seen, since = self._resize_seen
        if pending is None:
            self._resize_seen = (None, now)
        elif pending is not seen:
            self._resize_seen = (pending, now)
        elif now - since > STEP_LOST_S:
            self._check_resize()
            lost.append(f"a resize seen {now - since:.1f} s ago")
        if lost:
            self.lost_steps += 1
            log.info("the console's tick takes over from %s (its timer never called back)",
                     " and ".join(lost))

    @_goes_on
    def _first_tick(self) -> None:
        self.tick()

    def _key_waits(self, now: float) -> bool:
        return self._key_at is not None and now - self._key_at < KEY_FIRST_S

    def _slice_later(self, delay: float) -> None:
        """Schedule the next slice (one at a time): in ``delay`` seconds (at least 1 ms, so
        the loop runs what else is ready in between), unless one is due sooner."""
        if self._next_slice is not None:
            return
        self._slice_gen += 1
        self._slice_due = time.perf_counter() + max(0.001, delay)
        self._next_slice = self.set_timer(max(0.001, delay),
                                          partial(self._backlog_slice, self._slice_gen))

    def _paint_later(self) -> None:
        """Redraw the view in 1 ms, then schedule the next slice (``_backlog_paint``)."""
        if self._next_paint is None:
            self._paint_gen += 1
            self._paint_due = time.perf_counter() + 0.001
            self._next_paint = self.set_timer(0.001, partial(
                self._backlog_paint, self._paint_gen, self._last_paint))

    def _cancel_paint(self) -> None:
        if self._next_paint is not None:
            self._next_paint.stop()
            self._next_paint = None
        self._paint_gen += 1

    @_goes_on
    def _backlog_paint(self, gen: int, asked_after: float) -> None:
        if gen != self._paint_gen:
            return  # dropped for lost after Textual had queued its call (``_drop_lost_steps``)
        self._next_paint = None
        t0 = time.perf_counter()
        if self._last_paint == asked_after and not self._key_waits(t0):
            # Not when a tick painted meanwhile, nor between a key and its own paint.
            self._last_paint = t0
            self.refresh_view()
            self.render_ms = (time.perf_counter() - t0) * 1000
        if self._backlog_left or self._tick_owed:  # unless a tick since took the rest
            self._slice_later(0.001)

    def _cancel_slice(self) -> None:
        if self._next_slice is not None:
            self._next_slice.stop()
            self._next_slice = None
        self._slice_gen += 1

    @_goes_on
    def _backlog_slice(self, gen: int) -> None:
        if gen != self._slice_gen:
            return  # stopped after Textual had queued its call, or a tick ran meanwhile
        self._next_slice = None
        now = time.perf_counter()
        if self._key_waits(now):
            assert self._key_at is not None
            self._slice_later(self._key_at + KEY_FIRST_S - now)
            return
        self.tick(paint_later=True)

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key) and not event.is_forwarded:
            self._key_at = time.perf_counter()
            self._keys += 1
            # The key is handled by now or within this refresh; what it changed (a switched
            # view refreshes after the switch's own refresh) is painted by the one after.
            self.call_after_refresh(self.call_after_refresh, self._key_shown, self._keys)
        await super().on_event(event)

    def _key_shown(self, key: int) -> None:
        if key != self._keys or self._key_at is None:
            return  # another key came since: it is in flight now
        self._key_at = None
        if self._next_slice is not None:  # the backlog waited for this key: on with it
            self._cancel_slice()
            self._slice_later(0.001)

    def refresh_view(self, now: float | None = None) -> None:
        """Redraw the view on top (and the one under a modal)."""
        now = self.clock() if now is None else now
        self.shown_revision = fleet_revision(self.state)
        for screen in reversed(self.screen_stack):
            if isinstance(screen, FleetView):
                if screen.is_mounted:
                    screen.refresh_view(now)
                break
        if self.shown_revision != self._painted_revision and not self._paint_pending:
            self._paint_pending = True
            self.call_after_refresh(self._note_painted)

    def _note_painted(self) -> None:
        """The painted hook: after a view refresh that showed a fleet revision not shown before,
        Textual's ``call_after_refresh`` runs this once the screen's pending updates have been
        composited and written to the terminal (the driver's write; headless, the update is
        composited and dropped). It records ``self.painted`` (a ``Painted``: wall and
        perf_counter times, the revision shown, the tick number) and calls each function in
        ``self.painted_hooks`` with it, so a benchmark measures lag to the screen, not to the
        apply: e.g. ``app.painted_hooks.append(lambda p: seen.append(p))``."""
        self._paint_pending = False
        revision = self.shown_revision
        if revision == self._painted_revision:
            return
        self._painted_revision = revision
        painted = self.painted = Painted(time.time(), time.perf_counter(), revision, self.ticks)
        for hook in self.painted_hooks:
            hook(painted)

    def link_text(self, now: float) -> str:
        """The header's second item, right after the cluster and the mode: where the data
        comes from and how that is going (the broker and its connection state)."""
        broker = self.broker_label or (self._broker_shown() if self.url is not None else "")
        return f"{esc(broker)} {self._link_state(now)}"

    def _link_state(self, now: float) -> str:
        """How the broker connection is going, as the header says it after the broker."""
        session = self.session
        if session.feed is None:
            conn = "[$text-muted]no broker[/]"
        else:
            c = session.feed.conn
            colour = {"connected": "$success", "connecting": "$warning"}.get(c.state, "$error")
            conn = f"[{colour}]{c.state}[/]"
            if c.state != "connected" and c.detail:
                conn += f" ({esc(self._short_detail(c.detail))})"
            quiet = session.sight.deaf.judge(session.feed, self.state, now)
            if quiet is not None:
                # A hung broker keeps the TCP link up until the keepalive runs out (~15 s):
                # the header read "connected" in green while nothing arrived and every node
                # went stale (a drill). A broker that answers its keepalive pings since is not
                # hung: the fleet is what went quiet (a replay into a broker that ended read
                # "broker hung?" for 333 s beside a broker carrying other clusters: an audit).
                # The ping's answer proves the broker alive, not that it delivers to this
                # console: a deaf console said "the fleet is silent" for 490 s while the fleet
                # published (a drill); a fresh subscription tells (console/deaf_check.py,
                # ``judge``: its words are status --json's ``quiet_link`` too).
                conn = (f"[$warning]connected, nothing heard for {quiet.quiet_s:.0f} s "
                        f"({quiet.text})[/]")
        return conn

    def _broker_shown(self) -> str:
        """``host:port`` for a plain anonymous link (the demo's), else the URL with its scheme
        and user, never the password: an operator on a production broker could not see
        whether the console spoke TLS nor as whom (a newcomer's run, docs/security.md)."""
        return self._broker_forms()[0]

    def _broker_forms(self) -> list[str]:
        """The broker as the header may show it, longest first: the URL with its user, then
        with its scheme alone, then ``host:port``."""
        assert self.url is not None
        url = self.url
        forms = [str(url), f"mqtts://{url.address}" if url.tls else "", url.address]
        if not (url.tls or url.username):
            forms = [url.address]
        return list(dict.fromkeys(f for f in forms if f))

    def quiet_s(self, now: float) -> float | None:
        """How long a connected console has heard nothing, once that is past two of the
        agents' sample intervals (agents that sample every 30 s are quiet between samples);
        None while things arrive. The header says it, and the overview's top problems do not
        call a fleet healthy through it (an SRE drill: "every node reports healthy" beside
        "nothing heard for 15 s"). On digests, the digests' period stands for the interval."""
        feed = self.session.feed
        if feed is None or feed.conn.state != "connected":
            return None
        # The header's own judgement (console/deaf_check.py ``DeafCheck.judge``): one rule.
        return fleet_quiet_s(self.state, now)

    def link_why(self, most: int = 160) -> str:
        """Why the broker connection is not up, as the header says it but longer (the problem
        line's width), or its state ("connecting") when no attempt failed yet. Plain text."""
        feed = self.session.feed
        if feed is None:
            return "no broker"
        c = feed.conn
        return self._short_detail(c.detail, most) if c.detail else c.state

    def _short_detail(self, detail: str, most: int = 72) -> str:
        """The connection's trouble in the header: the broker's address is already beside it,
        and a cut falls between words ("…: connecti" hid "connection refused")."""
        if self.url is not None:
            detail = detail.replace(f" at {self.url}", "")
            # "(the default: no --broker, …)" filled the 72 characters and hid "connection
            # refused"; the timeline keeps the whole sentence.
            detail = detail.replace(f" {DEFAULT_NOTE}", "")
        return clip_words(detail.rstrip("."), most)

    def header_text(self, now: float) -> str:
        session = self.session
        mode = "[$warning]\\[R][/]" if self.read_only else "[$success]\\[RW][/]"
        gap = "  "
        if session.probe is not None and session.probe.dropped:
            # Read-only in effect, most likely: its test publish did not come back (the
            # timeline and every command's dialog say why). Not "broker drops commands": a
            # user that may publish commands but not read them back fails the test too while
            # its commands reach their nodes (docs/security.md); a node's answer to one of
            # them clears it. In the alarm's colour: not read-only by choice.
            mode = "[$error]\\[R?] commands unconfirmed[/]"
        elif session.probe is not None and session.probe.pending:
            # Not known yet whether the broker delivers its commands: "[RW]" claimed it for the
            # 10 s a viewer's test publish is waited for (docs/security.md). One space less, so
            # what follows stays where it will be once the test answers.
            mode, gap = "[$text-muted]\\[RW?][/]", " "
        updated = self.updated_text(now)
        bad = self.state.malformed.total
        # Bad input is an alarm, said before the routine figures (cut first at 80 columns).
        alarm = f"  [$error]malformed {bad}[/]" if bad else ""
        routine = "" if bad else "  malformed 0"
        active = len(self.tracker.active)
        cmds = f"  [$warning]cmds {active} open[/]" if active else ""
        audit = "  [$error]AUDIT LOG FAILING[/]" if session.audit_failing else ""
        store = ""
        if "store" in session.problems:
            store = f"  [$error]STORE FAILING ({session.store_backlog} ticks held)[/]"
        if "history" in session.problems:
            store = "  [$error]NO HISTORY (store: see events)[/]"
        dead = "".join(f"  [$error]{esc(p.what.upper())} STOPPED[/]"
                       for p in session.problems.values()
                       if p.what not in ("store", "audit", "history"))
        if session.burst_cut is not None:
            # Nodes whose births the broker dropped at connect are in no count: said in the
            # header, where an overview with problems has no line for it (an SRE drill: 34 of
            # 64 nodes listed, the cut said only in the events view).
            dead += f"  [$error]NODES UNLISTED? ({session.burst_cut[0]} cut at connect)[/]"
        rec = ""
        if session.recorder is not None:
            rec = f"  [$error]● RECORDING {human_bytes(session.recorder.size)}[/]"
        behind = self.state.behind_s
        lagging = ""
        if session.shedding(now):
            shed = session.feed.dropped_total if session.feed is not None else 0
            lost = self.state.seq_lost
            what = ", ".join(w for w in (f"shed {shed:,}" if shed else "",
                                         f"{lost:,} samples lost" if lost else "") if w)
            lagging = f"  [$error]BEHIND {behind:.1f}s{', ' + what if what else ''}[/]"
        elif behind > BEHIND_WARN_S:
            lagging = f"  [$error]BEHIND {behind:.1f}s[/]"
        digests = ""
        if session.digests:
            live = sum(1 for c in self.state.collectors.values() if c.online)
            digests = (f"  on digests, {live} collector{'' if live == 1 else 's'}" if live
                       else "  [$error]on digests, no collector live[/]")
        bridge = self.state.bridge
        if bridge is not None and not bridge.up and not bridge.cluster_side:
            # The one cause of the cluster's silence on a site broker, before its nodes go
            # stale one by one (console/bridge.py; the overview's incident says the rest).
            digests += f"  [$error]BRIDGE FROM {esc(self.cluster)} DOWN[/]"
        # What needs attention before the routine figures: at 80 columns the end is cut off,
        # and "● RECORDING" or "cmds 1 open" went with it (a UX audit).
        def told(link: str) -> str:
            return (f"[b]fleetdeck[/] [b]{esc(self.cluster)}[/] {mode}{gap}{link}"
                    f"{digests}{lagging}{audit}{store}{dead}{rec}{cmds}{alarm}")

        routine_end = f"{updated}{routine}  op {esc(self.operator)}"
        if self.broker_label or self.url is None:
            return told(self.link_text(now)) + routine_end
        # mqtts://user@host:8883 took 20 more cells than host:port: at 80 columns the
        # connection's state and every alarm after it ("● RECORDING", "cmds 1 open") were cut
        # off. Where they would be, the broker is said shorter; its user, then its scheme, go
        # first (HeaderBar pads a cell each side). The routine figures may be cut, as before.
        room = self.size.width - 2
        conn = self._link_state(now)
        for form in self._broker_forms():
            text = told(f"{esc(form)} {conn}")
            if Content.from_markup(text).cell_length <= room:
                break
        return text + routine_end

    def updated_text(self, now: float) -> str:
        """The header's age of the last update, ``  upd 0.4s ago``."""
        last = self.state.last_update
        return "  upd " + ("never" if last is None else f"{max(0.0, now - last):.1f}s ago")

    # --- navigation ---------------------------------------------------------------------------

    def action_view(self, view: str) -> Awaitable[object] | None:
        """Switch to ``view``; await the result to know its screen is mounted."""
        if view not in VIEWS:
            return None
        if self.current_mode == view:
            # Already on the view's stack, under a node detail: the view's key means the view
            # itself (a UX audit pressed 4 twice).
            self._to_view_root(view)
            return None
        self._remember(self.current_mode)
        if view in self.history:
            self.history.remove(view)  # here now: not a step back
        done = self._switch(view)
        # The view itself, not a node detail left open on its stack long ago: "1" after a
        # detail opened from the overview and a look at the jobs showed that detail again, with
        # the overview's tab lit (a 3 a.m. drive). Its cursor is kept: enter opens it again.
        # At once, not after a refresh: a key typed in between went to the old detail ('r'
        # drains there: a review).
        self._to_view_root(view)
        return done

    def _remember(self, view: str) -> None:
        """``view`` on top of the back history, once: Esc walked back through every view ever
        visited (twelve presses and it had not settled: an operator's walkthrough)."""
        if view in self.history:
            self.history.remove(view)
        self.history.append(view)

    def _switch(self, view: str) -> Awaitable[object]:
        # A node detail pushed on the current view's stack stays there: going back to the view
        # (its key, Esc) pops it (action_view, _to_view_root).
        # The view switched to refreshes itself as it resumes (FleetView._on_screen_resume).
        self._views_composed.add(self.current_mode)
        if isinstance(self.screen, FleetView):
            self.screen.leaving()
        self._mask_s = 0.0 if view in self._views_composed else SWITCH_MASK_S
        try:
            done = self.switch_mode(view)
        finally:
            self._mask_s = SWITCH_MASK_S
        self._views_composed.add(view)
        return done

    def delay_update(self, delay: float = SWITCH_MASK_S) -> None:
        """Textual's own, but lifted by the tick too once overdue (``_drop_lost_steps``):
        its one-shot timer can end without calling back (``STEP_LOST_S``), and the mask it
        left on (``App._begin_batch``) held every later paint, the console's screen frozen
        for good after a first visit to a view."""
        # Called by Textual's switch_mode with its default: a view composed before is not
        # masked (SWITCH_MASK_S). Not with a zero delay: Textual's timers divide by it.
        if self._mask_s <= 0:
            return
        delay = min(delay, self._mask_s)
        self._begin_batch()
        self._mask_gen += 1
        self._masks[self._mask_gen] = time.perf_counter() + delay
        self.set_timer(delay, partial(self._lift_mask, self._mask_gen), name="delay_update")

    def _lift_mask(self, gen: int) -> None:
        if self._masks.pop(gen, None) is None:
            return  # lifted by the tick already, its timer's call queued
        self._end_batch()
        if not self._batch_count:
            self.screen.refresh()

    # --- contexts (one per cluster) -----------------------------------------------------------

    def action_contexts(self) -> None:
        """The fleet of fleets: every cluster this console watches, with its counts."""
        if self.current_mode != "clusters":
            self._remember(self.current_mode)
        self._switch("clusters")

    def use_context(self, cluster: str) -> None:
        """Make ``cluster`` the context every view shows (k9s ``:ctx NAME``)."""
        if cluster not in self.sessions:
            known = ", ".join(self.sessions)
            self.notify(f"no context '{esc(cluster)}' (this console watches {esc(known)}; "
                        "start it with --cluster a,b)", severity="warning")
            return
        back = next((v for v in reversed([*self.history, self.current_mode]) if v in VIEWS),
                    "overview")
        if cluster == self.active:
            self.action_view(back)
            return
        self.run_worker(self._use_context(cluster, back), group="context", exclusive=True)

    async def _use_context(self, cluster: str, view: str) -> None:
        # The views cache what they computed per node and per fleet revision, and their stacks
        # hold node details of the old cluster: rebuilt from scratch, nothing of one cluster is
        # ever shown under another's name. The clusters view keeps no per-context cache.
        if self.current_mode != "clusters":
            await self.switch_mode("clusters")
        self.active = cluster
        self.other_clusters, self._empty_since = None, None  # asked afresh of this one
        for name in VIEWS:
            await self.remove_mode(name)
            self.add_mode(name, self.MODES[name])
        await self._drop_detail()
        unsettle_later()  # the old views, frozen by a settle, are garbage now (runtime.py)
        self.shown_revision = (-1, -1, -1)
        self._painted_revision = None
        self.history = [v for v in self.history if v not in VIEWS]
        self._views_composed = {"clusters"}  # the views are new: each composes (and is masked)
        await self.switch_mode(view)
        self._views_composed.add(view)
        self.refresh_view()
        self.notify(f"context {esc(cluster)}", timeout=2)

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
        if self.current_mode == "overview":
            self.history.clear()  # home: Esc stops here
            return
        if self.history:
            view = self.history.pop()
            self._switch(view)
            # Back to the view itself, not to a node detail left open on it long ago (Esc
            # landed on an old gpu0019 detail); at once, as action_view.
            self._to_view_root(view)

    def _to_view_root(self, view: str) -> None:
        if self.current_mode != view:
            return
        while len(self.screen_stack) > 1 and not isinstance(self.screen, ModalScreen):
            self.pop_screen()
        self.refresh_view()

    def open_requests(self) -> list[tuple[str, Request]]:
        """Every command not finished yet, in every context, with its cluster."""
        return [(name, req) for name, session in self.sessions.items()
                for req in session.tracker.active]

    async def action_quit(self) -> None:
        # Textual's own quit (ctrl+q, the palette's "Quit the application") asks too.
        self.action_interrupt()

    def action_interrupt(self) -> None:
        """ctrl+c (and ctrl+q): quit as q does; pressed again while the quit question is
        shown, quit anyway (a shell's second ctrl+c), not a second question over the first."""
        from fleetdeck.console.tui.modals import QuitScreen

        if isinstance(self.screen, QuitScreen):
            self.screen.action_answer(True)
            return
        self.action_quit_console()

    def action_quit_console(self) -> None:
        """q: quit, after a y/n when commands are still open (an operator who quits right
        after a drain would otherwise never see whether it was done)."""
        from fleetdeck.console.tui.modals import QuitScreen

        open_now = self.open_requests()
        if not open_now:
            self.exit(0)
            return
        many = len(self.sessions) > 1
        lines = [(f"[{name}] " if many else "") + f"{request_words(req)}: {req.standing()}"
                 for name, req in open_now]

        def done(quit_: bool | None) -> None:
            if not quit_:
                return
            for session in self.sessions.values():
                session.abandon("console quit before an outcome was seen", Phase.ABANDONED)
            self.exit(0)

        self.push_screen(QuitScreen(lines), done)

    def action_help(self) -> None:
        from fleetdeck.console.tui.modals import HelpScreen

        probe = self.session.probe
        self.push_screen(HelpScreen(self.read_only, self.HELP_EXTRA,
                                    probe.why() if probe is not None else "",
                                    pending=probe is not None and probe.pending))

    def action_command_line(self) -> None:
        from fleetdeck.console.tui.modals import CommandLine

        # ':' is a priority binding, so the keys typed straight after it reach the command
        # line (a key goes to what has focus when the app reads it, and a plain binding runs
        # only once its key went round the old screen). In a text box or a modal ':' is a
        # character, as before: skipped, the key goes on to the box.
        if self.screen.is_modal or isinstance(self.focused, Input):
            raise SkipAction()
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
        if verb in ("q", "quit"):
            self.action_quit_console()
        elif verb == "q!":
            self.exit(0)  # vim's q!: no question asked
        elif verb in ALIASES and not rest:
            self.action_view(ALIASES[verb])
        elif verb in ("ctx", "context", "contexts", "cluster", "clusters"):
            if rest:
                self.use_context(rest[0])
            else:
                self.action_contexts()
        elif verb in ("node", "no", "nodes") and rest:
            self.open_node(rest[0])
        elif verb in ("drain", "resume") and rest:
            # The CLI's parser: ':drain gpu+' (an MQTT wildcard) read "unknown nodes: gpu+"
            # where `fleetdeck drain gpu+` said no node can have that name (a CLI fuzz round).
            try:
                targets = parse_targets(",".join(rest))
            except UserError as err:
                self.session.refuse(CommandOp(verb), ",".join(rest), str(err))
                self.notify(esc(str(err)), severity="error")
                return
            if verb == "drain":
                self.request_drain(targets)
            else:
                self.request_resume(targets)
        elif verb in ("restart", "restart-job", "requeue") and rest:
            self.request_restart(rest[0])
        elif verb == "help":
            self.action_help()
        elif verb in NEEDS:
            self.notify(esc(f"':{verb}' {NEEDS[verb]}"), severity="warning")
        else:
            # Escaped whole: "[NAME]" is Rich markup to Textual, and vanished from the list.
            self.notify(esc(f"unknown command ':{text.strip().lstrip(':')}' (try {COMMANDS_HELP})"),
                        severity="warning")

    def show_nodes(self, hostlist: str) -> None:
        """The nodes view filtered to ``hostlist`` (a job's or an incident's nodes)."""
        from fleetdeck.console.tui.screens.nodes import NodesScreen

        self.action_view("nodes")

        def apply() -> None:
            if isinstance(self.screen, NodesScreen):
                self.screen.set_filter(hostlist)
                self.refresh_view()

        self.call_after_refresh(apply)

    def open_node(self, node_id: str, gpu: int | None = None) -> None:
        if node_id not in self.state.nodes:
            from fleetdeck.hostlist import did_you_mean

            hint = did_you_mean([node_id], self.state.nodes)
            self.notify(esc(f"no node named {node_id}" + (f" ({hint})" if hint else "")),
                        severity="warning")
            return
        self.push_screen(self._node_detail(node_id, gpu))
        self.call_after_refresh(self.refresh_view)

    def _node_detail(self, node_id: str, gpu: int | None) -> "NodeDetailScreen":
        """The detail kept for reuse, made the detail of ``node_id``, when no stack holds it;
        else a new one. A new screen per open left ~5,000 objects of cyclic garbage (its
        widgets, styles and charts) that only the periodic full sweep frees, ~0.28 s at 16,384
        nodes (docs/performance.md, "The node detail's garbage"). Still held: a detail left
        open on another view's stack, or the one under a ``:node`` typed in a detail."""
        from fleetdeck.console.tui.screens.node_detail import NodeDetailScreen

        kept = self._detail
        if kept is not None and kept.is_mounted and not self._stacked(kept):
            kept.show_node(node_id, gpu, self.clock())
            return kept
        screen = NodeDetailScreen(node_id, gpu)
        if kept is None:
            self.install_screen(screen, DETAIL_SCREEN)
            self._detail = screen
        return screen

    def pop_screen(self) -> AwaitComplete:
        if isinstance(self.screen, FleetView):
            # A node detail closed: the kept one is shown again on a later open, restyled then
            # only if what its styles rest on changed (FleetView.leaving); each restyle of its
            # footer's keys left ~700 objects of cyclic garbage (Textual's virtual nodes of
            # component classes).
            self.screen.leaving()
        return super().pop_screen()

    def _stacked(self, screen: FleetView) -> bool:
        # ``_screen_stacks`` (every mode's stack) is Textual's own: pyproject.toml pins 8.2.8.
        return any(screen in stack for stack in self._screen_stacks.values())

    async def _drop_detail(self) -> None:
        """Forget the kept detail (a new context: nothing of one cluster is shown under
        another's name, and its node is no longer watched)."""
        kept, self._detail = self._detail, None
        if kept is None:
            return
        self.uninstall_screen(kept)
        if not self._stacked(kept) and kept.is_attached:
            await kept.remove()
        unsettle_later()  # frozen by a settle, it is garbage now (runtime.py)

    # --- commands -----------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.read_only if action == "read_only" else True

    def action_read_only(self, key: str) -> None:
        """A command key of the view shown, pressed in a read-only console (not a key of no
        use on this view: that says nothing, as in a read-write console)."""
        for binding in getattr(self.screen, "BINDINGS", ()):
            if (isinstance(binding, Binding) and binding.key == key
                    and binding.action in COMMAND_ACTIONS):
                self.refuse_read_only(f"{key} ({binding.description.lower()})")
                return

    def refuse_read_only(self, what: str) -> None:
        # One short line: with "drain, resume and restart are for a read-write console" it
        # wrapped to 3 lines at 100 columns (a walk-through); ``?``'s help says that part.
        self.notify(esc(f"{self.read_only_why}: {what} is off"), severity="warning", timeout=4)

    def _unknown(self, targets: list[str]) -> list[str]:
        return [t for t in targets if t not in self.state.nodes]

    def _unknown_said(self, unknown: list[str]) -> str:
        """"unknown nodes: gpu42 (did you mean gpu0042?)": the node to type, as the CLI says
        it (a tired operator's unpadded name at 3 a.m.)."""
        from fleetdeck.hostlist import did_you_mean

        hint = did_you_mean(unknown, self.state.nodes)
        return esc(f"unknown nodes: {clip_words(compress(unknown), 120)}"
                   + (f" ({hint})" if hint else ""))

    def request_drain(self, targets: list[str]) -> None:
        if self.read_only:
            self.refuse_read_only("drain")
            return
        if not targets:
            return
        from fleetdeck.console.tui.modals import DrainScreen

        unknown = self._unknown(targets)
        if unknown:
            self.session.refuse(CommandOp.DRAIN, targets, f"unknown node(s) {compress(unknown)}")
            self.notify(self._unknown_said(unknown), severity="error")
            return

        taken: dict[tuple[object, ...], BlastRadius] = {}

        def radius(mode: DrainMode) -> BlastRadius:
            # Taken again only when a target moved (its shape: verdict, liveness, drain, busy)
            # or every RADIUS_WORK_S (the work its jobs would lose grows): the dialog asks each
            # second, and a radius reads the whole fleet, 45 ms at 16,384 nodes (a review).
            nodes = self.state.nodes
            now = self.clock()
            key = (mode, self.state.serial, now // RADIUS_WORK_S,
                   tuple(st.shape_rev if (st := nodes.get(n)) is not None else -1
                         for n in targets))
            if key not in taken:
                taken.clear()
                taken[key] = blast_radius(self.state, CommandOp.DRAIN, targets, now, mode)
            return self._unsent_note(taken[key])

        def done(result: tuple[str, DrainMode] | None) -> None:
            if result is not None:
                reason, mode = result
                if not self._changed_while_open(CommandOp.DRAIN, targets, reason, mode):
                    self.send(self.session.drain(targets, reason, mode))

        hint = drain_reason_hint(self.state.nodes.get(targets[0]))
        self.push_screen(DrainScreen(radius, suggested_drain_mode(self.state, targets), hint),
                         done)

    def request_resume(self, targets: list[str]) -> None:
        if self.read_only:
            self.refuse_read_only("resume")
            return
        if not targets:
            return
        from fleetdeck.console.tui.modals import ConfirmScreen

        unknown = self._unknown(targets)
        if unknown:
            self.session.refuse(CommandOp.RESUME, targets, f"unknown node(s) {compress(unknown)}")
            self.notify(self._unknown_said(unknown), severity="error")
            return
        # A target not drained is in the radius's notes: as `fleetdeck resume` does, the
        # command is still sent (the agent answers "was not drained").
        radius = blast_radius(self.state, CommandOp.RESUME, targets, self.clock())

        def done(ok: bool | None) -> None:
            if ok and not self._changed_while_open(CommandOp.RESUME, targets):
                self.send(self.session.resume(targets))

        self.push_screen(ConfirmScreen("Resume", self._unsent_note(radius)), done)

    def request_restart(self, job_id: str) -> None:
        if self.read_only:
            self.refuse_read_only("restart")
            return
        from fleetdeck.console.tui.modals import RestartScreen

        why = job_refusal(self.state, job_id)
        if why:
            self.session.refuse(CommandOp.RESTART_JOB, job_id, why)
            hint = unknown_job_hint(self.state, job_id)
            self.notify(esc(why + (f" ({hint})" if hint else "")), severity="error")
            return
        now = self.clock()
        radius = job_blast_radius(self.state, job_id, now)

        opened = self.state.jobs[job_id]

        def done(reason: str | None) -> None:
            if reason and not self._changed_while_open(CommandOp.RESTART_JOB, job_id, reason,
                                                       opened=opened):
                self.send(self.session.restart_job(job_id, reason))

        hint = restart_reason_hint(opened, self.state, now)
        self.push_screen(RestartScreen(job_id, self._unsent_note(radius), hint), done)

    def _changed_while_open(self, op: CommandOp, targets: list[str] | str, reason: str = "",
                            mode: DrainMode | None = None,
                            opened: JobStatus | None = None) -> bool:
        """Whether a command confirmed in its dialog is refused for what changed since the
        dialog opened (``changed_while_open``: a target retired, the job gone or ended):
        audited as refused, said, nothing sent, as at the dialog's opening."""
        why = changed_while_open(self.state, op, targets, opened)
        if why:
            self.session.refuse(op, targets, why, reason, mode)
            self.notify(esc(clip_words(why, 160)), severity="error")
        return bool(why)

    def _unsent_note(self, radius: BlastRadius) -> BlastRadius:
        """The dialog's radius, first saying that the command would not go out now."""
        why = self.session.cannot_send_now()
        return dataclasses.replace(radius, notes=[why, *radius.notes]) if why else radius

    def send(self, req: Request) -> None:
        """A request the session has audited and queued: tell the operator, spend the marks."""
        self.notify(f"{esc(request_words(req))}: requested", timeout=3)
        for screen in self.screen_stack:
            if isinstance(screen, NodesScreen) and screen.is_mounted:
                screen.action_clear_marks()  # k9s: marks are spent by the action
        self.refresh_view()

    def _notify_finished(self, req: Request, cluster: str | None = None) -> None:
        outcome = req.phase
        details = finish_details(req)
        text = f"{esc(request_words(req))}: {outcome.value.replace('_', ' ')}"
        if cluster is not None:
            text = f"[{esc(cluster)}] {text}"
        if details:
            # Cut between words, the closing bracket after an ellipsis: "[:120]" left the
            # time-out of a hung node reading "…its agent is hung or cut )" (a drill). A single
            # node's sentence fits whole; the audit log keeps all of it.
            text += f" ({esc(clip_words(details, TOAST_DETAIL_CHARS))})"
        # A drain its operator's own resume undid is no error: said, in the warning colour.
        severity: Literal["information", "warning", "error"] = (
            "information" if outcome is Phase.DONE
            else "warning" if outcome is Phase.SUPERSEDED else "error")
        self.notify(text, severity=severity, timeout=6)


TOAST_DETAIL_CHARS = 240
"""The most of a finished command's details its toast shows (a few lines of a toast)."""
COMMAND_ACTIONS = frozenset({"drain", "resume", "restart"})
"""The views' actions that send commands (disabled in a read-only console)."""
COMMANDS_HELP = (":nodes, :jobs, :fabric, :events, :incidents, :node NAME, :drain HOSTLIST, "
                 ":resume HOSTLIST, :restart JOB, :ctx [NAME], :help, :q")
"""The command line's commands, as an unknown one is answered (plain text, not markup)."""
NEEDS = {
    "drain": "needs a host list: :drain gpu0012 or :drain gpu[0001-0004]",
    "resume": "needs a host list: :resume gpu0012 or :resume gpu[0001-0004]",
    **dict.fromkeys(("restart", "restart-job", "requeue"),
                    "needs a job id: :restart 4102 (3: jobs lists them)"),
    # README and the help name :seek; a live console has no past to seek in.
    "seek": "is for a recording: fleetdeck replay FILE, then :seek 90, :seek +10 or :seek -30",
}
"""What a command given without its argument needs (it was 'unknown command' before)."""


def request_words(req: Request) -> str:
    """``drain gpu[0001-0004]``, ``resume gpu0007``, ``restart job 4102`` (the target text of
    a restart already says "job")."""
    verb = "restart" if req.op is CommandOp.RESTART_JOB else req.op.value.replace("_", " ")
    return f"{verb} {req.target_text}"


BEHIND_WARN_S = 2.0
"""Telemetry queued longer than this (beyond each node's normal delay) is shown as BEHIND."""
CLUSTERS_PROBE_AFTER_S = 5.0
"""Connected and nothing of this cluster heard for this long: which clusters does the broker
hold (``FleetdeckApp._probe_clusters``)?"""
QUIET_LINK_S = QUIET_LOOK_S
"""Connected with agents online and nothing received for this long: the header says so."""

def run_replay_console(path: Path, *, speed: float = 1.0, tick_s: float = 0.5) -> int:
    """Replay a recording in the console (read-only by construction)."""
    from fleetdeck.console.tui.replay_app import ReplayApp

    tune_gc()
    render_cycles.install()
    app = ReplayApp(path, speed=speed, tick_s=tick_s, log_path=console_log_path())
    app.run()
    say_where_logs_went(app)
    damage = app.damage_on_exit()
    if damage:
        # As the headless replay says it, with its exit status (docs/recording.md).
        print(f"fleetdeck replay: {damage}", file=sys.stderr)
        return 1
    return 0


def run_console(url: BrokerURL, cluster: str | Sequence[str], *, tick_s: float = 0.5,
                read_only: bool = False, operator: str = "operator", broker_label: str = "",
                audit_path: Path | str | None = None, command_key: bytes | None = None,
                store_path: Path | None = None, record_dir: Path | None = None,
                stores: dict[str, Path | None] | None = None, digests: bool = False,
                log_path: Path | None = None) -> int:
    """``cluster``: one name, or several (contexts; the first is shown first); ``digests``:
    every context fed from the sharded collectors' digests; ``log_path``: the log records'
    file (the demo keeps its own, with its other files), else ``console_log_path()``."""
    tune_gc()
    render_cycles.install()
    clusters = [cluster] if isinstance(cluster, str) else list(cluster)
    app = FleetdeckApp(cluster=clusters[0], url=url, broker_label=broker_label, tick_s=tick_s,
                       read_only=read_only, operator=operator, audit_path=audit_path,
                       command_key=command_key, store_path=store_path, record_dir=record_dir,
                       contexts=clusters[1:], stores=stores, digests=digests,
                       log_path=log_path or console_log_path())
    app.run()
    say_where_logs_went(app)
    return app.return_code or 0


def console_log_path() -> Path:
    """Where a console on a terminal writes its log records (its own file, next to the audit
    log and the store: the terminal is the console's screen)."""
    return state_base() / "console.log"


def say_where_logs_went(app: FleetdeckApp) -> None:
    """Once the terminal is the shell's again: warnings logged while the console ran were
    shown only briefly, if at all, so say where they are."""
    notices = app.log_notices
    if notices is not None and notices.count:
        where = f": see {notices.log_path}" if notices.log_path is not None else ""
        print(f"fleetdeck: {plural(notices.count, 'warning')} logged while the console "
              f"ran{where}", file=sys.stderr)
