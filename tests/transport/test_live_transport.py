"""The console's receive path (fleetdeck/transport.py under console/live.py) against a real
Mosquitto: re-subscribing after the broker dies, TLS and passwords, shedding a burst larger than
the buffer (oldest telemetry only), and QoS 1 commands reaching an agent's subscription."""

import asyncio
import contextlib
import os
import subprocess
import time
import uuid

import aiomqtt
import pytest

from bench._mqttload import RawPublisher, publish_packet
from fleetdeck.broker import MOSQUITTO, ManagedBroker
from fleetdeck.brokerurl import BrokerURL
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.live import LiveFeed
from fleetdeck.protocol import codec
from fleetdeck.protocol.messages import Command, CommandArgs, CommandOp
from fleetdeck.protocol.topics import Kind, topic_for
from fleetdeck.transport import TransportError
from tests.conftest import eventually, unsubscribed
from tests.security.deploy import DEPLOY, needs_tools, secured_broker

CLUSTER = "tp"


def new_feed(url: BrokerURL, **kw) -> LiveFeed:
    return LiveFeed(url, Ingest(CLUSTER), client_id=f"tp-{uuid.uuid4().hex[:8]}", **kw)


@contextlib.asynccontextmanager
async def running(feed: LiveFeed, *, pump: bool = True):
    """The feed (or only its transport, when ``pump`` is False: nothing is handed to ingest)
    until the block ends."""
    stop = asyncio.Event()
    task = asyncio.create_task(feed.run(stop) if pump else feed.link.run(stop))
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, 15)


def handed_to(feed: LiveFeed) -> list[tuple[str, bytes]]:
    """What the feed hands to ingest, in order (through the recording tap)."""
    seen: list[tuple[str, bytes]] = []
    feed.tap = lambda _ts, topic, payload, _qos, _retain: seen.append((topic, payload))
    return seen


async def publish(url: BrokerURL, topic: str, payload: bytes, **kw) -> None:
    async with aiomqtt.Client(url.host, url.port, identifier=f"pub-{uuid.uuid4().hex[:6]}",
                              protocol=aiomqtt.ProtocolVersion.V311, **kw) as c:
        await c.publish(topic, payload, qos=1)


async def test_receives_again_after_the_broker_is_killed_and_restarted(mosquitto, caplog):
    feed = new_feed(mosquitto.url)
    seen = handed_to(feed)
    topic = topic_for(CLUSTER, Kind.EVENT, "gpu0001")
    async with running(feed):
        await eventually(lambda: feed.conn.state == "connected", 15, message="connected")
        await publish(mosquitto.url, topic, b"before")
        await eventually(lambda: (topic, b"before") in seen, 10, message="first message")
        mosquitto.kill()
        await eventually(lambda: feed.conn.state == "disconnected", 15, message="loss seen")
        assert feed.client is None
        mosquitto.start()
        await eventually(lambda: feed.conn.connects == 2 and feed.conn.state == "connected",
                         30, message="reconnected")
        # A new connection to a broker that forgot every session: only a fresh SUBSCRIBE
        # (gmqtt never re-subscribes by itself) brings this message in.
        await publish(mosquitto.url, topic, b"after")
        await eventually(lambda: (topic, b"after") in seen, 10, message="message after restart")
    assert feed.first_error is not None and "127.0.0.1" in feed.first_error
    assert feed.received == feed.handed == 2 and feed.dropped_total == 0
    # A log that said "cannot reach … retrying" says it is back (an SRE drill's collector log
    # ended on "cannot reach" while it worked).
    assert any("connected to the MQTT broker at" in r.getMessage() and " again " in
               r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]


async def test_publish_when_not_connected_says_so(mosquitto):
    feed = new_feed(BrokerURL("127.0.0.1", mosquitto.port))
    with pytest.raises(TransportError, match="not connected"):
        await feed.publish(Kind.CMD, "gpu0001", b"{}")
    mosquitto.kill()
    with pytest.raises(TransportError, match="refused"):
        await feed.run(asyncio.Event(), retry=False)
    assert feed.conn.state == "disconnected" and "connection refused" in feed.conn.detail


