"""A real agent process under a broker that is SIGKILLed and restarted again and again: the
reconnect backoff starts over after every session, so the sixth recovery is as quick as the
first (it used to grow to 15-30 s after about five broker blips)."""

import asyncio
import time
import uuid

import aiomqtt

from fleetdeck.broker import MOSQUITTO, ManagedBroker
from fleetdeck.brokerurl import make_client
from fleetdeck.protocol import codec
from fleetdeck.protocol.messages import Birth
from fleetdeck.protocol.topics import Kind, topic_for
from tests.conftest import spawn, stop_process
from tests.sim.sim_logs import own_lines

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


def test_two_agents_for_one_node_say_so_once_each_not_per_retry(mosquitto, tmp_path):
    """Two agents with the same node id (a copy left running on a reinstalled host): each
    connection takes the other's session over, and each journal said "lost the connection …
    retrying" and "connected again" every second, never why (a newcomer's run, with two
    simulators). Each says the likely cause once, then nothing while it goes on; the one left
    says when the takeovers stopped (docs/reliability.md, "Two clients with one client id")."""
    said = f"another client may be connected with the same client id fd-{CLUSTER}-{NODE}"
    logs = [tmp_path / "first.log", tmp_path / "second.log"]
    procs = [spawn("agent", "--broker", str(mosquitto.url), "--cluster", CLUSTER, "--node-id",
                   NODE, "--interval", "0.5", log=log) for log in logs]
    try:
        deadline = time.monotonic() + 40
        while not all(said in log.read_text(errors="replace") for log in logs):
            assert time.monotonic() < deadline, [log.read_text() for log in logs]
            time.sleep(0.2)
        before = [log.read_text(errors="replace") for log in logs]
        time.sleep(5)  # five more takeovers or so each
        after = [log.read_text(errors="replace") for log in logs]
        assert list(map(own_lines, after)) == list(map(own_lines, before)), after
        assert all(text.count(said) == 1 for text in after), after
        stop_process(procs[1])
        deadline = time.monotonic() + 60  # a connection must hold 30 s (TAKEOVER_END_S)
        while "the takeovers stopped" not in logs[0].read_text(errors="replace"):
            assert time.monotonic() < deadline, logs[0].read_text()
            time.sleep(0.2)
    finally:
        for proc in procs:
            stop_process(proc)


def test_a_keyframe_over_the_brokers_max_packet_size_is_said_as_such(tmp_path):
    """Mosquitto's ``max_packet_size`` below the agent's telemetry keyframe (3.7 KB for eight
    simulated GPUs): the broker drops the agent at each keyframe and the agent reconnects
    in a loop, the node offline by its will each time. The journal said another client with
    the node's id might be taking its session (a 2026-12-07 drill); it names the packet
    size now."""
    conf = "listener {port} 127.0.0.1\nallow_anonymous true\nmax_packet_size 3000\n"
    with ManagedBroker(MOSQUITTO, workdir=tmp_path, config=conf) as broker:
        log = tmp_path / "agent.log"
        proc = spawn("agent", "--broker", str(broker.url), "--cluster", CLUSTER, "--node-id",
                     NODE, "--interval", "1", log=log)
        try:
            deadline = time.monotonic() + 30
            while "max_packet_size is most likely below that" not in log.read_text(
                    errors="replace"):
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
        finally:
            stop_process(proc)


def test_an_agent_says_once_that_it_connected(mosquitto, tmp_path):
    """A healthy agent logged nothing, so the ``journalctl -u fleetdeck-agent -f`` that ends
    docs/real-nodes.md's install showed systemd's "Started" alone (a newcomer's production
    set-up): it says its first connection once, with the broker (no password) and interval."""
    log = tmp_path / "agent.log"
    proc = spawn("agent", "--broker", str(mosquitto.url), "--cluster", CLUSTER, "--node-id",
                 NODE, "--interval", "0.5", log=log)
    said = (f"fleetdeck agent {NODE}: connected to {mosquitto.url} (cluster {CLUSTER}), "
            "publishing every 0.5 s")
    try:
        deadline = time.monotonic() + 20
        while said not in log.read_text(errors="replace"):
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        time.sleep(2)  # samples go on: nothing more to say
    finally:
        stop_process(proc)
    assert log.read_text(errors="replace").count("connected to") == 1, log.read_text()
