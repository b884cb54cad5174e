"""Overload drill: telemetry floods in far faster than the console can validate. The console
coalesces (latest sample per node), keeps its MQTT queue bounded, keeps answering keys, and says
in its header that it is BEHIND."""

import threading
import time

from bench._mqttload import RawPublisher, publish_packet
from fleetdeck.console.live import MAX_QUEUED_INCOMING
from fleetdeck.console.tui.app import FleetdeckApp
from fleetdeck.console.tui.screens.jobs import JobsScreen
from fleetdeck.console.tui.screens.nodes import NodesScreen
from fleetdeck.protocol import codec
from fleetdeck.protocol.topics import Kind, topic_for
from tests.conftest import eventually
from tests.helpers import FakeNode

NODES = 200


def flood(url, stop: threading.Event, sent: list[int]) -> None:
    """Every node's sample, round after round, as fast as a socket takes them."""
    base = FakeNode("gpu00001", cluster="ovl")
    base.sim.load = 1.0
    proto = codec.encode(base.telemetry())
    head, rest = proto.split(b'"seq":', 1)
    tail = rest.split(b'"ts":', 1)[1].split(b",", 1)[1]
    pub = RawPublisher(url.host, url.port, "flood")
    # Nodes exist from their birth on: announce them first, then flood their telemetry.
    birth = base.birth()
    pub.send(b"".join(
        publish_packet(topic_for("ovl", Kind.BIRTH, f"gpu{i + 1:05d}"),
                       codec.encode(birth.model_copy(update={"node": f"gpu{i + 1:05d}",
                                                             "bdSeq": 1})))
        for i in range(NODES)))
    seq = 0
    while not stop.is_set():
        seq += 1
        ts = int(time.time() * 1000)
        buf = bytearray()
        for i in range(NODES):
            node = f"gpu{i + 1:05d}"
            body = (head.replace(b'"node":"gpu00001"', f'"node":"{node}"'.encode())
                    + f'"seq":{seq},"bdSeq":1,"ts":{ts},'.encode() + tail)
            buf += publish_packet(topic_for("ovl", Kind.TELEMETRY, node), body)
        pub.send(bytes(buf))
        sent[0] += NODES
    pub.close()


async def test_console_sheds_load_stays_responsive_and_says_it_is_behind(mosquitto, tmp_path):
    app = FleetdeckApp(cluster="ovl", url=mosquitto.url, audit_path=tmp_path / "a.jsonl")
    stop = threading.Event()
    sent = [0]
    worst_behind = 0.0
    async with app.run_test(size=(160, 48)) as pilot:
        await eventually(lambda: app.feed is not None and app.feed.client is not None, 10,
                         message="console connected")
        assert app.feed is not None and app.feed.client is not None
        assert app.feed.client._queue.maxsize == MAX_QUEUED_INCOMING
        thread = threading.Thread(target=flood, args=(mosquitto.url, stop, sent), daemon=True)
        thread.start()
        try:
            def behind() -> bool:
                nonlocal worst_behind
                worst_behind = max(worst_behind, app.state.behind_s)
                return "BEHIND" in app.header_text(app.clock())

            await eventually(behind, 30, 0.2, message="header says BEHIND")
            await pilot.press("3")
            await eventually(lambda: isinstance(app.screen, JobsScreen), 15,
                             message="keys still work: jobs view")
            await pilot.press("2")
            await eventually(lambda: isinstance(app.screen, NodesScreen), 15,
                             message="keys still work: nodes view")
            assert len(app.state.nodes) == NODES
            assert app.state.superseded > 0  # coalesced: older samples of a node dropped
            assert app.feed.client._queue.qsize() <= MAX_QUEUED_INCOMING
        finally:
            stop.set()
            thread.join(10)
    assert sent[0] > 5 * NODES
    assert worst_behind > 2.0
