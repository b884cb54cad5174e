"""The console's MQTT connection for its live receive path: the one place that knows the client
library (gmqtt; why in docs/architecture.md, "Transport").

gmqtt is asyncio-native, reads the socket 64 KiB at a time and calls ``on_message`` inline in its
read loop, which is what makes it cheap per message. Three of its traits are handled here, so no
caller has to know them:

- It reconnects by itself (fixed delay, same client). :class:`MqttLink` owns reconnecting
  instead: a fresh client per attempt and a jittered, growing back-off, the state of which
  callers read from :attr:`MqttLink.conn`.
- It does not subscribe again after a reconnect: every connection subscribes in ``on_connect``,
  and counts as connected only once the broker's SUBACK arrived (a message published before it
  would not reach us).
- ``on_message`` runs inside the read loop: the ``sink`` given here must only store what it gets
  (no decoding), or the socket stops being read while it works.
"""

import asyncio
import contextlib
import logging
import random
import ssl
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import gmqtt
from gmqtt.mqtt.constants import MQTTv311
from gmqtt.mqtt.handler import MQTTConnectError
from gmqtt.storage import PersistentStorage

from fleetdeck.brokerurl import BrokerURL, describe_mqtt_error, tls_context
from fleetdeck.retry_said import RetrySaid

log = logging.getLogger("fleetdeck.transport")
LINK_STATE = {"link_state": True}
"""``extra`` of a record that says the broker connection was lost or came back: a front end
that shows the connection's state on screen need not show it again (the TUI's header)."""

if logging.getLogger("gmqtt").level == logging.NOTSET:
    # gmqtt logs every lost connection at WARNING with a traceback; MqttLink says it in one line
    # (Connection.detail and its own retry warning), so only the library's errors are kept.
    logging.getLogger("gmqtt").setLevel(logging.ERROR)



def _drop_connack_refusals(record: logging.LogRecord) -> bool:
    """gmqtt logs a refused CONNACK (a wrong password: "CONNACK: 0x5", "CONNACK 0x5 is
    permanent, not reconnecting", "not reconnecting after a permanent CONNACK refusal") as two
    or three WARNING and ERROR lines per attempt. MqttLink says the same in one sentence
    (``describe_mqtt_error``: "refused the credentials …", the TUI's header) and reconnects by
    itself, so a console given a wrong password showed a library ERROR popup and filled its
    log with them every 2 s (a drill). Its other records (unexpected errors) are kept."""
    msg = record.msg if isinstance(record.msg, str) else ""
    return not (msg.startswith("[MqttPackageHandler] CONNACK")
                or "permanent CONNACK refusal" in msg)


# On the logger, not a handler: whichever handler a front end installs (stderr, console.log,
# the TUI's notices) never sees them.
logging.getLogger("gmqtt.mqtt.handler").addFilter(_drop_connack_refusals)

Will = tuple[str, bytes, int, bool]
"""``(topic, payload, qos, retain)``: what the broker publishes when the connection dies."""

Sink = Callable[[str, bytes, int, bool], None]
"""``sink(topic, payload, qos, retain)``: called in the read loop for every message."""

T = TypeVar("T")

CONNECT_TIMEOUT_S = 10.0
"""CONNACK and SUBACK within this, or the attempt failed (a hung or wrong broker)."""
PUBLISH_TIMEOUT_S = 10.0
"""A QoS 1 publish not acknowledged within this raises (the caller retries)."""
MAX_BACKOFF_S = 10.0
INTERACTIVE_BACKOFF_S = 2.0
"""The cap for a console someone is looking at (``MqttLink.max_backoff_s``): one client, so
no herd to spread, and at 10 s its header said "disconnected" 8 s after the broker was back
(an SRE drill). Agents and collectors keep ``MAX_BACKOFF_S``."""
SUBSCRIBE_CHUNK = 256
"""Filters per SUBSCRIBE packet (a sharded collector has one per node it owns)."""


