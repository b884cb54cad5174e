"""A console user whose ACL block lists node topics one by one and leaves out ``job/+/status``
(a 2026-12-07 drill): Mosquitto grants the subscription and delivers nothing, so the jobs
view said "the scheduler has not published any job status" and ``status --json`` had
``"jobs": []`` while the nodes' telemetry named the jobs they ran. The console now says that
nodes report jobs no status of which was heard, and that the broker may not deliver them."""

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import run_cli, spawn, stop_process
from tests.security.deploy import DEPLOY, needs_tools, secured_broker

pytestmark = needs_tools

CLUSTER = "acl"


def mistaken_acl(path: Path) -> Path:
    """The shipped ACL, the console's reads listed one by one (no jobs, events or acks), and a
    user for the simulator, whose agents all log in as one."""
    acl = (DEPLOY / "acl").read_text().replace(
        "user console\ntopic read fleetdeck/v1/#\n",
        "user console\n" + "".join(f"topic read fleetdeck/v1/+/node/+/{t}\n"
                                   for t in ("birth", "status", "telemetry"))
        + "topic read fleetdeck/v1/+/sched/#\n")
    assert "node/+/telemetry" in acl
    path.write_text("user sim\ntopic readwrite fleetdeck/v1/#\n\n" + acl)
    return path


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> Iterator[tuple[dict[str, str], int]]:
    tmp = tmp_path_factory.mktemp("acljobs")
    (tmp / "b").mkdir()
    with secured_broker(tmp / "b", users=["console", "viewer", "sim"],
                        acl=mistaken_acl(tmp / "acl")) as (broker, creds, _tls, _work):
        sim = spawn("sim", "--nodes", "4", "--jobs", "1", "--cluster", CLUSTER,
                    "--broker", f"mqtt://sim:{creds['sim']}@127.0.0.1:{broker.port}",
                    log=tmp / "sim.log")
        try:
            yield creds, broker.port
        finally:
            stop_process(sim)


def status(creds: dict[str, str], port: int, user: str) -> tuple[dict, str]:
    res = run_cli("status", "--json", "--wait", "3", "--cluster", CLUSTER,
                  "--broker", f"mqtt://{user}:{creds[user]}@127.0.0.1:{port}")
    return json.loads(res.stdout), res.stderr


def test_nodes_running_jobs_no_status_came_of_are_said(fleet):
    creds, port = fleet
    deadline = time.monotonic() + 30
    while True:  # the job starts within a few seconds of the simulator
        seen, _err = status(creds, port, "viewer")
        running = sorted(j["job_id"] for j in seen["jobs"] if j["state"] == "R")
        if running or time.monotonic() > deadline:
            break
    assert running, seen["jobs"]
    assert seen["jobs_unheard"] == []
    out, err = status(creds, port, "console")
    assert out["jobs"] == []
    assert out["jobs_unheard"] == running, out["jobs_unheard"]
    assert "no job status heard, yet nodes report running job" in err, err
    assert "may not deliver job/+/status to this user" in err, err
