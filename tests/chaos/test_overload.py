"""Overload drill: telemetry floods in far faster than the console can validate. The console
coalesces (latest sample per node), keeps its MQTT queue bounded, keeps answering keys, and says
in its header that it is BEHIND.

Nothing here measures speed: every step waits for its condition with a deadline generous enough
for a loaded 2-core CI machine (the flood, the broker and the console share it), and the checks
are about behaviour (bounded queue, BEHIND shown, keys answered, samples coalesced)."""

import threading
import time

from bench._mqttload import RawPublisher, publish_packet
from fleetdeck.console.live import MAX_PENDING
from fleetdeck.console.tui.app import BEHIND_WARN_S, FleetdeckApp
from fleetdeck.console.tui.screens.jobs import JobsScreen
from fleetdeck.console.tui.screens.nodes import NodesScreen
from fleetdeck.protocol import codec
from fleetdeck.protocol.topics import Kind, topic_for
from tests.conftest import eventually
from tests.helpers import FakeNode

NODES = 200
DEADLINE_S = 120.0
"""Per step. Generous on purpose: a slow machine makes the drill slower, never wrong."""


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
    worst = {"behind_s": 0.0, "queued": 0, "shed": 0}
    async with app.run_test(size=(160, 48)) as pilot:
        feed = app.feed
        assert feed is not None

        def observe() -> None:
            # Sampled on every poll for the whole flood: the feed's buffer (only telemetry in
            # this flood, after the births) must never hold more than its bound.
            worst["queued"] = max(worst["queued"], feed.queued, feed.queue_hwm)
            worst["behind_s"] = max(worst["behind_s"], app.state.behind_s)
            worst["shed"] = max(worst["shed"], feed.dropped_total)

        async def until(predicate, message: str) -> None:
            def check() -> bool:
                observe()
                return bool(predicate())
            try:
                await eventually(check, DEADLINE_S, 0.2, message=message)
            except AssertionError as err:
                s = app.state
                raise AssertionError(
                    f"{err} (connection {feed.conn.state} {feed.conn.detail!r}, "
                    f"{feed.conn.connects} connect(s); {len(s.nodes)} nodes, {s.applied} applied, "
                    f"{s.superseded} superseded, behind {s.behind_s:.1f} s, {sent[0]} sent, "
                    f"{feed.received} received, {feed.dropped_total} shed, {s.seq_lost} lost, "
                    f"screen {type(app.screen).__name__})") from None

        # Subscribed, not merely a client object: births published before the SUBACK are lost,
        # and then no node ever exists.
        await until(lambda: feed.conn.state == "connected", "console subscribed")
        thread = threading.Thread(target=flood, args=(mosquitto.url, stop, sent), daemon=True)
        thread.start()
        try:
            await until(lambda: len(app.state.nodes) == NODES, "every node's birth applied")
            await until(lambda: "BEHIND" in app.header_text(app.clock()), "header says BEHIND")
            await pilot.press("3")
            await until(lambda: isinstance(app.screen, JobsScreen), "keys still work: jobs view")
            await pilot.press("2")
            await until(lambda: isinstance(app.screen, NodesScreen),
                        "keys still work: nodes view")
            await until(lambda: app.state.superseded > 0,
                        "coalescing: older samples of a node dropped for its latest")
            await until(lambda: sent[0] > 5 * NODES, "a flood, not a trickle: 5 rounds sent")
            observe()
        finally:
            stop.set()
            thread.join(10)
    assert len(app.state.nodes) == NODES  # the flood never invented or lost a node
    assert 0 < worst["queued"] <= MAX_PENDING
    # Behind the stream one way or another: its applied samples lag, its own buffer shed, or
    # (a fast console reads what it can and Mosquitto drops the rest for it) samples are
    # missing from the nodes' seq.
    assert (worst["behind_s"] > BEHIND_WARN_S or worst["shed"] > 0
            or app.state.seq_lost > NODES), worst
