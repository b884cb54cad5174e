"""The console session sends what its ingest wants: one signed ``keyframe`` command per node."""

import asyncio
import time

from fleetdeck.console.follow_ups import KEYFRAME_ASKS_PER_TICK
from fleetdeck.console.session import ConsoleSession
from fleetdeck.protocol import codec, signing
from fleetdeck.protocol.messages import Command, CommandOp
from fleetdeck.protocol.topics import Kind
from tests.helpers import FakeNode

KEY = b"k" * 32


class Sent:
    def __init__(self) -> None:
        self.commands: list[tuple[str, Command]] = []

    async def __call__(self, kind: Kind, subject: str, payload: bytes) -> None:
        self.commands.append((subject, codec.decode(Command, payload)))


async def test_deltas_without_their_keyframe_make_one_signed_ask_per_node_at_a_time() -> None:
    nodes = [FakeNode("gpu0001", cluster="kf"), FakeNode("gpu0002", cluster="kf")]
    sent = Sent()
    session = ConsoleSession("kf", clock=lambda: nodes[0].now, publisher=sent, operator="t",
                             command_key=KEY)
    for node in nodes:
        node.agent.telemetry_payload()  # the keyframes this console never saw
    for _ in range(3):
        for node in nodes:
            node.now += 1.0
            session.ingest.handle(node.topic(Kind.TELEMETRY), node.agent.telemetry_payload(),
                                  node.now)
        session.tick()
        await session.flush()
    asks = [(subject, cmd) for subject, cmd in sent.commands if cmd.op is CommandOp.KEYFRAME]
    assert sorted(subject for subject, _ in asks) == ["gpu0001", "gpu0002"]  # throttled: once
    for subject, cmd in asks:
        assert cmd.target == subject and cmd.args.reason.startswith("no keyframe 1 of session")
        assert signing.check(cmd, KEY, int(nodes[0].now * 1000)) == ""
    assert session.ingest.keyframe_missing == 6 and not session.ingest.keyframe_wanted


class SlowBroker:
    """A publisher whose every publish takes a broker round trip (the PUBACK a QoS 1 publish
    waits for): counts how many are under way at once."""

    def __init__(self, round_trip_s: float) -> None:
        self.round_trip_s = round_trip_s
        self.in_flight = 0
        self.most_in_flight = 0
        self.asks = 0

    async def __call__(self, kind: Kind, subject: str, payload: bytes) -> None:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.round_trip_s)
        finally:
            self.in_flight -= 1
        if codec.decode(Command, payload).op is CommandOp.KEYFRAME:
            self.asks += 1


async def test_keyframe_asks_to_a_big_fleet_do_not_wait_for_each_other() -> None:
    """`status` on 1,024 v2 nodes read 635 stale ("not yet its keyframe") after its 3.5 s
    watch: the session sent its asks one at a time, each after the last one's PUBACK."""
    nodes = [FakeNode(f"gpu{i:04d}", cluster="kf") for i in range(1, 401)]
    broker = SlowBroker(round_trip_s=0.01)  # one at a time: 400 x 10 ms = 4 s
    session = ConsoleSession("kf", clock=lambda: nodes[0].now, publisher=broker, operator="t")
    for node in nodes:
        node.agent.telemetry_payload()  # the keyframes this console never saw
        node.now += 1.0
        session.ingest.handle(node.topic(Kind.TELEMETRY), node.agent.telemetry_payload(),
                              node.now)
    session.tick()
    started = time.monotonic()
    await session.flush()
    took = time.monotonic() - started
    assert broker.asks == min(400, KEYFRAME_ASKS_PER_TICK)
    assert broker.most_in_flight > 1
    assert took < 1.0, f"{broker.asks} asks took {took:.2f} s"