async def test_qos1_command_reaches_the_agents_subscription(mosquitto):
    feed = new_feed(mosquitto.url)
    cmd_topic = topic_for(CLUSTER, Kind.CMD, "gpu0001")
    now = int(time.time() * 1000)
    cmd = Command(cmd_id="c-1", op=CommandOp.DRAIN, target="gpu0001",
                  args=CommandArgs(reason="transport test"), issued_by="t", issued_at=now,
                  expires_at=now + 30_000)
    async with aiomqtt.Client(mosquitto.url.host, mosquitto.url.port, identifier="agent-sub",
                              protocol=aiomqtt.ProtocolVersion.V311) as agent:
        await agent.subscribe(cmd_topic, qos=1)
        async with running(feed):
            await eventually(lambda: feed.conn.state == "connected", 15, message="connected")
            sent = await feed.send_command(Kind.CMD, "gpu0001", cmd)
            # send_command returned: the broker acknowledged it (PUBACK), nothing in flight.
            assert not feed.link.client._persistent_storage._messages
        async with asyncio.timeout(5):
            async for message in agent.messages:
                assert message.qos == 1
                assert codec.decode(Command, bytes(message.payload)) == sent
                break


async def test_a_burst_beyond_the_bound_sheds_oldest_telemetry_and_keeps_every_event(mosquitto):
    bound = 100
    feed = new_feed(mosquitto.url, max_pending=bound)
    seen = handed_to(feed)
    telemetry, events = 1_000, 50
    packets, order = [], []
    for i in range(telemetry):
        node = f"gpu{i % 10:04d}"
        packets.append(publish_packet(topic_for(CLUSTER, Kind.TELEMETRY, node), b"t%d" % i))
        order.append(("t", i))
        if i % (telemetry // events) == 0:  # one event after every 20th sample
            j = i // (telemetry // events)
            packets.append(publish_packet(topic_for(CLUSTER, Kind.EVENT, node), b"e%d" % j))
            order.append(("e", j))
    total = len(packets)
    # Only the transport runs: ingest is stalled, so the whole burst meets the bound.
    async with running(feed, pump=False):
        await eventually(lambda: feed.conn.state == "connected", 15, message="connected")
        pub = RawPublisher(mosquitto.url.host, mosquitto.url.port, "burst")
        pub.send(b"".join(packets))
        pub.close()
        await eventually(lambda: feed.received == total, 20, message="whole burst received")
    assert feed.queue_hwm <= bound and feed.queued <= bound
    assert feed.dropped == {"telemetry": total - feed.queued}
    assert feed.hand() == total - feed.dropped_total
    assert feed.queued == 0 and feed.last_handed is not None
    got = [payload.decode() for _t, payload in seen]
    # Every event, in order; the telemetry that is left is the newest, in order.
    assert [p for p in got if p[0] == "e"] == [f"e{j}" for j in range(events)]
    kept_t = [int(p[1:]) for p in got if p[0] == "t"]
    assert kept_t == list(range(telemetry - len(kept_t), telemetry))
    # Arrival order across kinds is kept too: the hand-off is the burst minus what was shed.
    assert got == [f"{k}{i}" for k, i in order if k == "e" or i in set(kept_t)]


async def test_the_pump_hands_a_burst_to_ingest_and_counts_it(mosquitto):
    feed = new_feed(mosquitto.url)
    n = 5_000
    async with running(feed):
        await eventually(lambda: feed.conn.state == "connected", 15, message="connected")
        pub = RawPublisher(mosquitto.url.host, mosquitto.url.port, "burst")
        pub.send(b"".join(publish_packet(topic_for(CLUSTER, Kind.TELEMETRY, "gpu0001"),
                                         b"not json") for _ in range(n)))
        pub.close()
        await eventually(lambda: feed.handed == n, 30, message="burst handed to ingest")
    assert feed.received == n and feed.queued == 0 and feed.dropped_total == 0
    assert 0 < feed.queue_hwm <= n
    # Validated and counted by ingest, as every message from the network is.
    assert feed.ingest.received == n
    assert feed.ingest.malformed.total == n


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    with secured_broker(tmp_path_factory.mktemp("secure")) as setup:
        yield setup


@needs_tools
async def test_tls_and_password_connect_and_receive(secured):
    broker, creds, tls_port, work = secured
    url = BrokerURL("127.0.0.1", tls_port, tls=True, username="console",
                    password=creds["console"], ca_file=str(work / "pki" / "ca.crt"))
    feed = new_feed(url)
    seen = handed_to(feed)
    topic = topic_for(CLUSTER, Kind.BIRTH, "gpu0001")
    async with running(feed):
        await eventually(lambda: feed.conn.state == "connected", 15, message="connected")
        await publish(BrokerURL(broker.host, broker.port), topic, b"hello",
                      username="gpu0001", password=creds["gpu0001"])
        await eventually(lambda: (topic, b"hello") in seen, 10, message="message over TLS")


@needs_tools
async def test_wrong_password_and_wrong_ca_fail_with_one_sentence(secured, tmp_path):
    _broker, creds, tls_port, work = secured
    ca = str(work / "pki" / "ca.crt")
    bad_pw = new_feed(BrokerURL("127.0.0.1", tls_port, tls=True, username="console",
                                password="wrong", ca_file=ca))
    with pytest.raises(TransportError):
        await bad_pw.run(asyncio.Event(), retry=False)
    assert "refused the credentials" in (bad_pw.first_error or "")
    subprocess.run(["bash", str(DEPLOY / "mkcerts.sh"), str(tmp_path / "other"), "127.0.0.1"],
                   check=True, capture_output=True)
    bad_ca = new_feed(BrokerURL("127.0.0.1", tls_port, tls=True, username="console",
                                password=creds["console"],
                                ca_file=str(tmp_path / "other" / "ca.crt")))
    with pytest.raises(TransportError):
        await bad_ca.run(asyncio.Event(), retry=False)
    assert "TLS with the MQTT broker" in (bad_ca.first_error or "")


@pytest.mark.needs("mosquitto", "openssl")
async def test_mutual_tls_with_a_client_certificate(tmp_path):
    pki = tmp_path / "pki"
    subprocess.run(["bash", str(DEPLOY / "mkcerts.sh"), str(pki), "127.0.0.1", "console"],
                   check=True, capture_output=True)
    conf = "\n".join([
        "per_listener_settings false", "allow_anonymous true", "persistence false",
        "listener {port} 127.0.0.1", f"cafile {pki}/ca.crt", f"certfile {pki}/server.crt",
        f"keyfile {pki}/server.key", "require_certificate true", "log_dest stderr",
    ]) + "\n"
    if os.geteuid() == 0:
        conf = "user root\n" + conf  # as tests/security/deploy.py: mosquitto reads pytest's tmp
    with ManagedBroker(MOSQUITTO, workdir=tmp_path, config=conf) as broker:
        base = BrokerURL("127.0.0.1", broker.port, tls=True, ca_file=str(pki / "ca.crt"))
        no_cert = new_feed(base)
        with pytest.raises(TransportError):
            await no_cert.run(asyncio.Event(), retry=False)
        with_cert = new_feed(BrokerURL("127.0.0.1", broker.port, tls=True,
                                       ca_file=str(pki / "ca.crt"),
                                       cert_file=str(pki / "console.crt"),
                                       key_file=str(pki / "console.key")))
        async with running(with_cert):
            await eventually(lambda: with_cert.conn.state == "connected", 15,
                             message="connected with a client certificate")


async def test_the_demos_embedded_amqtt_broker_works_too(amqtt_broker):
    """amqtt speaks only MQTT 3.1.1, which is what the transport asks for."""
    feed = new_feed(amqtt_broker.url)
    seen = handed_to(feed)
    topic = topic_for(CLUSTER, Kind.STATUS, "gpu0001")
    async with running(feed):
        await eventually(lambda: feed.conn.state == "connected", 15, message="connected")
        await publish(amqtt_broker.url, topic, b"up")
        await eventually(lambda: (topic, b"up") in seen, 10, message="message via amqtt")
        await feed.publish(Kind.CMD, "gpu0001", b"{}")  # QoS 1: amqtt's PUBACK came back


class SlowIngest(Ingest):
    """A real Ingest that also burns ~1 ms of CPU per message (a heavy validation)."""

    def handle(self, topic: str, payload: bytes, rx_ts: float) -> None:
        until = time.perf_counter() + 0.001
        while time.perf_counter() < until:
            pass
        super().handle(topic, payload, rx_ts)


async def test_the_pump_yields_to_the_event_loop_in_the_middle_of_a_backlog(mosquitto):
    n = 200
    feed = LiveFeed(mosquitto.url, SlowIngest(CLUSTER), client_id="tp-slow")
    async with running(feed, pump=False):  # the backlog builds up with ingest stalled
        await eventually(lambda: feed.conn.state == "connected", 15, message="connected")
        pub = RawPublisher(mosquitto.url.host, mosquitto.url.port, "burst")
        pub.send(b"".join(publish_packet(topic_for(CLUSTER, Kind.TELEMETRY, "gpu0001"), b"x")
                          for _ in range(n)))
        pub.close()
        await eventually(lambda: feed.queued == n, 20, message="backlog received")
    seen_mid_backlog: list[int] = []

    async def other_work() -> None:
        while feed.handed < n:
            if feed.handed > 0:
                seen_mid_backlog.append(feed.handed)
            await asyncio.sleep(0)

    # ~200 ms of ingest work: handed over in slices, other tasks run between them.
    async with running(feed):
        await asyncio.wait_for(other_work(), 60)
    assert feed.handed == n and feed.ingest.received == n
    assert len(set(seen_mid_backlog)) >= 3, seen_mid_backlog


async def test_filters_added_and_removed_while_connected_and_the_last_will(telling_mosquitto):
    """What a sharded collector does: subscribe to a node it gains (its retained messages come
    at once), unsubscribe from one it loses, and leave a Last Will for the others."""
    mosquitto = telling_mosquitto
    url = mosquitto.url
    will_topic = f"fleetdeck/v1/{CLUSTER}/collector/shard-9"
    node_a = f"fleetdeck/v1/{CLUSTER}/node/gpu0001/+"
    retained_birth = topic_for(CLUSTER, Kind.BIRTH, "gpu0001")
    async with aiomqtt.Client(url.host, url.port) as c:
        await c.publish(retained_birth, b"retained-birth", qos=1, retain=True)
    feed = new_feed(url, filters=[f"fleetdeck/v1/{CLUSTER}/sched/ack"],
                    will=(will_topic, b"gone", 1, True))
    seen = handed_to(feed)
    async with running(feed):
        await eventually(lambda: feed.link.connected, 10, message="connected")
        feed.link.subscribe([node_a])
        await eventually(lambda: (retained_birth, b"retained-birth") in seen, 10,
                         message="the gained node's retained birth")
        feed.link.unsubscribe([node_a])
        # The UNSUBSCRIBE reaches the broker before the next publish (a fixed 0.3 s was a
        # guess a loaded machine can outlast, and the message then arrived).
        await eventually(lambda: unsubscribed(mosquitto, feed.client_id, node_a), 30,
                         message="the broker took the UNSUBSCRIBE")
        await publish(url, topic_for(CLUSTER, Kind.STATUS, "gpu0001"), b"after-unsubscribe")
        await publish(url, topic_for(CLUSTER, Kind.SCHED_ACK), b"control")
        await eventually(lambda: (topic_for(CLUSTER, Kind.SCHED_ACK), b"control") in seen, 10,
                         message="the control message")
        assert all(p != b"after-unsubscribe" for _t, p in seen)
        assert node_a not in feed.link.filters
        # The will goes out only when the connection dies: kill the broker's view of it.
        feed.link.client._connection._transport.abort()
        async with aiomqtt.Client(url.host, url.port) as c:
            await c.subscribe(will_topic, qos=1)
            async with asyncio.timeout(10):
                async for m in c.messages:
                    assert m.payload == b"gone" and m.retain
                    break


def test_a_console_someone_watches_retries_every_2_s_at_most_and_agents_every_10():
    """After a long outage the console's back-off had grown to 9 s: its header said
    "disconnected" 8 s after the broker was back (an SRE drill). A console is one client, no
    herd to spread; collectors and agents keep the longer cap."""
    from fleetdeck.console.tui.app import FleetdeckApp
    from fleetdeck.transport import INTERACTIVE_BACKOFF_S, MAX_BACKOFF_S, backoff_s

    url = BrokerURL("127.0.0.1", 1)
    app = FleetdeckApp(cluster="a", url=url, contexts=["b"], auto_tick=False)
    links = [s.feed.link for s in app.sessions.values()]
    assert len(links) == 2
    assert {link.max_backoff_s for link in links} == {INTERACTIVE_BACKOFF_S}
    assert new_feed(url).link.max_backoff_s == MAX_BACKOFF_S
    assert max(backoff_s(a, INTERACTIVE_BACKOFF_S) for a in range(1, 50)) <= 2.0
    assert max(backoff_s(a) for a in range(6, 60)) > 5.0
