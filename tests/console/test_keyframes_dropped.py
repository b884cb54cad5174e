"""Mosquitto's ``message_size_limit`` below a real agent's telemetry keyframe (3.7 KB for eight
simulated GPUs; its deltas are 1.2 KB): the broker drops every keyframe without a word (QoS 0)
and delivers the deltas (a 2026-12-07 drill). ``status`` read the nodes ``waiting``, "asked for
one (an ask the broker drops, as for a broker user that may not publish node/+/cmd, such as
'viewer' …)", though the agents had answered each ask. It now says the broker most likely drops
their keyframes and names the size limits."""

import json

from fleetdeck.broker import MOSQUITTO, ManagedBroker
from tests.conftest import run_cli, spawn, stop_process

CLUSTER = "sizes"


def test_keyframes_the_broker_drops_are_said_as_too_large(tmp_path):
    conf = "listener {port} 127.0.0.1\nallow_anonymous true\nmessage_size_limit 3000\n"
    with ManagedBroker(MOSQUITTO, workdir=tmp_path, config=conf) as broker:
        agent = spawn("agent", "--broker", str(broker.url), "--cluster", CLUSTER, "--node-id",
                      "gpu0001", "--interval", "1", log=tmp_path / "agent.log")
        try:
            res = run_cli("status", "--json", "--wait", "15", "--cluster", CLUSTER,
                          "--broker", str(broker.url))
        finally:
            stop_process(agent)
    node = json.loads(res.stdout)["nodes"][0]
    assert node["verdict"] == "waiting", node
    h1 = node["findings"][0]
    assert "keyframe asks and none came: the broker most likely drops its keyframes" in h1, h1
    assert "such as 'viewer'" not in h1
    assert "message_size_limit or max_packet_size below their size" in res.stderr, res.stderr
    assert "such as 'viewer'" not in res.stderr, res.stderr
