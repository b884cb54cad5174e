"""A simulator killed and started again: the job statuses the first one left retained are
cleared by the second (it does not run them), so no console keeps them running for ever; and
between the two, every console reads from the scheduler's retained Last Will that the job
states are as of its death (docs/protocol.md, "Scheduler status")."""

import json
import os
import signal
import time

from tests.conftest import run_cli, spawn, stop_process


def summary(url: str, cluster: str) -> dict:
    out = run_cli("status", "--broker", url, "--cluster", cluster, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def jobs_seen(url: str, cluster: str) -> list[tuple[str, str]]:
    return sorted((j["job_id"], j["state"]) for j in summary(url, cluster)["jobs"])


def test_a_restarted_simulator_clears_the_jobs_it_does_not_run(mosquitto, tmp_path):
    url, cluster = str(mosquitto.url), "gj"
    first = spawn("sim", "--broker", url, "--cluster", cluster, "--nodes", "8", "--jobs", "3",
                  "--seed", "1", log=tmp_path / "sim1.log")
    try:
        deadline = time.monotonic() + 30
        while jobs_seen(url, cluster) != [("4101", "R"), ("4102", "R"), ("4103", "R")]:
            assert time.monotonic() < deadline, jobs_seen(url, cluster)
        assert summary(url, cluster)["scheduler"]["online"] is True
        # A broker this young may not have every agent back yet: status says so (an SRE
        # drill's status read 2 nodes of 32 right after a broker restart, exit 0).
        # Only while a node still waits: over a fleet all heard it was noise (a newcomer's
        # run: every status in a demo's first half minute printed it).
        out = run_cli("status", "--broker", url, "--cluster", cluster, "--json")
        data = json.loads(out.stdout)
        uptime = data["broker_uptime_s"]
        assert uptime is not None
        waiting = not data["nodes"] or any(n["verdict"] == "waiting" for n in data["nodes"])
        assert ("agents may still be reconnecting" in out.stderr) is (
            uptime < 30 and waiting), out.stderr
    finally:
        os.kill(first.pid, signal.SIGKILL)  # no goodbye: its retained statuses stay
        first.wait()
    # A console started after the death learns it from the retained will.
    deadline = time.monotonic() + 30
    while (sched := summary(url, cluster)["scheduler"])["online"]:
        assert time.monotonic() < deadline, sched
    assert sched["name"] == "sim" and sched["jobs_running"] == ["4101", "4102", "4103"]
    assert "offline (heard " in sched["text"] and "restart-job gets no answer" in sched["text"]
    out = run_cli("status", "--broker", url, "--cluster", cluster)
    assert "scheduler sim offline (heard " in out.stdout, out.stdout  # an incident line
    second = spawn("sim", "--broker", url, "--cluster", cluster, "--nodes", "8", "--jobs", "1",
                   "--seed", "2", log=tmp_path / "sim2.log")
    try:
        deadline = time.monotonic() + 30
        while (seen := jobs_seen(url, cluster)) != [("4101", "R")]:
            assert time.monotonic() < deadline, seen  # 4102 and 4103 ran for ever before
        assert summary(url, cluster)["scheduler"]["online"] is True
    finally:
        assert stop_process(second) == 0
    out = summary(url, cluster)
    assert out["totals"]["malformed"] == 0  # a cleared status is no error
    # A clean stop sends no will: the scheduler says it goes.
    assert out["scheduler"]["online"] is False and out["scheduler"]["jobs_running"] == ["4101"]
