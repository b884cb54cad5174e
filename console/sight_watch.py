"""What the console can see of its fleet, and when it cannot: its broker lost, hung or
silent, the process itself stopped (SIGSTOP, a suspended VM, a starved host), or this host's
wall clock stepped. While it cannot, no node goes stale for the console's own silence
(``FleetState.lose_sight`` / ``regain_sight``), and the timeline says why (docs/architecture.md).

``ConsoleSession`` owns one ``SightWatch``; each tick of a live session calls ``watch``.
"""

import time
from collections.abc import Callable

from fleetdeck.console.deaf_check import DeafCheck
from fleetdeck.console.eventlog import Note
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.live import LiveFeed
from fleetdeck.console.state import AGENT_RECONNECT_S, FleetState

STALL_BLIND_S = 5.0
"""A live session that did not tick for this long (ticks are 0.5 s apart) did not run."""
STALL_GRACE_S = 5.0
"""After such a gap, the time it takes to read what queued up meanwhile."""
CLOCK_STEP_S = 2.0
"""The wall clock moved this much more (or less) than the monotonic one between two ticks: it
was stepped (NTP, ``date -s``), not the process stopped (both move then)."""
_BOOTTIME: int | None = getattr(time, "CLOCK_BOOTTIME", None)


def host_steady() -> float:
    """The clock beside the wall clock that tells a step from a stop: one that never steps and
    counts the time the host slept. Linux's ``time.monotonic`` stops while the host is
    suspended: a laptop closed for an hour read "this host's clock was stepped forward by
    3600 s"; ``CLOCK_BOOTTIME`` moves on with the wall clock through a sleep, as through a
    SIGSTOP, and is ``time.monotonic`` otherwise."""
    if _BOOTTIME is not None:
        return time.clock_gettime(_BOOTTIME)
    return time.monotonic()


MUTE_AFTER_KEEPALIVES = 1.5
"""Connected, and nothing from the broker (not even a ping's answer) for this many keepalives:
it is hung, and the console blind (``SightWatch.watch``)."""
QUIET_PING_S = 1.0
"""A broker that has sent nothing for this long is pinged (at most this often): its answer
proves it alive, so a silent node reads stale at most about this much later than it would."""
QUIET_END_S = 3.0
"""A timed watch ending with nothing from the broker for this long (its ping at
``QUIET_PING_S`` unanswered for 2 s) ends cut off from it (``SightWatch.quiet_at_end``)."""


