"""Headless commands for scripts: ``fleetdeck drain|resume|restart-job|retire``.

Each connects like the console, collects the retained state for a moment, publishes one protocol
``Command`` per target, then follows acks and the fleet state with the same ``CommandTracker``
as the TUI until every target is done or the deadline passes. It prints one line per transition
and a summary, writes the audit log, and exits 0 (done), 3 (rejected/failed), 4 (timed out),
5 (timed out with nothing answered, and the broker most likely dropped it: a test publish of
this broker user's did not come back either) or 6 (a drain timed out with every target done or
still DRAINING: it took, their jobs finish first).
"""

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TextIO, TypeVar

import aiomqtt

from fleetdeck.brokerurl import BrokerURL, describe_mqtt_error
from fleetdeck.console import publish_probe
from fleetdeck.console.audit import AuditLog, AuditRecord, AuditSink
from fleetdeck.console.commands import (
    DRAINING,
    BlastRadius,
    Phase,
    Request,
    Transition,
    blast_radius,
    drained_for,
    draining_jobs,
    heard_live,
    job_blast_radius,
    job_refusal,
    jobs_on,
    new_request_id,
    parse_targets,
    refusal,
    retire_refusal,
    scheduled_jobs_by_node,
    unknown_job_hint,
    why_unanswered,
)
from fleetdeck.console.live import broker_uptime_s, clusters_seen
from fleetdeck.console.session import ConsoleSession, TickReport
from fleetdeck.console.state import FleetState
from fleetdeck.errors import UserError
from fleetdeck.hostlist import compress, did_you_mean
from fleetdeck.paths import given_file
from fleetdeck.protocol.messages import CommandOp, DrainMode
from fleetdeck.protocol.topics import RETAINED_NODE_KINDS
from fleetdeck.transport import TransportError

EXIT_DONE = 0
EXIT_REJECTED = 3
EXIT_TIMED_OUT = 4
EXIT_DROPPED = 5
"""Nothing answered the command by its deadline and the broker is judged to drop this user's
publishes (console/publish_probe.py): most likely an ACL to fix, not a node to look at. A
viewer's drain read "timed_out ... most likely never reached it", exit 4 as for an offline node
(a drill). Said at the deadline, not at the probe's verdict: until then the command may still
land (a late echo on a loaded broker, a user that may not read commands back)."""
EXIT_STILL_DRAINING = 6
"""A drain's deadline passed with every target DRAINED or acknowledged and still DRAINING (the
drain took; their jobs run to completion first, Slurm's DRAINING, or a --now drain's are being
requeued), none unanswered, rejected or superseded. It was exit 4, as for nodes that never
answered: a script could tell "wait longer" from "go and look at a node" only by the text."""
T = TypeVar("T")
CONNECT_TIMEOUT_S = 10.0
SETTLE_S = 0.7
BIRTH_WAIT_S = 30.0
"""How long after connecting unknown targets are waited for at the most."""
BIRTHS_QUIET_S = 3.0
"""Unknown targets are given up on once no new node has appeared for this long."""
BROKER_YOUNG_S = 10.0
"""Until the broker has been up this long, unknown targets are waited for all the same: the
agents' first reconnect back-offs after a short outage (agents/agent.py) are still running."""
SAMPLES_WAIT_S = 3.0
"""After connecting, how long the blast radius waits at the most for the rest of the cluster's
first telemetry (for "free GPUs left"; measured before it, nodes not yet heard from counted no
free GPUs, and a dry run said "0 free GPUs left" where the console said 40). The command's own
nodes (its targets, a job's nodes) are waited for up to two of their intervals: their GPUs and
jobs are the blast radius. Waiting so for the whole cluster kept a drain silent for 21 s when
agents ran --interval 10 (a newcomer's production set-up)."""

WAIT_SAID_OVER_S = 2.5
"""The wait for the command's own nodes' first telemetry is said on stderr when more than this
is left of it: agents at 1 Hz are heard within a second of the settle, and every drain of such
a fleet said it waited "up to 2 s" for nodes then heard at once (a review)."""


class UnknownTargets(UserError):
    """Targets (nodes, or a job) this console has heard nothing of on the cluster."""

    def __init__(self, text: str, *, nothing_heard: bool = False) -> None:
        super().__init__(text)
        self.nothing_heard = nothing_heard
        """Nothing of their kind heard at all (no node, no job status): a broker that just
        restarted lost its retained messages, so they are waited for longer."""

"""How long to collect retained births/statuses/jobs before sending (to know the targets)."""
POLL_S = 0.1
BROKER_MUTE_SAID_S = 5.0
"""A connected broker that has sent nothing, a ping's answer included, for this long is said
to be hung (``CommandRun._watch_mute``): four pings unanswered, past a loaded host's stall of
a second or two."""
CLI_STALL_S = 1.0
"""A gap this long between two of a command's watches of its link (ticks are ``POLL_S``
apart) is the command not running (suspended with Ctrl-Z, a starved host, a long tick): it
asked the broker nothing meanwhile, so the broker's silence over it is no sign of a hang."""
PROGRESS_GROUP_OVER = 8
"""Targets above which a command's progress is said per group of nodes, not per node: a drain
of 512 nodes printed 1,068 lines, an ack and an outcome a node (a 2026-12-07 drill)."""
PROGRESS_EVERY_S = 1.0
"""How often grouped progress is said: what moved in that second, one line per outcome."""


async def _cancelled(task: "asyncio.Task[None]") -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


@dataclass(frozen=True)
class Attempt:
    """What the operator asked for: audited as ``refused`` when it is never sent."""

    op: CommandOp
    targets: list[str] | str
    """Node ids, or the hostlist or job id as typed (before it could be read)."""
    reason: str = ""
    mode: DrainMode | None = None


