"""The console's live feed: receive through :mod:`fleetdeck.transport`, buffer, hand to ``Ingest``.

The transport's read loop only appends ``(topic, payload, rx_ts, qos, retain)`` to a bounded
buffer; a pump hands the buffer to ``Ingest.handle`` in slices of at most ``SLICE_S`` of work,
yielding to the event loop between them, so a burst never stalls keys or paint. Beyond
``MAX_PENDING`` the oldest telemetry is dropped (latest-value data: a newer sample of the node is
behind it) and counted; births, statuses, events, acks and job updates are never dropped there
(docs/architecture.md, "Transport"). Rendering happens on the UI's own tick.
"""

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from fleetdeck.brokerurl import BrokerURL
from fleetdeck.console.ingest import Ingest
from fleetdeck.protocol import codec, signing
from fleetdeck.protocol.messages import Command
from fleetdeck.protocol.topics import ROOT, Kind, subscriptions, topic_for
from fleetdeck.transport import Connection, MqttLink, TransportError, Will

__all__ = ["MAX_PENDING", "MAX_QUEUED_INCOMING", "Connection", "LiveFeed", "TransportError",
           "clusters_seen"]

log = logging.getLogger("fleetdeck.live")

MAX_PENDING = 20_000
"""Messages waiting for the ingest, at most, while telemetry can be shed (~10 KiB each: about
200 MiB; 1.2 s of a 16,384-node fleet at 1 Hz)."""
MAX_QUEUED_INCOMING = MAX_PENDING
"""The bound's name from the aiomqtt days (benchmarks size their bare aiomqtt subscriber by it)."""
HARD_FACTOR = 8
"""Past ``HARD_FACTOR * max_pending`` even non-telemetry goes, oldest first (a flood of events
from a broken or hostile publisher must not exhaust memory); agents re-send lost events when
asked (seq gaps)."""
SLICE_S = 0.008
"""Work handed to ingest per event-loop turn, at most (the loop must never stall > 50 ms)."""

_TELEMETRY_SUFFIX = "/" + Kind.TELEMETRY.value

Pending = tuple[str, bytes, float, int, bool]
"""(topic, payload, rx_ts, qos, retain)"""


