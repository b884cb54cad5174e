"""The session's command outbox: the operators' requests (drain, resume, restart-job) audited,
logged and queued, their outcomes said and audited, a refused one audited too; the session's own
messages (a collector's digests and birth), its follow-ups' asks and re-sends, and its test of
whether the broker delivers its commands (console/publish_probe.py), published by the I/O pump;
and a replay's lines for the commands a recording holds (docs/architecture.md, "One console
core").

``ConsoleSession`` owns one ``CommandOutbox``: its public request methods are thin delegations to
it, each tick tells it the acks and the tracker's transitions, and its I/O pump calls
``publish_pending``. What the session may swap while it runs (its feed and publisher, in tests;
its audit sink, teed with the store by ``open_store``; its state, ingest and timeline, put back
by a replay's seek) is read through it at each call, never kept here.
"""

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

import aiomqtt

from fleetdeck.console.audit import AuditRecord, AuditSink
from fleetdeck.console.commands import (
    CommandTracker,
    Phase,
    Request,
    Transition,
    audit_fields,
    clip_words,
    refusal,
)
from fleetdeck.console.eventlog import EventLine, EventLog, Note
from fleetdeck.console.follow_ups import Outgoing
from fleetdeck.console.ingest import Batch, Ingest, request_of
from fleetdeck.console.live import LiveFeed
from fleetdeck.console.publish_probe import PROBE_NODE, PublishProbe, probe_topic
from fleetdeck.console.state import DUPLICATE_WINDOW_S, FleetState
from fleetdeck.hostlist import compress
from fleetdeck.protocol import codec, signing
from fleetdeck.protocol.messages import Ack, Command, CommandOp, DrainMode
from fleetdeck.protocol.topics import Kind

log = logging.getLogger("fleetdeck.session")

Publisher = Callable[[Kind, str, bytes], Awaitable[None]]
"""Publishes an encoded command (tests capture them with one; the default is the live feed)."""

UNRECORDED_COMMAND = "— its command is not recorded (another terminal's, or sent before)"
"""What a replay's answer line adds when the recording holds the ack but not the command."""
ASKS_IN_FLIGHT = 256
"""Fire-and-forget asks (keyframe, re-send, rebirth) published at once, not each after the
last one's PUBACK (``CommandOutbox._publish_asks``); paho still caps what is unacknowledged
on the wire, the rest wait in its queue, not behind a broker round trip each."""


class OutboxCounters(Protocol):
    """The session's counters the outbox moves (``SessionCounters``)."""

    commands_sent: int
    publish_errors: int
    messages_sent: int


@dataclass(frozen=True, slots=True)
class SessionParts:
    """What the outbox reads of its session at each call, as the session holds it then: a
    test swaps the session's ``publisher`` or ``feed``, ``open_store`` tees its ``audit`` with
    the store, a replay's seek puts back another ``state``, ``ingest`` and ``log``."""

    feed: Callable[[], LiveFeed | None]
    publisher: Callable[[], Publisher | None]
    audit: Callable[[], AuditSink]
    state: Callable[[], FleetState]
    ingest: Callable[[], Ingest]
    log: Callable[[], EventLog]