def checked(attempt: Attempt, audit: AuditSink, operator: str, cluster: str,
            check: Callable[[], T]) -> T:
    """``check()``; a ``UserError`` from it (a bad host list, no reason) is audited as the
    attempt's refusal before it goes on to the operator."""
    try:
        return check()
    except UserError as err:
        audit.write(refusal(attempt.op, attempt.targets, str(err), who=operator,
                            cluster=cluster, now=time.time(), reason=attempt.reason,
                            mode=attempt.mode))
        raise


class NothingToSend(Exception):
    """The command would change nothing (every target drained for its reason already): said
    in one line, exit 0, nothing sent and nothing audited."""


class Interrupted(UserError):
    """The command was ended by a signal: exit 128 + its number, as a shell reports it."""

    def __init__(self, text: str, exit_code: int) -> None:
        super().__init__(text)
        self.exit_code = exit_code


class CommandRun:
    """One headless command: connect, send, follow, report — through a ``ConsoleSession``, so
    a broker blip is ridden out (the feed reconnects, unacknowledged commands are re-sent with
    the same id) and every audited request ends with an outcome line."""

    def __init__(self, url: BrokerURL, cluster: str, operator: str, *,
                 audit: AuditSink, timeout_s: float, out: TextIO = sys.stdout,
                 clock: Callable[[], float] = time.time,
                 command_key: bytes | None = None) -> None:
        self.url = url
        self.cluster = cluster
        self.operator = operator
        self.timeout_s = timeout_s
        self.out = out
        self.clock = clock
        self._started = time.monotonic()
        self._connected_at: float | None = None
        self._waiting_said = False
        """Whether the wait for the command's nodes' first telemetry was said."""
        self._draining_said = False
        """Whether a finish drain's wait for DRAINED was said (``_say_draining``)."""
        self._lost_at: float | None = None
        """When the link to the broker was lost (None: up, or never up yet)."""
        self._mute_at: float | None = None
        """When the broker, connected, last answered before it went quiet past
        ``BROKER_MUTE_SAID_S`` (None: it answers)."""
        self._watched_at: float | None = None
        """When ``_watch_mute`` last ran."""
        self._ran_since = float("-inf")
        """When this command last resumed after not running (``CLI_STALL_S``)."""
        self._heard = 0
        """Nodes and jobs heard of: while it grows, unknown targets may still appear."""
        self._heard_changed_at = time.monotonic()
        self._others: list[str] | None = None
        """Clusters with retained births on the broker (``_probe_clusters``); None until
        known."""
        self._uptime: float | None = None
        """The broker's uptime as the probe read it (None: not known)."""
        self._held: dict[str, list[str]] = {}
        """Progress lines held for grouping (text -> nodes), said every ``PROGRESS_EVERY_S``."""
        self._held_since: float | None = None
        self._group = False
        """Whether progress is grouped: the request has more than ``PROGRESS_GROUP_OVER``
        targets."""
        self._answered = False
        """Anything answered the command (an ack, a rejection, its effect seen): it reached
        something, whatever the broker's test publish says."""
        self._dropped: set[str] = set()
        """The sentences "the broker most likely dropped it" given to the tracker for its
        unanswered targets at their deadline: exit 5 when every target that timed out went
        with one (what the audit says, not the probe's latest verdict: a review)."""
        self._probe: asyncio.Task[None] | None = None
        """Started only once nothing of the cluster was heard: every command reading every
        cluster's births on a shared broker cost a Slurm prolog's worth of traffic (a
        review)."""
        # The acknowledgement may take as long as --timeout (default 10 s cut a 15 s --timeout
        # short for an offline node); the command expires then too, so an agent back later
        # does not act on what this command already reported as timed out.
        # Not ``one_shot``: it waits up to --timeout (a drain letting jobs finish, minutes),
        # where a subscription the broker stopped delivering to is found by a look and made
        # again (console/deaf_check.py), not waited out to a timed-out exit for acks that came.
        self.audit = audit
        self.session = ConsoleSession(cluster, url=url, clock=clock, operator=operator,
                                      audit=audit, command_key=command_key,
                                      ack_timeout_s=timeout_s,
                                      client_id=f"fd-cli-{os.getpid()}-{id(self):x}")

    @property
    def state(self) -> FleetState:
        return self.session.state

    async def _probe_clusters(self) -> None:
        """Which clusters the broker keeps births of, and how long it has been up, beside the
        command's own wait: a mistyped --cluster waited 30 s for births a restarted broker
        might still be owed, where another cluster's retained births on a broker up longer
        than that say it lost none (a newcomer's scripts)."""
        me = f"fd-cli-probe-{os.getpid()}-{id(self):x}"
        try:
            self._uptime = await asyncio.wait_for(broker_uptime_s(self.url, me[:64]),
                                                  CONNECT_TIMEOUT_S)
            self._others = await asyncio.wait_for(clusters_seen(self.url, me[:64]),
                                                  CONNECT_TIMEOUT_S)
        except Exception:  # a hint only: a failed probe leaves the wait as it was
            self._others = []

    def _unanswered(self, req: Request) -> str | None:
        """Why ``req``'s unanswered targets went unanswered, as its deadline comes (the
        tracker's ``unanswered``): the broker's test publish did not come back either (the
        probe's sentence), '' when that is not known, None while the probe's verdict is still
        out (waited for, a moment: a --timeout shorter than the probe's wait). Never before
        the deadline: a probe's echo can be late on a loaded broker, or never come to a user
        that may publish commands but not read them back (docs/security.md), while the
        command, valid until then and re-sent, reaches its node. Any answer from any target
        cancels the verdict: the command reached something."""
        probe = self.session.probe
        answered = self._answered or any(
            t.phase not in (Phase.REQUESTED, Phase.TIMED_OUT, Phase.ABANDONED)
            for t in req.targets)
        if probe is None or answered:
            return ""
        if probe.undecided(self.clock()) and self.clock() < self._verdict_by(req):
            return None
        dropped = probe.dropped_command()
        if dropped:
            self._dropped.add(dropped)
        return dropped

    def _verdict_by(self, req: Request) -> float:
        """Until when (the session's clock) a command unanswered by its deadline waits for the
        probe's verdict: its test publish's wait from the PUBACK and a second's grace, and at
        most as long past the deadline (a test publish not out yet may never go out)."""
        by = req.issued_at + req.ack_timeout_s + publish_probe.PROBE_WAIT_S + 1.0
        probe = self.session.probe
        if probe is not None and probe.sent_at is not None:
            by = min(by, probe.sent_at + publish_probe.PROBE_WAIT_S + 1.0)
        return by

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def _progress(self, reports: Iterable[Transition], *, flush: bool = False) -> None:
        """Say each target's move; for a large request, the nodes that moved alike within a
        second as one hostlist line (``gpu[0001-0180]: acknowledged (drain (finish))``)."""
        for tr in reports:
            if not self._group:
                self.say(f"  {tr.target}: {tr.text}")
                continue
            self._held.setdefault(tr.text, []).append(tr.target)
            if self._held_since is None:
                self._held_since = time.monotonic()
        if self._held_since is None:
            return
        if flush or time.monotonic() - self._held_since >= PROGRESS_EVERY_S:
            for text, targets in self._held.items():
                self.say(f"  {compress(targets)}: {text}")
            self._held.clear()
            self._held_since = None

    def refuse(self, attempt: Attempt, why: str) -> None:
        self.session.refuse(attempt.op, attempt.targets, why, attempt.reason, attempt.mode)

    async def run(self, make: Callable[["CommandRun"], Request], attempt: Attempt, *,
                  wait_done: bool = True,
                  needs: Callable[[], Iterable[str]] = lambda: ()) -> int:
        """``attempt``: what ``make`` asks for, audited as refused if it is never sent;
        ``needs``: the nodes whose first telemetry ``make`` waits for (``_when_settled``)."""
        session = self.session
        self._started = time.monotonic()
        req: Request | None = None
        deadline = 0.0
        checking_said = hint_said = False
        # Whether the broker delivers this user's commands: a viewer's drain otherwise waited
        # out --timeout for an ack that could never come (console/publish_probe.py). Its
        # verdict is told at once, and decides the outcome only at the command's deadline
        # (``_unanswered``): until then the command is valid, re-sent, and may still land.
        session.probe_commands()
        session.tracker.unanswered = self._unanswered
        # Requests a killed console or command left open in the audit log get their outcome
        # from what this run hears (docs/reliability.md, "A console killed with a command open").
        session.adopt_orphans()

        def on_tick(report: TickReport) -> bool:
            over = step(report)
            if over:
                self._progress((), flush=True)
            return over

        def step(report: TickReport) -> bool:
            nonlocal req, deadline, checking_said, hint_said
            self._progress(report.commands)
            for tr in report.commands:
                self._answered = (self._answered
                                  or tr.new not in (Phase.TIMED_OUT, Phase.ABANDONED))
            self._watch_link(sent=req is not None)
            if req is None:
                found = self._when_settled(make, needs)
                if found is None:
                    return False
                req = found
                self._group = len(req.targets) > PROGRESS_GROUP_OVER
                self.say(f"{describe_op(req)} [{req.request_id}] requested by {self.operator}")
                deadline = self.clock() + self.timeout_s
                return False
            if wait_done:
                self._say_draining(req, report.commands, deadline - self.clock())
            probe = session.probe
            hint = "" if probe is None or self._answered else probe.hint()
            if hint and not hint_said and self.clock() < deadline:
                hint_said = True
                self.say(f"no answer yet, and {hint}; waiting for an answer all the same until "
                         f"the --timeout ({deadline - self.clock():.0f} s more): the command "
                         "holds until then and may still reach its nodes")
            over = req.finished_at is not None or self.clock() > deadline
            if over and self._unanswered(req) is None:
                if not checking_said and probe is not None:
                    checking_said = True
                    left = self._verdict_by(req) - self.clock()
                    self.say("no answer: checking whether the broker delivers this user's "
                             f"commands (up to {max(0.0, left):.0f} s more)")
                return False
            if req.finished_at is not None:
                return True
            if not wait_done and all(t.phase is not Phase.REQUESTED for t in req.targets):
                return True
            if self.clock() > deadline:
                if any(t.phase is Phase.REQUESTED for t in req.targets):
                    # Past their ack deadline, no longer held: the tracker times them out at
                    # its next tick, with what is known of why (``_unanswered``).
                    return False
                self._progress(session.abandon(f"no result within {self.timeout_s:g} s"))
                return True
            return False

        stop = asyncio.Event()
        # SIGTERM, or SIGHUP from a dropped ssh session, ends the command as Ctrl-C does: the
        # open request gets its outcome in the audit log (killed, it kept only "requested").
        caught: list[int] = []
        me = asyncio.current_task()
        loop = asyncio.get_running_loop()

        def stopped_by(signum: int) -> None:
            caught.append(signum)
            if me is not None:
                me.cancel()

        for signum in (signal.SIGTERM, signal.SIGHUP):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signum, stopped_by, signum)
        try:
            await session.watch(stop, tick_s=POLL_S, on_tick=on_tick)
        except NothingToSend as done:
            self.say(str(done))
            return EXIT_DONE
        except (KeyboardInterrupt, asyncio.CancelledError):
            self._progress((), flush=True)
            why = (f"interrupted ({signal.Signals(caught[0]).name})" if caught
                   else "interrupted")
            session.abandon(f"{why} before an outcome was seen", Phase.ABANDONED)
            if req is None:
                self.refuse(attempt, f"{why} before it was sent")
            else:
                # The way back, for a drain stopped by a Ctrl-C that meant "not this one" (a
                # 3 a.m. run read only that it stays in effect).
                undo = (f"; 'fleetdeck resume {req.target_text}' undoes it"
                        if req.op is CommandOp.DRAIN else "")
                self.say(f"{describe_op(req)}: {why}; what was sent stays in effect on the "
                         f"nodes that received it (check with fleetdeck status{undo})")
            if caught:
                raise Interrupted(f"{why}: the outcome is in the audit log as abandoned.",
                                  128 + caught[0]) from None
            raise
        except (aiomqtt.MqttError, TransportError) as err:
            self._progress((), flush=True)
            session.abandon(f"broker connection lost: {err}", Phase.ABANDONED)
            text = describe_mqtt_error(self.url, err)
            if req is None:
                self.refuse(attempt, text)
            raise UserError(text) from None
        except UserError as err:
            # Refused before sending (no broker, unknown targets): the operator's attempt is
            # in the audit trail with the sentence the CLI prints.
            if req is None:
                self.refuse(attempt, str(err))
            raise
        finally:
            if self._probe is not None:
                await _cancelled(self._probe)
            if req is not None and not wait_done:
                session.left_open(req, "not waiting for the effect (--no-wait)")
            await session.close()
        assert req is not None
        code = self._report(req)
        timed_out = [t for t in req.targets if t.phase is Phase.TIMED_OUT]
        dropped = next((d for d in self._dropped
                        if timed_out and all(d in t.detail for t in timed_out)), "")
        if dropped and code == EXIT_TIMED_OUT:
            # Nothing answered by the deadline, and the broker's test publish did not come
            # back either: said last, for the script reading the output. Not where a target
            # is known offline or silent: that node's time-out says so (exit 4).
            self.say(f"{describe_op(req)}: {dropped}")
            code = EXIT_DROPPED
        if self.audit.errors:
            # The command went out: its exit status stays, but the gap in the trail is said.
            print(f"fleetdeck {req.op.value.replace('_', '-')}: warning: {self.audit.last_error}; "
                  f"the audit log misses part of this command's records", file=sys.stderr)
        return code

    def _report(self, req: Request) -> int:
        phase = req.phase
        counts = ", ".join(f"{n} {p.value}" for p, n in req.counts().items())
        bad = [t for t in req.targets if t.phase is not Phase.DONE]
        if phase is Phase.DONE:
            self.say(f"{describe_op(req)}: {counts}")
            return EXIT_DONE
        if req.finished_at is None:
            # --no-wait: acknowledged, not finished
            self.say(f"{describe_op(req)}: acknowledged ({counts}); not waiting for the effect")
            return EXIT_DONE
        dead_of = {t.target: ("" if req.op is CommandOp.RESTART_JOB
                              else why_unanswered(self.state, t.target)) for t in bad}
        # A drain that timed out on nodes still DRAINING took: their jobs finish first. Counted
        # with the nodes that never answered ("32 timed_out, 32 done" of a 64-node drain, 3
        # of them offline, a 2026-12-07 drill), they hid which nodes want a look; said apart,
        # on one line, not one a node.
        draining = [t.target for t in bad if req.op is CommandOp.DRAIN
                    and t.phase is Phase.TIMED_OUT and "DRAINING" in t.detail
                    and not dead_of[t.target]]
        if draining:
            by_phase = req.counts()
            by_phase[Phase.TIMED_OUT] -= len(draining)
            counts = ", ".join(f"{n} {p.value}" for p, n in by_phase.items() if n)
            counts = (f"{counts}, " if counts else "") + (
                f"{len(draining)} still draining (acknowledged: the drain holds, "
                f"{draining_jobs(req.mode, one=False)})")
        self.say(f"{describe_op(req)}: {counts}")
        cut_off = self._cut_off_s()
        if len(draining) > 1:
            self.say(f"  {compress(draining)}: timed_out while DRAINING — "
                     + (f"they were draining when this command lost the broker {cut_off:.0f} s "
                        "ago; what they are now is not known (fleetdeck status tells)"
                        if cut_off is not None else
                        f"the nodes are still draining ({draining_jobs(req.mode, one=False)})"))
        for t in bad:
            if len(draining) > 1 and t.target in draining:
                continue
            still = ""
            dead = dead_of[t.target]
            if req.op is CommandOp.DRAIN and "DRAINING" in t.detail:
                # Its agent died after it said DRAINING: "still draining" was a guess past the
                # Last Will that came 23 s before the time-out (an SRE drill).
                if dead:
                    still = f" — it was draining when its agent went silent: {dead}"
                elif cut_off is not None:
                    # Nothing heard of it since the broker went: its job may have ended and
                    # the node be DRAINED by now (a drill: "still draining", the broker
                    # SIGSTOPped for the whole wait).
                    still = (f" — it was draining when this command lost the broker "
                             f"{cut_off:.0f} s ago; what it is now is not known "
                             "(fleetdeck status tells)")
                else:
                    still = f" — the node is still draining ({draining_jobs(req.mode)})"
            elif dead and t.phase is Phase.TIMED_OUT and " — the node " not in t.detail:
                # Said already when the tracker's own deadline came first.
                still = f" — {dead}"
            self.say(f"  {t.target}: {t.phase.value}: {t.detail}{still}")
        if phase is Phase.TIMED_OUT and len(draining) == len(bad):
            return EXIT_STILL_DRAINING
        return EXIT_TIMED_OUT if phase is Phase.TIMED_OUT else EXIT_REJECTED

    @property
    def _lost_limit_s(self) -> float:
        """How long a link lost before sending is waited for."""
        return min(CONNECT_TIMEOUT_S, self.timeout_s)

    def _watch_link(self, *, sent: bool) -> None:
        """Say when the link to the broker is lost and when it is back: a command that went
        quiet for a broker outage read as hung (a drill)."""
        feed = self.session.feed
        if feed is None or feed.conn.connects == 0:
            return
        up = feed.conn.state == "connected"
        self._watch_mute(feed.broker_heard_s() if up else None, sent=sent)
        if not up and self._lost_at is None:
            # A hung broker's link dropped at last: one outage, from its last word.
            self._lost_at, self._mute_at = self._mute_at or time.monotonic(), None
            self.say(f"the connection to the broker at {self.url} is lost; "
                     + ("what was sent stays in effect, waiting for the outcome as it "
                        "reconnects (--timeout)" if sent else
                        f"nothing is sent unless it is back within {self._lost_limit_s:g} s"))
        elif up and self._lost_at is not None:
            self.say(f"the connection to the broker is back after "
                     f"{time.monotonic() - self._lost_at:.0f} s")
            self._lost_at = None

    def _watch_mute(self, heard_s: float | None, *, sent: bool) -> None:
        """Say when a connected broker stops answering (``heard_s``: seconds since it last
        sent anything, None when not connected) and when it answers again. A broker
        SIGSTOPped 20 s while a drain waited for DRAINED was said by no line: the link stays
        up until twice the keepalive, and the drain ended "the node is still draining" from
        what it had heard before the hang (a 3 a.m. drill); the console and ``collect`` said
        "the broker has not answered (hung?)". The session asks a quiet broker for a ping
        each second (``ConsoleSession``, ``QUIET_PING_S``), so this long unanswered is one
        ping not answered for seconds."""
        now = time.monotonic()
        last, self._watched_at = self._watched_at, now
        if last is not None and now - last > CLI_STALL_S:
            self._ran_since = now
        # The broker's silence counts from when this command last ran on: a drain suspended
        # 10 s with Ctrl-Z pinged no one meanwhile (the session pings as it ticks), and read
        # "has not answered for 10 s (hung?)" of a broker that answered its next ping at
        # once (a review; tests/console/test_cli_mute.py).
        mute_s = None if heard_s is None else min(heard_s, now - self._ran_since)
        if mute_s is not None and mute_s > BROKER_MUTE_SAID_S and self._mute_at is None:
            self._mute_at = now - mute_s
            self.say(f"the broker at {self.url} has not answered for {mute_s:.0f} s (hung?); "
                     + ("what was sent stays in effect, waiting for the outcome as it "
                        "answers again (--timeout)" if sent else
                        "what is sent waits in it until it answers"))
        elif self._mute_at is not None and heard_s is not None and heard_s <= BROKER_MUTE_SAID_S:
            self.say(f"the broker answers again after {now - heard_s - self._mute_at:.0f} s")
            self._mute_at = None

    def _cut_off_s(self) -> float | None:
        """How long this command has heard nothing of its broker (lost or hung), None while
        it hears it."""
        since = min((t for t in (self._lost_at, self._mute_at) if t is not None), default=None)
        return None if since is None else time.monotonic() - since

    def _when_settled(self, make: Callable[["CommandRun"], T],
                      needs: Callable[[], Iterable[str]] = lambda: ()) -> T | None:
        """``make(self)`` once connected and settled (retained births, statuses and jobs name
        the targets, and the nodes ``needs()`` names sent their first telemetry), else None to
        be asked again next tick; raises ``UserError`` when the broker cannot be reached or
        the targets never appear."""
        feed = self.session.feed
        assert feed is not None
        if feed.conn.connects == 0:
            if feed.first_error is not None:
                raise UserError(feed.first_error)
            if time.monotonic() - self._started > CONNECT_TIMEOUT_S:
                if feed.conn.connacks:
                    # Which step went unanswered: the CONNACK came, the SUBACK did not.
                    raise UserError(f"connected to {self.url}, but the broker did not confirm "
                                    f"the subscription (no SUBACK) within "
                                    f"{CONNECT_TIMEOUT_S:g} s (a hung or overloaded broker? "
                                    "try again); nothing was sent")
                raise UserError(f"cannot connect to {self.url} within {CONNECT_TIMEOUT_S:g} s")
            return None
        if feed.conn.state != "connected":
            self._connected_at = None  # a blip before sending: settle again after it
            lost = time.monotonic() - (self._lost_at or time.monotonic())
            if lost > self._lost_limit_s:
                # It reconnects for ever: the command would be sent whenever the broker came
                # back, minutes after its operator gave up on it (a drill: --timeout 10, a
                # drain sent 54 s later).
                raise UserError(f"the connection to the broker at {self.url} was lost before "
                                f"the command was sent and did not come back within "
                                f"{self._lost_limit_s:g} s: nothing was sent")
            return None
        self._connected_at = self._connected_at or time.monotonic()
        if time.monotonic() - self._connected_at < SETTLE_S:
            return None
        since = time.monotonic() - self._connected_at
        unheard = sorted(n for n in set(needs())
                         if (st := self.state.nodes.get(n)) is not None and st.waiting)
        if unheard:
            # Two of its intervals (a v2 delta first, then the keyframe it asks for), plus
            # the way here.
            limit = max(SAMPLES_WAIT_S,
                        2 * max(self.state.nodes[n].interval_s for n in unheard) + 1)
            if since < limit:
                if limit - since > WAIT_SAID_OVER_S:
                    self._say_waiting(unheard, limit - since)
                return None
        elif since < SAMPLES_WAIT_S and any(st.waiting for st in self.state.nodes.values()):
            return None  # the rest of the cluster, for "free GPUs left": a moment at most
        heard = len(self.state.nodes) + len(self.state.jobs)
        if heard != self._heard:
            self._heard, self._heard_changed_at = heard, time.monotonic()
        try:
            return make(self)
        except UnknownTargets as err:
            # A broker that just restarted has lost its retained births and job statuses: the
            # agents and the scheduler publish them again as they reconnect. Give up once they
            # stopped arriving (a typo in the hostlist fails in about two seconds), or after
            # BIRTH_WAIT_S at the most.
            now = time.monotonic()
            quiet = now - max(self._heard_changed_at, self._connected_at)
            waited = now - self._connected_at
            if self._probe is None:
                self._probe = asyncio.create_task(self._probe_clusters())
            if not self._probe.done() and waited < min(BIRTH_WAIT_S, self.timeout_s):
                return None  # how long the broker has been up decides the wait below
            others = self._others
            # Other clusters' retained births on a broker up for longer than the wait: it lost
            # none of them, so nothing heard of this cluster is no restart to wait out (just
            # after a restart another cluster's agents may be back before this one's).
            up = self._uptime
            kept = (bool(others) and self.cluster not in (others or ())
                    and (up is None or up >= BIRTH_WAIT_S))
            owed = err.nothing_heard and not kept
            # A broker just (re)started may still be owed the births of the named nodes: a
            # resume a second after a broker restart was refused as "unknown node" while that
            # node's agent waited out its back-off (CI).
            young = up is not None and up + waited < BROKER_YOUNG_S
            if (quiet < BIRTHS_QUIET_S or owed or young) \
                    and waited < min(BIRTH_WAIT_S, self.timeout_s):
                return None
            if err.nothing_heard and others and self.cluster not in others:
                raise UnknownTargets(f"{err}; clusters seen there: {', '.join(others)}",
                                     nothing_heard=True) from None
            raise

    def _say_draining(self, req: Request, moves: Iterable[Transition], left_s: float) -> None:
        """Say once, on stderr (stdout keeps its lines for scripts), that a finish drain's
        nodes said DRAINING and what the wait is for: a drain of a busy node said "status now
        DRAINING", then nothing for the 60 s of its --timeout before exit 6, "still draining"
        (a fresh-clone walk-through), and the operator could not tell a wait from a hang."""
        if self._draining_said or req.op is not CommandOp.DRAIN or req.mode is not DrainMode.FINISH:
            return
        nodes = [tr.target for tr in moves if tr.request is req
                 and tr.new is Phase.ACKNOWLEDGED and tr.detail == DRAINING]
        if not nodes:
            return
        self._draining_said = True
        one = len(nodes) == 1
        print(f"{compress(nodes)} {'is' if one else 'are'} DRAINING: "
              f"{draining_jobs(req.mode, one=one)}; waiting up to {max(0.0, left_s):.0f} s for "
              f"DRAINED (--timeout); Ctrl-C or the --timeout leaves the drain in place "
              f"('fleetdeck resume {req.target_text}' undoes it)", file=sys.stderr, flush=True)

    def _say_waiting(self, owed: list[str], left_s: float) -> None:
        """Say once, on stderr (stdout keeps the result for scripts), which nodes' first
        telemetry the command waits for: a drain printed nothing for 21 s before its blast
        radius when agents ran --interval 10 (a newcomer's production set-up)."""
        if self._waiting_said:
            return
        self._waiting_said = True
        every = sorted({self.state.nodes[n].interval_s for n in owed})
        one = len(owed) == 1
        who = "its agent reports" if one else "their agents report"
        # Each pace said: "their agents report every 10 s" of a 1 Hz node and a 10 s one.
        pace = f"{every[0]:g}" if len(every) == 1 else f"{every[0]:g} to {every[-1]:g}"
        print(f"waiting for the first telemetry of {compress(owed)} ({'its' if one else 'their'}"
              f" GPUs and jobs; {who} every {pace} s): up to {left_s:.0f} s",
              file=sys.stderr, flush=True)

    def show_radius(self, radius: BlastRadius) -> None:
        """What the command touches, before it is sent (the TUI's confirmation, in text)."""
        self.say(f"blast radius: {radius.summary()}")
        for job in radius.jobs:
            self.say(f"  {job.line()}")
        for note in radius.notes:
            self.say(f"  note: {note}")

    async def dry_run(self, radius: Callable[["CommandRun"], BlastRadius],
                      needs: Callable[[], Iterable[str]] = lambda: ()) -> int:
        """Connect, learn the fleet, print what the command would touch; send nothing."""
        session = self.session
        self._started = time.monotonic()
        found: list[BlastRadius] = []

        def on_tick(_report: TickReport) -> bool:
            self._watch_link(sent=False)
            radius_now = self._when_settled(radius, needs)
            if radius_now is None:
                return False
            found.append(radius_now)
            return True

        try:
            await session.watch(asyncio.Event(), tick_s=POLL_S, on_tick=on_tick)
        finally:
            if self._probe is not None:
                await _cancelled(self._probe)
            await session.close()
        self.say("dry run: nothing sent")
        self.show_radius(found[0])
        return EXIT_DONE

    async def retire(self, targets: list[str], reason: str, *, force: bool) -> int:
        """Clear the targets' retained topics (docs/protocol.md, "Retiring a node"), once the
        retained state says none is live (or ``force``); then wait until this session's own
        state has forgotten them, as every console's does."""
        session = self.session
        self._started = time.monotonic()
        text = compress(targets)
        clearing: list[asyncio.Task[None]] = []
        deadline = [0.0]
        gone: set[str] = set()
        """Targets this session saw forgotten (their empty birth came back from the broker)."""
        live: dict[str, float] = {}
        """Targets heard online when cleared (``--force``), with their agents' intervals."""
        back_by = [0.0]
        """Until when a live target's birth is waited for to come back after the clear."""

        def settled(r: CommandRun) -> list[str]:
            r.known(targets)
            why = retire_refusal(r.state, targets, r.clock())
            if why and not force:
                raise UserError(why)
            if why:
                r.say(f"retire {text}: --force: {why.split(':')[0]}; retiring all the same")
            live.update((t, r.state.nodes[t].interval_s)
                        for t in heard_live(r.state, targets, r.clock()))
            return targets

        def on_tick(_report: TickReport) -> bool:
            self._watch_link(sent=bool(clearing))
            now = time.monotonic()
            if not clearing:
                if self._when_settled(settled, lambda: targets) is None:
                    return False
                clearing.append(asyncio.ensure_future(self._clear(targets)))
                deadline[0] = now + self.timeout_s
                return False
            if not clearing[0].done():
                return False
            clearing[0].result()
            left = [t for t in targets if t in self.state.nodes]
            gone.update(t for t in targets if t not in left)
            if any(t not in gone for t in left):
                return now > deadline[0]  # a clear not seen yet (or dropped: an ACL)
            if live and not back_by[0]:
                # A live agent's next telemetry, unborn now, draws a rebirth request (this
                # session's, any console's) and its birth comes back: two of its intervals,
                # as for its first telemetry (``_when_settled``). Said retired at once, all
                # of a --force were, those still running too (a review).
                back_by[0] = min(deadline[0], now + 2 * max(live.values()) + 1)
                if back_by[0] - now > WAIT_SAID_OVER_S:
                    print(f"retire {text}: waiting up to {back_by[0] - now:.0f} s for "
                          f"{compress(list(live))} to publish a birth again (their agents "
                          "ran when cleared)", file=sys.stderr, flush=True)
            return now >= back_by[0] or all(t in left for t in live)

        try:
            await session.watch(asyncio.Event(), tick_s=POLL_S, on_tick=on_tick)
        except (aiomqtt.MqttError, TransportError) as err:
            why = describe_mqtt_error(self.url, err)
            self._retire_record(targets, reason, "refused" if not clearing else "failed", why)
            raise UserError(why) from None
        except UserError as err:
            self._retire_record(targets, reason, "refused" if not clearing else "failed",
                                str(err))
            raise
        finally:
            if self._probe is not None:
                await _cancelled(self._probe)
            for task in clearing:
                if not task.done():
                    await _cancelled(task)
            await session.close()
        by = f"by {self.operator}" + (f": {reason}" if reason else "")
        left = [t for t in targets if t in self.state.nodes]
        kept = [t for t in left if t not in gone]
        if kept:
            # The broker acknowledged the empty payloads but kept the births: an ACL that
            # lets this user publish no node's retained topics (deploy/mosquitto/acl gives
            # them to each node's agent alone) drops them silently.
            why = (f"the broker still holds the birth of {compress(kept)} {self.timeout_s:g} s "
                   "after it was cleared: this broker user may not publish the nodes' "
                   "retained topics (an ACL; docs/protocol.md, \"Retiring a node\")")
            self._retire_record(targets, reason, "failed", why)
            self.say(f"retire {text}: {why}")
            return EXIT_REJECTED
        # Those whose birth came back are not retired: "gpu[0001-0004] retired" was said of
        # nodes whose agents, still running (--force), published their births again.
        retired = [t for t in targets if t not in left]
        # As drain's and resume's progress (PROGRESS_GROUP_OVER): `retire 'gpu[0001-0512]'`
        # said 512 lines, one a node, before the sentence that says they are gone.
        for group in ([compress(retired)] if len(retired) > PROGRESS_GROUP_OVER else retired):
            self.say(f"{group} retired {by}")
        if left:
            # Cleared, but heard again: an agent still running published its birth anew.
            one = len(left) == 1
            back = (f"{compress(left)} published {'its birth' if one else 'their births'} "
                    "again after the clear: "
                    f"{'its agent still runs' if one else 'their agents still run'}")
            done = f"{compress(retired)} retired {by}; " if retired else ""
            self._retire_record(targets, reason, "failed", f"{done}{back}")
            self.say(f"retire {text}: {back}; stop {'it' if one else 'them'}, then retire "
                     f"{'it' if one else 'them'} again")
            return EXIT_REJECTED
        self._retire_record(targets, reason, "done", f"{text} retired {by}")
        self.say(f"retire {text}: the broker holds no birth, status or digest of "
                 f"{'it' if len(targets) == 1 else 'them'} now; the stores keep the history")
        return EXIT_DONE

    async def _clear(self, targets: list[str]) -> None:
        feed = self.session.feed
        assert feed is not None
        for node in targets:
            # The birth first: consoles and collectors forget the node on its empty birth, so
            # no collector publishes its digest again after the digest is cleared below.
            for kind in RETAINED_NODE_KINDS:
                await feed.publish(kind, node, b"", qos=1, retain=True)

    def _retire_record(self, targets: list[str], reason: str, outcome: str,
                       detail: str) -> None:
        now = self.clock()
        self.audit.write(AuditRecord(
            ts=now, who=self.operator, what="retire", targets=compress(targets),
            why=reason.strip(), outcome=outcome, request_id=new_request_id(now),
            cluster=self.cluster, detail=detail.strip().rstrip(".")))

    def known(self, targets: list[str]) -> None:
        unknown = [t for t in targets if t not in self.state.nodes]
        if unknown:
            # gpu42 typed for gpu0042 (a 3 a.m. run): name the node to type, not only the doubt.
            hint = did_you_mean(unknown, self.state.nodes) or "wrong --cluster or hostlist?"
            raise UnknownTargets(f"unknown node(s) {compress(unknown)}: no birth or status seen on "
                                 f"cluster '{self.cluster}' ({hint})",
                                 nothing_heard=not self.state.nodes)

    def known_job(self, job_id: str) -> None:
        why = job_refusal(self.state, job_id)
        if why and job_id in self.state.jobs:
            # Found, but pending or ended: no typo to look for, and no status still to wait for.
            raise UserError(why)
        if why:
            hint = ("is it running, and is --cluster right?" if not self.state.jobs
                    else "wrong --cluster or job id?")
            meant = unknown_job_hint(self.state, job_id)
            if meant:
                hint = meant if meant.startswith("did you mean") else f"{meant}; {hint}"
            raise UnknownTargets(f"{why} ({hint})", nothing_heard=not self.state.jobs)


