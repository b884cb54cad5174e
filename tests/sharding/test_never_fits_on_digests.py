"""A job that can never start on its cluster, said on the digests of a real ``fleetdeck collect
--shard 1/1`` as on raw telemetry: the collector counts the cluster's nodes once its births came
whole (``CollectorStatus.cluster_nodes``), and ``status --digests`` takes that count. Before, a
console on digests, which hears no birth and judges no connect burst, never trusted its node
count: "needs 6 nodes; 4 heard so far" and ``never_fits`` null beside the raw "it can never
start here" (docs/protocol.md, "CollectorStatus")."""

import asyncio
import contextlib
import json
import time
import uuid

import aiomqtt
import pytest

from fleetdeck.brokerurl import BrokerURL
from fleetdeck.protocol import codec
from fleetdeck.protocol.topics import Kind, topic_for
from tests.conftest import run_cli, spawn, stop_process
from tests.console.test_statuses_the_broker_dropped import (  # noqa: F401 - a fixture
    CUT_NODES,
    _big_job,
    _retain_dead_agents,
    small_queue_mosquitto,
)
from tests.tui.fleet import CLUSTER as FLEET_CLUSTER
from tests.tui.fleet import Clock, SynthFleet

CLUSTER = "nfit"


def _inject(url: str, *args: str, deadline: float) -> str:
    """Inject until the simulator answers (it takes a few seconds to subscribe)."""
    while True:
        res = run_cli("inject", "--broker", url, "--cluster", CLUSTER, *args, "--wait", "2")
        if res.returncode == 0 or time.monotonic() > deadline:
            assert res.returncode == 0, res.stderr
            return res.stdout.strip()


def _huge(url: str, *extra: str) -> tuple[dict, dict]:
    """The job named huge and the summary, as ``status --json`` (``extra``) says them."""
    res = run_cli("status", "--broker", url, "--cluster", CLUSTER, "--json", "--wait", "6",
                  *extra)
    assert res.returncode in (0, 1), res.stderr
    out = json.loads(res.stdout)
    job = next((j for j in out["jobs"] if j["name"] == "huge"), {})
    return job, out


def _until_never_fits(url: str, deadline: float, *extra: str) -> tuple[dict, dict]:
    while True:
        job, out = _huge(url, *extra)
        if job.get("never_fits") or time.monotonic() > deadline:
            return job, out


@pytest.mark.timeout(300)
def test_a_job_too_big_for_the_cluster_never_fits_on_digests_as_on_raw_telemetry(mosquitto,
                                                                                  tmp_path):
    url = str(mosquitto.url)
    sim = spawn("sim", "--broker", url, "--cluster", CLUSTER, "--nodes", "4", "--seed", "3",
                log=tmp_path / "sim.log")
    col = None
    try:
        deadline = time.monotonic() + 60
        said = _inject(url, "submit", "name=huge", "nodes=6", "steps=100", deadline=deadline)
        assert said.startswith("injected: submit"), said
        deadline = time.monotonic() + 90
        raw, _out = _until_never_fits(url, deadline)
        never = "needs 6 nodes; the cluster has 4: it can never start here"
        assert raw["never_fits"] == never, raw
        # Started on a running cluster, as a collector restarted: the broker's retained job
        # statuses come after every birth at its connect, so its births are known whole.
        col = spawn("collect", "--broker", url, "--cluster", CLUSTER, "--shard", "1/1",
                    "--db", str(tmp_path / "c.db"), log=tmp_path / "collect.log")
        dig, out = _until_never_fits(url, time.monotonic() + 90, "--digests")
        assert [(c["collector"], c["online"], c["cluster_nodes"]) for c in out["collectors"]] \
            == [("shard-1", True, 4)], out["collectors"]
        assert dig["never_fits"] == raw["never_fits"], dig
        assert [n["owner"] for n in out["nodes"]] == ["shard-1"] * 4
    finally:
        if col is not None:
            assert stop_process(col) == 0, (tmp_path / "collect.log").read_text()[-2000:]
        assert stop_process(sim) == 0, (tmp_path / "sim.log").read_text()[-2000:]



