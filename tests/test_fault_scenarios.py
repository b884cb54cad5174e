"""Fault scenarios judged end to end with real processes: Mosquitto, `fleetdeck sim`, `fleetdeck
inject` and a one-shot `fleetdeck status --json`, as an operator would run them
(docs/scenarios.md, "Fault kinds")."""

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, fleetdeck_cmd, run_cli, spawn, stop_process

SCENARIO = """
[fleet]
nodes = 4
hang_timeout = "10m"

[[job]]
name = "big"
nodes = 2
steps = 100000
step_time = "0.5s"

[[job]]
name = "small"
nodes = 1
steps = 100000
step_time = "0.5s"
"""


def status_json(url: str, cluster: str, wait: float = 3.0) -> dict:
    res = run_cli("status", "--broker", url, "--cluster", cluster, "--json", "--wait", str(wait))
    assert res.returncode in (0, 1), res.stderr  # 1: some node is not ok
    return json.loads(res.stdout)


def inject(url: str, cluster: str, *args: str) -> None:
    res = run_cli("inject", "--broker", url, "--cluster", cluster, *args)
    assert res.returncode == 0, res.stderr


def until(url: str, cluster: str, check, timeout: float = 40.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        res = run_cli("status", "--broker", url, "--cluster", cluster, "--json", "--wait", "2")
        out = json.loads(res.stdout) if res.stdout.startswith("{") else None
        if out is not None and check(out):
            return out
        assert time.monotonic() < deadline, f"timed out; last status: {res.stdout[-2000:]}"


def nodes_of(out: dict) -> dict[str, dict]:
    return {n["id"]: n for n in out["nodes"]}


def test_dead_node_is_not_taken_for_a_dead_agent_by_a_console_that_starts_late(
        mosquitto, tmp_path: Path) -> None:
    """Node death stops the ranks with the agent; agent death leaves them stepping. A console
    that connects after both (a one-shot `status`) reads the jobs' retained statuses at once:
    the dead node's job, stalled at its last step, must not read as "still stepping — restart
    the agent, do not drain" just because the console only now heard of it."""
    url, cluster = str(mosquitto.url), "deadnode"
    scenario = tmp_path / "two-jobs.toml"
    scenario.write_text(SCENARIO)
    sim = spawn("sim", "--broker", url, "--cluster", cluster, "--scenario", str(scenario),
                "--seed", "5", log=tmp_path / "sim.log")
    try:
        out = until(url, cluster, lambda o: sum(j["state"] == "R" for j in o["jobs"]) == 2)
        jobs = {j["name"]: j for j in out["jobs"]}
        big, small = jobs["big"], jobs["small"]
        dead_node, dead_agent = big["nodes"][0], small["nodes"][0]
        inject(url, cluster, "node_death", f"node={dead_node}")
        inject(url, cluster, "agent_death", f"node={dead_agent}")
        time.sleep(3.0)  # both wills fired; the big job stalls at its next collective
        out = status_json(url, cluster)
    finally:
        assert stop_process(sim) == 0
    nodes = nodes_of(out)
    node = nodes[dead_node]
    assert node["verdict"] == "offline"
    assert node["job_still_stepping"] is None, node
    assert node["action"].startswith("check the node"), node["action"]
    assert not any("still stepping" in f for f in node["findings"]), node["findings"]
    agent = nodes[dead_agent]
    assert agent["verdict"] == "offline"
    assert agent["job_still_stepping"] == small["job_id"], agent
    assert agent["action"].startswith("restart the agent"), agent["action"]


def test_rate_findings_name_their_threshold(mosquitto, tmp_path: Path) -> None:
    """A symbol storm and a PCIe replay storm: each finding names the port or GPU and the
    threshold it crossed (docs/architecture.md, "Health rules"), so the on-call need not look
    up why 342 symbol errors drain a node and 20 do not."""
    url, cluster = str(mosquitto.url), "rates"
    sim = spawn("sim", "--broker", url, "--cluster", cluster, "--nodes", "4", "--seed", "2",
                log=tmp_path / "sim.log")
    try:
        until(url, cluster, lambda o: o["totals"]["by_verdict"].get("ok") == 4)
        inject(url, cluster, "symbol_storm", "node=gpu0002", "port=6", "rate=200")
        inject(url, cluster, "pcie_replay", "node=gpu0003", "gpu=5", "per_min=1200")
        out = status_json(url, cluster, wait=4.0)
    finally:
        assert stop_process(sim) == 0
    nodes = nodes_of(out)
    storm = [f for f in nodes["gpu0002"]["findings"] if f.startswith("N3 ")]
    assert storm and storm[0].startswith("N3 mlx5_ib6:1: ") and storm[0].endswith(
        "symbol errors/h (> 120/h)"), nodes["gpu0002"]["findings"]
    (replay,) = nodes["gpu0003"]["findings"]
    assert replay.startswith("G11 gpu5: PCIe replay ") and replay.endswith(
        "/min (> 31/min)"), replay
    assert nodes["gpu0003"]["verdict"] == "degraded"


@pytest.mark.timeout(300)
def test_three_symbol_error_episodes_in_an_hour_escalate_to_drain(
        mosquitto, tmp_path: Path) -> None:
    """NVSentinel: a port whose errors come back to the warning level (N4, > 10 symbol
    errors/s) three times within an hour drains. Bursts of 20/s for 1 s, 70 s apart (an
    episode ends a minute after its last warning): about 20 symbol errors each, under the
    hourly budget that drains by itself (N3, > 120/h)."""
    url, cluster = str(mosquitto.url), "episodes"
    sim = spawn("sim", "--broker", url, "--cluster", cluster, "--nodes", "2", "--seed", "4",
                log=tmp_path / "sim.log")
    try:
        until(url, cluster, lambda o: o["totals"]["by_verdict"].get("ok") == 2)
        watch = subprocess.Popen(
            fleetdeck_cmd("status", "--broker", url, "--cluster", cluster, "--json",
                          "--wait", "160"),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
        time.sleep(3.0)
        for burst in range(3):
            if burst:
                time.sleep(70.0)
            inject(url, cluster, "symbol_storm", "node=gpu0001", "port=3", "rate=20",
                   "duration=1s")
        stdout, stderr = watch.communicate(timeout=200)
    finally:
        assert stop_process(sim) == 0
    assert stdout.startswith("{"), stderr
    node = nodes_of(json.loads(stdout))["gpu0001"]
    assert node["verdict"] == "failed", node
    assert "N4 mlx5_ib3:1: 3 degradation episodes in the last hour (≥ 3/h escalate)" in node[
        "findings"], node["findings"]
    assert node["action"].startswith("drain"), node["action"]