class TransportError(ConnectionError):
    """The broker cannot be reached, refused us, did not answer, or the connection dropped.

    A ``ConnectionError`` so that callers that already treat socket errors as "not connected
    now" (the session's publish pump) handle it without knowing the library."""


@dataclass
class Connection:
    state: str = "connecting"
    """connecting | connected | disconnected"""
    detail: str = ""
    since: float = 0.0
    connects: int = 0
    connacks: int = 0
    """CONNACKs the broker sent: a broker that accepts the connection and then never answers
    the SUBSCRIBE (``connects`` stays 0) is not one that never answered at all."""

    @property
    def why(self) -> str:
        """``detail`` (a sentence, ``describe_mqtt_error``'s) to go inside parentheses, or the
        state: "(… (is it running?).)" read as a typo in the drain dialog (a 3 a.m. drive)."""
        return self.detail.rstrip(". ") or self.state


def backoff_s(attempt: int, cap: float = MAX_BACKOFF_S) -> float:
    """Jittered exponential back-off: 0.5-1 s after the first failure, at most ``cap``; the
    jitter keeps a fleet of consoles and collectors from reconnecting in step after a broker
    restart."""
    return min(cap, 0.5 * 2.0 ** min(attempt, 6)) * random.uniform(0.5, 1.0)


class _Inflight(PersistentStorage):  # type: ignore[misc]  # gmqtt ships no type information
    """gmqtt's store of unacknowledged QoS 1 publishes, plus a future per packet id so that
    :meth:`MqttLink.publish` can wait for its PUBACK (gmqtt's own publish returns at once)."""

    def __init__(self) -> None:
        super().__init__()
        self.last_mid: int | None = None
        self.acks: dict[int, asyncio.Future[None]] = {}

    def push_message(self, mid: int, raw_package: bytes) -> None:
        super().push_message(mid, raw_package)
        self.last_mid = mid

    def remove_message_by_mid(self, mid: int) -> None:
        super().remove_message_by_mid(mid)
        fut = self.acks.pop(mid, None)
        if fut is not None and not fut.done():
            fut.set_result(None)

    def fail_all(self, err: Exception) -> None:
        acks, self.acks = self.acks, {}
        for fut in acks.values():
            if not fut.done():
                fut.set_exception(err)


class _Client(gmqtt.Client):  # type: ignore[misc]  # gmqtt ships no type information
    async def reconnect(self, delay: bool = False) -> None:
        # gmqtt calls this after any loss or refusal; MqttLink owns reconnecting (a fresh
        # client per attempt, jittered back-off), so the library's own retry does nothing.
        return None