class LiveFeed:
    def __init__(
        self,
        url: BrokerURL,
        ingest: Ingest,
        *,
        client_id: str,
        clock: Callable[[], float] = time.time,
        keepalive: int = 10,
        command_key: bytes | None = None,
        max_pending: int = MAX_PENDING,
        filters: Sequence[str] | None = None,
        will: Will | None = None,
    ) -> None:
        self.url = url
        self.ingest = ingest
        self.client_id = client_id
        self.clock = clock
        self.keepalive = keepalive
        self.command_key = command_key
        self.tap: Callable[[float, str, bytes, int, bool], None] | None = None
        """Sees every message handed to ingest (with its receive time), and every command sent
        (console recording)."""
        self.link = MqttLink(url, client_id,
                             subscriptions(ingest.cluster) if filters is None else filters,
                             self._received, keepalive=keepalive, clock=clock, will=will)
        self.max_pending = max_pending
        self.probe_topic: str | None = None
        """Where this console's test publish comes back (console/publish_probe.py): handed to
        ``on_probe``, never to ingest or a recording."""
        self.on_probe: Callable[[bytes], None] | None = None
        self._shed_at = max_pending
        self._shed_logged = float("-inf")
        self._pending: deque[Pending] = deque()
        self._wake = asyncio.Event()
        # Counters (the benchmarks and the header read them).
        self.received = 0
        """Messages the transport delivered, in total."""
        self.queue_hwm = 0
        """The most messages ever waiting for ingest at once."""
        self.dropped: dict[str, int] = {}
        """Messages shed from a full buffer, by kind ('telemetry'; 'other' only past
        HARD_FACTOR times the bound)."""
        self.handed = 0
        """Messages handed to ingest, in total."""
        self.last_handed: float | None = None
        """Clock time of the last hand-off to ingest."""
        self._own_prefix = f"{ROOT}/{ingest.cluster}/"
        self.status_retained_on = -1
        """The connection (its ``Connection.connacks``) on which a retained status (of a node,
        a job or the scheduler) last came, whatever it held: their filters are subscribed after
        the births', so a broker that cut this connection's burst there had sent every birth
        first (``RetainedBurst._note_burst_cut``; docs/reliability.md, "The retained burst").
        The retain flag tells a retained status from a live one (a 3.1.1 subscriber gets it
        set only on what its subscribe brought)."""
        self.jobs_retained_on = -1
        """The same of a retained job or scheduler status alone: a sharded collector
        subscribes to them in the one subscribe after every node's birth
        (``topics.shard_subscriptions``) and to its nodes' own topics only later, so one whose
        births the broker cut got none, and a node's status (of those later topics) says
        nothing of the births (``ShardRunner``'s ``cluster_nodes``)."""

    # --- state callers read ----------------------------------------------------------------

    @property
    def conn(self) -> Connection:
        return self.link.conn

    @property
    def first_error(self) -> str | None:
        return self.link.first_error

    @property
    def failed_connects(self) -> int:
        return self.link.failures

    def broker_heard_s(self) -> float | None:
        """Seconds since the broker last sent anything, its keepalive answers included."""
        return self.link.broker_heard_s()

    def ping(self) -> None:
        """Ask the broker for a sign of life now (``MqttLink.ping``)."""
        self.link.ping()

    @property
    def client(self) -> Any:
        """The transport's client while connected and subscribed, else None."""
        return self.link.client

    @property
    def queued(self) -> int:
        """Messages received and not yet handed to ingest."""
        return len(self._pending)

    @property
    def dropped_total(self) -> int:
        return sum(self.dropped.values())

    # --- receive ---------------------------------------------------------------------------

    def _received(self, topic: str, payload: bytes, qos: int, retain: bool) -> None:
        # In the transport's read loop: store and return, nothing else (module docstring).
        if topic == self.probe_topic and self.on_probe is not None:
            self.on_probe(payload)  # marks it heard: read as it arrives, not after a backlog
            return
        pending = self._pending
        if not pending:
            self._wake.set()
        if retain and topic.endswith("/status") and topic.startswith(self._own_prefix):
            # Only this cluster's: amqtt sends retained messages no filter asked for (another
            # cluster's statuses), which would hide a cut in the births (a review).
            # Here, not once handed: the connection it came on is the one now.
            self.status_retained_on = self.link.conn.connacks
            if not topic.startswith("node/", len(self._own_prefix)):
                self.jobs_retained_on = self.link.conn.connacks
        pending.append((topic, payload, self.clock(), qos, retain))
        self.received += 1
        n = len(pending)
        if n > self._shed_at:
            self._shed()
            n = len(self._pending)
        if n > self.queue_hwm:  # noqa: PLR1730 - a compare costs less than max() per message
            self.queue_hwm = n

    def _shed(self) -> None:
        """Drop the oldest telemetry down to 90 % of the bound (so this pass over the buffer
        runs once per tenth of the bound, not once per message); past ``HARD_FACTOR`` times the
        bound, the oldest of anything."""
        pending = self._pending
        excess = len(pending) - self.max_pending * 9 // 10
        kept: deque[Pending] = deque()
        dropped = 0
        for item in pending:
            if dropped < excess and item[0].endswith(_TELEMETRY_SUFFIX):
                dropped += 1
            else:
                kept.append(item)
        if dropped:
            self.dropped["telemetry"] = self.dropped.get("telemetry", 0) + dropped
        over = len(kept) - HARD_FACTOR * self.max_pending
        if over > 0:
            for _ in range(over):
                kept.popleft()
            self.dropped["other"] = self.dropped.get("other", 0) + over
        now = time.monotonic()
        if (dropped or over > 0) and now - self._shed_logged >= 10.0:
            # Once per 10 s at most: under sustained overload this runs several times a second.
            self._shed_logged = now
            log.warning("ingest is behind: %d messages waiting; dropped so far: %s",
                        len(kept), self.dropped)
        self._pending = kept
        # When what is left cannot be shed (not telemetry), the next pass waits for another
        # tenth of the bound: one pass per message would be quadratic.
        self._shed_at = max(self.max_pending, len(kept) + self.max_pending // 10)

    def hand(self, budget_s: float | None = None) -> int:
        """Hand pending messages to ingest, in arrival order, for at most ``budget_s`` of work
        (None: all of them); return how many. The pump calls it; so may a caller that runs
        ``link`` without the pump (tests, benchmarks)."""
        pending = self._pending
        if not pending:
            return 0
        ingest = self.ingest
        handle = ingest.handle
        tap = self.tap
        clock = time.perf_counter
        deadline = None if budget_s is None else clock() + budget_s
        popleft = pending.popleft
        n = 0
        try:
            while pending:
                topic, payload, rx_ts, qos, retain = popleft()
                n += 1
                if tap is not None:
                    tap(rx_ts, topic, payload, qos, retain)
                if retain:
                    # What a broker keeps may be older than what was heard live
                    # (``Ingest._replayed``).
                    ingest.retained = True
                    try:
                        handle(topic, payload, rx_ts)
                    finally:
                        ingest.retained = False
                else:
                    handle(topic, payload, rx_ts)
                if deadline is not None and clock() > deadline:
                    break
        finally:
            self.handed += n
            if len(pending) <= self.max_pending:
                self._shed_at = self.max_pending
            self.last_handed = self.clock()
        return n

    async def _pump(self) -> None:
        while True:
            if not self._pending:
                self._wake.clear()
                await self._wake.wait()
            self.hand(SLICE_S)
            await asyncio.sleep(0)

    async def run(self, stop: asyncio.Event | None = None, *, retry: bool = True) -> None:
        """Receive until ``stop`` is set. With ``retry=False`` the first failure raises
        :class:`TransportError`. What was received before the end is handed to ingest."""
        stop = stop or asyncio.Event()
        # Made here, not in __init__: an Event belongs to the loop that first waits on it.
        self._wake = asyncio.Event()
        if self._pending:
            self._wake.set()
        pump = asyncio.create_task(self._pump(), name="live-pump")
        link = asyncio.create_task(self.link.run(stop, retry=retry), name="live-link")
        try:
            await asyncio.wait({pump, link}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            # Also when we are cancelled (the app is closing): no orphan task may outlive us.
            for task in (pump, link):
                task.cancel()
            await asyncio.gather(pump, link, return_exceptions=True)
        self.hand(None)
        for task in (pump, link):
            if not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]

    # --- send ------------------------------------------------------------------------------

    async def send_command(self, kind: Kind, subject: str, cmd: Command) -> Command:
        """Sign (when a command key is configured) and publish a command; return what was sent.
        A command to a node comes here already stamped in the node's clock (its one caller,
        ``CommandOutbox._publish``, console/clock.py ``ClockWatch.on_node_clock``)."""
        if self.command_key is not None:
            cmd = signing.sign(cmd, self.command_key)
        payload = codec.encode(cmd)
        await self.publish(kind, subject, payload, qos=1)
        if self.tap is not None:
            self.tap(self.clock(), topic_for(self.ingest.cluster, kind, subject), payload, 1,
                     False)
        return cmd

    async def publish(self, kind: Kind, subject: str, payload: bytes, qos: int = 1,
                      retain: bool = False) -> None:
        """Publish (QoS 1: once the broker acknowledged it); :class:`TransportError` when not
        connected."""
        await self.link.publish(topic_for(self.ingest.cluster, kind, subject), payload, qos=qos,
                                retain=retain)


async def _read_retained(url: BrokerURL, client_id: str, topic_filter: str, listen_s: float,
                         take: Callable[[str, bytes], bool]) -> None:
    """Subscribe to ``topic_filter`` and hand each message to ``take`` (topic, payload) until
    it returns True or ``listen_s`` is over: a look at what the broker holds retained.

    Over the transport's gmqtt link (``MqttLink``), as every other read: aiomqtt's client,
    cancelled while connecting (a probe beside a watch that failed), raised CancelledError in
    its socket callback and asyncio printed a traceback after `status`'s sentence (a
    newcomer's scripts). Raises :class:`TransportError` when it cannot connect."""
    done = asyncio.Event()

    def sink(topic: str, payload: bytes, _qos: int, _retain: bool) -> None:
        if not done.is_set() and take(topic, payload):
            done.set()

    await listen_until(MqttLink(url, client_id, [topic_filter], sink, qos=0, probe=True),
                       done, listen_s)


async def listen_until(link: MqttLink, done: asyncio.Event, listen_s: float) -> None:
    """Run ``link`` (whose sink sets ``done``) until ``done`` or ``listen_s`` after its SUBACK,
    then end it: one look through a connection of its own (a retained read, the deaf check's
    fresh subscription, console/deaf_check.py). Raises :class:`TransportError` when it cannot
    connect."""
    stop = asyncio.Event()
    runner = asyncio.create_task(link.run(stop, retry=False))
    try:
        while not link.connected:  # connected means subscribed (MqttLink)
            if runner.done():
                runner.result()  # its TransportError
                return
            await asyncio.sleep(0.01)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), listen_s)
    finally:
        stop.set()
        if not link.connected and not runner.done():
            runner.cancel()
        with contextlib.suppress(TransportError, asyncio.CancelledError):
            await runner


