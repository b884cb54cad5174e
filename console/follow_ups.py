"""The session's follow-ups, planned each tick for its I/O pump to publish: commands not yet
acknowledged sent again, agents asked for the events they sent and this console missed, nodes
without a usable birth asked to re-publish it, v2 nodes asked for their keyframe, and events
that never come said (docs/architecture.md, "One console core").

``ConsoleSession`` owns one ``FollowUps``: its full passes call ``plan`` (a one-shot status,
which follows nothing up, ``plan_rebirths`` only), every tick ``plan_keyframes``; what they
plan goes on the session's outgoing queue (``Outgoing``), which the I/O pump publishes.
"""

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from fleetdeck.console.commands import CommandTracker, Request
from fleetdeck.console.eventlog import Note
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.live import LiveFeed
from fleetdeck.console.state import RESEND_MAX_ASKS, UNBORN_MAX, FleetState
from fleetdeck.hostlist import compress
from fleetdeck.protocol.messages import Command, CommandArgs, CommandOp
from fleetdeck.protocol.topics import Kind

log = logging.getLogger("fleetdeck.session")

REBIRTH_EVERY_S = 30.0
"""Ask one node to re-publish its birth and status at most this often."""
RESENDS_PER_TICK = 64
"""Event re-send requests per tick at most: after a restart thousands of nodes may be behind,
and each request makes an agent re-publish up to its whole outbox."""
KEYFRAME_ASKS_PER_TICK = 512
"""v2 keyframe requests per tick at most: a console started late asks every node once; the
rest wait a tick (or their periodic keyframe)."""

Problem = Callable[[str, str, float], None]
"""Says a problem of the console's own, what, detail and since when
(``ConsoleSession._problem``)."""


@dataclass
class Outgoing:
    """A command on the session's outgoing queue, for its I/O pump to publish: a request's
    (``request``, and ``progress_index`` its target's) or one no request waits on (a re-send,
    an ask)."""

    kind: Kind
    subject: str
    cmd: Command
    request: Request | None = None
    progress_index: int = -1


class Since(Protocol):
    """A problem of the console's own as the follow-ups read it (``SessionProblem``)."""

    since: float


class Problems(Protocol):
    """The session's problems as the follow-ups read and clear them
    (``ConsoleSession.problems``)."""

    def get(self, what: str, /) -> Since | None: ...

    def pop(self, what: str, default: None, /) -> object: ...


class FollowUpCounters(Protocol):
    """The session's counters the follow-ups move (``SessionCounters``)."""

    command_retries: int
    resend_requests: int
    rebirth_requests: int
    events_lost: int


