"""The console's MQTT connection: subscribe, hand every message to ``Ingest``, reconnect.

The message loop does nothing but validate and store (``Ingest.handle``); rendering happens on the
UI's own tick. aiomqtt 2.x has no auto-reconnect, so this loop owns it.
"""

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

import aiomqtt

from fleetdeck.brokerurl import BrokerURL, describe_mqtt_error, make_client
from fleetdeck.console.ingest import Ingest
from fleetdeck.protocol import codec, signing
from fleetdeck.protocol.messages import Command, CommandArgs, CommandOp
from fleetdeck.protocol.topics import ROOT, Kind, subscriptions, topic_for

log = logging.getLogger("fleetdeck.live")

MAX_QUEUED_INCOMING = 20_000
"""Messages waiting for the ingest loop, at most (~10 KiB each: about 200 MiB)."""


@dataclass
class Connection:
    state: str = "connecting"
    """connecting | connected | disconnected"""
    detail: str = ""
    since: float = 0.0
    connects: int = 0


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
    ) -> None:
        self.url = url
        self.ingest = ingest
        self.client_id = client_id
        self.clock = clock
        self.keepalive = keepalive
        self.conn = Connection(since=clock())
        self.client: aiomqtt.Client | None = None
        self.first_error: str | None = None
        self.command_key = command_key
        self.tap: Callable[[float, str, bytes, int, bool], None] | None = None
        """Sees every message as received, and every command sent (console recording)."""

    def _set(self, state: str, detail: str = "") -> None:
        if state != self.conn.state or detail != self.conn.detail:
            self.conn.state, self.conn.detail, self.conn.since = state, detail, self.clock()

    async def run(self, stop: asyncio.Event | None = None, *, retry: bool = True) -> None:
        """Receive until ``stop`` is set. With ``retry=False`` the first failure raises."""
        stop = stop or asyncio.Event()
        attempt = 0
        while not stop.is_set():
            # Bounded: under overload aiomqtt drops the newest beyond this (and logs it) instead
            # of growing without limit; telemetry is latest-value, and the header says BEHIND.
            client = make_client(self.url, self.client_id, keepalive=self.keepalive,
                                 max_queued_incoming=MAX_QUEUED_INCOMING)
            try:
                async with client:
                    self.client = client
                    for filt in subscriptions(self.ingest.cluster):
                        await client.subscribe(filt, qos=1)
                    self.conn.connects += 1
                    self._set("connected")
                    attempt = 0
                    await self._receive(client, stop)
                    return
            except aiomqtt.MqttError as err:
                self.client = None
                why = describe_mqtt_error(self.url, err)
                self.first_error = self.first_error or why
                self._set("disconnected", why)
                if not retry:
                    raise
                attempt += 1
                delay = min(10.0, 0.5 * 2 ** min(attempt, 6)) * random.uniform(0.5, 1.0)
                if self.conn.connects or attempt > 1:
                    # The first failure is the caller's to report (one-shot commands give up
                    # on it with one sentence); later ones are the reconnect's story.
                    log.warning("%s retrying in %.1f s", why, delay)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), delay)
        self.client = None

    async def _receive(self, client: aiomqtt.Client, stop: asyncio.Event) -> None:
        stopper = asyncio.create_task(stop.wait())
        reader = asyncio.create_task(self._read(client))
        try:
            done, _ = await asyncio.wait({stopper, reader}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            # Also when we are cancelled (the app is closing): no orphan task may outlive us
            # and die unobserved when the connection drops.
            for task in (stopper, reader):
                task.cancel()
            await asyncio.gather(stopper, reader, return_exceptions=True)
        if reader in done and not reader.cancelled() and reader.exception() is not None:
            raise reader.exception()  # type: ignore[misc]

    async def _read(self, client: aiomqtt.Client) -> None:
        handle = self.ingest.handle
        clock = self.clock
        async for message in client.messages:
            payload = message.payload
            if not isinstance(payload, bytes | bytearray):
                payload = b"" if payload is None else str(payload).encode()
            now = clock()
            if self.tap is not None:
                self.tap(now, message.topic.value, bytes(payload), message.qos, message.retain)
            handle(message.topic.value, bytes(payload), now)

    async def request_resends(self, asks: list[tuple[str, int]], issued_by: str) -> int:
        """Ask agents to re-send events we missed (``FleetState.missing_events``)."""
        if self.client is None or not asks:
            return 0
        now = int(self.clock() * 1000)
        sent = 0
        for node, since in asks:
            cmd = Command(
                cmd_id=f"resend-{node}-{since}-{now}", op=CommandOp.RESEND_EVENTS, target=node,
                args=CommandArgs(since_seq=since), issued_by=issued_by, issued_at=now,
                expires_at=now + 30_000,
            )
            try:
                await self.send_command(Kind.CMD, node, cmd)
                sent += 1
            except aiomqtt.MqttError:
                break  # reconnecting; the state asks again later
        return sent

    async def send_command(self, kind: Kind, subject: str, cmd: Command) -> Command:
        """Sign (when a command key is configured) and publish a command; return what was sent."""
        if self.command_key is not None:
            cmd = signing.sign(cmd, self.command_key)
        payload = codec.encode(cmd)
        await self.publish(kind, subject, payload, qos=1)
        if self.tap is not None:
            self.tap(self.clock(), topic_for(self.ingest.cluster, kind, subject), payload, 1,
                     False)
        return cmd

    async def publish(self, kind: Kind, subject: str, payload: bytes, qos: int = 1) -> None:
        if self.client is None:
            raise aiomqtt.MqttError("not connected to the broker")
        await self.client.publish(topic_for(self.ingest.cluster, kind, subject), payload, qos=qos)


async def clusters_seen(url: BrokerURL, client_id: str, listen_s: float = 1.0) -> list[str]:
    """Cluster names with a retained birth under the topic root (what a mistyped ``--cluster``
    probably meant)."""
    seen: set[str] = set()
    client = make_client(url, client_id, keepalive=10)
    async with client:
        await client.subscribe(f"{ROOT}/+/node/+/birth", qos=0)

        async def read() -> None:
            async for message in client.messages:
                parts = message.topic.value.split("/")
                if len(parts) == 6 and parts[5] == "birth":
                    seen.add(parts[2][:64])

        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(read(), listen_s)
    return sorted(seen)