def describe_op(req: Request) -> str:
    """``drain gpu[0001-0004]`` / ``restart job 4102``."""
    if req.op is CommandOp.RESTART_JOB:
        return f"restart job {req.job}"
    return f"{req.op.value} {req.target_text}"


def _audit(path: str | None, *, check: bool = True) -> AuditSink:
    audit = AuditLog(given_file(path, "--audit-log") if path else None)
    problem = audit.check() if check else ""
    if problem:
        raise UserError(f"{problem}; nothing was sent (give a writable --audit-log)")
    return audit


def run_drain(url: BrokerURL, cluster: str, hostlist: str, reason: str, *, now: bool,
              operator: str, audit_path: str | None, timeout_s: float, wait: bool,
              command_key: bytes | None = None, dry_run: bool = False) -> int:
    mode = DrainMode.NOW if now else DrainMode.FINISH
    # A dry run records nothing, so it answers whatever the audit log's state.
    audit = _audit(audit_path, check=not dry_run)

    def parse() -> list[str]:
        names = parse_targets(hostlist)
        if not reason.strip():
            raise UserError("a reason is required to drain (--reason TEXT)")
        return names

    # A dry run sends nothing by design: nothing to audit.
    targets = parse() if dry_run else checked(Attempt(CommandOp.DRAIN, hostlist, reason, mode),
                                              audit, operator, cluster, parse)
    run = CommandRun(url, cluster, operator, audit=audit, timeout_s=timeout_s,
                     command_key=command_key)

    def radius(r: CommandRun) -> BlastRadius:
        r.known(targets)
        return blast_radius(r.state, CommandOp.DRAIN, targets, r.clock(), mode, reason)

    def make(r: CommandRun) -> Request:
        r.show_radius(radius(r))
        if len(drained_for(r.state, targets, reason)) == len(targets):
            raise NothingToSend(f"drain {compress(targets)}: nothing sent: already drained "
                                "for this reason")
        return r.session.drain(targets, reason, mode)

    def needs() -> list[str]:
        if mode is not DrainMode.NOW:
            return targets
        # A drain --now requeues the targets' jobs: its radius names their other nodes that
        # the requeue may land back on (failed, throttled, the straggler: ``requeue_risks``),
        # which their telemetry alone tells. Waiting for the targets alone, such a node not
        # heard yet went unnamed.
        state = run.state
        scheduled = scheduled_jobs_by_node(state)
        return list(dict.fromkeys([*targets, *(
            n for t in targets if (st := state.nodes.get(t)) is not None
            for j in jobs_on(st, scheduled, state)
            if (job := state.jobs.get(j)) is not None for n in job.nodes)]))

    if dry_run:
        return asyncio.run(run.dry_run(radius, needs))
    return asyncio.run(run.run(make, Attempt(CommandOp.DRAIN, targets, reason, mode),
                               wait_done=wait, needs=needs))


