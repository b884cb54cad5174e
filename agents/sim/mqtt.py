"""The simulator's per-node MQTT session over gmqtt: the part of ``aiomqtt.Client`` that
:class:`~agents.agent.NodeAgent` uses (connect with a Last Will, subscribe, publish QoS 0/1,
iterate messages, disconnect), so thousands of simulated agents fit in one process.

Why not aiomqtt here: measured on this machine with 1,024 simulated nodes and the sample model
stubbed out, aiomqtt/paho cost ~366 µs of CPU per node-second (a thread-pool connect, an asyncio
Event and ``wait_for`` per QoS 0 publish, a misc-loop task per client), gmqtt ~134 µs
(asyncio-native; a QoS 0 publish is one transport write); ``bench/sim_capacity.py --mqtt
aiomqtt|gmqtt`` compares them with the model on. Each node keeps its own connection, client id
and Last Will, so the broker still announces a node's death.

Semantics kept from aiomqtt, because NodeAgent relies on them:

* a QoS 1 publish and a subscribe return once the broker acknowledged them, and raise
  :class:`aiomqtt.MqttError` when the connection is lost first or after ``timeout`` s;
* ``messages`` ends with :class:`aiomqtt.MqttError` when the connection is lost;
* gmqtt's own reconnect is off: NodeAgent reconnects with a new session (new ``bdSeq``);
* :meth:`abort` drops the TCP connection without DISCONNECT, so the broker fires the will
  (how the simulator kills an agent).

Only MQTT 3.1.1, like every other client here (brokerurl.make_client: amqtt speaks nothing
else). This belongs behind the project's transport module once there is one (issue 12).
"""

import asyncio
import contextlib
import logging
import struct
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiomqtt
import gmqtt
from gmqtt.mqtt.constants import MQTTv311

from fleetdeck.brokerurl import BrokerURL, tls_context

if logging.getLogger("gmqtt").level == logging.NOTSET:
    # gmqtt logs every dropped connection at WARNING; NodeAgent already says what happened
    # (fleetdeck.logs.setup_logging sets the level for the CLI).
    logging.getLogger("gmqtt").setLevel(logging.ERROR)


@dataclass(frozen=True, slots=True)
class Received:
    topic: str
    payload: bytes
    qos: int
    retain: bool = False


class _Client(gmqtt.Client):  # type: ignore[misc]
    """gmqtt with the acknowledgements a caller can wait for."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.acked: dict[int, asyncio.Future[None]] = {}

    def _remove_message_from_queue(self, mid: int) -> None:
        # Called by gmqtt's handler on PUBACK for one of our QoS 1 publishes.
        super()._remove_message_from_queue(mid)
        fut = self.acked.pop(mid, None)
        if fut is not None and not fut.done():
            fut.set_result(None)

    def publish_qos0(self, head: bytes, payload: bytes, retain: bool) -> None:
        """A QoS 0 PUBLISH written straight to the transport: what gmqtt's publish sends for
        MQTT 3.1.1 (no properties, no packet id), without its Message object, its two debug
        log calls and its bytearray building, ~half of a telemetry publish's CPU outside the
        socket write (docs/performance.md, "Simulator capacity"). ``head``: the topic as
        :func:`topic_head` packs it."""
        conn: Any = getattr(self, "_connection", None)
        transport = getattr(conn, "_transport", None)
        if conn is None or transport is None or transport.is_closing():
            raise aiomqtt.MqttError("Could not publish message: not connected")
        conn._last_data_out = time.monotonic()  # gmqtt's keepalive reads it (no PINGREQ due)
        n = len(head) + len(payload)
        if n < 128:
            size = bytes((n,))
        elif n < 16384:
            size = bytes((n & 0x7F | 0x80, n >> 7))
        else:
            size = _varint(n)
        transport.write(b"".join((b"\x31" if retain else b"\x30", size, head, payload)))

    def publish_mid(self, message: Any) -> int:
        """gmqtt's publish, returning the packet id it chose (0 for QoS 0: none)."""
        mid, package = self._connection.publish(message)
        if message.qos > 0:
            self._persistent_storage.push_message(mid, package)
            return int(mid)
        return 0


def _varint(n: int) -> bytes:
    """MQTT's variable byte integer (remaining length)."""
    out = bytearray()
    while True:
        n, b = divmod(n, 128)
        out.append(b | 0x80 if n else b)
        if not n:
            return bytes(out)


def topic_head(topic: str) -> bytes:
    """A PUBLISH's topic field: two length bytes and the UTF-8 name."""
    raw = topic.encode()
    return struct.pack("!H", len(raw)) + raw


