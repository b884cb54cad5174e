"""A read-only broker user (the shipped ACL's ``viewer``) may publish nothing: Mosquitto drops
its keyframe asks and its commands without a word (MQTT 3.1.1 has no way to say so).

- Its `status` read every node "no telemetry heard from it yet" and a rack "fell silent" (go
  check the network) while every agent was talking; the node's H1 now says its deltas are
  heard and what to do, and no silence incident is raised for it.
- Its drain read "no acknowledgement within 15 s" and nothing more; it now says that the node
  reports, so the command most likely never reached it, and which ACL right to check."""

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleetdeck.broker import free_port
from tests.conftest import run_cli, spawn, stop_process
from tests.security.deploy import needs_tools, secured_broker

pytestmark = needs_tools

NODES = ["gpu0001", "gpu0002", "gpu0003"]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> Iterator[tuple[dict[str, str], list[str], Path]]:
    """Three agents on the shipped TLS listener, one rack; (credentials, viewer's flags, dir)."""
    tmp = tmp_path_factory.mktemp("viewer")
    (tmp / "b").mkdir()
    with secured_broker(tmp / "b", users=["viewer", *NODES],
                        tls_port=free_port()) as (_broker, creds, tls_port, work):
        ca = str(work / "pki" / "ca.crt")
        agents = [spawn("agent", "--source", "sim", "--node-id", node, "--cluster", "v",
                        "--broker", f"mqtts://{node}:{creds[node]}@127.0.0.1:{tls_port}",
                        "--ca", ca, "--interval", "0.5", "--rack", "r1",
                        "--state-dir", str(tmp / node), log=tmp / f"{node}.log")
                  for node in NODES]
        try:
            time.sleep(3)  # their first keyframes are gone by: deltas only from now on
            yield creds, ["--cluster", "v", "--ca", ca, "--broker",
                          f"mqtts://viewer:{creds['viewer']}@127.0.0.1:{tls_port}"], tmp
        finally:
            for proc in agents:
                stop_process(proc)


def test_a_viewer_status_says_deltas_are_heard_not_that_the_rack_fell_silent(fleet):
    """With a --wait shorter than the keyframe period, a node still talking reads waiting
    (health unknown, exit 3 for --fail-on), not stale (exit 1: a page for a healthy fleet)."""
    creds, viewer, _tmp = fleet
    res = run_cli("status", "--json", "--wait", "2", "--fail-on", "degraded", *viewer)
    out = json.loads(res.stdout)
    nodes = {n["id"]: n for n in out["nodes"]}
    assert set(nodes) == set(NODES), res.stdout
    # Keyframes come every 30 s: within this watch a viewer holds none of them.
    assert any(n["verdict"] == "waiting" for n in nodes.values()), res.stdout
    assert {n["verdict"] for n in nodes.values()} <= {"waiting", "ok"}, res.stdout
    assert res.returncode == 3, res.stderr
    assert "sent telemetry deltas but no keyframe in the 2 s watch" in res.stderr, res.stderr
    for node in nodes.values():
        if node["verdict"] != "waiting":
            continue  # a periodic keyframe came by in the watch: fine
        [h1] = [f for f in node["findings"] if f.startswith("H1")]
        assert "telemetry deltas heard" in h1 and "no telemetry heard" not in h1, h1
        assert "node/+/cmd" in node["action"], node["action"]
    assert not any("fell silent" in inc["title"] for inc in out["incidents"]), out["incidents"]
    assert creds["viewer"] not in res.stdout + res.stderr


def test_a_viewer_status_without_wait_watches_until_the_periodic_keyframes(fleet):
    """A monitoring cron's ``status --fail-on degraded`` as a viewer exited 1 for a healthy
    fleet: its 3.5 s watch read every talking node stale. It now watches on while nodes talk,
    up to the agents' keyframe period (30 s) and a grace."""
    _creds, viewer, _tmp = fleet
    res = run_cli("status", "--json", "--fail-on", "degraded", *viewer)
    out = json.loads(res.stdout)
    assert res.returncode == 0, (res.stderr, [(n["id"], n["verdict"]) for n in out["nodes"]])
    assert {n["id"]: n["verdict"] for n in out["nodes"]} == dict.fromkeys(NODES, "ok")
    assert out["collected_s"] <= 33, out["collected_s"]