def run_resume(url: BrokerURL, cluster: str, hostlist: str, *, reason: str, operator: str,
               audit_path: str | None, timeout_s: float,
               command_key: bytes | None = None, dry_run: bool = False) -> int:
    audit = _audit(audit_path, check=not dry_run)
    targets = (parse_targets(hostlist) if dry_run else
               checked(Attempt(CommandOp.RESUME, hostlist, reason), audit, operator, cluster,
                       lambda: parse_targets(hostlist)))
    run = CommandRun(url, cluster, operator, audit=audit, timeout_s=timeout_s,
                     command_key=command_key)

    def radius(r: CommandRun) -> BlastRadius:
        r.known(targets)
        return blast_radius(r.state, CommandOp.RESUME, targets, r.clock())

    def make(r: CommandRun) -> Request:
        # Not drained, or still failing its checks: said before sending, as the TUI's dialog.
        r.show_radius(radius(r))
        return r.session.resume(targets, reason)

    if dry_run:
        return asyncio.run(run.dry_run(radius, lambda: targets))
    return asyncio.run(run.run(make, Attempt(CommandOp.RESUME, targets, reason),
                               needs=lambda: targets))


def run_restart_job(url: BrokerURL, cluster: str, job_id: str, *, reason: str, operator: str,
                    audit_path: str | None, timeout_s: float,
                    command_key: bytes | None = None, dry_run: bool = False) -> int:
    audit = _audit(audit_path)

    def parse() -> None:
        if not reason.strip():
            raise UserError("a reason is required to restart a job (--reason TEXT)")

    # A dry run sends nothing by design: nothing to audit.
    if dry_run:
        parse()
    else:
        checked(Attempt(CommandOp.RESTART_JOB, job_id, reason), audit, operator, cluster, parse)
    run = CommandRun(url, cluster, operator, audit=audit, timeout_s=timeout_s,
                     command_key=command_key)

    def radius(r: CommandRun) -> BlastRadius:
        r.known_job(job_id)
        return job_blast_radius(r.state, job_id, r.clock())

    def make(r: CommandRun) -> Request:
        # What the requeue throws away (GPU-hours since the checkpoint), as the TUI's dialog
        # and 'drain' say it before sending.
        r.show_radius(radius(r))
        return r.session.restart_job(job_id, reason)

    def needs() -> list[str]:
        job = run.state.jobs.get(job_id)
        return list(job.nodes) if job is not None else []

    if dry_run:
        return asyncio.run(run.dry_run(radius, needs))
    return asyncio.run(run.run(make, Attempt(CommandOp.RESTART_JOB, job_id, reason),
                               needs=needs))


def run_retire(url: BrokerURL, cluster: str, hostlist: str, *, reason: str, force: bool,
               operator: str, audit_path: str | None, timeout_s: float,
               command_key: bytes | None = None) -> int:
    """``fleetdeck retire``: exit 0 retired, 2 refused (a bad hostlist, an unknown node, a
    node live now or one a job holds, without --force), 3 a birth still there after the
    clear (its agent published it again, or the broker dropped the clear: an ACL)."""
    audit = _audit(audit_path)
    try:
        targets = parse_targets(hostlist)
    except UserError as err:
        audit.write(AuditRecord(
            ts=time.time(), who=operator, what="retire", targets=hostlist, why=reason.strip(),
            outcome="refused", request_id=new_request_id(time.time()), cluster=cluster,
            detail=str(err).rstrip(".")))
        raise
    # Signed, its keyframe asks reach agents that obey only signed commands: it took --command-key
    # and sent them unsigned, each rejected in the agent's journal (a newcomer's run).
    run = CommandRun(url, cluster, operator, audit=audit, timeout_s=timeout_s,
                     command_key=command_key)
    return asyncio.run(run.retire(targets, reason, force=force))
