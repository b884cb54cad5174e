"""`fleetdeck sim` whose scenario kills nodes: no unobserved task, no traceback on stderr."""

import time

from tests.conftest import spawn, stop_process
from tests.sim.sim_logs import wait_for_lines

SCENARIO = """\
name = "kills"
description = "one node dies whole, another loses only its agent, both in the first second"

[fleet]
nodes = 4

[[fault]]
at = "1s"
fault = "node_death"
node = "gpu0002"

[[fault]]
at = "1s"
fault = "agent_death"
node = "gpu0003"
"""


def test_a_scenario_that_kills_nodes_leaves_no_unretrieved_task_exception(mosquitto, tmp_path):
    scenario = tmp_path / "kills.toml"
    scenario.write_text(SCENARIO)
    log = tmp_path / "sim.log"  # stdout and stderr
    sim = spawn("--log-level", "info", "sim", "--broker", str(mosquitto.url), "--cluster",
                "kills", "--scenario", str(scenario), "--interval", "0.5", log=log)
    try:
        wait_for_lines(log, ["agent of gpu0002 killed", "agent of gpu0003 killed"], timeout=30)
        time.sleep(1.5)  # a few more ticks: time for the dead sessions' tasks to be collected
    finally:
        code = stop_process(sim)
    said = log.read_text(errors="replace")
    assert code == 0, said
    assert "Task exception was never retrieved" not in said
    assert "Traceback" not in said
    assert "ERROR" not in said
