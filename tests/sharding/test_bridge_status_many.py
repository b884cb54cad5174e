"""``status --cluster a,b --digests`` on a site broker where cluster b's bridge is down and
cluster a's is up (console/bridge.py): the down one is said and the exit is 3, as for one
cluster; it read exit 0 and said nothing."""

import time
import uuid

import aiomqtt

from fleetdeck.protocol import codec
from fleetdeck.protocol.messages import CollectorStatus
from fleetdeck.protocol.topics import Kind, topic_for
from tests.conftest import run_cli
from tests.sharding.test_digests_after_a_broker_restart import _digest


async def _cluster(c: aiomqtt.Client, cluster: str, bridge: bytes, now_ms: int) -> None:
    birth = CollectorStatus(collector="shard-1", online=True, started=now_ms - 60_000,
                            shard="1/1", nodes=1, ts=now_ms)
    await c.publish(topic_for(cluster, Kind.COLLECTOR, "shard-1"), codec.encode(birth),
                    qos=1, retain=True)
    await c.publish(topic_for(cluster, Kind.DIGEST, "gpu0001"),
                    _digest("gpu0001", "shard-1", now_ms), qos=1, retain=True)
    await c.publish(topic_for(cluster, Kind.BRIDGE), bridge, qos=1, retain=True)


async def test_several_clusters_one_bridge_down_is_said_and_exits_3(mosquitto):
    url = mosquitto.url
    now_ms = int(time.time() * 1000)
    async with aiomqtt.Client(url.host, url.port, identifier=f"pub-{uuid.uuid4().hex[:6]}") as c:
        await _cluster(c, "a", b"1", now_ms)
        await _cluster(c, "b", b"0", now_ms)
    out = run_cli("status", "--broker", str(url), "--cluster", "a,b", "--digests", "--wait", "2")
    assert out.returncode == 3, (out.stdout, out.stderr)
    assert "the bridge from cluster b is down since" in out.stderr, out.stderr
    assert "cluster a" not in out.stderr, out.stderr
    # --fail-on finds no bad node: still 3, the cluster behind the bridge is not seen.
    out = run_cli("status", "--broker", str(url), "--cluster", "a,b", "--digests", "--wait", "2",
                  "--fail-on", "failed")
    assert out.returncode == 3, (out.stdout, out.stderr)
