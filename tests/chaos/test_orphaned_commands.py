"""A ``fleetdeck drain`` SIGKILLed while its node is DRAINING left its audit record at
``requested`` for ever; the next one-shot command on that log settles it from the node's status
(docs/reliability.md, "A console killed with a command open")."""

import json
import os
import signal
import subprocess
import time

import pytest

from tests.conftest import fleetdeck_cmd, run_cli, spawn, stop_process

pytestmark = pytest.mark.needs("mosquitto")

CLUSTER = "orphan"
LONG_JOB = """
[fleet]
nodes = 4

[[job]]
name = "llama-pretrain"
nodes = 4
steps = 1000000
step_time = "1s"
"""


def records(path, rid: str) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if r["request_id"] == rid]


@pytest.mark.timeout(180)
def test_a_killed_drain_is_settled_by_the_next_command(mosquitto, tmp_path):
    url = str(mosquitto.url)
    scenario, audit = tmp_path / "long.toml", tmp_path / "audit.jsonl"
    scenario.write_text(LONG_JOB)
    sim = spawn("sim", "--broker", url, "--cluster", CLUSTER, "--scenario", str(scenario),
                "--interval", "0.5", log=tmp_path / "sim.log")
    out = tmp_path / "drain.out"
    try:
        deadline = time.monotonic() + 30
        while run_cli("status", "--json", "--broker", url, "--cluster", CLUSTER,
                      "--wait", "1").returncode != 0:
            assert time.monotonic() < deadline, "sim up"
        with out.open("w") as fh:
            drain = subprocess.Popen(
                fleetdeck_cmd("drain", "gpu0002", "--reason", "bad DIMM OPS-7", "--broker", url,
                              "--cluster", CLUSTER, "--audit-log", str(audit), "--timeout",
                              "120"), stdout=fh, stderr=subprocess.STDOUT)
        until = time.monotonic() + 60
        while "status now DRAINING" not in out.read_text():
            assert drain.poll() is None and time.monotonic() < until, out.read_text()
            time.sleep(0.1)
        os.kill(drain.pid, signal.SIGKILL)
        drain.wait()
        [left] = [json.loads(line) for line in audit.read_text().splitlines()]
        assert left["outcome"] == "requested"
        rid = left["request_id"]
        # Any later command on that log and cluster settles it: here a resume of another node.
        after = run_cli("resume", "gpu0001", "--broker", url, "--cluster", CLUSTER,
                        "--audit-log", str(audit), "--timeout", "30")
        assert after.returncode == 0, after.stdout + after.stderr
    finally:
        stop_process(sim)
    recs = records(audit, rid)
    assert [r["outcome"] for r in recs] == ["requested", "done"], recs
    assert (f"seen after the fleetdeck drain that sent it (pid {drain.pid} on "
            in recs[1]["detail"]) and "gpu0002 DRAINING" in recs[1]["detail"]
