"""One console core that every front end drives: the TUI, ``status``, ``drain``/``resume``/
``restart-job``, ``collect``, headless replay, the replay console and the chaos tests.

A ``ConsoleSession`` owns the path from MQTT to every output (docs/architecture.md)::

    LiveFeed ─► Ingest ─► tick(now): FleetState.apply ─► recent history, event log,
                                     command tracker (acks, effects, deadlines)
                                     ─► store queue, recording flush, follow-ups
    run(): the feed and one I/O pump that writes the store and publishes commands, retries and
           event re-send requests, so ``tick`` itself never waits on SQLite or the broker.

``tick`` is synchronous and cheap to call from a Textual timer or a headless loop; ``watch``
is the headless driver (tick every ``tick_s`` until told to stop). Nothing here imports textual.
"""

import asyncio
import contextlib
import io
import logging
import math
import pickle
import sqlite3
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import aiomqtt

from fleetdeck.brokerurl import BrokerURL
from fleetdeck.console.audit import (
    HELD_MAX_BYTES,
    AuditRecord,
    AuditSink,
    MemoryAudit,
    TeeAudit,
    log_of,
)
from fleetdeck.console.commands import (
    CommandTracker,
    Phase,
    Request,
    Transition,
    fmt_duration,
)
from fleetdeck.console.deaf_check import QuietLink
from fleetdeck.console.eventlog import RETIRE_KIND, EventLine, EventLog, event_line
from fleetdeck.console.follow_ups import REBIRTH_EVERY_S, FollowUps
from fleetdeck.console.health import VERDICT_SEVERITY, Finding, Verdict, verdict_text
from fleetdeck.console.ingest import Batch, Ingest
from fleetdeck.console.interruptions import (
    IN_PLACE,
    INTERRUPTION,
    UNWATCHED,
    InterruptionTracker,
    interruption_text,
    report,
)
from fleetdeck.console.judgements import (
    correlate,
    correlate_digests,
    job_reason,
    not_stepping,
    not_stepping_text,
    scheduler_gone,
    utc_hms,
)
from fleetdeck.console.live import LiveFeed
from fleetdeck.console.orphan_settler import OrphanSettler
from fleetdeck.console.outbox import CommandOutbox, Publisher, SessionParts
from fleetdeck.console.publish_probe import PublishProbe
from fleetdeck.console.recent import COLUMNS as RECENT_COLUMNS
from fleetdeck.console.recent import RecentHistory
from fleetdeck.console.recording import RecordingWriter
from fleetdeck.console.retained_burst import RecordedBurst, RetainedBurst
from fleetdeck.console.rows import Summaries, meter_columns, metrics
from fleetdeck.console.sight_watch import SightWatch, host_steady
from fleetdeck.console.state import (
    AGENT_RECONNECT_S,
    FleetState,
)
from fleetdeck.console.state import Transition as VerdictChange
from fleetdeck.console.store import (
    CONSOLE_SOURCE,
    DEFAULT_RETENTION_DAYS,
    RESTORED_TABLES,
    Store,
)
from fleetdeck.console.store_link import StoreLink
from fleetdeck.console.summary import judged_not_ok
from fleetdeck.hostlist import HostlistError, compress, expand
from fleetdeck.protocol import codec, wire2
from fleetdeck.protocol.messages import (
    CommandOp,
    DrainMode,
    Event,
    JobState,
    JobStatus,
    Status,
)
from fleetdeck.protocol.messages import Severity as EventSeverity
from fleetdeck.protocol.topics import ROOT, Kind, digest_subscriptions, node_filter, topic_for
from fleetdeck.runtime import sweep_tick
from fleetdeck.transport import TransportError, Will

log = logging.getLogger("fleetdeck.session")

RECORDING_FLUSH_S = 2.0
"""Each flush ends a gzip member: every 2 s keeps a file being recorded readable."""
AUDIT_RETRY_S = 5.0
"""How often a failing audit log is tried again with the records it holds (``AuditLog.retry``)."""
APPLY_BUDGET_S = 0.020
"""Telemetry applied by one tick at most this long: the rest waits for the next tick, so the
event loop never stalls on a large batch (issue 12: no stall > 50 ms at 16,384 nodes). The
judgement pass gets what is left of it (at least JUDGE_MIN_S) and leaves the rest too."""
APPLY_MIN_NODES = 64
"""Nodes one tick applies at least, whatever the measured cost: the backlog always drains."""
JUDGE_MIN_S = 0.005
"""A budgeted judgement pass runs at least this long (``FleetState.judge``): it always gains."""
SUMMARY_CATCH_UP = 512
"""Shape-log entries the fleet-wide tables (``Summaries``) catch up per tick at most: ~8 ms at
~16 µs a node; a burst of shape changes is caught up over the slices that follow it."""
FULL_PASS_S = 0.5
"""While a backlog drains in slices, the fleet-wide pass (correlation, verdicts, follow-ups)
runs on the slice that empties it, or at least this often: each is O(fleet), a slice is not."""


PIECE_MIN_ITEMS = 64
"""A dict of a session's picture with at least this many entries is snapshotted an entry at a
time (``snapshot_steps``): the per-node ones (fleet state, recent history, keyframes held)."""


@dataclass(frozen=True, slots=True)
class Picture:
    """A session's picture (``ConsoleSession.parts``); the last piece of a snapshot, referring
    to the pieces before it."""

    parts: tuple[Any, ...]


_ATOMS = (str, bytes, int, float, type(None))


def _big_dicts(picture: tuple[object, ...]) -> list[dict[Any, Any]]:
    """The dicts of at least PIECE_MIN_ITEMS entries among a picture's parts, their
    attributes and their attributes' attributes: the per-node ones."""
    seen: set[int] = set()
    found: list[dict[Any, Any]] = []
    level: list[object] = list(picture)
    for _depth in range(3):
        below: list[object] = []
        for obj in level:
            if id(obj) in seen or isinstance(obj, _ATOMS):
                continue
            seen.add(id(obj))
            if isinstance(obj, dict):
                if len(obj) >= PIECE_MIN_ITEMS:
                    found.append(obj)
                continue
            d = getattr(obj, "__dict__", None)
            if isinstance(d, dict):
                below.extend(d.values())
        level = below
    return found


def _pieces(picture: tuple[object, ...]) -> Iterator[object]:
    """What ``snapshot_steps`` pickles one at a time before the picture: the values of its big
    dicts. Which objects go first only cuts the work up (the pickler's memo makes the picture
    refer to them), so finding them by shape cannot change what a snapshot holds."""
    for d in _big_dicts(picture):
        yield from (v for v in d.values() if not isinstance(v, _ATOMS))


@dataclass(frozen=True)
class TickReport:
    """What one tick did (front ends print, test or bench on it)."""

    now: float
    messages: int
    changed: frozenset[str]
    """Nodes whose data changed."""
    verdicts: list[VerdictChange]
    """Verdict changes. A tick that applies one slice of a backlog may skip the fleet-wide pass
    (and report none here): the slice that empties the backlog, or the first after
    ``FULL_PASS_S``, judges every node that changed in between."""
    commands: list[Transition]
    logged: int
    """Entries added to the event log."""
    apply_ms: float
    backlog: int = 0
    """Nodes whose received sample is not applied yet, plus those a budgeted judgement pass
    left, plus those the fleet-wide tables have not caught up with (``Summaries``): while not
    0, the front end ticks again soon."""
    retired: tuple[str, ...] = ()
    """Nodes retired (forgotten: their retained birth cleared) in this tick."""


SHED_WINDOW_S = 5.0
"""Telemetry shed this recently means the console is behind the live stream."""
JOB_KEPT_SAID_S = 60.0
"""A job an empty payload did not withdraw is said at most this often: under a flood of empty
publishes (not retained) each tick's answer of the broker kept it, and each was a timeline line
kept in the store (49 in 10 s of one every 50 ms: a review)."""
LOST_SHOWN = (10, 0.01)
"""Samples missing from the nodes' seq within a tick that mean the console is behind: at least
this many, and this share of what it received (a broker restart's gap is one blip)."""


@dataclass
class SessionCounters:
    ticks: int = 0
    commands_sent: int = 0
    command_retries: int = 0
    resend_requests: int = 0
    rebirth_requests: int = 0
    publish_errors: int = 0
    store_errors: int = 0
    store_writes: int = 0
    store_dropped_ticks: int = 0
    events_lost: int = 0
    messages_sent: int = 0


@dataclass
class SessionProblem:
    what: str
    detail: str
    since: float

    def as_json(self) -> dict[str, object]:
        """``console_problems`` of ``status --json`` and replay summaries: what the TUI's header
        says as "EVENTS STOPPED", "STORE FAILING" (docs/protocol.md)."""
        return {"what": self.what, "text": self.detail, "since": round(self.since, 3)}


def verdict_line(ts: float, node: str, old: str, new: Verdict,
                 reasons: Sequence[str], seen: bool = True) -> EventLine:
    """A verdict change as the timeline says it ("ok -> failed (G1, G2)"), live or recalled
    from the store; one the console did not see happen says so (``verdict_text``)."""
    return EventLine(ts, node, "verdict", VERDICT_SEVERITY.get(new, "info"),
                     verdict_text(old, new, reasons, seen), (node,))


