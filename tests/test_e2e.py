"""End to end with real processes: broker -> `fleetdeck sim` -> `fleetdeck status --json`."""

import json
import time

from tests.conftest import run_cli, spawn, stop_process


def status_json(url: str, cluster: str, wait: float = 2.5) -> dict:
    res = run_cli("status", "--broker", url, "--cluster", cluster, "--json", "--wait", str(wait))
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def wait_for_nodes(url: str, cluster: str, n: int, timeout: float = 30) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        res = run_cli("status", "--broker", url, "--cluster", cluster, "--json", "--wait", "2.5")
        if res.returncode == 2 and "no node of cluster" in res.stderr \
                and time.monotonic() < deadline:
            continue  # the fleet has not announced itself yet (exit 2, one sentence)
        assert res.returncode == 0, res.stderr
        out = json.loads(res.stdout)
        if out["totals"]["by_verdict"]["ok"] == n or time.monotonic() > deadline:
            return out


def test_sim_16_nodes_all_ok_in_status_json(mosquitto, tmp_path):
    url = str(mosquitto.url)
    sim = spawn("sim", "--broker", url, "--cluster", "e2e", "--nodes", "16",
                log=tmp_path / "sim.log")
    try:
        out = wait_for_nodes(url, "e2e", 16)
    finally:
        assert stop_process(sim) == 0
    t = out["totals"]
    assert (t["nodes"], t["gpus"], t["ib_ports"], t["malformed"]) == (16, 128, 128, 0)
    assert t["by_verdict"]["ok"] == 16
    assert [n["id"] for n in out["nodes"]] == [f"gpu{i:04d}" for i in range(1, 17)]
    for n in out["nodes"]:
        assert n["verdict"] == "ok" and n["reasons"] == [] and n["online"] is True
        assert n["gpus"] == 8 and n["ib_ports_up"] == 8 and n["drain"] == "none"
        assert n["state"] == "idle"  # sinfo's word, as the console's (no --jobs: idle)


def test_clean_sim_shutdown_marks_every_node_offline(mosquitto, tmp_path):
    url = str(mosquitto.url)
    sim = spawn("sim", "--broker", url, "--cluster", "bye", "--nodes", "4",
                log=tmp_path / "sim.log")
    wait_for_nodes(url, "bye", 4)
    assert stop_process(sim) == 0  # SIGTERM: agents publish offline themselves, exit 0
    out = status_json(url, "bye", wait=1.0)
    assert out["totals"]["by_verdict"]["offline"] == 4
    assert {n["state"] for n in out["nodes"]} == {"down*"}


def test_embedded_amqtt_path(amqtt_broker, tmp_path):
    """The demo's zero-install path: serialised connects survive amqtt's connect race."""
    url = str(amqtt_broker.url)
    sim = spawn("sim", "--broker", url, "--cluster", "amq", "--nodes", "8",
                "--connect-concurrency", "1", log=tmp_path / "sim.log")
    try:
        out = wait_for_nodes(url, "amq", 8)
    finally:
        stop_process(sim)
    assert out["totals"]["nodes"] == 8
    assert out["totals"]["by_verdict"]["ok"] == 8
    assert out["totals"]["malformed"] == 0