DROPPED = ("the broker most likely dropped it: a test publish of this user's on node/+/cmd did "
           "not come back within 10 s either, as when broker user 'viewer' may not publish "
           "there")


def test_a_viewer_drain_that_the_broker_drops_names_the_acl_right(fleet):
    """A --timeout shorter than the broker test's wait: the command's deadline waits for that
    test's verdict, then says plainly that the broker most likely dropped it, exit 5 (it read
    "most likely never reached it", exit 4, as a node that did not answer)."""
    creds, viewer, tmp = fleet
    audit = tmp / "audit.jsonl"
    res = run_cli("drain", "gpu0002", "--reason", "drill", "--timeout", "4", "--operator",
                  "sre1", "--audit-log", str(audit), *viewer)
    assert res.returncode == 5, res.stdout + res.stderr
    assert "no answer: checking whether the broker delivers this user's commands" in res.stdout
    assert f"gpu0002: timed_out (no acknowledgement within 4 s — {DROPPED}" in res.stdout
    assert "hung or cut off" not in res.stdout, res.stdout
    assert res.stdout.strip().splitlines()[-1].startswith(f"drain gpu0002: {DROPPED}"), res.stdout
    last = json.loads(audit.read_text().splitlines()[-1])
    assert last["outcome"] == "timed_out" and DROPPED in last["detail"], last
    assert creds["viewer"] not in res.stdout + res.stderr + audit.read_text()


@pytest.mark.parametrize("command", [["drain", "gpu0003", "--reason", "drill"],
                                     ["resume", "gpu0003"]])
def test_a_viewer_command_is_said_dropped_by_the_broker_not_timed_out(fleet, command):
    """With the default --timeout (60 s) a viewer's drain waited it all out for an ack that
    could never come, then read "timed_out ... most likely never reached it", exit 4 as for a
    node that did not answer. The broker test's verdict is said as it comes (about 10 s in),
    the command waits for its answers until its deadline all the same (it may still land: a
    late echo, a user that may not read commands back), then ends: the broker most likely
    dropped it, which right the user lacks, exit 5, that sentence audited."""
    creds, viewer, tmp = fleet
    audit = tmp / f"audit-{command[0]}.jsonl"
    t0 = time.monotonic()
    res = run_cli(*command, "--timeout", "14", "--operator", "sre1", "--audit-log", str(audit),
                  *viewer)
    took = time.monotonic() - t0
    assert res.returncode == 5, res.stdout + res.stderr
    hint = ("no answer yet, and the broker did not deliver a test publish of this user's on "
            "node/+/cmd back within 10 s: broker user 'viewer' most likely may not publish "
            "node/+/cmd (docs/security.md); waiting for an answer all the same until the "
            "--timeout")
    lines = res.stdout.splitlines()
    said = [i for i, line in enumerate(lines) if line.startswith(hint)]
    ended = [i for i, line in enumerate(lines) if f"gpu0003: timed_out (no acknowledgement "
             f"within 14 s — {DROPPED}" in line]
    assert said and ended and said[0] < ended[0], res.stdout
    assert "failed" not in res.stdout and "nothing reached" not in res.stdout, res.stdout
    assert 14 <= took < 30, took
    last = json.loads(audit.read_text().splitlines()[-1])
    assert last["outcome"] == "timed_out" and DROPPED in last["detail"], last
    assert creds["viewer"] not in res.stdout + res.stderr + audit.read_text()


def test_a_status_as_a_user_the_acl_lets_read_nothing_names_the_acl(fleet):
    """An agent's user (it may read only its own commands) gets its SUBACK, then silence."""
    creds, viewer, _tmp = fleet
    flags = [f.replace(f"viewer:{creds['viewer']}", f"gpu0001:{creds['gpu0001']}")
             for f in viewer]
    res = run_cli("status", "--wait", "1", *flags)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "may broker user 'gpu0001' not read fleetdeck/v1/#" in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and creds["gpu0001"] not in res.stderr
