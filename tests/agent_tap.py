"""A raw MQTT subscriber that records every protocol message of a cluster in arrival order, and a
plain publisher: what the agent really put on the wire, without the console's interpretation."""

import asyncio
import contextlib
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import aiomqtt

from fleetdeck.brokerurl import BrokerURL, make_client
from fleetdeck.protocol import codec
from fleetdeck.protocol.messages import Ack, Birth, Command, Event, JobStatus, Status
from fleetdeck.protocol.topics import Kind, TopicError, parse_topic, topic_for
from tests.conftest import eventually

MODELS: dict[Kind, Any] = {Kind.STATUS: Status, Kind.BIRTH: Birth, Kind.ACK: Ack,
                           Kind.EVENT: Event, Kind.SCHED_ACK: Ack, Kind.JOB: JobStatus}


@dataclass
class Seen:
    kind: Kind
    subject: str
    msg: Any
    rx: float
    """time.time() at arrival."""


@dataclass
class Tap:
    url: BrokerURL
    cluster: str
    seen: list[Seen] = field(default_factory=list)

    async def __aenter__(self) -> "Tap":
        ready = asyncio.Event()
        self._task = asyncio.create_task(self._run(ready))
        await asyncio.wait_for(ready.wait(), 10)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, aiomqtt.MqttError):
            await self._task

    async def _run(self, ready: asyncio.Event) -> None:
        async with make_client(self.url, f"tap-{uuid.uuid4().hex[:8]}") as client:
            await client.subscribe(f"fleetdeck/v1/{self.cluster}/#", qos=1)
            ready.set()
            async for m in client.messages:
                try:
                    t = parse_topic(str(m.topic))
                except TopicError:
                    continue  # the simulator's injection answers
                model = MODELS.get(t.kind)
                if model is not None and isinstance(m.payload, bytes):
                    self.seen.append(Seen(t.kind, t.subject, codec.decode(model, m.payload),
                                          time.time()))

    def of(self, kind: Kind, subject: str | None = None) -> list[Any]:
        return [s.msg for s in self.seen
                if s.kind is kind and (subject is None or s.subject == subject)]

    def statuses(self, node: str) -> list[Status]:
        return self.of(Kind.STATUS, node)

    def acks(self, cmd_id: str, kind: Kind = Kind.ACK) -> list[Ack]:
        return [a for a in self.of(kind) if a.cmd_id == cmd_id]

    def first_status_after(self, node: str, bd_seq: int) -> Status | None:
        """The first online status of a session newer than ``bd_seq``."""
        return next((s for s in self.statuses(node) if s.bdSeq > bd_seq and s.online), None)

    async def until(self, predicate: Any, timeout: float = 15, message: str = "condition"
                    ) -> None:
        await eventually(predicate, timeout, 0.02, message)


async def publish(url: BrokerURL, topic: str, payload: bytes) -> None:
    async with make_client(url, f"op-{uuid.uuid4().hex[:8]}") as c:
        await c.publish(topic, payload, qos=1)


async def send(url: BrokerURL, cluster: str, cmd: Command) -> bytes:
    """Publish ``cmd`` to its node's command topic; the exact bytes sent (to replay them)."""
    payload = codec.encode(cmd)
    await publish(url, topic_for(cluster, Kind.CMD, cmd.target), payload)
    return payload
