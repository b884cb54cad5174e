"""A read-only broker user (the shipped ACL's ``viewer``) cannot publish the keyframe asks a
console sends for wire-v2 deltas whose keyframe it missed: Mosquitto drops them without a word.
Its `status` read every node "no telemetry heard from it yet" and a rack "fell silent" (go
check the network) while every agent was talking; the node's H1 now says its deltas are heard
and what to do, and no silence incident is raised for it."""

import json
import time

from fleetdeck.broker import free_port
from tests.conftest import run_cli, spawn, stop_process
from tests.security.deploy import needs_tools, secured_broker

pytestmark = needs_tools

NODES = ["gpu0001", "gpu0002", "gpu0003"]


def test_a_viewer_status_says_deltas_are_heard_not_that_the_rack_fell_silent(tmp_path):
    (tmp_path / "b").mkdir()
    with secured_broker(tmp_path / "b", users=["viewer", *NODES],
                        tls_port=free_port()) as (_broker, creds, tls_port, work):
        ca = str(work / "pki" / "ca.crt")
        agents = [spawn("agent", "--source", "sim", "--node-id", node, "--cluster", "v",
                        "--broker", f"mqtts://{node}:{creds[node]}@127.0.0.1:{tls_port}",
                        "--ca", ca, "--interval", "0.5", "--rack", "r1",
                        "--state-dir", str(tmp_path / node), log=tmp_path / f"{node}.log")
                  for node in NODES]
        try:
            time.sleep(3)  # their first keyframes are gone by: deltas only from now on
            res = run_cli("status", "--json", "--wait", "2", "--cluster", "v", "--broker",
                          f"mqtts://viewer:{creds['viewer']}@127.0.0.1:{tls_port}", "--ca", ca)
        finally:
            for proc in agents:
                stop_process(proc)
    assert res.returncode in (0, 1), res.stderr
    out = json.loads(res.stdout)
    nodes = {n["id"]: n for n in out["nodes"]}
    assert set(nodes) == set(NODES), res.stdout
    # Keyframes come every 30 s: within this watch a viewer holds none of them.
    assert any(n["verdict"] == "stale" for n in nodes.values()), res.stdout
    for node in nodes.values():
        if node["verdict"] != "stale":
            continue  # a periodic keyframe came by in the watch: fine
        [h1] = [f for f in node["findings"] if f.startswith("H1")]
        assert "telemetry deltas heard" in h1 and "no telemetry heard" not in h1, h1
        assert "node/+/cmd" in node["action"], node["action"]
    assert not any("fell silent" in inc["title"] for inc in out["incidents"]), out["incidents"]
    assert creds["viewer"] not in res.stdout + res.stderr
