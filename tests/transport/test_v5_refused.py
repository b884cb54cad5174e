"""The console's live link connects with MQTT v5 (its Receive Maximum takes the retained burst
whole: docs/reliability.md, "The retained burst"). amqtt 0.12 speaks 3.1.1 only, and instead of
refusing a v5 CONNECT with CONNACK 0x01 as MQTT 3.1.1 requires ([MQTT-3.1.2-2]) it parsed the v5
properties as a client id and waited for bytes that never came: a timer fell back to 3.1.1
after 1.25 s, and `status --wait 1` on the demo gave up with "no answer (CONNACK) within 1 s".
The demo's embedded broker now refuses at once, and the link speaks 3.1.1 on that refusal."""

import asyncio
import struct
import time
from collections.abc import AsyncIterator

import pytest

from fleetdeck.broker import free_port
from fleetdeck.brokerurl import BrokerURL
from fleetdeck.embedded_broker import amqtt_config, new_broker
from fleetdeck.transport import RECEIVE_MAXIMUM, MqttLink


@pytest.fixture
async def demo_broker() -> AsyncIterator[BrokerURL]:
    port = free_port()
    broker = new_broker(amqtt_config("127.0.0.1", port))
    await broker.start()
    try:
        yield BrokerURL("127.0.0.1", port)
    finally:
        await broker.shutdown()


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("!H", len(raw)) + raw


def v5_connect() -> bytes:
    """A v5 CONNECT as the console sends it: clean start, a will, a Receive Maximum."""
    variable = _string("MQTT") + bytes([5, 0x02 | 0x04 | 0x08]) + struct.pack("!H", 30)
    variable += bytes([3, 0x21]) + struct.pack("!H", RECEIVE_MAXIMUM)  # properties
    payload = _string("fd-v5-probe") + bytes([0]) + _string("fleetdeck/v1/x/will")
    payload += struct.pack("!H", 3) + b"bye"
    body = variable + payload
    assert len(body) < 128
    return bytes([0x10, len(body)]) + body


async def test_the_demo_broker_refuses_a_v5_connect_at_once(demo_broker):
    reader, writer = await asyncio.open_connection(demo_broker.host, demo_broker.port)
    try:
        writer.write(v5_connect())
        async with asyncio.timeout(2):
            connack = await reader.readexactly(4)
            rest = await reader.read()  # then the broker closes, nothing more said
    finally:
        writer.close()
    assert connack == b"\x20\x02\x00\x01"  # CONNACK: unacceptable protocol version
    assert rest == b""


async def test_a_v5_link_speaks_3_1_1_to_the_demo_broker_at_once(demo_broker):
    stop = asyncio.Event()
    link = MqttLink(demo_broker, "fd-v5-link", ["fleetdeck/v1/x/#"], lambda *a: None,
                    receive_maximum=RECEIVE_MAXIMUM, will=("fleetdeck/v1/x/will", b"bye", 1,
                                                           False))
    started = time.monotonic()
    task = asyncio.create_task(link.run(stop, retry=False))
    try:
        async with asyncio.timeout(5):
            while not link.connected:
                assert not task.done(), task.exception()
                await asyncio.sleep(0.01)
        took = time.monotonic() - started
    finally:
        stop.set()
        await asyncio.gather(task, return_exceptions=True)
    assert not link.connected_v5
    assert link.failures == 0 and link.first_error is None
    assert took < 1.0, took  # a connect or two on loopback: milliseconds