class MqttLink:
    """One logical connection to the broker: subscribe to ``filters`` on every connect, hand
    every message to ``sink``, reconnect until stopped, publish with QoS 1."""

    def __init__(
        self,
        url: BrokerURL,
        client_id: str,
        filters: Sequence[str],
        sink: Sink,
        *,
        keepalive: int = 10,
        clean_session: bool = True,
        qos: int = 1,
        clock: Callable[[], float] = time.time,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        will: Will | None = None,
        probe: bool = False,
    ) -> None:
        self.url = url
        self.will = will
        self.client_id = client_id
        self.filters = list(filters)
        self.sink = sink
        self.keepalive = keepalive
        self.clean_session = clean_session
        self.qos = qos
        self.clock = clock
        self.connect_timeout_s = connect_timeout_s
        self.max_backoff_s = MAX_BACKOFF_S
        self.probe = probe
        """A look at what the broker holds (``console.live``): a refused subscription (an ACL on
        ``$SYS``) is an empty answer, not a warning on every ``status``."""
        self.conn = Connection(since=clock())
        self.first_error: str | None = None
        """The first failure's sentence (one-shot commands report it and give up)."""
        self.failures = 0
        """Connection attempts that failed (a one-shot caller may give a transient one a
        second try: ``console/cli/status.py``)."""
        self.client: Any = None
        """The current gmqtt client while connected and subscribed, else None."""
        self._inflight: _Inflight | None = None
        self._filter_set = set(self.filters)
        self._ping_missing_said = False
        self.say_first = False
        """Log the first failed connect too: a long-running caller (``collect``) has no one
        else to say it, and its log was silent for the back-off's first second or two while
        a one-shot command reports that failure itself (``first_error``)."""
        self._retry_said = RetrySaid()
        self._lost: asyncio.Event | None = None
        self._drop_why = ""

    @property
    def connected(self) -> bool:
        return self.client is not None

    def broker_heard_s(self) -> float | None:
        """Seconds since the broker last sent anything on this link, its keepalive answers
        (PINGRESP) included; None when not connected. gmqtt pings after 0.8 of the keepalive
        without traffic, so a link with nothing to deliver still hears the broker then: a
        silent fleet and a hung broker (no answer) tell apart. gmqtt keeps the time in its
        connection's ``_last_data_in`` (monotonic), which it has no public name for."""
        conn = getattr(self.client, "_connection", None)
        last = getattr(conn, "_last_data_in", None)
        return None if not isinstance(last, float) else max(0.0, time.monotonic() - last)

    def ping(self) -> None:
        """Ask the broker for a sign of life now (PINGREQ), where gmqtt would wait for 0.8 of
        the keepalive: its answer moves ``broker_heard_s``. Nothing when not connected."""
        conn = getattr(self.client, "_connection", None)
        if conn is None:
            return
        # gmqtt has no public ping: its connection's own (pinned by tests/transport/test_ping.py).
        send = getattr(conn, "_send_ping_request", None)
        if send is None:
            if not self._ping_missing_said:
                self._ping_missing_said = True
                log.warning("this gmqtt has no ping to send (_send_ping_request): on a quiet "
                            "broker a dead node reads stale only at gmqtt's own keepalive ping")
            return
        send()

    def drop(self, why: str) -> None:
        """End the connection now; ``run`` makes a new one, which subscribes again (a broker
        that answers pings and no longer delivers to this client: console/deaf_check.py)."""
        if self._lost is not None:
            self._drop_why = why
            self._lost.set()

    def subscribe(self, filters: Sequence[str]) -> None:
        """Add filters: sent now when connected (the broker then delivers their retained
        messages), and on every later connect. No wait for the SUBACK: a sharded collector
        adds thousands of nodes at once and needs none of them acknowledged one by one."""
        new = [f for f in filters if f not in self._filter_set]
        if not new:
            return
        self.filters.extend(new)
        self._filter_set.update(new)
        client = self.client
        if client is not None:
            for i in range(0, len(new), SUBSCRIBE_CHUNK):
                client.subscribe([gmqtt.Subscription(f, qos=self.qos)
                                  for f in new[i:i + SUBSCRIBE_CHUNK]])

    def unsubscribe(self, filters: Sequence[str]) -> None:
        gone = [f for f in filters if f in self._filter_set]
        if not gone:
            return
        self._filter_set.difference_update(gone)
        self.filters = [f for f in self.filters if f in self._filter_set]
        client = self.client
        if client is not None:
            for i in range(0, len(gone), SUBSCRIBE_CHUNK):
                client.unsubscribe(gone[i:i + SUBSCRIBE_CHUNK])

    def _catch_up(self, client: Any, sent: list[str]) -> None:
        """Filters added or removed between CONNECT and SUBACK (no client to send them to
        then): send the difference now."""
        was = set(sent)
        added = [f for f in self.filters if f not in was]
        removed = [f for f in sent if f not in self._filter_set]
        for i in range(0, len(added), SUBSCRIBE_CHUNK):
            client.subscribe([gmqtt.Subscription(f, qos=self.qos)
                              for f in added[i:i + SUBSCRIBE_CHUNK]])
        for i in range(0, len(removed), SUBSCRIBE_CHUNK):
            client.unsubscribe(removed[i:i + SUBSCRIBE_CHUNK])

    def _set(self, state: str, detail: str = "") -> None:
        if state != self.conn.state or detail != self.conn.detail:
            self.conn.state, self.conn.detail, self.conn.since = state, detail, self.clock()

    async def run(self, stop: asyncio.Event, *, retry: bool = True) -> None:
        """Stay connected until ``stop`` is set. With ``retry=False`` the first failure raises
        :class:`TransportError`."""
        ctx = tls_context(self.url) if self.url.tls else None
        attempt = 0
        while not stop.is_set():
            connects = self.conn.connects
            try:
                await self._session(ctx, stop)
            except TransportError as err:
                if self.conn.connects != connects:
                    attempt = 0  # it was up: the back-off starts over
                why = describe_mqtt_error(self.url, err)
                self.first_error = self.first_error or why
                self.failures += 1
                self._set("disconnected", why)
                if not retry:
                    raise
                attempt += 1
                delay = backoff_s(attempt, self.max_backoff_s)
                if self.conn.connects or attempt > 1 or self.say_first:
                    # The first failure is the caller's to report (one-shot commands give up
                    # on it with one sentence); later ones are the reconnect's story, each
                    # reason said at once, then its repeats rate-limited as the agent's are:
                    # a collector's journal had the one sentence at every try.
                    said = self._retry_said.line(why.rstrip("."), delay, time.monotonic())
                    if said is not None:
                        log.warning("%s", said, extra=LINK_STATE)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), delay)

    async def _session(self, ctx: ssl.SSLContext | None, stop: asyncio.Event) -> None:
        """One connection, from CONNECT to its loss (raises) or ``stop`` (returns)."""
        loop = asyncio.get_running_loop()
        lost = self._lost = asyncio.Event()
        self._drop_why = ""
        subscribed: asyncio.Future[tuple[int, ...]] = loop.create_future()
        inflight = _Inflight()
        will = None
        if self.will is not None:
            topic, payload, qos, retain = self.will
            will = gmqtt.Message(topic, payload, qos=qos, retain=retain)
        client = _Client(self.client_id, clean_session=self.clean_session,
                         persistent_storage=inflight, will_message=will)
        if self.url.username is not None:
            client.set_auth_credentials(self.url.username, self.url.password)
        sink = self.sink
        accepted = False
        filters_sent: list[str] = []
        """What this connection's CONNECT subscribed to (``subscribe`` calls before its SUBACK
        find no client yet: they are caught up once connected)."""

        def on_message(_c: Any, topic: str | bytes, payload: bytes, qos: int,
                       properties: dict[str, Any]) -> None:
            if not isinstance(topic, str):  # not UTF-8: ingest rejects and counts it
                topic = bytes(topic).decode("utf-8", "replace")
            sink(topic, payload, qos, bool(properties["retain"]))

        def on_connect(c: Any, _flags: int, _rc: int, _props: dict[str, Any]) -> None:
            # Counted here, at the CONNACK, not when ``connect`` returns: the retained burst
            # the subscribe below brings can be read before the awaiting coroutine resumes,
            # and a status counted on the connection before read as none on this one (a
            # flaky cut-burst test: ``LiveFeed.status_retained_on``).
            self.conn.connacks += 1
            # Every connection, first or not: gmqtt never subscribes again by itself. In order
            # and in chunks: the first SUBACK (the first chunk, what every caller needs first)
            # marks the connection usable.
            filters_sent[:] = self.filters
            for i in range(0, len(filters_sent), SUBSCRIBE_CHUNK):
                c.subscribe([gmqtt.Subscription(f, qos=self.qos)
                             for f in filters_sent[i:i + SUBSCRIBE_CHUNK]])

        def on_subscribe(_c: Any, _mid: int, granted: tuple[int, ...], _props: Any) -> None:
            if not subscribed.done():
                subscribed.set_result(granted)

        def on_disconnect(_c: Any, _packet: Any, _exc: Any = None) -> None:
            lost.set()
            inflight.fail_all(TransportError("the connection to the broker was lost"))

        client.on_message = on_message
        client.on_connect = on_connect
        client.on_subscribe = on_subscribe
        client.on_disconnect = on_disconnect
        try:
            try:
                async with asyncio.timeout(self.connect_timeout_s):
                    await _unless_lost(client.connect(self.url.host, self.url.port,
                                                      ssl=ctx or False, keepalive=self.keepalive,
                                                      version=MQTTv311), lost)
                    accepted = True
                    granted = await _unless_lost(subscribed, lost)
            except TimeoutError:
                # Which step went unanswered: "no CONNACK" sent operators to check a broker
                # that had accepted the connection and only left the SUBSCRIBE unanswered
                # (amqtt's connect race).
                if accepted:
                    raise TransportError(
                        "the broker did not confirm the subscription (no SUBACK) within "
                        f"{self.connect_timeout_s:g} s") from None
                raise TransportError("timed out waiting for CONNACK") from None
            except MQTTConnectError as err:
                raise TransportError(str(err)) from None
            except ConnectionRefusedError:
                raise TransportError("connection refused") from None
            except OSError as err:  # ssl.SSLError included
                raise TransportError(str(err) or type(err).__name__) from None
            if any(g >= 0x80 for g in granted) and not self.probe:
                # Mosquitto's ACL refuses silently (it grants, never delivers); a broker that
                # says so is worth one line.
                log.warning("the broker at %s refused some subscriptions: %s", self.url,
                            [f for f, g in zip(filters_sent[:SUBSCRIBE_CHUNK], granted,
                                               strict=False) if g >= 0x80])
            self.client, self._inflight = client, inflight
            self._catch_up(client, filters_sent)
            if self.conn.state == "disconnected" and self.conn.connects:
                # The warnings said it was gone, every few seconds: say that it is back, or a
                # collector's log ends on "cannot reach" while it works (an SRE drill).
                log.warning("connected to the MQTT broker at %s again (lost %.0f s ago)",
                            self.url, self.clock() - self.conn.since, extra=LINK_STATE)
            self.conn.connects += 1
            self._retry_said.clear()
            self._set("connected")
            waiter = asyncio.ensure_future(lost.wait())
            stopper = asyncio.ensure_future(stop.wait())
            try:
                await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in (waiter, stopper):
                    task.cancel()
            if lost.is_set():
                raise TransportError(self._drop_why or "the connection to the broker was lost")
        finally:
            self._lost = None
            self.client = self._inflight = None
            inflight.fail_all(TransportError("not connected to the broker"))
            # Also after a loss: it awaits the socket's close, so its error is observed.
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2.0):
                    await client.disconnect()

    async def publish(self, topic: str, payload: bytes, *, qos: int = 1, retain: bool = False,
                      timeout_s: float = PUBLISH_TIMEOUT_S) -> None:
        """Publish; with QoS 1, return once the broker acknowledged it (PUBACK). Raises
        :class:`TransportError` when not connected, or when the connection drops or the broker
        does not answer in time."""
        client, inflight = self.client, self._inflight
        if client is None or inflight is None or not client.is_connected:
            raise TransportError("not connected to the broker")
        inflight.last_mid = None
        client.publish(topic, payload, qos=qos, retain=retain)
        mid = inflight.last_mid
        if qos == 0 or mid is None:
            return
        # The PUBACK cannot have arrived yet: nothing was read since publish() wrote the packet.
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        inflight.acks[mid] = fut
        try:
            async with asyncio.timeout(timeout_s):
                await fut
        except TimeoutError:
            inflight.acks.pop(mid, None)
            raise TransportError(f"no PUBACK from the broker within {timeout_s:g} s") from None


async def _unless_lost(aw: Awaitable[T], lost: asyncio.Event) -> T:
    """``await aw``, or raise when the connection drops first (gmqtt's connect() would wait for
    a CONNACK that never comes)."""
    task = asyncio.ensure_future(aw)
    waiter = asyncio.ensure_future(lost.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
    if task.done() and not task.cancelled():
        return task.result()
    raise TransportError("the broker closed the connection before accepting it")
