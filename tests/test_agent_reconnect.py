"""A real agent process under a broker that is SIGKILLed and restarted again and again: the
reconnect backoff starts over after every session, so the sixth recovery is as quick as the
first (it used to grow to 15-30 s after about five broker blips)."""

import asyncio
import time
import uuid

import aiomqtt

from fleetdeck.brokerurl import make_client
from fleetdeck.protocol import codec
from fleetdeck.protocol.messages import Birth
from fleetdeck.protocol.topics import Kind, topic_for
from tests.conftest import spawn, stop_process

CLUSTER = "blips"
NODE = "gpu0001"
RESTARTS = 6
DOWN_S = 0.5
LIMIT_S = 5.0
"""The backoff starts at 0.5-1 s; two failed tries while the broker is down still stay under it."""


async def next_birth(url, after_bd_seq: int, timeout: float) -> Birth:
    """Connect as soon as the broker takes connections; return the agent's first birth of a
    session newer than ``after_bd_seq`` (retained, so it counts even if it came first)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            async with make_client(url, f"watch-{uuid.uuid4().hex[:6]}", timeout=2) as c:
                await c.subscribe(topic_for(CLUSTER, Kind.BIRTH, NODE), qos=1)
                async with asyncio.timeout(max(0.1, deadline - time.monotonic())):
                    async for m in c.messages:
                        assert isinstance(m.payload, bytes)
                        birth = codec.decode(Birth, m.payload)
                        if birth.bdSeq > after_bd_seq:
                            return birth
        except aiomqtt.MqttError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


async def test_reconnects_stay_fast_after_many_broker_restarts(mosquitto, tmp_path):
    proc = spawn("agent", "--broker", str(mosquitto.url), "--cluster", CLUSTER, "--node-id",
                 NODE, "--interval", "0.5", "--keepalive", "2", log=tmp_path / "agent.log")
    took: list[float] = []
    try:
        birth = await next_birth(mosquitto.url, 0, 20)
        for _ in range(RESTARTS):
            mosquitto.kill()
            await asyncio.sleep(DOWN_S)
            started = time.time()  # the broker's own start-up counts: it is part of a blip
            mosquitto.start()
            try:
                birth = await next_birth(mosquitto.url, birth.bdSeq, 3 * LIMIT_S)
            except TimeoutError:
                raise AssertionError(f"no reconnect within {3 * LIMIT_S} s after broker restart "
                                     f"{len(took) + 1} (earlier: {took})") from None
            # The birth's ts is taken right after the agent's CONNACK.
            took.append(round(birth.ts / 1000 - started, 2))
        print("reconnect seconds after each broker restart:", took)
        assert max(took) <= LIMIT_S, took
    finally:
        stop_process(proc)
