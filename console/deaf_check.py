"""A console that hears nothing from a broker that answers: is the fleet silent, or is this
console deaf? Only a second subscription can tell.

The broker's answer to the keepalive ping proves the broker alive, not that it delivers this
console's subscriptions. A 2026-12-07 drill's console (2,048 nodes, Mosquitto 2.0.11), its link
up and its pings answered, heard nothing for 490 s and its header said "the broker answers: the
fleet is silent" while ``fleetdeck status`` on the same broker read the fleet and a fresh
console got everything in seconds. Its own test publish (console/publish_probe.py) comes back
on its command subscription alone and says nothing of the fleet's topics; the ping's answer
says nothing of any subscription.

So, once the console has heard nothing for two of its agents' intervals while the broker
answers, it looks through a fresh connection subscribed to the same filters, for a while: a
live (not retained) message there means the broker delivers the fleet to others and not to
this console, whose connection is then dropped and made again (a new session subscribes
again; docs/architecture.md, "Transport"). Nothing there either is the fleet's silence, as far
as the broker can show it. Until the look ends, the console says it does not know which.

A session that runs long looks: the console, ``collect`` (a deaf collector would write every
node of its fleet stale into the store and its digests, with no header to say why; it looks
once as its fleet goes quiet, and again each ``LOOK_AGAIN_S`` only while its nodes stay online
and silent: their wills end the quiet), and ``drain``, ``resume`` and ``restart-job``, which
wait up to their ``--timeout`` (minutes, for a drain letting jobs finish) and, deaf, would
wait it out for answers that came. ``status`` (``may_look`` off) made its subscription for
its watch of seconds, as fresh as a look's: what it does not hear, a look would not either, so
its quiet is the fleet's silence at once, with no second connection (a ``--wait`` past
``LOOK_AGAIN_S`` of its connection looks as the console does). ``judge`` says the verdict
as the TUI's header and ``status --json``'s ``quiet_link`` give it (docs/protocol.md).
"""

import asyncio
import contextlib
import os
from dataclasses import dataclass

from fleetdeck.console.eventlog import Note
from fleetdeck.console.live import LiveFeed, listen_until
from fleetdeck.console.state import FleetState
from fleetdeck.transport import MqttLink

QUIET_LOOK_S = 5.0
"""Nothing heard for at least this long (and two agents' intervals) before a look."""
LOOK_MIN_S = 3.0
LOOK_MAX_S = 30.0
"""A look listens for two agents' intervals, within these bounds (the first live message ends
it sooner)."""
LOOK_AGAIN_S = 60.0
"""A fleet found silent is looked at again this often while the quiet lasts."""

LOOKING = "looking"
SILENT = "silent"
DEAF = "deaf"
HUNG = "broker_hung"
"""Not this check's: the broker does not answer pings either (the sight watch's mute)."""


@dataclass(frozen=True, slots=True)
class QuietLink:
    """A connected session that hears nothing, and why as far as it knows (``DeafCheck.judge``)."""

    since: float
    """When it last heard anything (unix seconds)."""
    quiet_s: float
    verdict: str
    """``LOOKING``, ``SILENT``, ``DEAF`` or ``HUNG``."""
    text: str
    """The header's words: "the broker answers, and a fresh subscription hears nothing either:
    the fleet is silent", "broker hung?"."""

    def as_json(self) -> dict[str, object]:
        """``quiet_link`` of ``status --json`` (docs/protocol.md)."""
        return {"since": round(self.since, 3), "quiet_s": round(self.quiet_s, 1),
                "verdict": self.verdict, "text": self.text}


def fleet_quiet_s(state: FleetState, now: float) -> float | None:
    """How long nothing was heard, once past ``QUIET_LOOK_S`` and two of the online agents'
    sample intervals (a digest's period on digests); None while things arrive or no node is
    online (nothing is expected then)."""
    last = state.last_update
    if last is None or now - last <= QUIET_LOOK_S:
        return None
    every = expected_every_s(state)
    quiet = now - last
    return quiet if every is not None and quiet > 2 * every else None


def expected_every_s(state: FleetState) -> float | None:
    """How often the online nodes are heard at the most: the shortest of their sample
    intervals, a digest's period on digests; None when no node is online."""
    return min((st.interval_s if st.digest is None else max(st.interval_s, st.digest.every_s)
                for st in state.nodes.values() if st.online), default=None)


async def live_heard(link: MqttLink, got: asyncio.Event, listen_s: float) -> bool:
    """Run ``link`` (whose sink sets ``got`` on a live message) until ``got`` or ``listen_s``
    after its SUBACK; whether a live message came. Raises TransportError when it cannot
    connect."""
    await listen_until(link, got, listen_s)
    return got.is_set()


