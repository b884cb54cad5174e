"""A sharded collector clears a retired node's digest itself, after the last digest it sent of
it: one sent by a tick that had not applied the cleared birth yet could reach the broker after
``fleetdeck retire`` cleared the digest, and consoles on digests showed the node for ever."""

import asyncio
import time

import aiomqtt

from fleetdeck.agents.agent import NodeAgent
from fleetdeck.agents.sim.node import SimNode
from fleetdeck.console.shard import ShardScope
from fleetdeck.protocol.topics import Kind, topic_for
from tests.conftest import eventually, first_retained, start_collector

CLUSTER = "rtc"


async def _retained(url, topic: str) -> bytes | None:
    """The broker's retained payload on ``topic`` (None: none within a second)."""
    async with aiomqtt.Client(url.host, url.port, identifier=f"t-read-{time.monotonic_ns()}"
                              ) as client:
        return await first_retained(client, topic, 1.0)


async def test_a_collector_clears_the_digest_of_a_node_retired(mosquitto):
    stop, stop_node = asyncio.Event(), asyncio.Event()
    agents = [NodeAgent(cluster=CLUSTER, node_id=f"gpu{i:04d}", source=SimNode(f"gpu{i:04d}"),
                        url=mosquitto.url, interval_s=0.2, phase_s=0.0) for i in (1, 2)]
    tasks = [asyncio.create_task(agents[0].run(stop)),
             asyncio.create_task(agents[1].run(stop_node))]
    collector, runner, task = start_collector(CLUSTER, mosquitto.url, stop)
    tasks.append(task)
    digest = topic_for(CLUSTER, Kind.DIGEST, "gpu0002")
    try:
        await eventually(lambda: runner.sender.sent >= 2, timeout=20, message="digests sent")
        assert await _retained(mosquitto.url, digest)
        stop_node.set()
        await tasks[1]
        # Only the birth cleared here: a digest gone from the broker is the collector's clear.
        async with aiomqtt.Client(mosquitto.url.host, mosquitto.url.port,
                                  identifier="t-retire") as client:
            await client.publish(topic_for(CLUSTER, Kind.BIRTH, "gpu0002"), b"", qos=1,
                                 retain=True)
        await eventually(lambda: "gpu0002" not in collector.state.nodes, timeout=10,
                         message="gpu0002 forgotten")
        await asyncio.sleep(1.0)
        assert not await _retained(mosquitto.url, digest)
    finally:
        stop.set()
        stop_node.set()
        await asyncio.gather(*tasks, return_exceptions=True)


def test_a_retired_node_leaves_the_collector_s_shard_scope():
    """Kept in ``ShardScope.known`` and ``owned``, a retired node stayed subscribed and counted
    in the collector's ``nodes`` for good; it is let go once (``take_changes``'s lost), and a
    birth under its name is learnt afresh."""
    from fleetdeck.console.ingest import Ingest
    from tests.tui.fleet import CLUSTER as FLEET
    from tests.tui.fleet import Clock, SynthFleet

    scope = ShardScope("shard-1", 0)
    ingest = Ingest(FLEET)
    ingest.scope = scope
    fleet = SynthFleet(2, Clock())
    fleet.birth(ingest)
    names = sorted(fleet.names)
    assert scope.known == scope.owned == set(names)
    assert scope.take_changes() == (set(names), set())
    ingest.handle(topic_for(FLEET, Kind.BIRTH, names[1]), b"", 0.0)
    assert scope.known == scope.owned == {names[0]}
    assert scope.take_changes() == (set(), {names[1]})
    fleet.birth(ingest, names=[names[1]])
    assert scope.owns(names[1]) and scope.take_changes() == ({names[1]}, set())
