"""A one-shot ``status --digests`` right after a broker restart: the collectors republish their
digests as they reconnect, and one whose digests a broker without persistence lost and that is
not back yet leaves its share of the fleet out of the counts. A drill (64 nodes, three
``collect --shard K/3``, Mosquitto SIGKILLed and restarted) read "ok 26", exit 0, with no word
of the restart, where ``status`` on raw telemetry says the broker is young and that nodes may
be missing."""

import json
import time
import uuid

import aiomqtt

from fleetdeck.protocol import codec
from fleetdeck.protocol.messages import CollectorStatus
from fleetdeck.protocol.topics import Kind, topic_for
from tests.conftest import run_cli

CLUSTER = "dgr"


def _digest(node: str, by: str, ts_ms: int, job: str | None = None) -> bytes:
    return json.dumps({"v": 1, "node": node, "by": by, "ts": ts_ms, "verdict": "ok",
                       "online": True, "job": job,
                       "gpus": [{"index": 0, "util_pct": 50.0, "temp_c": 40.0,
                                 "power_w": 300.0}],
                       "ports": [{"dev": "mlx5_ib0", "up": True}]}).encode()


async def test_status_on_digests_says_the_broker_is_young_and_counts_may_be_short(mosquitto):
    url = mosquitto.url
    now_ms = int(time.time() * 1000)
    async with aiomqtt.Client(url.host, url.port, identifier=f"pub-{uuid.uuid4().hex[:6]}") as c:
        # shard-1 is back and has republished its two nodes; shard-2 (not back yet) owned
        # two more, which this broker, restarted without persistence, no longer holds.
        birth = CollectorStatus(collector="shard-1", online=True, started=now_ms - 60_000,
                                shard="1/2", nodes=2, ts=now_ms)
        await c.publish(topic_for(CLUSTER, Kind.COLLECTOR, "shard-1"), codec.encode(birth),
                        qos=1, retain=True)
        for node in ("gpu0001", "gpu0003"):
            await c.publish(topic_for(CLUSTER, Kind.DIGEST, node),
                            _digest(node, "shard-1", now_ms), qos=1, retain=True)
    out = run_cli("status", "--broker", str(url), "--cluster", CLUSTER, "--digests", "--json",
                  "--wait", "2")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["broker_uptime_s"] is not None and summary["broker_uptime_s"] < 30
    assert summary["totals"]["nodes"] == 2
    up = summary["broker_uptime_s"]
    assert f"started {up:.0f}-{up + 10:.0f} s ago" in out.stderr, out.stderr
    assert "collectors may still be reconnecting" in out.stderr, out.stderr
    assert "missing from the counts" in out.stderr, out.stderr


async def test_status_on_digests_right_after_a_restart_does_not_blame_the_acl_for_jobs(
        mosquitto):
    """The nodes' digests name job 4101 and no job status has come: the scheduler, like the
    collectors, may not be back yet (a 2026-12-07 drill: "the broker may not deliver
    job/+/status to this user (its ACL)" of a scheduler not reconnected yet)."""
    url = mosquitto.url
    now_ms = int(time.time() * 1000)
    async with aiomqtt.Client(url.host, url.port, identifier=f"pub-{uuid.uuid4().hex[:6]}") as c:
        birth = CollectorStatus(collector="shard-1", online=True, started=now_ms - 60_000,
                                shard="1/1", nodes=2, ts=now_ms)
        await c.publish(topic_for(CLUSTER, Kind.COLLECTOR, "shard-1"), codec.encode(birth),
                        qos=1, retain=True)
        for node in ("gpu0001", "gpu0002"):
            await c.publish(topic_for(CLUSTER, Kind.DIGEST, node),
                            _digest(node, "shard-1", now_ms, job="4101"), qos=1, retain=True)
    out = run_cli("status", "--broker", str(url), "--cluster", CLUSTER, "--digests", "--json",
                  "--wait", "2")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["broker_uptime_s"] is not None and summary["broker_uptime_s"] < 30
    assert summary["jobs_unheard"] == ["4101"], summary["jobs_unheard"]
    assert "its ACL" not in out.stderr, out.stderr
    assert summary["jobs_unheard_why"] == "broker_young"
    assert "running job 4101: the broker started less than 30 s ago" in out.stderr, out.stderr
    assert out.stderr.count("collectors may still be reconnecting") == 1, out.stderr
