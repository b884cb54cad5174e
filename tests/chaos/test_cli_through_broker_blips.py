"""``fleetdeck drain``/``resume`` ride out a broker restart: the session reconnects and re-sends
the command with the same id, so each ends DONE (exit 0) and every audited request has its
outcome line. Before, 6-9 of 13 CLI commands of a chaos run gave up with exit 2 at the first
blip, leaving ``requested`` audit lines with no outcome."""

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import fleetdeck_cmd, run_cli, spawn, stop_process

CLUSTER = "blips"


def _requested(audit: Path) -> int:
    if not audit.exists():
        return 0
    return sum('"requested"' in line for line in audit.read_text().splitlines())


@pytest.mark.timeout(300)
def test_cli_commands_survive_broker_restarts_and_all_end_with_an_outcome(mosquitto, tmp_path):
    url = str(mosquitto.url)
    audit = tmp_path / "audit.jsonl"
    sim = spawn("sim", "--broker", url, "--cluster", CLUSTER, "--nodes", "4", "--jobs", "0",
                "--interval", "0.5", "--keepalive", "2", log=tmp_path / "sim.log")
    results = []
    try:
        deadline = time.monotonic() + 30
        while run_cli("status", "--json", "--broker", url, "--cluster", CLUSTER,
                      "--wait", "1").returncode != 0:
            assert time.monotonic() < deadline, "sim up"
        plan = [("drain", "gpu0001", 1.2), ("drain", "gpu0002", 1.8), ("resume", "gpu0001", 1.5),
                ("drain", "gpu[0003-0004]", 2.4), ("resume", "gpu0002", 2.0)]
        for verb, hosts, kill_after in plan:
            extra = ["--reason", "chaos", "--now"] if verb == "drain" else []
            proc = subprocess.Popen(
                fleetdeck_cmd(verb, hosts, *extra, "--broker", url, "--cluster", CLUSTER,
                              "--audit-log", str(audit), "--timeout", "60"),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            # The blip must hit the command in flight, not its first connect (a CLI that cannot
            # reach the broker at all rightly says so at once, exit 2): on a loaded machine the
            # CLI's start-up alone can outlast kill_after, so the clock starts when the request
            # is audited (the session is up), less the ~1 s start-up the plan was written for.
            wanted = len(results) + 1
            until = time.monotonic() + 60
            while _requested(audit) < wanted and proc.poll() is None:
                assert time.monotonic() < until, f"{verb} {hosts} never issued"
                time.sleep(0.02)
            time.sleep(max(0.1, kill_after - 1.0))
            mosquitto.kill()
            time.sleep(1.0)
            mosquitto.start()
            out, err = proc.communicate(timeout=120)
            results.append((verb, hosts, proc.returncode, out, err))
    finally:
        stop_process(sim)
    for verb, hosts, code, out, err in results:
        assert code == 0, f"{verb} {hosts}: exit {code}\n{out}\n{err}"
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    by_request: dict[str, list[str]] = {}
    for r in records:
        by_request.setdefault(r["request_id"], []).append(r["outcome"])
    assert len(by_request) == len(plan)
    assert all(outcomes == ["requested", "done"] for outcomes in by_request.values()), by_request


@pytest.mark.timeout(120)
def test_a_link_lost_before_sending_gives_up_and_sends_nothing(telling_mosquitto, tmp_path):
    """The broker dies while a drain still waits for its targets' births: the command used to
    wait for ever, silent, and sent the drain whenever the broker came back (a drill:
    ``--timeout 10``, drained 54 s later). Now it says the link is lost and refuses once it
    stayed lost for 10 s (or --timeout): exit 2, audited as refused, nothing sent."""
    from tests.conftest import subscribers

    broker = telling_mosquitto
    audit = tmp_path / "audit.jsonl"
    # No agent of this cluster: on a broker just started, unknown targets are waited for
    # (their agents may still be reconnecting), so the command sits before sending.
    proc = subprocess.Popen(
        fleetdeck_cmd("drain", "gpu0001", "--reason", "drill", "--broker", str(broker.url),
                      "--cluster", "nobody", "--audit-log", str(audit), "--timeout", "60"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        until = time.monotonic() + 30
        while subscribers(broker, "fd-cli-") == 0:
            assert proc.poll() is None and time.monotonic() < until, "the command subscribed"
            time.sleep(0.05)
        broker.kill()
        lost = time.monotonic()
        out, err = proc.communicate(timeout=60)
        took = time.monotonic() - lost
    finally:
        if proc.poll() is None:  # the defect this is about: it waits for ever
            proc.kill()
            proc.communicate()
    assert proc.returncode == 2, (out, err)
    assert "connection to the broker" in out and "is lost; nothing is sent unless it is back " \
        "within 10 s" in out, out
    assert "did not come back within 10 s: nothing was sent" in err, err
    assert took < 25, took  # not the 30 s wait for births, nor for ever
    outcomes = [json.loads(line)["outcome"] for line in audit.read_text().splitlines()]
    assert outcomes == ["refused"], outcomes