class FollowUps:
    """What the session asks of its nodes on its own, and when it last asked each node for its
    birth."""

    def __init__(self, cluster: str, operator: str, tracker: CommandTracker,
                 outgoing: deque[Outgoing], counters: FollowUpCounters, note: Note,
                 problem: Problem, problems: Problems, *, digests: bool) -> None:
        self._cluster = cluster
        self._operator = operator
        self._tracker = tracker
        self._outgoing = outgoing
        """The session's queue for its I/O pump: what is planned here goes on its end."""
        self._counters = counters
        self._note = note
        self._problem = problem
        self._problems = problems
        self._digests = digests
        self.rebirth_asked: dict[str, float] = {}
        """Node -> when it was last asked for its birth (``REBIRTH_EVERY_S``; the session's
        ``RetainedBurst.in_burst`` reads it too)."""
        self.asked_unborn: set[str] = set()
        """The nodes of ``rebirth_asked`` asked because they were heard with no birth at all
        (``FleetState.rebirth_wanted``), not for a birth or status that came and was refused:
        only those can be births a cut retained burst dropped (``status``'s
        ``nodes_learned_since``)."""
        self._rebirths_this_tick = 0

    def plan(self, now: float, state: FleetState, ingest: Ingest, feed: LiveFeed | None,
             sends: bool) -> None:
        """Re-send due commands, ask for missed events and births, say events lost and
        unheard. ``sends``: the session has a feed or a publisher (else nothing is asked)."""
        if not sends:
            return
        queued = {o.cmd.cmd_id for o in self._outgoing}
        for kind, subject, cmd, progress in self._tracker.due_for_retry(now):
            if cmd.cmd_id in queued:
                continue
            progress.sent_at = now  # not again until the next retry period
            self._outgoing.append(Outgoing(kind, subject, cmd))
            self._counters.command_retries += 1
        # On digests the collectors ask their nodes for missed events (a pass over 65,536
        # nodes every tick here would be for nothing: digest nodes carry no event counter).
        asks = [] if self._digests else state.missing_events(now)
        for node, since in asks[:RESENDS_PER_TICK]:
            stamp = int(now * 1000)
            self._outgoing.append(Outgoing(Kind.CMD, node, Command(
                cmd_id=f"resend-{node}-{since}-{stamp}", op=CommandOp.RESEND_EVENTS,
                target=node, args=CommandArgs(since_seq=since), issued_by=self._operator,
                issued_at=stamp, expires_at=stamp + 30_000)))
            self._counters.resend_requests += 1
        self.plan_rebirths(now, state, ingest)
        for node, lost in state.take_lost_events():
            self._counters.events_lost += lost
            self._note(f"{node}: {lost} event(s) lost (no longer in the agent's outbox)",
                       severity="warn", nodes=(node,), kind="events_lost")
        self._events_unheard(now, state, feed)

    def _events_unheard(self, now: float, state: FleetState, feed: LiveFeed | None) -> None:
        """Say once, as a problem of the console's own, that events do not reach it; clear it
        when one does. Telemetry and statuses came, so the overview looked whole while the
        events view held only the console's own lines (docs/security.md)."""
        unheard, state.unheard_events = state.unheard_events, []
        problem = self._problems.get("events")
        if problem is not None and state.event_heard_at is not None \
                and state.event_heard_at > problem.since:
            self._problems.pop("events", None)
            self._note("node events reach this console again", kind="events_lost", keep=True)
            log.warning("node events reach this console again")
            problem = None
        if not unheard:
            return
        nodes = tuple(sorted({node for node, _n, _s in unheard}))
        count = sum(n for _node, n, _s in unheard)
        self._counters.events_lost += count
        since = min(s for _node, _n, s in unheard)
        user = feed.url.username if feed is not None else None
        who = f"broker user '{user}'" if user else "this console's broker user"
        text = (f"{count} event(s) of {compress(list(nodes))} never reached this console, "
                f"asked for again {RESEND_MAX_ASKS} times, and no event of any node has come "
                f"since {time.strftime('%H:%M:%S', time.localtime(since))}: the broker most "
                f"likely does not deliver node/+/event to {who} (its ACL must let it read "
                f"fleetdeck/v1/{self._cluster}/node/+/event)")
        self._problem("events", text, now)
        self._note(text, severity="error", nodes=nodes, kind="events_lost",
                   keep=problem is None)
        if problem is None:
            log.warning("%s", text)

    def plan_keyframes(self, now: float, ingest: Ingest, sends: bool) -> None:
        # v2 deltas need their keyframe (docs/protocol.md). Read-only and throttled per node by
        # the ingest, so even a one-shot status (follow_up off) asks, or v2 nodes would stay
        # blank until their next periodic keyframe.
        wanted = ingest.keyframe_wanted
        if not sends:
            wanted.clear()
            return
        for node in list(wanted)[:KEYFRAME_ASKS_PER_TICK]:
            stamp = int(now * 1000)
            self._outgoing.append(Outgoing(Kind.CMD, node, Command(
                cmd_id=f"keyframe-{node}-{stamp}", op=CommandOp.KEYFRAME, target=node,
                args=CommandArgs(reason=wanted.pop(node)), issued_by=self._operator,
                issued_at=stamp, expires_at=stamp + 30_000)))

    def plan_rebirths(self, now: float, state: FleetState, ingest: Ingest) -> None:
        for wanted in (state.rebirth_wanted, ingest.rebirth_wanted):
            asked = self.rebirth_asked
            for node in list(wanted):
                if self._rebirths_this_tick >= RESENDS_PER_TICK:
                    break  # the rest stay wanted for the next ticks
                if now - asked.get(node, -1e18) < REBIRTH_EVERY_S:
                    # Still wanted once the period is over: dropped here, a second bad birth
                    # within 30 s of the first was never asked for again (an SRE drill).
                    continue
                why = wanted.pop(node)
                asked[node] = now
                if wanted is state.rebirth_wanted:
                    self.asked_unborn.add(node)
                self._rebirths_this_tick += 1
                stamp = int(now * 1000)
                self._outgoing.append(Outgoing(Kind.CMD, node, Command(
                    cmd_id=f"rebirth-{node}-{stamp}", op=CommandOp.REBIRTH, target=node,
                    args=CommandArgs(reason=why), issued_by=self._operator, issued_at=stamp,
                    expires_at=stamp + 30_000)))
                self._counters.rebirth_requests += 1
        self._rebirths_this_tick = 0
        if len(self.rebirth_asked) > 2 * UNBORN_MAX:
            for node in [n for n, t in self.rebirth_asked.items() if now - t > REBIRTH_EVERY_S]:
                del self.rebirth_asked[node]
                self.asked_unborn.discard(node)

