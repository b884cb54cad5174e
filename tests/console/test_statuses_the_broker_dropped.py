"""A console (or one-shot ``status``) that starts on a fleet of 1,024 nodes gets every node's
retained birth and status at once; Mosquitto keeps at most ``max_queued_messages`` (1000 by
default) of them for it and drops the rest, the statuses, which it sends after the births. The
nodes whose agents had died read "stale: no telemetry heard from it yet", not offline (an SRE
drill: 4 dead agents of 1,024, `status` read 4 stale; Mosquitto logged "Outgoing messages are
being dropped"). A node born with no status heard is asked for its retained status again, on
its own topic (docs/reliability.md)."""

import json
import uuid

import aiomqtt
import pytest

from fleetdeck.broker import ManagedBroker, mosquitto_conf
from fleetdeck.protocol import codec
from fleetdeck.protocol.topics import Kind, topic_for
from tests.conftest import require_binaries, run_cli
from tests.tui.fleet import CLUSTER, Clock, SynthFleet

NODES = 8


@pytest.fixture
def small_queue_mosquitto(tmp_path):
    """Mosquitto whose queue for a subscriber holds the births of NODES nodes and not their
    statuses too: 1,024 nodes on the default 1000, scaled down."""
    require_binaries("mosquitto")
    broker = ManagedBroker("mosquitto", workdir=tmp_path / "mosquitto")
    broker.workdir.mkdir()  # type: ignore[union-attr]
    broker.config = mosquitto_conf(broker.port, broker.host).replace(
        "max_queued_messages 10000",
        "max_queued_messages 6\nmax_inflight_messages 4\nlog_type notice")
    with broker:
        yield broker


async def test_dead_agents_read_offline_when_the_broker_dropped_their_retained_wills(
        small_queue_mosquitto):
    broker = small_queue_mosquitto
    fleet = SynthFleet(NODES, Clock(), leaves=1)
    url = broker.url
    async with aiomqtt.Client(url.host, url.port, identifier=f"pub-{uuid.uuid4().hex[:6]}") as c:
        for name in fleet.names:
            a = fleet.agents[name]
            # What the broker keeps of an agent that died: its birth and its Last Will.
            for kind, msg in ((Kind.BIRTH, a.birth()), (Kind.STATUS, a.status(online=False))):
                await c.publish(topic_for(CLUSTER, kind, name), codec.encode(msg), qos=1,
                                retain=True)
    out = run_cli("status", "--broker", str(url), "--cluster", CLUSTER, "--json")
    summary = json.loads(out.stdout)
    assert "Outgoing messages are being dropped" in broker.log_path.read_text(), (
        "the broker kept every status: the test no longer tests the drop")
    verdicts = {n["id"]: n["verdict"] for n in summary["nodes"]}
    assert verdicts == dict.fromkeys(fleet.names, "offline"), verdicts
    assert summary["totals"]["by_verdict"]["offline"] == NODES