class GmqttSession:
    """One MQTT 3.1.1 session, used as ``async with`` like ``aiomqtt.Client``."""

    def __init__(self, url: BrokerURL, identifier: str, *, will: aiomqtt.Will | None = None,
                 keepalive: int = 10, timeout: float = 10.0) -> None:
        self.url = url
        self.keepalive = keepalive
        self.timeout = timeout
        will_msg = None
        if will is not None:
            payload = will.payload if isinstance(will.payload, bytes) else str(will.payload)
            will_msg = gmqtt.Message(will.topic, payload, qos=will.qos, retain=will.retain)
        self._c = _Client(identifier, clean_session=True, will_message=will_msg)
        if url.username:
            self._c.set_auth_credentials(url.username, url.password)
        self._c.on_message = self._on_message
        self._c.on_disconnect = self._on_disconnect
        self._c.on_subscribe = self._on_subscribe
        self._queue: asyncio.Queue[Received] = asyncio.Queue()
        self._subacks: dict[int, asyncio.Future[None]] = {}
        self._lost: asyncio.Future[None] | None = None
        self._connected = False
        self._heads: dict[str, bytes] = {}

    # --- connection --------------------------------------------------------------------------

    async def __aenter__(self) -> "GmqttSession":
        self._lost = asyncio.get_running_loop().create_future()
        ssl = tls_context(self.url) if self.url.tls else False
        try:
            await asyncio.wait_for(self._c.connect(
                self.url.host, self.url.port, ssl=ssl, keepalive=self.keepalive,
                version=MQTTv311), self.timeout)
        except TimeoutError:
            self._give_up()
            raise aiomqtt.MqttError("Operation timed out") from None
        except aiomqtt.MqttError:
            self._give_up()
            raise
        except Exception as err:  # OSError, ssl errors, gmqtt's refusals: one class, like aiomqtt
            self._give_up()
            raise aiomqtt.MqttError(str(err) or type(err).__name__) from err
        if self._lost.done():
            self._give_up()
            raise aiomqtt.MqttError("connection lost during the handshake")
        self._connected = True
        return self

    async def __aexit__(self, *exc: object) -> None:
        lost = self._lost is None or self._lost.done()
        self._connected = False
        if lost:
            self._give_up()
            return
        # A clean DISCONNECT: the broker drops the will (NodeAgent said offline itself).
        self._c._is_active = False
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._c.disconnect(), self.timeout)
        self._fail_all(aiomqtt.MqttError("disconnected"))

    def abort(self) -> None:
        """Drop the connection without DISCONNECT: the broker publishes the Last Will."""
        conn = getattr(self._c, "_connection", None)
        transport = getattr(getattr(conn, "_transport", None), "abort", None)
        self._c._is_active = False  # no reconnect by gmqtt
        if callable(transport):
            transport()

    def _give_up(self) -> None:
        self._c._is_active = False
        conn = getattr(self._c, "_connection", None)
        transport = getattr(getattr(conn, "_transport", None), "abort", None)
        if callable(transport):
            transport()
        self._fail_all(aiomqtt.MqttError("disconnected"))

    @property
    def lost(self) -> "asyncio.Future[None] | None":
        return self._lost

    def _on_disconnect(self, client: Any, packet: Any, exc: Any = None) -> None:
        # Our own reconnect (NodeAgent's) makes a new session; gmqtt's would reuse this one.
        self._c._is_active = False
        self._fail_all(aiomqtt.MqttError("Disconnected during message iteration"))

    def _fail_all(self, err: aiomqtt.MqttError) -> None:
        if self._lost is not None and not self._lost.done():
            self._lost.set_exception(err)
            self._lost.exception()  # retrieved: nobody may be waiting on it
        for fut in [*self._subacks.values(), *self._c.acked.values()]:
            if not fut.done():
                fut.set_exception(err)
                fut.exception()
        self._subacks.clear()
        self._c.acked.clear()

    def _check(self) -> None:
        if not self._connected or self._lost is None or self._lost.done():
            raise aiomqtt.MqttError("Could not publish message: not connected")

    # --- operations --------------------------------------------------------------------------

    def publish_nowait(self, topic: str, payload: bytes, retain: bool = False) -> None:
        """A QoS 0 publish, at once (nothing to wait for): the telemetry path. Raises
        :class:`aiomqtt.MqttError` when the session is not connected."""
        self._check()
        head = self._heads.get(topic)
        if head is None:
            head = self._heads[topic] = topic_head(topic)
        self._c.publish_qos0(head, payload, retain)

    async def publish(self, topic: str, payload: bytes | str | None = None, qos: int = 0,
                      retain: bool = False, **_: Any) -> None:
        self._check()
        if qos == 0:
            data = payload.encode() if isinstance(payload, str) else payload or b""
            self.publish_nowait(topic, data, retain)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        mid = self._c.publish_mid(gmqtt.Message(topic, payload or b"", qos=qos, retain=retain))
        self._c.acked[mid] = fut
        await self._wait(fut)

    async def subscribe(self, topic: str, qos: int = 0, **_: Any) -> None:
        self._check()
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        mid = self._c.subscribe(topic, qos=qos)
        self._subacks[int(mid)] = fut
        await self._wait(fut)

    async def _wait(self, fut: "asyncio.Future[None]") -> None:
        try:
            await asyncio.wait_for(asyncio.shield(fut), self.timeout)
        except TimeoutError:
            raise aiomqtt.MqttError("Operation timed out") from None

    def _on_subscribe(self, client: Any, mid: int, qos: Any, properties: Any) -> None:
        fut = self._subacks.pop(mid, None)
        if fut is not None and not fut.done():
            fut.set_result(None)

    def _on_message(self, client: Any, topic: str, payload: bytes, qos: int,
                    properties: Any) -> int:
        self._queue.put_nowait(Received(str(topic), bytes(payload), qos))
        return 0  # PUBACK with success

    @property
    def messages(self) -> AsyncIterator[Received]:
        return self._messages()

    async def _messages(self) -> AsyncIterator[Received]:
        lost = self._lost
        if lost is None:
            raise aiomqtt.MqttError("not connected")
        while True:
            if not self._queue.empty():
                yield self._queue.get_nowait()
                continue
            if lost.done():
                raise aiomqtt.MqttError("Disconnected during message iteration")
            getter = asyncio.ensure_future(self._queue.get())
            either: set[asyncio.Future[Any]] = {getter, lost}
            try:
                await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            finally:
                if not getter.done():
                    getter.cancel()
            if getter.done() and not getter.cancelled():
                yield getter.result()