class CommandOutbox:
    """The commands and messages a session has to publish, its requests' life-cycle in the
    timeline and the audit trail, and its test of whether the broker delivers its commands."""

    def __init__(self, cluster: str, operator: str, clock: Callable[[], float],
                 tracker: CommandTracker, counters: OutboxCounters, note: Note,
                 wake: Callable[[], None], parts: SessionParts, *,
                 command_key: bytes | None) -> None:
        self.cluster = cluster
        self.operator = operator
        self.tracker = tracker
        self._clock = clock
        self._counters = counters
        self._note = note
        self._wake = wake
        """Wakes the session's I/O pump, which publishes what is queued here."""
        self._feed = parts.feed
        self._publisher = parts.publisher
        self._audit_sink = parts.audit
        self._state = parts.state
        self._ingest = parts.ingest
        self._log = parts.log
        self._command_key = command_key
        self.outgoing: deque[Outgoing] = deque()
        """Commands to publish: the requests' (``submit``) and the follow-ups' (the session's
        ``FollowUps`` plans onto the same queue)."""
        self._messages: deque[tuple[Kind, str, bytes, int, bool]] = deque()
        """Messages of the session's own to publish (a collector's digests and birth)."""
        self.probe: PublishProbe | None = None
        """Whether the broker delivers this session's commands (``probe_commands``)."""
        self._probe_out: bytes | None = None
        """The probe's test publish, due and not yet handed to the broker (the pump does)."""

    @property
    def pending(self) -> bool:
        """Something is queued for the I/O pump to publish."""
        return bool(self.outgoing or self._messages)

    def publish_message(self, kind: Kind, subject: str, payload: bytes, *, qos: int = 0,
                        retain: bool = False) -> None:
        """Queue a message of this session's own (the I/O pump publishes it; dropped, and
        counted, when not connected: what is sent this way is re-sent periodically)."""
        self._messages.append((kind, subject, payload, qos, retain))
        self._wake()

    # --- the publish probe ---------------------------------------------------------------------

    def probe_commands(self) -> None:
        """Test, once per connection, whether the broker delivers this session's commands
        (console/publish_probe.py): a read-write console's; a read-only one, a status and a
        collector send none, and publish nothing for it."""
        feed = self._feed()
        if feed is None or self.probe is not None:
            return
        self.probe = PublishProbe(user=feed.url.username or "")
        feed.probe_topic = probe_topic(self.cluster)
        feed.on_probe = self.probe.heard
        feed.link.subscribe([feed.probe_topic])

    def run_probe(self, now: float) -> None:
        """Each tick: queue the probe's test publish when one is due, and say when the probe
        finds the broker drops this console's commands, or delivers them again."""
        probe, feed = self.probe, self._feed()
        if probe is None or feed is None:
            return
        if feed.link.connected:
            payload = probe.due(now, feed.conn.connects, self.operator)
            if payload is not None:
                self._probe_out = payload  # a newer test replaces one not yet published
                self._wake()
        heard_s = feed.broker_heard_s()
        spoke = (heard_s is not None and probe.sent_at is not None
                 and heard_s < now - probe.sent_at)
        change = probe.judge(now, feed.link.connected, spoke)
        if change == "dropped":
            self._note(probe.why(), severity="warn", kind="command")
        elif change == "delivered":
            self._note("the broker delivers this console's commands again (its test publish "
                       "on node/+/cmd came back)", kind="command")

    def answered_probe(self, acks: list[Ack]) -> None:
        """A node's answer to a command of this console's shows the broker delivers them,
        where the test publish could not (console/publish_probe.py ``node_answered``)."""
        probe = self.probe
        if probe is None or probe.answered:
            return
        ack = next((a for a in acks if self.tracker.progress(a.cmd_id) is not None), None)
        if ack is not None and probe.node_answered():
            self._note(f"the broker delivers this console's commands: {ack.by} answered one, "
                       "though the test publish on node/+/cmd did not come back (a broker user "
                       "that may publish node/+/cmd but not read it back, docs/security.md)",
                       kind="command")

    # --- requests ------------------------------------------------------------------------------

    def cannot_send_now(self) -> str:
        """Why a command asked for now would not go out at once ('' when it would): a drain
        confirmed with the broker down said so only after the dialog had closed (an SRE
        drill), so the confirmation dialogs say it first."""
        feed = self._feed()
        if feed is None:
            return ""
        if feed.conn.state == "connected":
            return self.probe.why() if self.probe is not None else ""
        timeout = self.tracker.ack_timeout_s
        return (f"not connected to the broker now ({feed.conn.why}): "
                f"this is sent only if the connection is back within {timeout:.0f} s, else it "
                "times out with nothing sent")

    def drain(self, targets: list[str], reason: str, mode: DrainMode = DrainMode.FINISH
              ) -> Request:
        return self.submit(self.tracker.drain(targets, reason, self._clock(), mode))

    def resume(self, targets: list[str], reason: str = "") -> Request:
        return self.submit(self.tracker.resume(targets, self._clock(), reason))

    def restart_job(self, job_id: str, reason: str = "") -> Request:
        return self.submit(self.tracker.restart_job(job_id, self._clock(), reason,
                                                    job=self._state().jobs.get(job_id)))

    def refuse(self, op: CommandOp, targets: Iterable[str] | str, why: str, reason: str = "",
               mode: DrainMode | None = None) -> AuditRecord:
        """An operator's command refused before anything was sent (``why``: one sentence):
        audited with outcome ``refused`` and shown in the timeline, as a sent command's
        outcome is. The front end still tells the operator in its own way."""
        record = refusal(op, targets, why, who=self.operator, cluster=self.cluster,
                         now=self._clock(), reason=reason, mode=mode)
        self._audit_sink().write(record)
        nodes = () if isinstance(targets, str) or op is CommandOp.RESTART_JOB else tuple(targets)
        verb = "restart" if op is CommandOp.RESTART_JOB else op.value
        self._log().add(EventLine(record.ts, "console", "command", "error",
                                   f"{self.operator}: {verb} {record.targets} refused: "
                                   f"{record.detail}", nodes[:64]))
        return record

    def submit(self, req: Request) -> Request:
        """Audit, log and queue a request's commands; the I/O pump publishes them."""
        self._audit(req, "requested", "")
        self._log().add(EventLine(self._clock(), "console", "command", "info",
                                   f"{self.operator} requested {req.describe()}"
                                   # "…: requested 1 reason: X" read as "1 reason"
                                   + (f"; reason: {req.reason}" if req.reason else ""),
                                   _nodes_of(req)))
        for i, (kind, subject, cmd) in enumerate(req.commands()):
            self.outgoing.append(Outgoing(kind, subject, cmd, req, i))
        self._wake()
        return req

    def abandon(self, why: str, phase: Phase = Phase.TIMED_OUT) -> list[Transition]:
        """Give up on every open command (a CLI's deadline, an interrupt): each gets an
        outcome in the log and the audit trail."""
        moved = self.tracker.expire_all(self._clock(), why, phase)
        for tr in moved:
            self.on_transition(tr)
        return moved

    def on_transition(self, tr: Transition) -> None:
        """A command's move (acked, done, timed out…) in the timeline; its request's outcome,
        once it has one, in the audit trail."""
        req = tr.request
        severity = {Phase.DONE: "done", Phase.REJECTED: "error", Phase.FAILED: "error",
                    Phase.TIMED_OUT: "error"}.get(tr.new, "info")
        what = "restart" if req.op is CommandOp.RESTART_JOB else req.op.value
        subject = f"job {tr.target}" if req.op is CommandOp.RESTART_JOB else tr.target
        nodes = (tr.target,) if req.op is not CommandOp.RESTART_JOB else _nodes_of(req)
        self._log().add(EventLine(tr.ts, "console", "command", severity,
                                   f"{what} {subject} [{req.request_id}]: {tr.text}", nodes))
        if req.finished_at is not None and not req.outcome_recorded:
            req.outcome_recorded = True
            self._audit(req, req.phase.value, finish_details(req))

    def log_recorded_commands(self, batch: Batch) -> None:
        """A replay's timeline lines for the operators' commands the recording holds and the
        acks that answered them, as the recording console's own lines read ("alice requested
        drain gpu0020 (finish); reason: …", "drain gpu0020: done (DRAINED)"). A replay used to
        show only their effects: "job 4101 interrupted: operator", by whom and why nowhere (a
        replay drill). One line per request and outcome: a drain of 16 nodes is 16 commands
        and 32 acks, one line each was a screenful; and a command the console re-sent while
        unanswered (same cmd_id every 3 s) is one request, not the operator asking five times
        (the ingest drops the re-sends: ``Ingest.recorded_cmds``)."""
        # What each line says besides its targets -> (its first time, the targets).
        asked: dict[tuple[str, str, str, str, str], tuple[float, list[str]]] = {}
        for rx, cmd in batch.commands:
            verb = "restart" if cmd.op is CommandOp.RESTART_JOB else cmd.op.value
            # Only a drain has a mode the operator chose (finish or now): a restart always
            # requeues, and its timeline line read "requested restart job 4106 (now)".
            mode = f" ({cmd.args.mode.value})" if cmd.op is CommandOp.DRAIN else ""
            reason = f"; reason: {cmd.args.reason}" if cmd.args.reason else ""
            key = (request_of(cmd.cmd_id), cmd.issued_by, verb, mode, reason)
            asked.setdefault(key, (rx, []))[1].append(cmd.target)
        answered: dict[tuple[str, str, str, str, bool], tuple[float, list[str]]] = {}
        for rx, ack in batch.acks:
            # Each answer once per command and result: an agent answers every re-send of an
            # unanswered command from memory, the same "accepted" again (the ingest keeps what
            # was told, so a seek back tells it as it was then).
            known = self._ingest().recorded_answer(ack)
            if known is None:
                continue  # no operator's command, or already told
            verb = "restart" if known.op is CommandOp.RESTART_JOB else known.op.value
            answered.setdefault((request_of(ack.cmd_id), verb, ack.result.value, ack.reason,
                                 known.recorded), (rx, []))[1].append(known.target)
        out: list[tuple[float, str, str, tuple[str, ...], str]] = []
        for (req, who, verb, mode, reason), (rx, targets) in asked.items():
            what, nodes = self._recorded_target(verb, targets)
            out.append((rx, "info", f"{who} requested {verb} {what}{mode}{reason}", nodes, req))
        for (_req, verb, result, said, recorded), (rx, targets) in answered.items():
            if recorded or verb != "restart":
                what, nodes = self._recorded_target(verb, targets)
            else:
                what, nodes = "of a job", ()  # the scheduler's reason names it
            severity = {"done": "done", "rejected": "error", "failed": "error"}.get(result, "info")
            unsent = "" if recorded else f" {UNRECORDED_COMMAND}"
            out.append((rx, severity, f"{verb} {what}: {result}" + (f" ({said})" if said else "")
                        + unsent, nodes, ""))
        # A request before its answers when they came in the same instant.
        for rx, severity, text, nodes, req in sorted(out, key=lambda line: line[0]):
            self._log().add(EventLine(rx, "console", "command", severity, text, nodes, req))

    def recorded_resends(self, request: str) -> int:
        """How many times the recording holds the commands of ``request`` again after their
        first send (the live console's retries of unanswered ones: told once, counted here)."""
        return self._ingest().recorded_resent.get(request, 0)  # (O(1) per request line)

    def _recorded_target(self, verb: str, targets: list[str]) -> tuple[str, tuple[str, ...]]:
        """How a recorded command's targets read, and the nodes its line concerns."""
        if verb == "restart":
            job = self._state().jobs.get(targets[0])
            return f"job {targets[0]}", tuple(job.nodes[:64]) if job is not None else ()
        names = sorted(set(targets))
        return compress(names), tuple(names[:64])

    def left_open(self, req: Request, why: str) -> None:
        """The front end stops following ``req`` before it finished (``--no-wait``): its last
        known state goes to the audit trail, which otherwise held only "requested"."""
        if req.finished_at is None and not req.outcome_recorded:
            req.outcome_recorded = True
            self._audit(req, req.phase.value, f"{why}: {req.describe()}")

    def _audit(self, req: Request, outcome: str, detail: str) -> None:
        self._audit_sink().write(AuditRecord(
            ts=self._clock(), who=self.operator, what=req.op.value, targets=req.target_text,
            why=req.reason, outcome=outcome, request_id=req.request_id, cluster=self.cluster,
            detail=detail, args=audit_fields(req),
        ))

    # --- publishing ----------------------------------------------------------------------------

    async def publish_pending(self) -> None:
        """Publish what is queued (the I/O pump's, under the session's lock): the probe's test
        publish, the session's own messages, then the outgoing commands in order."""
        await self._publish_probe()
        messages = self._messages
        while messages:
            kind, subject, payload, qos, retain = messages.popleft()
            feed = self._feed()
            if feed is None:
                continue
            try:
                await feed.publish(kind, subject, payload, qos=qos, retain=retain)
            except (OSError, ConnectionError):
                self._counters.publish_errors += 1
                messages.clear()  # not connected: the owner re-sends on its own schedule
                break
            self._counters.messages_sent += 1
        while self.outgoing:
            out = self.outgoing[0]
            if out.request is None:
                await self._publish_asks()
                continue
            if out.request is not None and out.progress_index >= 0:
                progress = out.request.targets[out.progress_index]
                if progress.phase.terminal:
                    self.outgoing.popleft()
                    continue
            if self._publisher() is None and self._feed() is None:
                self.outgoing.popleft()
                if out.request is not None:
                    for tr in self.tracker.publish_failed(out.request, "no broker connection",
                                                          self._clock()):
                        self.on_transition(tr)
                continue
            try:
                await self._publish(out.kind, out.subject, out.cmd)
            except (aiomqtt.MqttError, OSError, ConnectionError) as err:
                # Not connected (a broker restart): the tracker re-sends unacknowledged
                # commands every few seconds until their deadline, so nothing is dropped here.
                self._counters.publish_errors += 1
                log.info("cannot publish %s now: %s", out.cmd.cmd_id, err)
                if out.request is not None and out.progress_index >= 0:
                    progress = out.request.targets[out.progress_index]
                    if not progress.send_error:
                        self._note(f"{progress.target}: cannot send {out.cmd.op.value} now "
                                   f"({err}); retrying until it expires", severity="warn",
                                   nodes=(progress.target,), kind="command")
                    progress.sent_at = self._clock()
                    progress.send_error = str(err) or type(err).__name__
                self.outgoing.popleft()
                continue
            self.outgoing.popleft()
            self._counters.commands_sent += 1
            if out.request is not None and out.progress_index >= 0:
                progress = out.request.targets[out.progress_index]
                progress.sent_at, progress.send_error = self._clock(), ""

    async def _publish_probe(self) -> None:
        """Publish the probe's test publish, and tell the probe when it went out (its PUBACK):
        its wait starts then, not when the tick queued it (console/publish_probe.py)."""
        payload, probe, feed = self._probe_out, self.probe, self._feed()
        if payload is None or probe is None or feed is None:
            return
        self._probe_out = None
        try:
            await feed.publish(Kind.CMD, PROBE_NODE, payload, qos=1)
        except (OSError, ConnectionError):
            self._counters.publish_errors += 1
            probe.unsent(payload)
            return
        self._counters.messages_sent += 1
        probe.sent(payload, self._clock())

    async def _publish_asks(self) -> None:
        """Publish the leading run of outgoing commands no request waits on (keyframe, event
        re-send and rebirth asks, re-sends of commands not yet acknowledged: a lost one is sent
        again on its own schedule) at once, up to ``ASKS_IN_FLIGHT``.
        One at a time, each QoS 1 publish waited for its PUBACK while the loop ingested the
        fleet: a console or ``status`` on 1,024 v2 nodes sent ~360 keyframe asks a second,
        and ``status`` read 635 of 1,024 nodes stale ("not yet its keyframe") after its 3.5 s
        watch (a 3 a.m. drill)."""
        batch: list[Outgoing] = []
        while self.outgoing and len(batch) < ASKS_IN_FLIGHT:
            if self.outgoing[0].request is not None:
                break
            batch.append(self.outgoing.popleft())
        if self._publisher() is None and self._feed() is None:
            return
        results = await asyncio.gather(
            *(self._publish(out.kind, out.subject, out.cmd) for out in batch),
            return_exceptions=True)
        for out, result in zip(batch, results, strict=True):
            if isinstance(result, (aiomqtt.MqttError, OSError, ConnectionError)):
                # Not connected (a broker restart): the ask is made again once it is still
                # wanted (the ingest's and the state's own schedules), as before.
                self._counters.publish_errors += 1
                log.info("cannot publish %s now: %s", out.cmd.cmd_id, result)
            elif isinstance(result, BaseException):
                raise result
            else:
                self._counters.commands_sent += 1

    async def _publish(self, kind: Kind, subject: str, cmd: Command) -> None:
        # Every command to a node goes out here (drains and resumes with their re-sends,
        # keyframe, re-send and rebirth asks), stamped in that node's clock: its agent judges
        # expiry by its own (console/clock.py ``ClockWatch.on_node_clock``). The tracker keeps
        # the command in ours: its deadlines and re-sends go by our clock.
        if kind is Kind.CMD:
            now = self._clock()
            state = self._state()
            st = state.nodes.get(subject)
            # Two machines under its id (H3): the latest sample may be the other's clock.
            duplicate = (st is not None and st.duplicate_at is not None
                         and now - st.duplicate_at < DUPLICATE_WINDOW_S)
            sent = state.clocks.on_node_clock(cmd, subject, now, duplicate)
            progress = self.tracker.progress(cmd.cmd_id)
            if progress is not None:
                # A re-send is stamped by the estimate now, but never later than a copy sent
                # before: the agent remembers an executed cmd_id only until the expiry of the
                # copy it acted on, and a later-expiring re-send (a console caught up on its
                # backlog reads the node further ahead) ran again after that (a review).
                shift = sent.expires_at - cmd.expires_at
                least = progress.sent_shift_ms
                if least is not None and shift > least:
                    shift = least
                    sent = cmd.model_copy(update={"issued_at": cmd.issued_at + shift,
                                                  "expires_at": cmd.expires_at + shift})
                progress.sent_shift_ms = shift
            cmd = sent
        # Every command this console sends is signed when a key is configured — retries,
        # event re-send requests and rebirth requests too: agents refuse unsigned ones. The
        # shifted stamps are signed.
        publisher = self._publisher()
        if publisher is not None:
            if self._command_key is not None:
                cmd = signing.sign(cmd, self._command_key)
            await publisher(kind, subject, codec.encode(cmd))
            return
        feed = self._feed()
        assert feed is not None
        await feed.send_command(kind, subject, cmd)