class DeafCheck:
    """The look's state: driven by the session's tick (``watch``), read by the front ends
    (``judge``)."""

    def __init__(self, note: Note, *, may_look: bool = True) -> None:
        self._note = note
        self.may_look = may_look
        """Look through a fresh subscription of its own (a console, a collector, a command
        waiting for its answers); off for ``status``, whose own subscription is that fresh one
        while its connection is younger than ``LOOK_AGAIN_S`` (``_fresh``)."""
        self.verdict: str | None = None
        """None (things arrive, or no look yet), ``LOOKING``, ``SILENT`` or ``DEAF``."""
        self.looked_at = float("-inf")
        self.looks = 0
        """Looks started (each a connection of its own)."""
        self.deaf_found = 0
        """Times the broker was found delivering to a fresh subscription and not to this
        console (each one dropped the connection to make it again)."""
        self._task: asyncio.Task[bool] | None = None
        self._heard_at: float | None = None
        self._received_at = 0
        self._dropped_at = float("-inf")

    def judge(self, feed: LiveFeed, state: FleetState, now: float) -> QuietLink | None:
        """The link's quiet as the TUI's header and ``status --json`` say it: None while things
        arrive, the link is down or no node is online (nothing is expected then)."""
        quiet = fleet_quiet_s(state, now) if feed.conn.state == "connected" else None
        if quiet is None:
            return None
        since = now - quiet
        answered = feed.broker_heard_s()
        if answered is None:
            # No client behind the link's "connected": a run that ended (a watch stopped
            # from outside) left its state as it was. Nothing to judge on.
            return None
        if answered >= quiet - 1:
            # A broker that does not answer its pings either is hung (the sight watch's).
            return QuietLink(since, quiet, HUNG, "broker hung?")
        if self._fresh(feed, now):
            return QuietLink(since, quiet, SILENT,
                             "the broker answers, and this watch's own subscription, made for "
                             "it, hears nothing: the fleet is silent")
        return QuietLink(since, quiet, self.verdict or LOOKING, self.why())

    def _fresh(self, feed: LiveFeed, now: float) -> bool:
        """A session that may not look, on a connection younger than ``LOOK_AGAIN_S``: its
        own subscription is as fresh as a look's. Older (``status --wait`` goes up to a day),
        it is no fresher than the console's that went deaf, and it looks as that one does."""
        return not self.may_look and now - feed.conn.since < LOOK_AGAIN_S

    def why(self) -> str:
        """What the header says of a quiet link whose broker answers its pings."""
        if self.verdict == SILENT:
            return ("the broker answers, and a fresh subscription hears nothing either: "
                    "the fleet is silent")
        if self.verdict == DEAF:
            return ("the broker delivers the fleet to a fresh subscription, not to this "
                    "console: reconnecting")
        return "the broker answers pings; looking whether the fleet publishes"

    def watch(self, feed: LiveFeed, state: FleetState, now: float) -> None:
        """Each tick of a live session: judge a look that ended, and start one when the quiet
        calls for it; nothing where it may not look (``may_look``: ``judge`` says silent)."""
        if self._fresh(feed, now):
            return
        task = self._task
        if task is not None and task.done():
            self._task = None
            self._judge(task, feed, state, now)
        quiet = fleet_quiet_s(state, now) if feed.conn.state == "connected" else None
        if quiet is None:
            if self.verdict is not None and self._task is None and (
                    (state.last_update is not None and state.last_update > self.looked_at)
                    or feed.conn.state != "connected"):
                self.verdict = None  # heard again (or reconnecting): the look is over
            return
        answered = feed.broker_heard_s()
        if answered is None or answered >= quiet - 1 or self._task is not None:
            return  # a broker that does not answer is the sight watch's (hung)
        if now - self._dropped_at < LOOK_AGAIN_S:
            # A console still deaf after its connection was made again is looked at once a
            # LOOK_AGAIN_S, not dropped and made again at every tick.
            return
        if self.verdict in (None, DEAF) or now - self.looked_at >= LOOK_AGAIN_S:
            self._start(feed, state, now)

    async def close(self) -> None:
        """End a look in flight with the session: left to the loop's shutdown, a front end
        that closes its session and goes on (a test, an embedding tool) got "Task was
        destroyed but it is pending" and an open second connection (a review)."""
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def _start(self, feed: LiveFeed, state: FleetState, now: float) -> None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return  # a session ticked outside a loop (tests): nothing to look with
        # The digests' period, as the quiet was judged by: a look of 2 samples' intervals
        # (3 s) beside digests every 10 s heard none most times and said "the fleet is
        # silent" of a console its broker no longer delivered to (a review).
        listen = min(LOOK_MAX_S, max(LOOK_MIN_S, 2 * (expected_every_s(state) or LOOK_MIN_S)))
        got = asyncio.Event()

        def sink(topic: str, _payload: bytes, _qos: int, retain: bool) -> None:
            if not retain and topic != feed.probe_topic:
                got.set()  # retained ones come with any subscribe: they prove nothing live

        filters = [f for f in feed.link.filters if f != feed.probe_topic]
        client_id = f"fd-look-{os.getpid()}-{id(self):x}"[:64]
        link = MqttLink(feed.url, client_id, filters, sink, qos=0, probe=True)
        self._heard_at = state.last_update
        self._received_at = feed.received
        self.looked_at = now
        self.looks += 1
        self.verdict = LOOKING
        self._task = asyncio.ensure_future(live_heard(link, got, listen))

    def _judge(self, task: "asyncio.Task[bool]", feed: LiveFeed, state: FleetState,
               now: float) -> None:
        if task.cancelled() or task.exception() is not None:
            self.verdict = None  # could not look: nothing known either way
            return
        if state.last_update != self._heard_at:
            self.verdict = None  # this console heard something meanwhile
            return
        if not task.result() or feed.received != self._received_at:
            # The broker delivered to this console too (messages the state does not take:
            # malformed, another sender's ack): not deaf, and none of the fleet's own.
            self.verdict = SILENT
            return
        self.verdict = DEAF
        self.deaf_found += 1
        self._dropped_at = now
        quiet = now - state.last_update if state.last_update is not None else 0.0
        self._note(f"this console heard nothing for {quiet:.0f} s while the broker answered "
                   "its pings and delivered the fleet to a fresh subscription: its own "
                   "subscriptions no longer get anything; its connection is made again",
                   severity="warn", kind="connection", keep=True)
        feed.link.drop("the broker delivered nothing to this console's subscriptions")