async def _collector_births(url: BrokerURL, cluster: str, seconds: float) -> list[dict]:
    """The births and wills heard on ``collector/+`` for ``seconds``."""
    got: list[dict] = []
    async with aiomqtt.Client(url.host, url.port, identifier=f"sub-{uuid.uuid4().hex[:6]}") as c:
        await c.subscribe(topic_for(cluster, Kind.COLLECTOR, "+"), qos=1)

        async def read() -> None:
            async for m in c.messages:
                if isinstance(m.payload, bytes) and m.payload:
                    got.append(json.loads(m.payload))

        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(read(), seconds)
    return got


@pytest.mark.timeout(120)
@pytest.mark.parametrize("cut", [False, True])
async def test_a_collector_counts_the_cluster_only_once_its_births_came_whole(
        cut, request, tmp_path):
    """24 nodes' retained births and statuses and a pending job's status after them: on a
    broker that keeps 10 of a subscriber's burst the collector's births are cut, and the job's
    status never comes: its count would be short (10), so it says none, and no console on
    digests says a 30-node job can never start on 10 nodes. On the shipped queue they come
    whole: 24."""
    broker = request.getfixturevalue("small_queue_mosquitto" if cut else "mosquitto")
    fleet = SynthFleet(CUT_NODES, Clock(), leaves=1)
    await _retain_dead_agents(broker, fleet)
    url = broker.url
    async with aiomqtt.Client(url.host, url.port, identifier=f"pub-{uuid.uuid4().hex[:6]}") as c:
        await c.publish(*_big_job(Clock(), 30), qos=1, retain=True)
    col = spawn("collect", "--broker", str(url), "--cluster", FLEET_CLUSTER, "--shard", "1/1",
                "--db", str(tmp_path / "c.db"), log=tmp_path / "collect.log")
    try:
        # Its birth at connect, and again once its count is known (2 s after the last birth).
        births = await _collector_births(url, FLEET_CLUSTER, 8.0)
    finally:
        assert stop_process(col) == 0, (tmp_path / "collect.log").read_text()[-2000:]
    counted = [b.get("cluster_nodes") for b in births if b["online"]]
    assert counted, births
    if cut:
        assert "Outgoing messages are being dropped" in broker.log_path.read_text()
        assert counted == [None] * len(counted), births
    else:
        assert counted[-1] == CUT_NODES, births


@pytest.mark.timeout(120)
async def test_a_collector_keeps_its_count_through_a_broker_that_lost_the_retained(mosquitto):
    """The count is kept through later connections, as a raw console keeps its own
    (``FleetState.births_whole``): a reconnect only adds to the births it knows. Judged anew
    on each, a collector said none after every reconnect, and for good after a broker
    restarted without persistence: the agents' births and the scheduler's job statuses came
    back live on its new connection, never retained, and no console on digests said again
    that a 6-node job can never start on 4 nodes."""
    from tests.conftest import eventually, start_collector
    from tests.console.test_statuses_the_broker_dropped import CLUSTER as CUT_CLUSTER

    fleet = SynthFleet(4, Clock(), leaves=1)
    url = mosquitto.url

    async def publish_cluster() -> None:
        """What the agents and the scheduler publish as they (re)connect: retained."""
        async with aiomqtt.Client(url.host, url.port,
                                  identifier=f"pub-{uuid.uuid4().hex[:6]}") as c:
            for name in fleet.names:
                a = fleet.agents[name]
                for kind, msg in ((Kind.BIRTH, a.birth()), (Kind.STATUS, a.status())):
                    await c.publish(topic_for(CUT_CLUSTER, kind, name), codec.encode(msg),
                                    qos=1, retain=True)
            await c.publish(*_big_job(Clock(), 6), qos=1, retain=True)

    await publish_cluster()
    stop = asyncio.Event()
    collector, runner, task = start_collector(CUT_CLUSTER, url, stop)
    feed = collector.feed
    assert feed is not None
    try:
        await eventually(lambda: runner.cluster_nodes(collector.clock()) == 4, 20,
                         message="the collector counting 4 nodes")
        mosquitto.kill()  # no persistence here: every retained message goes with it
        mosquitto.start()
        await eventually(lambda: feed.conn.connacks >= 2 and feed.conn.state == "connected",
                         30, message="the collector subscribed again")
        await publish_cluster()  # live to the collector, subscribed already
        births = await _collector_births(url, CUT_CLUSTER, 2 * 2.0 + 1.0)
    finally:
        stop.set()
        await asyncio.gather(task, return_exceptions=True)
    counted = [b.get("cluster_nodes") for b in births if b["online"]]
    assert counted and set(counted) == {4}, births