RUN_ENDED = frozenset({"CD", "CA"})
"""Job states after which an interrupted job will not run again (``_note_reruns``): NF, RQ
and PD are on the way to its next run (NF then RQ when the scheduler requeues it). F is not
the end: an operator's ``restart-job`` (or the scheduler) may requeue a failed job, and it
waits in ``ConsoleSession._rerun_failed`` until then."""
KEPT_TEXT_MAX = 2048
"""An event's message at most (protocol ``Text``): a kept line longer than that is cut."""
UNWATCHED_SAID_S = 15.0
"""A store last written longer ago than this is a gap a restarted console says it missed."""
RERUN_UNHEARD_S = 60.0
"""How long a restarted console waits to hear a recalled interruption's job before it lets
the job go (the scheduler may have forgotten it meanwhile)."""
RERUN_RECALLED_S = 3600.0
"""A restarted console watches for the run again of the interruptions the store kept from this
long ago: older ones' jobs ran again (or not) long before, and each would be a line at start."""
MALFORMED_SAY_EVERY_S = 600.0
"""A topic's rejected messages are said in the timeline at most this often (all counted)."""
MALFORMED_LINES_PER_TICK = 5
MALFORMED_TOPICS_KEPT = 10_000
RECALLED_LINES = 2000
"""Verdict changes (and interruptions) a restarted console puts back in its timeline, the
newest: as many as the events ``Store.restore`` puts back."""
REPORT_WINDOW_S = 7 * 86400.0
"""The console's interruption report covers a week, as ``fleetdeck report``'s default."""


