"""Fault scenarios judged end to end with real processes: Mosquitto, `fleetdeck sim`, `fleetdeck
inject` and a one-shot `fleetdeck status --json`, as an operator would run them
(docs/scenarios.md, "Fault kinds")."""

import json
import time
from pathlib import Path

from tests.conftest import run_cli, spawn, stop_process

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