class SightWatch:
    """When the session last ticked, by the wall clock and the steady one, and what it last
    knew of its broker."""

    def __init__(self, note: Note, steady: Callable[[], float] | None, *,
                 may_look: bool = True) -> None:
        self._note = note
        self._pinged_at = float("-inf")
        """When the quiet broker was last pinged (``watch``, ``QUIET_PING_S``)."""
        self._ticked_at: float | None = None
        """When the live session last ticked (a long gap: it did not run, ``watch``)."""
        self._steady = steady
        """The clock that never steps, beside a real wall clock (an injected one, a test's,
        has none unless given): tells a stepped wall clock from a process that did not run."""
        self._ticked_steady: float | None = None
        self._resumed_at: float | None = None
        """When this console last ran again after not running (``watch``): the broker's
        silence counts from then, as the nodes' does."""
        self._was_up = False
        self._mute_connects: int | None = None
        """The link's ``connects`` when sight was lost to a broker that stopped answering,
        its link up (hung); None after a lost link: the same link still up at the regain is
        a broker answering again, not a connection back."""
        """The feed has been connected once (a broker lost after that blinds the console)."""
        self.deaf = DeafCheck(note, may_look=may_look)
        """Whether a quiet link whose broker answers is the fleet's silence or this console's
        deafness (console/deaf_check.py; ``may_look`` off: ``status``, whose own subscription,
        made for its watch of seconds, is as fresh as a look's)."""

    def clock_stepped(self, state: FleetState, ingest: Ingest, now: float, step: float) -> None:
        """This host's wall clock jumped by ``step`` s between two ticks: what was measured
        against the old one (each node's usual delay, its clock offset) starts again, and the
        timeline says why the times around it do not follow on."""
        ingest.clock_stepped()
        state.clocks.stepped(now, step)
        # Moments of the old clock measured against the new one: a step back of 10 min after
        # a resume read the broker's silence "0 s", and pinged it never, for 10 min; a broker
        # hung then was not said hung until its link dropped.
        if self._resumed_at is not None:
            self._resumed_at += step
        self._pinged_at += step
        way = "forward" if step > 0 else "back"
        self._note(f"this host's clock was stepped {way} by {abs(step):.0f} s (NTP, or set by "
                   "hand): times before it are of the old clock; delays and node clock offsets "
                   "are measured again from now", severity="warn", kind="connection", keep=True)

    def watch(self, feed: LiveFeed, state: FleetState, ingest: Ingest, now: float,
              tick_s: float) -> None:
        """Tell the fleet state when the console loses and regains the broker: while it is
        cut off (and until the agents had time to reconnect), no node goes stale for the
        console's own silence, so no rack looks dark and no agent looks dead for it."""
        last, self._ticked_at = self._ticked_at, now
        steady = self._steady() if self._steady is not None else None
        last_steady, self._ticked_steady = self._ticked_steady, steady
        gap = None if last is None else now - last
        if last is not None and gap is not None and steady is not None and last_steady is not None:
            ran = steady - last_steady
            if abs(gap - ran) > CLOCK_STEP_S:
                self.clock_stepped(state, ingest, now, gap - ran)
                # Only the time that passed counts as not running: a step of +7 min read
                # "this console did not run for 421 s" (a 2026-12-07 drill). A step forward
                # makes every node's last word look that much older: the span it skipped is
                # not the nodes' silence, as a stop's is not.
                stalled = ran > max(STALL_BLIND_S, 4 * tick_s)
                if stalled or gap > ran:
                    state.lose_sight(last if gap > ran else now - ran,
                                     f"this console did not run for {ran:.0f} s" if stalled
                                     else "this host's clock was stepped forward")
                    state.regain_sight(now, STALL_GRACE_S)
                if stalled:
                    self._resumed_at = now
                    self._note(f"this console did not run for {ran:.0f} s (stopped, suspended "
                               "or starved of CPU): no node is judged stale for that time",
                               severity="warn", kind="connection", keep=True)
                gap = None
        if last is not None and gap is not None and gap > max(STALL_BLIND_S, 4 * tick_s):
            # This process did not run (SIGSTOP, a suspended VM, a starved host): what the
            # nodes sent meanwhile waits in the socket, unread. Their silence is ours; a
            # collector resumed after 33 s published every node stale (a scale-out audit).
            state.lose_sight(last, f"this console did not run for {now - last:.0f} s")
            state.regain_sight(now, STALL_GRACE_S)
            self._resumed_at = now
            self._note(f"this console did not run for {now - last:.0f} s (stopped, suspended "
                       "or starved of CPU): no node is judged stale for that time",
                       severity="warn", kind="connection", keep=True)
        if feed.conn.connects and not self._was_up:
            # Up since the last tick, connected or not now: a connection lost before a tick
            # saw it (a broker gone within a tick of the SUBACK) is a loss all the same, or
            # ``status`` read the fleet it then could not see as healthy (exit 0, not 3).
            state.start_hearing(now)
            self._was_up = True
        # Connected, but the broker has sent nothing, not even an answer to the keepalive's
        # ping, for a keepalive: hung (SIGSTOP). The link stays up until twice that, and every
        # node read stale and "8 racks fell silent: the network between the fleet and the
        # broker" meanwhile (a drill). Blind from its last word, as a lost link is.
        # gmqtt pings once nothing has come for 0.8 of the keepalive: on a quiet, healthy link
        # the broker's answer comes about once a keepalive, a tick late on a busy loop. Half
        # a keepalive more is a ping unanswered (gmqtt drops the link at twice it).
        heard = feed.broker_heard_s() if feed.conn.state == "connected" else None
        if heard is not None and self._resumed_at is not None:
            # Not before this console ran again: what the broker sent meanwhile waits unread
            # in the socket. A console SIGSTOPped 28 s said "broker connection lost (the
            # broker has not answered for 28 s (hung?))" the tick it resumed, then "back
            # after 29 s", beside its own "did not run for 28 s" (2026-12-07 drill).
            heard = min(heard, max(0.0, now - self._resumed_at))
        mute = heard is not None and heard > MUTE_AFTER_KEEPALIVES * feed.keepalive
        # Until then, a quiet broker is asked for a sign of life at once, and a node's silence
        # counts only up to its last word (``FleetState.broker_word_at``): one SIGSTOPped
        # 20 s had every node written stale 2 s in, and back when the mute above fired.
        state.broker_word_at = None if heard is None else now - heard
        if heard is not None and heard >= QUIET_PING_S and now - self._pinged_at >= QUIET_PING_S:
            self._pinged_at = now
            feed.ping()
        if feed.conn.state == "connected" and not mute:
            if state.blind is not None and state.blind[1] is None:
                # This outage's length: the second of two outages read "back after 32 s"
                # where it had lasted 3 (an SRE drill).
                since = state.outage_start()
                state.regain_sight(now)
                back = ("the broker answers again" if self._mute_connects == feed.conn.connects
                        else "broker connection back")
                self._mute_connects = None
                self._note(f"{back} after {now - since:.0f} s; a node not heard "
                           f"from within {AGENT_RECONNECT_S:.0f} s (the agents' reconnect "
                           "back-off) goes stale", severity="info", kind="connection",
                           keep=True)
        elif self._was_up and (state.blind is None or state.blind[1] is not None):
            if mute and heard is not None:
                why = f"the broker has not answered for {heard:.0f} s (hung?)"
                state.lose_sight(now - heard, why)  # its outage began with its last word
                # Its link is up: "broker connection lost" read in the timeline under a header
                # saying "connected, nothing heard for 17 s (broker hung?)" (a review).
                lost = f"{why}, its link still up"
                self._mute_connects = feed.conn.connects
            else:
                why = feed.conn.why
                state.lose_sight(now)
                lost = f"broker connection lost ({why})"
                self._mute_connects = None
            self._note(f"{lost}: no "
                       "data; verdicts stay as they were and no node goes stale until the "
                       "broker and its agents are back", severity="warn", kind="connection",
                       keep=True)
        self.deaf.watch(feed, state, now)

    def quiet_at_end(self, feed: LiveFeed, state: FleetState, now: float) -> None:
        """A timed watch (``status``) that ends with the broker silent past a ping's answer
        (``QUIET_END_S``) ends cut off: a broker SIGSTOPped 3 s into a 10 s watch left every
        verdict as of its last word, said as the fleet now, exit 0 (a drill; the keepalive's
        mute comes at 15 s). Blind from its last word, as a hung broker is."""
        if feed.conn.state != "connected" or state.blind is not None:
            return
        heard = feed.broker_heard_s()
        if heard is None or heard <= QUIET_END_S:
            return
        why = f"the broker has not answered for {heard:.0f} s (hung?)"
        state.lose_sight(now - heard, why)
        self._note(f"{why}, its link still up: no data; verdicts stay as they were",
                   severity="warn", kind="connection", keep=True)
