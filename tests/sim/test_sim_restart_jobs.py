"""A simulator killed and started again: the job statuses the first one left retained are
cleared by the second (it does not run them), so no console keeps them running for ever."""

import json
import os
import signal
import time

from tests.conftest import run_cli, spawn, stop_process


def jobs_seen(url: str, cluster: str) -> list[tuple[str, str]]:
    out = run_cli("status", "--broker", url, "--cluster", cluster, "--json")
    assert out.returncode == 0, out.stderr
    return sorted((j["job_id"], j["state"]) for j in json.loads(out.stdout)["jobs"])


def test_a_restarted_simulator_clears_the_jobs_it_does_not_run(mosquitto, tmp_path):
    url, cluster = str(mosquitto.url), "gj"
    first = spawn("sim", "--broker", url, "--cluster", cluster, "--nodes", "8", "--jobs", "3",
                  "--seed", "1", log=tmp_path / "sim1.log")
    try:
        deadline = time.monotonic() + 30
        while jobs_seen(url, cluster) != [("4101", "R"), ("4102", "R"), ("4103", "R")]:
            assert time.monotonic() < deadline, jobs_seen(url, cluster)
    finally:
        os.kill(first.pid, signal.SIGKILL)  # no goodbye: its retained statuses stay
        first.wait()
    second = spawn("sim", "--broker", url, "--cluster", cluster, "--nodes", "8", "--jobs", "1",
                   "--seed", "2", log=tmp_path / "sim2.log")
    try:
        deadline = time.monotonic() + 30
        while (seen := jobs_seen(url, cluster)) != [("4101", "R")]:
            assert time.monotonic() < deadline, seen  # 4102 and 4103 ran for ever before
    finally:
        assert stop_process(second) == 0
    out = run_cli("status", "--broker", url, "--cluster", cluster, "--json")
    assert json.loads(out.stdout)["totals"]["malformed"] == 0  # a cleared status is no error
