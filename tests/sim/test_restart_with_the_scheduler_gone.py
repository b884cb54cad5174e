"""``restart-job`` while the scheduler is gone: a real simulator SIGKILLed (its scheduler's Last
Will retained), the real CLI, a real Mosquitto. The time-out names the dead scheduler, as a
drain's names a dead node (2026-12-07 drill: "no acknowledgement within 15 s" and nothing
more, the radius's note above it the only word of why)."""

import json
import os
import signal
import time

from tests.conftest import run_cli, spawn


def test_a_restart_the_dead_scheduler_never_answers_says_it_is_offline(mosquitto, tmp_path):
    url, cluster = str(mosquitto.url), "sgone"
    sim = spawn("sim", "--broker", url, "--cluster", cluster, "--nodes", "4", "--jobs", "1",
                "--seed", "1", log=tmp_path / "sim.log")
    try:
        deadline = time.monotonic() + 30
        while True:
            out = run_cli("status", "--broker", url, "--cluster", cluster, "--json")
            jobs = json.loads(out.stdout)["jobs"] if out.returncode == 0 else []
            if any(j["state"] == "R" for j in jobs):
                break
            assert time.monotonic() < deadline, out.stdout + out.stderr
        job = next(j["job_id"] for j in jobs if j["state"] == "R")
    finally:
        os.kill(sim.pid, signal.SIGKILL)  # its scheduler's will: offline, retained
        sim.wait()
    out = run_cli("restart-job", job, "--reason", "drill", "--broker", url, "--cluster", cluster,
                  "--operator", "alice", "--audit-log", str(tmp_path / "audit.jsonl"),
                  "--timeout", "4")
    assert out.returncode == 4, out.stdout + out.stderr
    timed_out = [line for line in out.stdout.splitlines()
                 if line.strip().startswith(f"{job}: timed_out")]
    assert timed_out and all("the scheduler sim is offline" in line for line in timed_out), (
        out.stdout)
    audit = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert "the scheduler sim is offline" in audit[-1]["detail"], audit[-1]