class ConsoleSession:
    def __init__(
        self,
        cluster: str,
        *,
        url: BrokerURL | None = None,
        clock: Callable[[], float] = time.time,
        operator: str = "operator",
        audit: AuditSink | None = None,
        command_key: bytes | None = None,
        client_id: str | None = None,
        keepalive: int = 10,
        publisher: Publisher | None = None,
        ack_timeout_s: float | None = None,
        effect_timeout_s: float | None = None,
        ingest: Ingest | None = None,
        follow_up: bool = True,
        digests: bool = False,
        filters: Sequence[str] | None = None,
        will: Will | None = None,
        recent_history: bool = True,
        steady: Callable[[], float] | None = None,
        one_shot: bool = False,
    ) -> None:
        self.cluster = cluster
        self.recent_history = recent_history
        """Keep the recent (sparkline) history per node: only the TUI's node detail shows it,
        so a headless replay, whose summary has none, turns it off."""
        self.url = url
        self.clock = clock
        self.operator = operator
        self.audit: AuditSink = audit if audit is not None else MemoryAudit()
        self.publisher = publisher
        self.command_key = command_key
        self.follow_up = follow_up
        """Send retries and event re-send requests (off for replay: nothing to talk to)."""
        self.digests = digests
        """Fed from collectors' digests (``console --digests``): the fleet-wide state holds
        their verdicts and is not judged again here (docs/architecture.md)."""
        self.ingest = ingest or Ingest(cluster)
        self.state = self._new_state()
        self.recent = RecentHistory()
        self.log = EventLog()
        self.interruptions = InterruptionTracker()
        self._hung: dict[str, tuple[float, int]] = {}
        """Jobs said in the timeline to be hung, with when their step last moved and that
        step (``_note_hangs``)."""
        self._rerun: dict[str, float] = {}
        """Jobs interrupted and not running again yet, with when their run ended."""
        self._rerun_unheard: dict[str, float] = {}
        """Jobs of ``_rerun`` recalled from the store and not heard yet, with until when they
        are waited for: the first ticks come before the broker's retained job statuses."""
        self._rerun_unwatched: set[str] = set()
        """Jobs of ``_rerun`` whose interruption was found after a gap (``unwatched``): no
        one saw their run end."""
        self._rerun_failed: dict[str, float] = {}
        """Interrupted jobs that failed (F), with when their run ended: watched again
        (``_rerun``) once the scheduler requeues them (an operator's ``restart-job``), let
        go once it withdraws them. Dropped at F, a restarted job's rerun went unsaid while a
        requeued one's was said (a newcomer's run)."""
        self._sched_gone: float | None = None
        """When the scheduler was heard going, while it is gone (``_note_scheduler``)."""
        self._malformed_seen = 0
        """``MalformedLog.total`` at the last tick (``_log_malformed``)."""
        self._malformed_said: dict[str, float] = {}
        """Topic -> when a rejected message on it was last said in the timeline."""
        self._kept = 0
        """Lines kept in the store so far (``_keep_line``: their ids' last part)."""
        self._kept_malformed_at = float("-inf")
        """When a bad message's line was last kept in the store (``_log_malformed``)."""
        tracker_kw: dict[str, float] = {}
        if ack_timeout_s is not None:
            tracker_kw["ack_timeout_s"] = ack_timeout_s
        if effect_timeout_s is not None:
            tracker_kw["effect_timeout_s"] = effect_timeout_s
        self.tracker = CommandTracker(cluster, operator, **tracker_kw)
        self.feed: LiveFeed | None = None
        if url is not None:
            if filters is None and digests:
                filters = digest_subscriptions(cluster)
            self.feed = LiveFeed(url, self.ingest, client_id=client_id or f"fd-{id(self):x}",
                                 clock=clock, keepalive=keepalive, command_key=command_key,
                                 filters=filters, will=will)
        self.tick_s = 0.5
        """How often its front end ticks it (``watch``'s ``tick_s``, the TUI's): a gap of
        several ticks means the process did not run (``SightWatch.watch``)."""
        self.sight = SightWatch(self.note, steady if steady is not None else (
            host_steady if clock is time.time else None), may_look=not one_shot)
        """Whether the console sees its fleet: broker lost or hung, process stopped, clock
        stepped. ``one_shot``: a session whose subscription is made for a watch of seconds
        (``status``): its quiet is judged the fleet's silence with no look through a second
        one (console/deaf_check.py; ``drain``'s waits up to its --timeout, and looks)."""
        self.quiet_link: QuietLink | None = None
        """A timed ``watch`` that ended hearing nothing, its broker connected, and why as far as
        it knew (``DeafCheck.judge``): ``status --json``'s ``quiet_link``."""
        self.recorder: RecordingWriter | None = None
        self.counters = SessionCounters()
        self.problems: dict[str, SessionProblem] = {}
        """Things that are broken right now (store, audit, a dead worker): front ends show
        them; a key disappears when the thing recovers."""
        self.store_link = StoreLink(self.note, self._problem, self.problems, self.counters,
                                    clock)
        """The history store, the ticks' rows held for it and their writes (``open_store``)."""
        self._wake = asyncio.Event()
        self._io_lock = asyncio.Lock()
        """Publishes: the pump's and a front end's final flush never interleave."""
        self.outbox = CommandOutbox(
            cluster, operator, clock, self.tracker, self.counters, self.note, self._wake.set,
            SessionParts(feed=lambda: self.feed, publisher=lambda: self.publisher,
                         audit=lambda: self.audit, state=lambda: self.state,
                         ingest=lambda: self.ingest, log=lambda: self.log),
            command_key=command_key)
        """Requests audited, logged and queued, and everything the I/O pump publishes, the
        publish probe's test included (console/outbox.py)."""
        self._last_event: Event | None = None
        self._rec_flushed = 0.0
        self._audit_errors_seen = 0
        self._audit_retried = 0.0
        self.settler = OrphanSettler(cluster, self.note, self._wake.set)
        """Commands consoles that stopped left open, settled here (``adopt_orphans``)."""
        self.follow_ups = FollowUps(cluster, operator, self.tracker, self.outbox.outgoing,
                                    self.counters, self.note, self._problem, self.problems,
                                    digests=digests)
        """Re-sends, asks for missed events, births and keyframes, planned for the pump."""
        self.burst = RetainedBurst(
            cluster, self.note,
            asks_statuses=self.feed is not None and filters is None and not digests)
        """Statuses the broker dropped at connect, asked for again; whether it cut the births."""
        self._job_asked: dict[str, float] = {}
        """Jobs whose status topic this session subscribed to alone, to hear whether the
        broker still retains the status an empty payload seemed to clear, and when that
        empty payload came (``FleetState.jobs_clearing``; ``_ask_job_statuses``)."""
        self._job_kept_said: dict[str, float] = {}
        """Job -> when the timeline last said an empty payload did not withdraw it
        (``JOB_KEPT_SAID_S``)."""
        self._dropped_seen = 0
        self._lost_seen = 0
        self._got_seen = 0
        self.shed_at: float | None = None
        """Clock time of the last tick that found telemetry shed by the feed's bounded buffer."""
        self._carry: dict[str, tuple[float, wire2.Sample]] = {}
        """Telemetry taken from the ingest but not applied yet: newest per node, in the order
        nodes first arrived (a node keeps its place when a newer sample replaces its own)."""
        self._carry_seqs: dict[str, list[int]] = {}
        """Every seq received per carried node, one per message (gaps, message counts)."""
        self._carry_basis: dict[str, wire2.Basis] = {}
        """The v2 basis of each carried sample that has one (``Batch.basis``)."""
        self.summaries: Summaries | None = None
        """Fleet-wide tables kept up to date a little every tick for the views that show them
        (the TUI sets it; headless front ends need none)."""
        self._node_cost_s = 100e-6
        """Measured apply cost per node: how many nodes fit the budget. It follows a dearer
        slice at once and a cheaper one slowly: a slice sized on the cost of quiet samples
        took 4,224 nodes of busy ones, 76 ms."""
        self._last_full = float("-inf")
        self.apply_budget_s: float | None = None
        """Apply at most this long of telemetry per tick (APPLY_BUDGET_S for a live front end
        whose event loop must not stall: the TUI, ``collect``); None applies the whole batch
        each tick, as replay and the one-shot commands (which decide on what one tick shows)
        need. ``watch`` ticks again at once while a budget leaves a backlog."""
        self.apply_max_nodes: int | None = None
        """A fixed number of nodes per tick instead of the time budget (tests, benchmarks)."""

    # --- lifecycle -----------------------------------------------------------------------------

    def reset(self, ingest: Ingest | None = None) -> None:
        """Start over with a fresh picture (a replay seeking backwards: the past cannot be
        un-applied). Commands and the store stay; history, timeline and state do not."""
        self.ingest = ingest or Ingest(self.cluster)
        self.state = self._new_state()
        self.recent = RecentHistory()
        self.interruptions = InterruptionTracker()
        self._hung = {}
        self._rerun, self._rerun_unheard, self._rerun_unwatched = {}, {}, set()
        self._rerun_failed = {}
        self._sched_gone = None
        self._malformed_seen, self._malformed_said = 0, {}
        self._carry, self._carry_seqs, self._carry_basis = {}, {}, {}
        self.log.clear()
        self._last_event = None
        if self.feed is not None:
            self.feed.ingest = self.ingest

    def parts(self) -> tuple[object, ...]:
        """What a snapshot holds, as it is now."""
        # What the timeline's notes remember too: seeking back out of a scheduler outage
        # said "scheduler sim back, 0s after it went" (a review).
        return (self.ingest, self.state, self.recent, self.log, self.interruptions,
                self._carry, self._carry_seqs, self._carry_basis, self._last_event,
                self._hung, self._rerun, self._rerun_unheard, self._sched_gone,
                self._rerun_failed, self._rerun_unwatched)

    def snapshot(self) -> bytes:
        """The picture ``reset`` starts over from, as it stands: ingest, fleet state with every
        node's rule history (counter windows, last fatal increments, rates), recent history,
        timeline, interruptions and what is carried to the next tick. A replay keeps these to
        seek back without replaying from the start (console/replay.py, ``Player``); ``restore``
        puts one back. Commands and the store are not in it, as ``reset`` keeps them."""
        steps = self.snapshot_steps()
        while True:
            try:
                next(steps)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]

    def snapshot_steps(self) -> Generator[None, None, bytes]:
        """``snapshot`` a piece at a time, for a caller that must not hold its event loop for
        the whole of it (~0.4 s at 1,024 nodes): each ``next`` pickles one more piece (about
        a node's worth), the last returns the bytes. The session must not change until then
        (the replay ticks it only once its snapshot is done)."""
        buf = io.BytesIO()
        pickler = pickle.Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL)
        picture = self.parts()
        # One pickler for every piece: its memo makes each object pickled once, and the
        # picture at the end refers to the pieces' objects, so what the parts share (the
        # malformed log, the last event) is shared again once restored.
        for piece in _pieces(picture):
            pickler.dump(piece)
            yield
        pickler.dump(Picture(picture))
        yield
        # Freeing the memo (an entry per object, ~15 ms at 1,024 nodes) is a step of its own.
        del pickler
        yield
        return buf.getvalue()

    def restore(self, snapshot: bytes) -> None:
        """Put back the picture of ``snapshot`` (made by ``snapshot`` of this session): as
        ``reset``, but to where the snapshot was taken instead of to nothing."""
        steps = self.restore_steps(snapshot)
        while True:
            try:
                next(steps)
            except StopIteration as done:
                self.put_back(done.value)
                return

    def restore_steps(self, snapshot: bytes) -> Generator[float, None, Picture]:
        """Unpickle ``snapshot`` a piece at a time (as ``snapshot_steps`` made it), yielding the
        share of it read so far; the last ``next`` returns the picture for ``put_back``. The
        session is not touched until then: a caller may drop the steps half way."""
        stream = io.BytesIO(snapshot)
        # Only ever bytes of its own ``snapshot``, never read from outside the process.
        unpickler = pickle.Unpickler(stream)
        size = max(1, len(snapshot))
        while True:
            got = unpickler.load()
            if isinstance(got, Picture):
                break
            yield stream.tell() / size
        yield 1.0
        # Freeing the memo (an entry per object, ~15 ms at 1,024 nodes) is a step of its own.
        del unpickler
        yield 1.0
        return got

    def put_back(self, picture: Picture) -> Picture:
        """Make ``picture`` (``restore_steps``) the session's; the one it replaces is returned,
        so that a caller can choose when to free it (~25 ms at 1,024 nodes)."""
        old = Picture(self.parts())
        seq = self.log.seq
        (self.ingest, self.state, self.recent, self.log, self.interruptions, self._carry,
         self._carry_seqs, self._carry_basis, self._last_event, self._hung, self._rerun,
         self._rerun_unheard, self._sched_gone, self._rerun_failed,
         self._rerun_unwatched) = picture.parts
        # Views redraw when the timeline's seq moves: numbered on from where it stood, so a
        # view that drew the later timeline does not take the earlier one for it.
        self.log.renumber_after(seq)
        if self.feed is not None:
            self.feed.ingest = self.ingest
        return old

    def let_go(self, old: Picture) -> Iterator[None]:
        """Free ``old`` a piece at a time (at once, a 1,024-node picture held the loop ~30 ms):
        each step empties an entry of one of its big dicts. For a picture this session does not
        hold any more (``put_back`` returns the one it replaced); a dict it still holds (``reset``
        keeps the timeline) is left alone."""
        for d in _big_dicts(old.parts):
            if any(d is mine for mine in _big_dicts(self.parts())):
                continue
            while d:
                d.popitem()
                yield

    def _new_state(self) -> FleetState:
        state = FleetState(self.cluster, self.ingest.malformed)
        # On digests the collectors did the fleet-wide correlation within their shards; the
        # console adds what no single shard could see (a switch whose nodes they split).
        state.correlate = correlate_digests if self.digests else correlate
        state.digest_mode = self.digests
        return state

    def publish_message(self, kind: Kind, subject: str, payload: bytes, *, qos: int = 0,
                        retain: bool = False) -> None:
        """Queue a message of this session's own (``CommandOutbox.publish_message``)."""
        self.outbox.publish_message(kind, subject, payload, qos=qos, retain=retain)

    def probe_commands(self) -> None:
        """Test, once per connection, whether the broker delivers this session's commands
        (``CommandOutbox.probe_commands``)."""
        self.outbox.probe_commands()

    @property
    def probe(self) -> PublishProbe | None:
        """Whether the broker delivers this session's commands (``probe_commands``)."""
        return self.outbox.probe

    @probe.setter
    def probe(self, probe: PublishProbe | None) -> None:
        self.outbox.probe = probe

    def watch_node(self, node_id: str) -> None:
        """On digests: receive this node's raw birth, status and telemetry too (its detail is
        open), until ``unwatch_node``. Its verdict stays the collector's."""
        if self.digests and self.feed is not None:
            self.feed.link.subscribe([node_filter(self.cluster, node_id)])

    def unwatch_node(self, node_id: str) -> None:
        if self.digests and self.feed is not None:
            self.feed.link.unsubscribe([node_filter(self.cluster, node_id)])
            st = self.state.nodes.get(node_id)
            if st is not None:
                st.raw = False  # the next digest's vitals replace the last raw sample

    def forget_nodes(self, nodes: Iterable[str]) -> None:
        """Drop nodes from the picture (a sharded collector handed them to another)."""
        for node in nodes:
            self.state.forget(node)
            self._carry.pop(node, None)
            self._carry_seqs.pop(node, None)
            self._carry_basis.pop(node, None)
            self.ingest.keyframe_wanted.pop(node, None)
            self.ingest.rebirth_wanted.pop(node, None)

    async def open_store(self, path: Path, retention_days: float | None = None, *,
                         collector: bool = False) -> int:
        """Open the SQLite store, restore recent events into the state; return how many.

        One collector writes a store (``WriterLock``: a second is refused); a console on a
        store a collector writes only reads it, and writes it (again) once none does."""
        store = await self.store_link.open(
            path, DEFAULT_RETENTION_DAYS if retention_days is None else retention_days,
            self.cluster, collector=collector)
        watched = await store.watched()
        restored = await store.restore(self.state, now=self.clock())
        if store.missing & RESTORED_TABLES.keys():
            self.note(store.missing_said(), severity="warn", kind="store")
        runs: dict[str, JobStatus] = {}
        for run, job_state, requeues, nodes in await store.job_runs():
            self.interruptions.recall(run, job_state, requeues, nodes)
            if job_state is JobState.R:
                runs[run.job_id] = run
        scope = self.ingest.scope
        if scope is not None:
            # A sharded collector learns its nodes from their births: the nodes put back from
            # the store were not known yet, so the first ownership pass forgot them (and the
            # hour of port errors and the settle hold with them), and a link that flapped 90 s
            # before a restart read "failed -> ok" 3 s after it (an SRE drill). Known now, a
            # node is kept or handed to a peer by ownership, as one heard from is.
            for node in list(self.state.nodes):
                scope.learn(node)
        self.store = store
        self.audit = TeeAudit(self.audit, store)
        said = await self._recalled_lines(store, runs)
        if restored or said:
            self._collect_events(said)
        now = self.clock()
        if (watched is not None and now - watched > UNWATCHED_SAID_S
                and self.store_written_by is not None):
            # A live collector writes every tick: a store it has not written for this long
            # is failing under it (disk full, locked) or it is stuck, and it holds what it
            # saw in memory; "nothing watched this fleet" was wrong advice (an SRE drill,
            # the store on a full disk; docs/architecture.md, "History, recording and replay").
            self.note(f"history store {path.name} not written since {utc_hms(watched)} UTC "
                      f"({fmt_duration(now - watched)}) though {self.store_written_by} writes "
                      "it: its writes are failing or it is stuck (see its log); what it saw "
                      "meanwhile is held in its memory", severity="warn")
        elif watched is not None and now - watched > UNWATCHED_SAID_S:
            # A restarted console told what happened while none ran only by the events its
            # agents sent; nothing said that it had not watched in between (a 3 a.m. drive).
            self.note(f"nothing watched this fleet from {utc_hms(watched)} to {utc_hms(now)} "
                      f"UTC ({fmt_duration(now - watched)}; store {path.name}): what happened "
                      "meanwhile is told by the agents' events and what the broker kept, and "
                      "verdict changes are dated when this console saw them", severity="warn",
                      keep=True)
        return restored

    async def _recalled_lines(self, store: Store,
                              running: dict[str, JobStatus]) -> list[EventLine]:
        """The console's own lines of the timeline the store keeps — verdict changes, job
        interruptions and the lines ``note`` kept — back into a fresh console's timeline
        beside the restored events (and the interruptions' jobs watched for running again): a
        restarted console's events view held only the agents' events, and an incident read
        "no events about its nodes" of a node whose flaps it listed (a drill). From as far
        back as the restored events reach (or a day, with none)."""
        now = self.clock()
        oldest = min((ev.ts / 1000 for ev in self.state.events), default=now - 86_400.0)
        out: list[EventLine] = []
        for tr in await store.transitions(oldest, limit=RECALLED_LINES, first_ok=False):
            if not tr["old"]:
                continue  # a node's first judgement is not a change (_log_verdicts)
            try:
                new = Verdict(tr["new"])
            except ValueError:
                continue
            out.append(verdict_line(float(tr["ts"]), tr["node"], tr["old"], new, tr["reasons"],
                                    tr["seen"]))
        for ev in await store.events(oldest, [CONSOLE_SOURCE], limit=RECALLED_LINES):
            data = ev["data"]
            hosts = data.get("nodes") if isinstance(data, dict) else None
            try:
                nodes = tuple(expand(hosts)) if isinstance(hosts, str) and hosts else ()
            except HostlistError:
                nodes = ()
            out.append(EventLine(float(ev["ts"]), "console", str(ev["kind"]),
                                 str(ev["severity"]), str(ev["message"]), nodes))
        for it in (await store.interruptions(oldest))[-RECALLED_LINES:]:
            nodes = tuple(it["nodes"])
            ran = running.get(it["job_id"])
            if (float(it["ts"]) >= now - RERUN_RECALLED_S and IN_PLACE not in it["detail"]
                    and not (ran is not None and ran.started_ts is not None
                             and ran.started_ts / 1000 >= float(it["ts"]) - 1)):
                # Its run again is watched for as a live one's: a console started after the
                # interruption never said "runs again" (nor that the job did not yet). Not
                # one the store saw run again (the console before said so), nor one restarted
                # in place (it ran on at once: its start may be the old run's).
                self._rerun[it["job_id"]] = float(it["ts"])
                self._rerun_unheard[it["job_id"]] = now + RERUN_UNHEARD_S
            out.append(EventLine(float(it["ts"]), "console", INTERRUPTION, "warn",
                                 interruption_text(it["job_id"], it["cause"], nodes,
                                                   float(it["lost_gpu_hours"])), nodes))
        return out

    async def interruption_report(self, window_s: float = REPORT_WINDOW_S) -> dict[str, object]:
        """Job interruptions by cause, GPU-hours lost and the effective training time ratio
        over the last ``window_s``: from the store when one is open (it outlives this process,
        like ``fleetdeck report``), else from what this session saw. ``source`` says which."""
        since = self.clock() - window_s
        if self.store is not None:
            try:
                rows = await self.store.interruptions(since)
                hours = await self.store.job_gpu_hours(since)
            except (sqlite3.Error, OSError) as err:
                log.warning("interruption report from %s failed (%s); showing this session's",
                            self.store.path, err)
            else:
                return {"source": "store", "since": since, **report(rows, hours), "list": rows}
        seen = [it.as_json() for it in self.interruptions.total if it.ts >= since]
        started = self.interruptions.started
        return {"source": "session", "since": max(since, started or since),
                **report(seen, self.interruptions.held_gpu_seconds / 3600), "list": seen}

    async def close(self) -> None:
        self.stop_recording()
        await self.sight.deaf.close()
        if self.settler.settling:
            # Decided by the last tick, not written yet: a one-shot command ends right after.
            async with self._io_lock:
                await self.settler.write(lambda: self.audit)
        await self.store_link.close()
        await self._release_audit_and_writer()

    async def _release_audit_and_writer(self) -> None:
        audit = log_of(self.audit)
        if audit is not None and audit.failing:
            # A last try: what it holds goes with this process.
            await asyncio.to_thread(audit.retry)
        lost = audit.unwritten() if audit is not None else ""
        if lost:
            log.warning("%s", lost)
        self.store_link.release_writer()

    async def run(self, stop: asyncio.Event) -> None:
        """The feed (when connected to a broker) and the I/O pump, until ``stop`` is set."""
        tasks = [asyncio.create_task(self._pump(stop), name="session-io")]
        if self.feed is not None:
            tasks.append(asyncio.create_task(self.feed.run(stop), name="session-feed"))
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def watch(self, stop: asyncio.Event, tick_s: float = 0.5,
                    on_tick: Callable[[TickReport], bool | None] | None = None,
                    duration_s: float | Callable[[], float] | None = None) -> TickReport:
        """The headless driver: run, tick every ``tick_s`` until ``stop``, ``duration_s`` or
        ``on_tick`` returning True; a last tick takes what arrived before the end.
        ``duration_s`` may be a callable, read after each tick: a watch whose length depends
        on how the connect went (``status``'s retry of a dropped connect)."""
        self.tick_s = tick_s
        runner = asyncio.create_task(self.run(stop), name="session-run")
        started = time.monotonic()
        try:
            while not stop.is_set():
                if runner.done():
                    runner.result()  # re-raise what killed the feed or the pump
                    break
                report = self.tick()
                if on_tick is not None and on_tick(report):
                    break
                # A backlog left by the apply budget: yield to the loop, then apply more.
                wait = 0.0 if report.backlog else tick_s
                if duration_s is not None:
                    length = duration_s() if callable(duration_s) else duration_s
                    left = started + length - time.monotonic()
                    if left <= 0:
                        break
                    wait = min(wait, left)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), wait)
            if duration_s is not None and self.feed is not None:
                self.sight.quiet_at_end(self.feed, self.state, self.clock())
            report = self.tick()
            while report.backlog:  # the last tick takes everything that arrived
                report = self.tick()
            if self.feed is not None:
                # As of everything applied, while still connected: a tick after the watch
                # (``status``'s once it knows the broker's age) has the link ended.
                self.quiet_link = self.sight.deaf.judge(self.feed, self.state, self.clock())
            await self.flush()
            return report
        finally:
            stop.set()
            feed = self.feed
            if feed is not None and feed.conn.connects == 0 and not runner.done():
                # Never connected: nothing to say goodbye to, and the connect attempt does not
                # watch ``stop``. A silent listener held `status` 10 s for a 5 s verdict (a
                # newcomer's scripts): the attempt is cut off.
                runner.cancel()
            with contextlib.suppress(aiomqtt.MqttError, TransportError, asyncio.CancelledError):
                await runner

    # --- the tick ------------------------------------------------------------------------------

    def tick(self, now: float | None = None) -> TickReport:
        """Apply what arrived since the last tick and follow everything up. Never blocks."""
        t0 = time.perf_counter()
        now = self.clock() if now is None else now
        self._watch_sight(now)
        batch = self._take_slice()
        full = (not self._carry or now - self._last_full >= FULL_PASS_S
                or (self.apply_budget_s is None and self.apply_max_nodes is None))
        if full:
            self._last_full = now
        shrunk = self._shrunk_before(batch) if batch.births else {}
        changed = self.state.apply(batch, now, judge=False)
        if batch.births:
            self._note_inventory_shrunk(batch, shrunk)
        self._record_history(batch)
        if batch.telemetry:
            # The slice's own cost per node (the fleet-wide pass below is not per node).
            per_node = (time.perf_counter() - t0) / len(batch.telemetry)
            self._node_cost_s = max(per_node, 0.7 * self._node_cost_s + 0.3 * per_node)
        if full or self.state.judge_left:
            budget = None
            if self.apply_budget_s is not None:
                budget = max(JUDGE_MIN_S, self.apply_budget_s - (time.perf_counter() - t0))
            self.state.judge_fleet(now, budget)
        if self.summaries is not None:
            self.summaries.catch_up(self.state, SUMMARY_CATCH_UP)
        logged = self._collect_events()
        acks = [ack for _rx, ack in batch.acks]
        self.outbox.answered_probe(acks)
        moved = self.tracker.observe(self.state, acks, now)
        for tr in moved:
            self.outbox.on_transition(tr)
        if batch.commands or (batch.acks and self.ingest.hears_commands):
            self.outbox.log_recorded_commands(batch)
        verdicts = self.state.take_transitions()
        scope = self.ingest.scope
        if scope is not None and verdicts:
            # A sharded collector's rows are about its own nodes only: one it no longer owns
            # (or knew only from its store) is another collector's to judge and record.
            verdicts = [tr for tr in verdicts if scope.owns(tr.node)]
        left = self.state.take_jobs_left()
        if scope is not None and left:
            left = {node: row for node, row in left.items() if scope.owns(node)}
        cleared = self.state.take_faults_cleared()
        if scope is not None and cleared:
            cleared = {node: row for node, row in cleared.items() if scope.owns(node)}
        self._log_verdicts(verdicts)
        self._log_malformed()
        self._log_drains_lost()
        self.interruptions.observe(self.state, now, batch.jobs_passed)
        self._note_hangs(now)
        self._note_scheduler(now)
        self._ask_job_statuses(now)
        self._note_withdrawn()
        retired = self._note_retired()
        found, job_seconds = self.interruptions.take(now)
        for it in found:
            # Dated when it happened, as the store and `fleetdeck events` have it: one found by
            # a console started after it read as if it had happened at that start (an SRE
            # drill), and one found a few seconds after the job failed is the job's failure.
            text = interruption_text(it.job_id, it.cause, it.nodes, it.lost_gpu_hours)
            self.note(text + (f" ({UNWATCHED})" if it.unwatched else ""), severity="warn",
                      nodes=it.nodes, kind=INTERRUPTION, ts=it.ts)
            job = self.state.jobs.get(it.job_id)
            if it.in_place and job is not None and job.state.value == "R":
                # It already runs, and its start may be the old run's: said now, not waited.
                self.note(f"job {it.job_id} runs again in place ({it.in_place}; its launcher "
                          "or its scheduler restarted it)", kind="job",
                          nodes=tuple(job.nodes[:64]), keep=True)
            else:
                self._rerun[it.job_id] = it.ts
                if it.unwatched:
                    self._rerun_unwatched.add(it.job_id)
        replaced = self.interruptions.replaced
        if replaced:
            # Another job under an interrupted job's id is not its rerun: a restarted
            # simulator's new 41 read "job 41 runs again ... 0s after its run ended" (a review).
            for job_id, at in replaced.items():
                ended = self._rerun.get(job_id)
                if ended is not None and ended <= at:
                    del self._rerun[job_id]
                    self._rerun_unheard.pop(job_id, None)
                    self._rerun_unwatched.discard(job_id)
                failed = self._rerun_failed.get(job_id)
                if failed is not None and failed <= at:
                    del self._rerun_failed[job_id]
                    self._rerun_unwatched.discard(job_id)
            # Kept while an interruption of the job before is still to be booked (its cause is
            # looked for up to 10 s): booked after the new job came, it too waited on the new.
            due = {p.job.job_id for p in self.interruptions.pending
                   if p.at <= replaced.get(p.job.job_id, -math.inf)}
            for job_id in [j for j in replaced if j not in due]:
                del replaced[job_id]
        if self._rerun or self._rerun_failed:
            self._note_reruns(now)
        self.store_link.queue(batch, verdicts, now, found, job_seconds, left, cleared,
                              self.interruptions.take_runs)
        self._check_audit(now)
        if self.settler.pending:
            feed = self.feed
            self.settler.settle(self.state, now,
                                feed is None or feed.conn.state == "connected")
        if self.recorder is not None and time.monotonic() - self._rec_flushed > RECORDING_FLUSH_S:
            self.recorder.flush()
            self._rec_flushed = time.monotonic()
        sends = self.feed is not None or self.publisher is not None
        if self.follow_up and full:
            self.follow_ups.plan(now, self.state, self.ingest, self.feed, sends)
        elif full and sends:
            # A one-shot status asks for the births it lacks too (op rebirth is read-only, as
            # keyframe is): a node whose retained birth was garbage was left out of `status`
            # altogether, its dead GPU with it, and the exit was 0 (an SRE drill).
            self.follow_ups.plan_rebirths(now, self.state, self.ingest)
        if self.burst.in_burst(batch, now, self.follow_ups.rebirth_asked, REBIRTH_EVERY_S):
            self.burst.burst_at = now
        if full and self.burst.asks_statuses and self.feed is not None:
            self.burst.ask_statuses(self.feed, self.state, now)
        self.follow_ups.plan_keyframes(now, self.ingest, sends)
        self.outbox.run_probe(now)
        self._note_shedding(now)
        self.counters.ticks += 1
        if self.outbox.pending or self.store_link.backlog:
            self._wake.set()
        report = TickReport(now, batch.messages, frozenset(changed), verdicts, moved,
                            logged + sum(1 for _ in moved),
                            (time.perf_counter() - t0) * 1000,
                            len(self._carry) + self.state.judge_left
                            + (self.summaries.pending if self.summaries is not None else 0),
                            retired=tuple(retired))
        sweep_tick()
        return report

    def _log_drains_lost(self) -> None:
        """A drained node back in a new agent session, not drained: said, not silent (its
        agent kept no state; FleetState.drains_lost)."""
        lost, self.state.drains_lost = self.state.drains_lost, []
        for node, was in lost:
            by = f" by {was.requested_by}" if was.requested_by else ""
            why = f" ({was.reason})" if was.reason else ""
            text = (f"{node} came back in a new agent session not drained; it was "
                    f"{was.state.value}{why}{by}: unless someone resumed it, its agent kept "
                    "no state (--state-dir), so drain it again if it is not repaired")
            self.note(text, severity="warn", nodes=(node,), kind="drain")
            # Kept as the node's event too: only this console's timeline said it, and
            # `fleetdeck events` and a console started later never did (a drill). Its id
            # names no agent session, so it moves no node's event counter on a restore.
            if self.store is None:
                continue
            ms = int(self.clock() * 1000)
            self.store_link.notes.append(Event(
                node=node, event_id=f"{node}.console-drain-lost-{ms}", seq=0, ts=ms,
                kind="drain", severity=EventSeverity.WARN, component="console", message=text))

    def _log_malformed(self) -> None:
        """A bad message in the timeline with its topic and why (rejected, or kept with a fix:
        an event stamped far ahead is kept at its arrival time), once per topic every
        ``MALFORMED_SAY_EVERY_S`` and a few a tick: the header only counted them, and only
        console.log named the topic (a drill sent 19 kinds; the operator saw "malformed 19")."""
        bad = self.ingest.malformed
        new = bad.total - self._malformed_seen
        self._malformed_seen = bad.total
        if new <= 0 or not bad.recent:
            return
        said = 0
        for item in list(bad.recent)[-min(new, len(bad.recent)):]:
            last = self._malformed_said.get(item.topic)
            if last is not None and item.rx_ts - last < MALFORMED_SAY_EVERY_S:
                continue
            if said >= MALFORMED_LINES_PER_TICK:
                break  # a flood is counted in the header, not spelled out here
            if len(self._malformed_said) >= MALFORMED_TOPICS_KEPT:
                self._malformed_said.clear()  # topics come from the network: bounded
            self._malformed_said[item.topic] = item.rx_ts
            parts = item.topic.split("/")
            nodes = (parts[4],) if len(parts) == 6 and parts[3] == "node" else ()
            detail = item.detail if len(item.detail) <= 160 else item.detail[:159] + "…"
            # The cluster's own root is the same on every line: the rest names the source.
            topic = item.topic.removeprefix(f"{ROOT}/{self.cluster}/")[:200]
            text = f"bad message on {topic}: {item.reason}" + (f": {detail}" if detail else "")
            self.log.add(EventLine(item.rx_ts, "console", "malformed", "warn", text, nodes))
            if self.store is not None and item.rx_ts - self._kept_malformed_at >= 60.0:
                # One a minute in the store: a fleet on an agent version this console cannot
                # read would add 10 rows a second, burying the rest (a review); the header
                # counts them all, and the timeline says each topic once in 10 minutes.
                self._kept_malformed_at = item.rx_ts
                self._keep_line(item.rx_ts, "malformed", "warn", text, nodes)
            said += 1

    def _log_verdicts(self, verdicts: list[VerdictChange]) -> None:
        """Verdict changes in the timeline (the events view and each incident's): a node that
        went offline was only in the store, not where the operator looks (found in a UX
        audit). A node's first judgement is not a change and is left out."""
        for tr in verdicts:
            if tr.old is None:
                continue
            self.log.add(verdict_line(tr.ts, tr.node, tr.old.value, tr.new, tr.reasons,
                                      tr.seen))

    def _watch_sight(self, now: float) -> None:
        """Tell the fleet state when the console loses and regains the broker
        (``SightWatch.watch``); a session with no live feed has nothing to lose."""
        feed = self.feed
        if feed is None:
            return
        self.sight.watch(feed, self.state, self.ingest, now, self.tick_s)

    def replay_gaps(self, gaps: Sequence[tuple[float, float, str]], now: float) -> None:
        """A recording's gaps up to ``now`` (from, until, why: its recorder had lost the
        broker): the console's own blindness, as it was live, and said in the timeline. A
        replay judged the 32 nodes it heard nothing of in a 10 s gap stale or offline, with
        "restart the agent" for each, where the live console had said only that its broker
        was gone (a replay audit)."""
        state = self.state
        i = state.gap_steps
        while i < 2 * len(gaps):
            since, until, why = gaps[i // 2]
            if i % 2 == 0:
                if since > now:
                    break
                state.lose_sight(since, why)
                self.note(f"the recording has a gap of {until - since:.0f} s here ({why}): no "
                          "data; verdicts stay as they were and no node goes stale until the "
                          "broker and its agents are back", severity="warn", kind="connection")
            else:
                if until > now:
                    break
                state.regain_sight(until)
                self.note(f"the recording goes on after its {until - since:.0f} s gap; a node "
                          f"not heard from within {AGENT_RECONNECT_S:.0f} s (the agents' "
                          "reconnect back-off) goes stale", severity="info", kind="connection")
            i += 1
        state.gap_steps = i

    def _note_shedding(self, now: float) -> None:
        if self.feed is None:
            return
        dropped = self.feed.dropped_total
        if dropped > self._dropped_seen:
            self._dropped_seen = dropped
            self.shed_at = now
        # A console that reads its socket too slowly sheds nothing itself: Mosquitto drops
        # QoS 0 telemetry for it past max_queued_messages (docs/performance.md). What shows
        # is samples missing from the nodes' seq, at a rate.
        state = self.state
        lost = state.seq_lost - self._lost_seen
        got = state.applied + state.superseded - self._got_seen
        self._lost_seen, self._got_seen = state.seq_lost, state.applied + state.superseded
        if state.sightless(now):
            return  # the gaps of a broker outage are the outage's, not this console's pace
        if lost >= LOST_SHOWN[0] and lost >= LOST_SHOWN[1] * max(got, 1):
            self.shed_at = now

    def shedding(self, now: float) -> bool:
        """The feed dropped telemetry within the last ``SHED_WINDOW_S``: the console cannot keep
        up with the stream, whatever the lag of what it did apply says (its buffer is bounded,
        so the measured lag is too)."""
        return self.shed_at is not None and now - self.shed_at <= SHED_WINDOW_S

    @property
    def backlog(self) -> int:
        """Nodes with a received sample not applied yet."""
        return len(self._carry)

    def _take_slice(self) -> Batch:
        """What this tick applies: everything of the ingest's batch except telemetry, and the
        telemetry of as many nodes (oldest first) as the time budget allows.

        Latest wins per node as in the ingest: a carried sample replaced by a newer one counts
        as superseded and its seqs still count for gaps. ``messages`` counts each message once,
        in the tick that applies it (or its successor), so ``FleetState.applied`` stays exact.
        """
        new = self.ingest.take_batch()
        for node in new.nodes_retired | new.digests_cleared:
            # Samples carried from before its birth was cleared are of a node now gone.
            self._carry.pop(node, None)
            self._carry_seqs.pop(node, None)
            self._carry_basis.pop(node, None)
        carry, seqs_of = self._carry, self._carry_seqs
        superseded = new.superseded
        # One message per seq: telemetry messages are the nodes plus the superseded samples.
        tel_messages = len(new.telemetry) + new.superseded
        basis = self._carry_basis
        if not carry:
            # The common case: adopt the ingest's dicts as they are, O(1) for any fleet size.
            carry, seqs_of = self._carry, self._carry_seqs = new.telemetry, new.seq_seen
            basis = self._carry_basis = new.basis
        else:
            # seqs_of, as Batch.seq_seen, lists the seqs of the nodes with more than one.
            for node, item in new.telemetry.items():
                b = new.basis.get(node)
                if b is not None:
                    basis[node] = b
                elif basis:
                    basis.pop(node, None)
                held = carry.get(node)
                if held is not None:
                    seqs = seqs_of.get(node)
                    if seqs is None:
                        seqs = seqs_of[node] = [held[1].seq]
                    seqs.extend(new.seqs(node))
                    superseded += 1
                elif node in new.seq_seen:
                    seqs_of[node] = list(new.seq_seen[node])
                carry[node] = item  # an existing key keeps its place in line
            for node, seqs in new.seq_seen.items():
                if node not in new.telemetry:  # counted superseded, their successor refused
                    held = carry.get(node)
                    seqs_of.setdefault(node, [] if held is None else [held[1].seq]).extend(seqs)
        out = Batch(births=new.births, statuses=new.statuses, events=new.events, acks=new.acks,
                    commands=new.commands,
                    jobs=new.jobs, jobs_passed=new.jobs_passed, jobs_withdrawn=new.jobs_withdrawn,
                    jobs_emptied=new.jobs_emptied,
                    nodes_retired=new.nodes_retired, digests_cleared=new.digests_cleared,
                    superseded=superseded,
                    delays=new.delays, digests=new.digests, collectors=new.collectors,
                    bridge=new.bridge, scheduler=new.scheduler, unkeyed=new.unkeyed)
        out.messages = new.messages - tel_messages
        limit = self.apply_max_nodes
        if limit is None and self.apply_budget_s is not None:
            limit = max(APPLY_MIN_NODES, int(self.apply_budget_s / self._node_cost_s))
        if limit is None or limit >= len(carry):
            out.telemetry, out.seq_seen, out.basis = carry, seqs_of, basis
            self._carry, self._carry_seqs, self._carry_basis = {}, {}, {}
            # A node without a seq list sent one sample.
            out.messages += len(carry) + sum(len(v) - (node in carry)
                                             for node, v in seqs_of.items())
            return out
        for node in list(islice(carry, limit)):
            out.telemetry[node] = carry.pop(node)
            seqs = seqs_of.pop(node, None)
            if seqs is None:
                out.messages += 1
            else:
                out.seq_seen[node] = seqs
                out.messages += len(seqs)
            b = basis.pop(node, None)
            if b is not None:
                out.basis[node] = b
        return out

    def _record_history(self, batch: Batch) -> None:
        if not self.recent_history:
            return
        nodes = self.state.nodes
        recent = self.recent
        record = recent.record_columns
        for node_id, (_rx, tel) in batch.telemetry.items():
            st = nodes.get(node_id)
            if st is None or st.sample is not tel:
                continue
            if type(tel) is wire2.Pending and not tel.built:
                # The GPU columns read once for both (a quiet sample: no rows built).
                index, present, util, temp, power = tel.gpu_columns(*RECENT_COLUMNS)
                record(node_id, index, present, util, temp, power)
                # While its columns are in the CPU's cache: the node list reads these for
                # every node it sorts by UTIL/TEMP/POWER (rows.metrics).
                meter_columns(st, present, util, temp, power)
            else:
                recent.record(node_id, tel)
                metrics(st)

    def _collect_events(self, recalled: Sequence[EventLine] = ()) -> int:
        """The state's new events into the timeline, in time order with ``recalled`` (lines
        of the console's own the store kept, ``_recalled_lines``)."""
        state = self.state
        events = state.events
        late, state.late_events = state.late_events, []
        if (not events or events[-1] is self._last_event) and not late and not recalled:
            return 0
        new: list[Event] = []
        for ev in reversed(events):
            if ev is self._last_event:
                break
            new.append(ev)
        self._last_event = events[-1] if events else None
        if late:
            # Put back before the newest logged: the walk above does not reach them.
            walked = {id(ev) for ev in new}
            new.extend(ev for ev in late if id(ev) not in walked)
        new.sort(key=lambda ev: ev.ts)
        lines = [event_line(ev) for ev in new]
        if recalled:
            lines = sorted([*lines, *recalled], key=lambda line: line.ts)
        for line in lines:
            self.log.add(line)
        return len(new)

    def _note_hangs(self, now: float) -> None:
        """A job that became hung, and one that steps again, in the timeline: a hang that
        cleared by itself left no trace of its 100 s (a 3 a.m. drive). Not hung any more is
        not stepping again: a hung job whose node then died only got the scheduler's reason
        (``not_stepping`` says nothing of a job with one, nor while this console is blind)
        and read "job 4105 steps again (step 277)" with its step where it stopped (a drive).
        Such a job stays noted, said again only once its step moves, hung once."""
        state = self.state
        for job_id, job in state.jobs.items():
            quiet = not_stepping(job, state, now)
            if quiet is not None and job_id not in self._hung:
                self._hung[job_id] = (now - quiet, job.step)
                self.note(f"job {job_id} hung: {not_stepping_text(job, quiet, now)}",
                          severity="error", nodes=tuple(job.nodes[:64]), kind="job", keep=True)
        for job_id, (since, step) in list(self._hung.items()):
            again = state.jobs.get(job_id)
            if again is not None and not_stepping(again, state, now) is not None:
                continue
            running = again is not None and again.state.value == "R"
            if running and again is not None and again.step == step:
                continue  # a reason, or this console blind: its step has not moved
            del self._hung[job_id]
            if running and again is not None:
                self.note(f"job {job_id} steps again (step {again.step}), "
                          f"{now - since:.0f} s after its step stopped", kind="job",
                          nodes=tuple(again.nodes[:64]), keep=True)

    def _note_retired(self) -> list[str]:
        """Nodes retired (their retained birth cleared: docs/protocol.md): they leave every
        view, so the timeline says where they went; who retired them, and why, is in the
        audit log of the ``fleetdeck retire`` that cleared them."""
        gone, self.state.nodes_retired = self.state.nodes_retired, []
        if not gone:
            return gone
        ingest = self.ingest
        for node in gone:
            ingest.keyframe_wanted.pop(node, None)
            ingest.rebirth_wanted.pop(node, None)
        self.note(f"{compress(gone)} retired: {'its' if len(gone) == 1 else 'their'} "
                  "retained birth was cleared (fleetdeck retire), so "
                  f"{'it leaves' if len(gone) == 1 else 'they leave'} the views, counts and "
                  "incidents; the store keeps the history", kind=RETIRE_KIND,
                  nodes=tuple(gone), keep=True)  # all: a restore forgets them by it
        return gone

    def retired_text(self, node: str) -> str:
        """What became of ``node``, retired while a view showed it (a node detail left open):
        '' when the timeline has no retire of it (not known, or not yet). Worded as the
        timeline's line; who retired it, and why, only the audit log of the ``fleetdeck
        retire`` that cleared it knows (docs/protocol.md, "Retiring a node"): the console
        heard only the cleared birth."""
        line = self.log.retired(node)
        if line is None:
            return ""
        return (f"{node} was retired at {utc_hms(line.ts)}: its retained birth was cleared "
                "(fleetdeck retire), so it left the views, counts and incidents; who retired "
                "it, and why, is in the audit log of that retire (what: retire); the store "
                "keeps its history")

    def _ask_job_statuses(self, now: float) -> None:
        """An empty payload on a job's status topic withdraws the job only if it cleared the
        retained status (``state.JOB_CLEAR_CONFIRM_S``): subscribed to that topic alone, the
        broker sends the status it still retains, which keeps the job. A 3.1.1 subscriber gets
        a retained clear with the retain flag off, as it gets an empty publish that cleared
        nothing, so only the broker can tell (docs/protocol.md, JobStatus)."""
        clearing, asked = self.state.jobs_clearing, self._job_asked
        said = self._job_kept_said
        if said and self.state.jobs_kept:
            for job_id in [j for j, at in said.items() if now - at >= JOB_KEPT_SAID_S]:
                del said[job_id]
        for job_id in self.state.jobs_kept:
            if job_id in said:
                continue
            said[job_id] = now
            job = self.state.jobs.get(job_id)
            self.note(f"job {job_id} not withdrawn: an empty message on its status topic was "
                      "followed by its status (an empty message that was not retained clears "
                      "nothing)", kind="job", nodes=tuple(job.nodes[:64]) if job else (),
                      keep=True)
        self.state.jobs_kept = []
        if self.feed is None or (not clearing and not asked):
            return
        link, cluster = self.feed.link, self.cluster
        # Done, or cleared anew by an empty payload after the status that kept it: the link
        # sends no SUBSCRIBE for a filter it holds, so that one is let go and made again for
        # the broker to send the retained status once more (a flood of empty publishes
        # withdrew a job it still retained: a review).
        done = [j for j, at in asked.items() if clearing.get(j) != at]
        if done:
            link.unsubscribe([topic_for(cluster, Kind.JOB, j) for j in done])
            for j in done:
                del asked[j]
        new = [j for j in clearing if j not in asked]
        if new:
            link.subscribe([topic_for(cluster, Kind.JOB, j) for j in new])
            asked.update((j, clearing[j]) for j in new)

    def _shrunk_before(self, batch: Batch) -> dict[str, tuple[Finding, ...]]:
        """G14/N8 of the nodes born in ``batch`` before it (``_note_inventory_shrunk``)."""
        nodes = self.state.nodes
        return {node: st.history.shrunk for node in batch.births
                if (st := nodes.get(node)) is not None and st.history.shrunk}

    def _note_inventory_shrunk(self, batch: Batch,
                               before: dict[str, tuple[Finding, ...]]) -> None:
        """A birth with fewer GPUs or IB ports than the node had (G14, N8): said once, with
        what is gone, where the verdict line says only "failed (G14)"; kept in the store.
        Not again for what the node already lacked: the broker sends the retained birth again
        at each resubscription and to a restarted console (whose store replay knew it), and
        each said it again, a line per short node after a broker restart."""
        for node, (rx, birth) in batch.births.items():
            st = self.state.nodes.get(node)
            if (st is None or st.birth is not birth or not st.history.shrunk
                    or st.history.shrunk == before.get(node)):
                continue
            gone = "; ".join(str(f) for f in st.history.shrunk)
            self.note(f"{node} came back short of the hardware it had: {gone}", severity="error",
                      nodes=(node,), kind="inventory", keep=True, ts=rx)

    def _note_withdrawn(self) -> None:
        """A running job withdrawn (docs/protocol.md): it left the jobs view with no word (a
        restarted simulator dropped job 4105: a 3 a.m. drive)."""
        gone, self.state.jobs_withdrawn = self.state.jobs_withdrawn, []
        for job in gone:
            where = f" on {compress(job.nodes)}" if job.nodes else ""
            if job.state.value in ("F", "NF"):
                # A failed job's incident went with no word when a Slurm bridge withdrew it
                # after MinJobAge (a review): what it was, and that nothing restarted it.
                why = job_reason(job)
                self.note(f"job {job.job_id} withdrawn by its scheduler while {job.state.value}"
                          f"{f' ({why})' if why else ''} at step {job.step}{where}: not "
                          "restarted, and its incident ends",
                          severity="warn", kind="job", nodes=tuple(job.nodes[:64]), keep=True)
                continue
            # "by its scheduler": an operator clears a dead scheduler's leftovers the same
            # way (docs/protocol.md), and a last status the clearing overtook is not seen.
            self.note(f"job {job.job_id} withdrawn (its retained status cleared) while it "
                      f"last read {job.state.value} (step {job.step}{where}): nothing reports "
                      "it now", severity="warn", kind="job", nodes=tuple(job.nodes[:64]),
                      keep=True)

    def _note_scheduler(self, now: float) -> None:
        """The scheduler's going and coming back, in the timeline: only the incidents view
        said it was offline, and a simulator killed for 20 s left no line of it in the events
        nor in ``fleetdeck events`` (a 3 a.m. drive)."""
        gone = scheduler_gone(self.state) if self.state.scheduler is not None else None
        if gone is not None and self._sched_gone is None:
            self._sched_gone = gone.since
            self.note(gone.text, severity="warn", kind="scheduler", keep=True)
        elif gone is None and self._sched_gone is not None:
            sched = self.state.scheduler
            if sched is not None and sched.online:
                who = f"scheduler {sched.name}" if sched.name else "the scheduler"
                self.note(f"{who} back, {fmt_duration(now - self._sched_gone)} after it went",
                          kind="scheduler", keep=True)
            self._sched_gone = None

    def _note_reruns(self, now: float) -> None:
        """An interrupted job that runs again, in the timeline: a restart was "done" at the
        requeue ("now PD (Resources)"), and nothing said when the job ran again, nor where (a
        jobs audit). A job that ended instead, or left the scheduler's word, is let go, as is
        one whose id another job took (``InterruptionTracker.replaced``). A failed one waits
        in ``_rerun_failed`` for a restart (``restart-job``, or the scheduler's requeue): its
        run again is said as a requeued one's, timed from when it failed."""
        for job_id, since in list(self._rerun_failed.items()):
            job = self.state.jobs.get(job_id)
            if job is not None and job.state.value == "F":
                continue
            del self._rerun_failed[job_id]
            if job is None or job.state.value in RUN_ENDED:
                self._rerun_unwatched.discard(job_id)  # withdrawn or ended: not restarted
            else:
                self._rerun[job_id] = since  # requeued (RQ, PD) or running after it failed
        for job_id, since in list(self._rerun.items()):
            job = self.state.jobs.get(job_id)
            if job is None and now < self._rerun_unheard.get(job_id, now):
                continue  # recalled from the store: its retained status is not in yet
            self._rerun_unheard.pop(job_id, None)
            if job is None or job.state.value in RUN_ENDED:
                del self._rerun[job_id]
                self._rerun_unwatched.discard(job_id)
                continue
            if job.state.value == "F":
                del self._rerun[job_id]
                self._rerun_failed[job_id] = since
                continue
            started = job.started_ts / 1000 if job.started_ts is not None else None
            if job.state.value != "R" or (started is not None and started < since - 1):
                continue  # waiting (NF, RQ, PD), or still the run that ended
            del self._rerun[job_id]
            unwatched = job_id in self._rerun_unwatched
            self._rerun_unwatched.discard(job_id)
            where = f" on {compress(job.nodes)}" if job.nodes else ""
            # From the scheduler's start where it says one: the interruption is booked up to
            # 10 s after the run ended, and the console saw the start up to a tick late.
            took = (started if started is not None else now) - since
            watched = self.interruptions.started
            before = (f" (at {utc_hms(started)} UTC, before this console started)"
                      if started is not None and watched is not None and started < watched - 1
                      else "")
            # From its checkpoint, where the run restarted: "from step 28" was the step the
            # console first saw it at (a drill).
            ckpt = job.last_checkpoint_step
            start = (f"from step {job.step}" if job.step <= ckpt
                     else f"from its checkpoint at step {ckpt} (at step {job.step} now)")
            # Found after a gap, its interruption is dated at this run's start: "0s after its
            # run ended" was a time no one saw (an SRE drill).
            after = "" if unwatched else f", {fmt_duration(took)} after its run ended"
            self.note(f"job {job_id} runs again (requeues {job.requeues}) {start}"
                      f"{where}{after}{before}", kind="job",
                      nodes=tuple(job.nodes[:64]), keep=True)

    def note(self, text: str, *, severity: str = "info", nodes: tuple[str, ...] = (),
             kind: str = "console", keep: bool = False, ts: float | None = None) -> None:
        """A line of the console's own in the timeline; ``keep``: in the store too, where
        ``fleetdeck events`` and a console started later read it (``CONSOLE_SOURCE``).
        ``ts``: when what it says happened, if not now."""
        now = self.clock() if ts is None else ts
        self.log.add(EventLine(now, "console", kind, severity, text, nodes))
        if keep and self.store is not None:
            self._keep_line(now, kind, severity, text, nodes)

    def _keep_line(self, ts: float, kind: str, severity: str, text: str,
                   nodes: tuple[str, ...]) -> None:
        """A timeline line of this console's as an event of ``CONSOLE_SOURCE`` in the store:
        the scheduler's going, a gap this console did not watch, its broker lost and back, a
        job that runs again or was withdrawn, a bad message. Only the console that saw them
        said them, and `fleetdeck events` the next morning showed none (a drill)."""
        self._kept += 1
        ms = int(ts * 1000)
        # Built, not validated: its node is no node id on purpose (``CONSOLE_SOURCE``).
        self.store_link.notes.append(Event.model_construct(
            node=CONSOLE_SOURCE, event_id=f"console.{kind}.{ms}.{self._kept}", seq=0,
            ts=ms, kind=kind, severity=EventSeverity(severity), component="console",
            message=text[:KEPT_TEXT_MAX], data={"nodes": compress(list(nodes))} if nodes else {}))

    # --- requests ------------------------------------------------------------------------------

    def cannot_send_now(self) -> str:
        """Why a command asked for now would not go out at once, '' when it would
        (``CommandOutbox.cannot_send_now``)."""
        return self.outbox.cannot_send_now()

    def drain(self, targets: list[str], reason: str, mode: DrainMode = DrainMode.FINISH
              ) -> Request:
        return self.outbox.drain(targets, reason, mode)

    def resume(self, targets: list[str], reason: str = "") -> Request:
        return self.outbox.resume(targets, reason)

    def restart_job(self, job_id: str, reason: str = "") -> Request:
        return self.outbox.restart_job(job_id, reason)

    def refuse(self, op: CommandOp, targets: Iterable[str] | str, why: str, reason: str = "",
               mode: DrainMode | None = None) -> AuditRecord:
        """An operator's command refused before anything was sent: audited and in the
        timeline (``CommandOutbox.refuse``)."""
        return self.outbox.refuse(op, targets, why, reason, mode)

    def submit(self, req: Request) -> Request:
        """Audit, log and queue a request's commands (``CommandOutbox.submit``)."""
        return self.outbox.submit(req)

    def abandon(self, why: str, phase: Phase = Phase.TIMED_OUT) -> list[Transition]:
        """Give up on every open command (``CommandOutbox.abandon``)."""
        return self.outbox.abandon(why, phase)

    def left_open(self, req: Request, why: str) -> None:
        """The front end stops following ``req`` before it finished
        (``CommandOutbox.left_open``)."""
        self.outbox.left_open(req, why)

    def recorded_resends(self, request: str) -> int:
        """How many times the recording holds the commands of ``request`` again after their
        first send (``CommandOutbox.recorded_resends``)."""
        return self.outbox.recorded_resends(request)

    def adopt_orphans(self) -> int:
        """Find this cluster's requests that a console (or one-shot command) no longer running
        left open in the audit log: the next ticks settle them (``OrphanSettler.adopt``). Only
        front ends that send commands call it. How many were found."""
        return self.settler.adopt(self.audit, self.clock())

    @property
    def audit_failing(self) -> bool:
        """The audit log holds records it could not write yet (``AuditLog.failing``; a sink
        that is no file: any write failed). Once a write gets them into the file it is not:
        the header said AUDIT LOG FAILING for as long as the console ran after a disk full
        for a minute (2026-12-07 drill)."""
        log = log_of(self.audit)
        return log.failing if log is not None else bool(self.audit.errors)

    def _check_audit(self, now: float) -> None:
        audit_log = log_of(self.audit)
        if audit_log is not None and audit_log.failing \
                and now - self._audit_retried >= AUDIT_RETRY_S:
            # The records held wait for no new command to reach the file once it has room.
            self._audit_retried = now
            audit_log.retry()
        errors = self.audit.errors
        if errors and errors != self._audit_errors_seen:
            why = self.audit.last_error or "audit log write failed"
            if "audit" not in self.problems:
                # The header said AUDIT LOG FAILING and nothing anywhere said why (the disk's
                # error was held for no view), nor that it recovered (a 2026-12-07 drill: the
                # log's file system remounted read-only under a TUI, then a drain).
                text = (f"{why}: commands still go out; their records are held (up to "
                        f"{HELD_MAX_BYTES // (1024 * 1024)} MiB) and written, in order, once "
                        "the file takes them")
                self.note(text, severity="error", kind="audit", keep=True)
                log.error("%s", text)
            self._problem("audit", why, now)
        elif "audit" in self.problems and not self.audit_failing:
            self.problems.pop("audit", None)
            path = audit_log.path if audit_log is not None else ""
            text = f"audit log {path} written again: the records it held are in it"
            self.note(text, kind="audit", keep=True)
            log.warning("%s", text)
        self._audit_errors_seen = errors

    # --- the retained burst ---------------------------------------------------------------------

    @property
    def _burst_judge(self) -> RetainedBurst | RecordedBurst:
        """Who judges the retained burst: a replay's ingest (``RecordedBurst``, the recorded
        connections' bursts), else this session's own connection (``RetainedBurst``). A
        replay's header and overview read the session's, which no replay judges: a recorded
        cut said no "NODES UNLISTED?" there while the timeline and the summary said it."""
        recorded = getattr(self.ingest, "burst", None)
        return recorded if isinstance(recorded, RecordedBurst) else self.burst

    @property
    def burst_cut(self) -> tuple[int, int] | None:
        """(nodes born with no status, nodes born) when a connect's burst was most likely cut
        in the births (``RetainedBurst.burst_cut``, a replay's ``RecordedBurst.burst_cut``),
        else None."""
        return self._burst_judge.burst_cut

    @property
    def burst_judged(self) -> bool:
        """Whether ``burst_cut`` says something of this connection's retained burst
        (``RetainedBurst.judged``, a replay's ``RecordedBurst.judged``)."""
        return self._burst_judge.judged

    # --- the I/O pump ----------------------------------------------------------------------------

    async def flush(self) -> None:
        """Do the pending I/O now (publish what is queued, write the store)."""
        await self._publish_now()
        await self.store_link.write_now()

    async def _publish_now(self) -> None:
        async with self._io_lock:  # the pump and a front end's final flush never interleave
            await self.outbox.publish_pending()
            if self.settler.settling:
                await self.settler.write(lambda: self.audit)

    async def _pump(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            waiter = asyncio.create_task(self._wake.wait())
            stopper = asyncio.create_task(stop.wait())
            try:
                await asyncio.wait({waiter, stopper}, timeout=1.0,
                                   return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiter.cancel()
                stopper.cancel()
            self._wake.clear()
            await self._publish_now()
            self.store_link.in_background()
        await self.store_link.pump_ended()

    # --- the store -----------------------------------------------------------------------------

    @property
    def store(self) -> Store | None:
        """The history store open (``open_store``), None while none is."""
        return self.store_link.store

    @store.setter
    def store(self, store: Store | None) -> None:
        self.store_link.store = store

    @property
    def store_written_by(self) -> str | None:
        """The collector that writes this console's store (its own words), None while none
        does (this console writes it then)."""
        return self.store_link.written_by

    @property
    def store_failing_s(self) -> float | None:
        return self.store_link.failing_s

    @property
    def store_backlog(self) -> int:
        return self.store_link.backlog

    # --- recording -------------------------------------------------------------------------------

    def start_recording(self, path: Path) -> RecordingWriter:
        """Record what this session receives (and the commands it sends), starting with a
        keyframe of what it already knows. Raises OSError when the file cannot be made."""
        if self.feed is None:
            raise RuntimeError("nothing to record: not connected to a broker")
        now = self.clock()
        rec = self._new_recording(path, now)
        for node_id, st in self.state.nodes.items():
            if self.ingest.reassembler.holds(node_id) is not None:
                # The v2 deltas recorded from now on need a keyframe in the recording too.
                self.ingest.keyframe_wanted[node_id] = "recording started"
            for kind, msg in ((Kind.BIRTH, st.birth), (Kind.TELEMETRY, st.telemetry)):
                if msg is not None:
                    rec.seed(topic_for(self.cluster, kind, node_id), codec.encode(msg))
            status = Status(node=node_id, online=bool(st.online), bdSeq=max(st.bd_seq, 0),
                            ts=int(st.status_ts * 1000), drain=st.drain)
            rec.seed(topic_for(self.cluster, Kind.STATUS, node_id), codec.encode(status))
        for job_id, job in self.state.jobs.items():
            rec.seed(topic_for(self.cluster, Kind.JOB, job_id), codec.encode(job))
        self.recorder = rec
        self.feed.tap = rec.write
        self._rec_flushed = time.monotonic()
        return rec

    def _new_recording(self, path: Path, now: float) -> RecordingWriter:
        """A recording at ``path``, or beside it (``name-2.jsonl.gz``, …) when that file
        exists: a recording is never overwritten (two started within one second got the same
        time-stamped name). The writer's ``path`` says where it went."""
        stem, dot, ext = path.name.partition(".")
        judged = judged_not_ok(self.state)
        for n in range(1, 1000):
            at = path if n == 1 else path.with_name(f"{stem}-{n}{dot}{ext}")
            try:
                # What rests on the hour before (N2, N3, a recovered switch) is not in the
                # recording: the header keeps what this console judged of it.
                return RecordingWriter(at, self.cluster, source=str(self.url), started=now,
                                       overwrite=False, judged=judged)
            except FileExistsError:
                continue
        raise FileExistsError(f"{path} and 998 recordings beside it exist")

    def stop_recording(self) -> RecordingWriter | None:
        rec, self.recorder = self.recorder, None
        if self.feed is not None:
            self.feed.tap = None
        if rec is not None:
            rec.close()
        return rec

    # --- problems --------------------------------------------------------------------------------

    def problems_json(self) -> list[dict[str, object]]:
        """The console's own problems, oldest first, as ``SessionProblem.as_json``."""
        return [p.as_json() for p in sorted(self.problems.values(), key=lambda p: p.since)]

    def _problem(self, what: str, detail: str, now: float) -> None:
        old = self.problems.get(what)
        self.problems[what] = SessionProblem(what, detail, old.since if old else now)

    def store_unavailable(self, why: str) -> None:
        """The history store (``--db``) could not be opened: nothing is kept, and the front end
        says so for as long as it runs (a toast went by, and then nothing said history was not
        being kept)."""
        self._problem("history", f"history not kept: {why}", self.clock())
        self.note(f"history not kept: {why}", severity="error", kind="console")

    def worker_failed(self, what: str, detail: str) -> None:
        """A front end's worker (the feed, the store writer) died: say so, never go quietly
        stale."""
        log.error("%s stopped: %s", what, detail)
        self._problem(what, f"{what} stopped: {detail}", self.clock())
        self.note(f"{what} stopped: {detail}", severity="error", kind="console")