async def clusters_seen(url: BrokerURL, client_id: str, listen_s: float = 1.0) -> list[str]:
    """Cluster names with a retained birth under the topic root (what a mistyped ``--cluster``
    probably meant)."""
    return sorted({c for c, _node in await retained_births(url, client_id, "+", listen_s)})


async def retained_births(url: BrokerURL, client_id: str, cluster: str = "+",
                          listen_s: float = 1.0) -> list[tuple[str, str]]:
    """(cluster, node) of every retained birth the broker holds under ``cluster`` ("+": any),
    sorted. An empty retained payload is a deletion (MQTT 3.1.1, 3.3.1.3), not a node."""
    seen: set[tuple[str, str]] = set()

    def take(topic: str, payload: bytes) -> bool:
        parts = topic.split("/")
        if payload and len(parts) == 6 and parts[3] == "node" and parts[5] == "birth":
            seen.add((parts[2][:64], parts[4][:64]))
        return False

    await _read_retained(url, client_id, f"{ROOT}/{cluster}/node/+/birth", listen_s, take)
    return sorted(seen)


async def broker_uptime_s(url: BrokerURL, client_id: str, listen_s: float = 0.5) -> float | None:
    """The broker's uptime from ``$SYS/broker/uptime`` (Mosquitto keeps it retained and
    refreshes it every ``sys_interval``, 10 s by default, so it may read up to that much low);
    None where the broker does not say (amqtt without its $SYS plugin) within ``listen_s``."""
    found: list[float] = []

    def take(_topic: str, payload: bytes) -> bool:
        head = payload.split(b" ", 1)[0]
        if head.isdigit():
            found.append(float(head))
        return bool(found)

    await _read_retained(url, client_id, "$SYS/broker/uptime", listen_s, take)
    return found[0] if found else None
