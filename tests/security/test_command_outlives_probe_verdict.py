"""The CLI's publish probe judges the broker; only the command's own deadline ends the command.

A custom ACL may let an operator's user publish commands but not read command topics back: the
probe's test publish then never comes back and the broker is judged to drop commands, while the
user's commands do reach the nodes (docs/security.md). With a target offline when it was sent,
``fleetdeck drain`` ended 12 s in: 'failed: the broker dropped it ... nothing reached the nodes',
exit 5, 'failed' in the audit log, while the command stayed valid (and re-sent) until its
--timeout and the node, back a few seconds later, would have drained (a review). A probe's echo
late on a loaded broker read the same."""

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleetdeck.broker import free_port
from tests.conftest import REPO, fleetdeck_cmd, spawn, stop_process
from tests.security.deploy import DEPLOY, needs_tools, secured_broker

pytestmark = needs_tools

# Reads every fleetdeck topic but the node command topics, and may publish commands.
NO_READ_BACK = """
user sre
topic read fleetdeck/v1/+/node/+/birth
topic read fleetdeck/v1/+/node/+/status
topic read fleetdeck/v1/+/node/+/telemetry
topic read fleetdeck/v1/+/node/+/event
topic read fleetdeck/v1/+/node/+/ack
topic read fleetdeck/v1/+/job/#
topic read fleetdeck/v1/+/sched/#
topic read fleetdeck/v1/+/ctl/#
topic write fleetdeck/v1/+/node/+/cmd
topic deny fleetdeck/v1/+/node/sre/#
"""


@pytest.fixture
def broker(tmp_path) -> Iterator[tuple[dict[str, str], str, str]]:
    """(credentials, CA file, mqtts URL without user) of the shipped setup plus user 'sre'."""
    acl = tmp_path / "acl"
    acl.write_text(NO_READ_BACK + (DEPLOY / "acl").read_text())
    (tmp_path / "b").mkdir()
    with secured_broker(tmp_path / "b", users=["sre", "gpu0001", "gpu0002"], acl=acl,
                        tls_port=free_port()) as (_broker, creds, tls_port, work):
        yield creds, str(work / "pki" / "ca.crt"), f"127.0.0.1:{tls_port}"


def _agent(creds: dict[str, str], ca: str, where: str, node: str, tmp: Path
           ) -> subprocess.Popen[bytes]:
    return spawn("agent", "--source", "sim", "--node-id", node, "--cluster", "p",
                 "--broker", f"mqtts://{node}:{creds[node]}@{where}", "--ca", ca,
                 "--interval", "0.5", "--state-dir", str(tmp / node), log=tmp / f"{node}.log")


def test_a_drain_the_probe_judges_dropped_still_waits_for_its_node_until_the_timeout(
        broker, tmp_path):
    creds, ca, where = broker
    other = _agent(creds, ca, where, "gpu0002", tmp_path)  # the broker keeps talking
    target = _agent(creds, ca, where, "gpu0001", tmp_path)
    try:
        time.sleep(3)  # gpu0001's retained birth names it to the CLI
        stop_process(target)  # offline (its Last Will) when the drain is sent
        audit = tmp_path / "audit.jsonl"
        t0 = time.monotonic()
        cli = subprocess.Popen(
            fleetdeck_cmd("drain", "gpu0001", "--reason", "drill", "--timeout", "40",
                          "--operator", "sre1", "--audit-log", str(audit), "--cluster", "p",
                          "--ca", ca, "--broker", f"mqtts://sre:{creds['sre']}@{where}"),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
        # Past the probe's verdict (its 10 s from the PUBACK, after the CLI settled).
        time.sleep(16)
        back = time.monotonic() - t0
        target = _agent(creds, ca, where, "gpu0001", tmp_path)
        out, err = cli.communicate(timeout=60)
        took = time.monotonic() - t0
    finally:
        stop_process(target)
        stop_process(other)
    assert cli.returncode == 0, out + err
    assert took > back, (took, back, out)  # it did not end before the node came back
    assert "gpu0001: done (DRAINED)" in out, out
    # The probe's finding was said while it waited, with what it waits for.
    assert ("the broker did not deliver a test publish of this user's on node/+/cmd back "
            "within 10 s") in out, out
    assert "waiting for an answer all the same until the --timeout" in out, out
    assert "nothing reached the nodes" not in out and "failed" not in out, out
    last = json.loads(audit.read_text().splitlines()[-1])
    assert last["outcome"] == "done", last
    assert creds["sre"] not in out + err + audit.read_text()


def test_a_drain_to_a_node_offline_to_the_end_blames_the_node_not_the_acl(broker, tmp_path):
    """The same user, the node offline until the --timeout: the probe's verdict (always
    "dropped" for a user that may not read commands back) came first and the time-out blamed
    the ACL, exit 5, for a node that is down (a review). The node's own state says why: exit
    4, as for any user."""
    creds, ca, where = broker
    other = _agent(creds, ca, where, "gpu0002", tmp_path)
    target = _agent(creds, ca, where, "gpu0001", tmp_path)
    try:
        time.sleep(3)
        stop_process(target)  # offline (its Last Will), and it stays so
        audit = tmp_path / "audit.jsonl"
        res = subprocess.run(
            fleetdeck_cmd("drain", "gpu0001", "--reason", "drill", "--timeout", "14",
                          "--operator", "sre1", "--audit-log", str(audit), "--cluster", "p",
                          "--ca", ca, "--broker", f"mqtts://sre:{creds['sre']}@{where}"),
            capture_output=True, text=True, cwd=REPO, timeout=90, check=False)
    finally:
        stop_process(target)
        stop_process(other)
    out = res.stdout
    assert res.returncode == 4, out + res.stderr
    assert "offline" in out, out
    last = json.loads(audit.read_text().splitlines()[-1])
    assert last["outcome"] == "timed_out" and "offline" in json.dumps(last), last
    assert "most likely dropped it" not in json.dumps(last), last