def _nodes_of(req: Request) -> tuple[str, ...]:
    if req.op is CommandOp.RESTART_JOB:
        return ()
    return tuple(t.target for t in req.targets)


def finish_details(req: Request) -> str:
    """Why targets of a finished request did not end DONE (audit detail, the TUI's notice),
    and, when they did not all end alike, which ended how: the request's one outcome is its
    worst, and the audit trail lost that a drain of two nodes drained one of them. All done,
    what done means, as the CLI prints it ("requeued (requeues 1), running again at step 50",
    "DRAINED"): the audit record's detail was empty where the CLI said that (a newcomer's
    run)."""
    why = sorted({f"{t.target}: {t.detail}" for t in req.targets if t.phase is not Phase.DONE})
    by_phase: dict[Phase, list[str]] = {}
    for t in req.targets:
        by_phase.setdefault(t.phase, []).append(t.target)
    split = ([f"{phase.value} {compress(targets)}" for phase, targets in by_phase.items()]
             if len(by_phase) > 1 else [])
    if not split and not why:
        by_detail: dict[str, list[str]] = {}
        for t in req.targets:
            if t.detail:
                by_detail.setdefault(t.detail, []).append(t.target)
        if len(by_detail) == 1:
            (only,) = by_detail
            return clip_words(only, 500)
        why = [f"{compress(targets)}: {detail}" for detail, targets in by_detail.items()]
    return clip_words("; ".join(split + why), 500)
