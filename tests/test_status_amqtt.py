"""`fleetdeck status` against the demo's embedded amqtt broker, run again and again.

amqtt 0.12 leaves a client's SUBSCRIBE unacknowledged when another client's CONNECT overlaps it
(its connect race: the CONNECT walks every subscription to hand out retained messages). `status`
connected its watch and its broker-uptime probe at the same moment, so against a demo of 32 nodes
one run in two said "no answer (CONNACK) within 5 s" (a newcomer's run without Mosquitto).
"""

from tests.conftest import run_cli, spawn, stop_process
from tests.test_e2e import wait_for_nodes

NODES = 24
"""Enough retained births and statuses that a CONNECT's walk over them overlaps a SUBSCRIBE."""
RUNS = 10


def test_status_on_amqtt_answers_every_time(amqtt_broker, tmp_path):
    url = str(amqtt_broker.url)
    sim = spawn("sim", "--broker", url, "--cluster", "amq", "--nodes", str(NODES),
                "--connect-concurrency", "1", log=tmp_path / "sim.log")
    try:
        wait_for_nodes(url, "amq", NODES)
        failed = []
        for _ in range(RUNS):
            res = run_cli("status", "--broker", url, "--cluster", "amq", "--wait", "1")
            if res.returncode != 0:
                failed.append(res.stderr.strip())
        for _ in range(2):  # two clusters: two watches and the probe, one connect at a time
            res = run_cli("status", "--broker", url, "--cluster", "amq,amq2", "--wait", "1")
            if "amq2" not in res.stdout or "no answer" in res.stdout + res.stderr:
                failed.append(res.stdout + res.stderr)
    finally:
        stop_process(sim)
    assert not failed, f"{len(failed)} status run(s) failed: {failed}"
