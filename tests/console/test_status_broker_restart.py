"""A one-shot ``status`` right after a broker restart: nodes whose births the broker kept
(persistence) but that have not reconnected yet are reconnecting, not stale. A status a second
after a restart read 31 of 32 nodes stale and "8 racks fell silent" (an SRE drill)."""

import json
import uuid

import aiomqtt

from fleetdeck.protocol import codec
from fleetdeck.protocol.topics import Kind, topic_for
from tests.conftest import run_cli
from tests.tui.fleet import CLUSTER, Clock, SynthFleet


async def test_nodes_not_back_yet_after_a_broker_restart_read_waiting(mosquitto):
    fleet = SynthFleet(4, Clock(), leaves=1)
    url = mosquitto.url
    async with aiomqtt.Client(url.host, url.port, identifier=f"pub-{uuid.uuid4().hex[:6]}") as c:
        for name in fleet.names:
            a = fleet.agents[name]
            # Kept by the broker: births and statuses retained; the agents are not back yet.
            for kind, msg in ((Kind.BIRTH, a.birth()), (Kind.STATUS, a.status())):
                await c.publish(topic_for(CLUSTER, kind, name), codec.encode(msg), qos=1,
                                retain=True)
    out = run_cli("status", "--broker", str(mosquitto.url), "--cluster", CLUSTER, "--json")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["broker_uptime_s"] is not None and summary["broker_uptime_s"] < 30
    assert summary["totals"]["by_verdict"]["stale"] == 0
    assert summary["totals"]["by_verdict"]["waiting"] == 4
    assert {n["verdict"] for n in summary["nodes"]} == {"waiting"}
    assert not [i for i in summary["incidents"] if i["kind"] in ("rack", "fleet", "node")]
    assert "a node not heard since reads waiting" in out.stderr
    # A range: the uptime is as of Mosquitto's last $SYS refresh, up to 10 s before.
    up = summary["broker_uptime_s"]
    assert f"started {up:.0f}-{up + 10:.0f} s ago" in out.stderr, out.stderr
