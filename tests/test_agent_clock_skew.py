"""Real agent processes whose clocks are off the console's (a node whose time sync broke), drained
by the real ``fleetdeck drain`` against a real Mosquitto.

2026-12-07 drill: an agent 5 min ahead refused every command as "expired before it arrived"
(drains, and the consoles' keyframe and re-send asks), and one only 11 s ahead refused every
drain of a TUI (its commands live 10 s); nothing said a clock was the cause."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import REPO, run_cli

CLUSTER = "skew"

SKEWED = """
import sys, time
off = float(sys.argv.pop(1))
real, real_ns = time.time, time.time_ns
time.time = lambda: real() + off
time.time_ns = lambda: real_ns() + int(off * 1e9)
from fleetdeck.cli import main
sys.exit(main())
"""
"""``fleetdeck`` with the wall clock moved by argv[1] seconds: what the agent stamps and judges
commands by (the monotonic clock, which nothing compares across hosts, is left alone)."""


def skewed_agent(url: str, node: str, offset_s: float, tmp_path: Path) -> subprocess.Popen[bytes]:
    log = open(tmp_path / f"{node}.log", "ab")
    return subprocess.Popen(
        [sys.executable, "-c", SKEWED, str(offset_s), "agent", "--broker", url, "--cluster",
         CLUSTER, "--node-id", node, "--interval", "0.5", "--state-dir", str(tmp_path / node)],
        stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, cwd=REPO,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})


def drain(url: str, node: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    # --timeout 10: the lifetime of a TUI's commands (console/commands.py, ACK_TIMEOUT_S).
    return run_cli("drain", node, "--reason", "clock drill", "--broker", url, "--cluster",
                   CLUSTER, "--operator", "alice", "--audit-log", str(tmp_path / "audit.jsonl"),
                   "--timeout", "10")


def test_a_node_clock_ahead_of_the_console_is_drained(mosquitto, tmp_path):
    """The console stamps each command in its node's clock by the offset it reads from the
    node's samples (console/clock.py ``ClockWatch.on_node_clock``): nodes 4 s, 30 s and 5 min
    ahead are drained by a drain that lives 10 s. Before, the ones 30 s and 5 min ahead
    refused it as "expired before it arrived" (exit 3)."""
    url = str(mosquitto.url)
    skews = {"gpu0001": 4.0, "gpu0002": 30.0, "gpu0003": 300.0}
    agents = [skewed_agent(url, node, off, tmp_path) for node, off in skews.items()]
    try:
        for node in skews:
            out = drain(url, node, tmp_path)
            assert out.returncode == 0, (node, out.stdout + out.stderr)
            assert "done (DRAINED)" in out.stdout, (node, out.stdout)
            assert "expired" not in out.stdout, (node, out.stdout)
    finally:
        for proc in agents:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


async def test_a_hung_node_whose_clock_is_behind_never_acts_after_the_console_wait(
        mosquitto, tmp_path):
    """A drain to a node 30 s behind that hangs (SIGSTOP) after the console heard it, woken
    (SIGCONT) once the console's wait timed out, rejects it as expired: stamped by the
    console's clock, the command was valid 30 s longer by the node's, which drained behind the
    operator's back (the hung agent of tests/console/test_one_shot_answers.py, its clock
    behind)."""
    import asyncio

    from fleetdeck.console.commands import Phase
    from fleetdeck.console.session import ConsoleSession
    from tests.conftest import eventually

    url = str(mosquitto.url)
    agent = skewed_agent(url, "gpu0001", -30.0, tmp_path)
    session = ConsoleSession(CLUSTER, url=mosquitto.url, ack_timeout_s=4,
                             client_id="console-behind")
    stop = asyncio.Event()
    watch = asyncio.create_task(session.watch(stop, tick_s=0.1))
    try:
        await eventually(lambda: (session.state.clocks.offset("gpu0001", time.time()) or 0) > 29,
                         30, interval=0.2, message="the node's offset heard")
        os.kill(agent.pid, signal.SIGSTOP)
        try:
            req = session.drain(["gpu0001"], "clock drill")
            await eventually(lambda: req.finished_at is not None, 15, interval=0.1,
                             message="the drain timed out")
            assert req.targets[0].phase is Phase.TIMED_OUT, req.describe()
        finally:
            os.kill(agent.pid, signal.SIGCONT)
        await asyncio.sleep(3.0)  # the woken agent reads the queued drain and its re-sends
    finally:
        stop.set()
        await watch
        os.killpg(agent.pid, signal.SIGKILL)
        agent.wait(10)
    status = run_cli("status", "--json", "--broker", url, "--cluster", CLUSTER, "--wait", "2")
    (node,) = json.loads(status.stdout)["nodes"]
    assert node["drain"] == "none", (node, (tmp_path / "gpu0001.log").read_text()[-2000:])


def test_status_says_which_node_clock_is_off_and_that_it_refuses_commands(mosquitto, tmp_path):
    """The same drill, as ``status`` reads it: the two nodes whose clocks are off read T1 (the
    one 5 min ahead: it refuses commands), the three in sync nothing, from the real agents'
    samples through a real broker (console/clock.py)."""
    url = str(mosquitto.url)
    skews = {"gpu0001": 8.0, "gpu0002": 300.0, "gpu0003": 0.0, "gpu0004": 0.0, "gpu0005": 0.0}
    agents = [skewed_agent(url, node, off, tmp_path) for node, off in skews.items()]
    try:
        for _ in range(20):  # agents started in parallel: until all five have been heard
            res = run_cli("status", "--broker", url, "--cluster", CLUSTER, "--json",
                          "--wait", "4")
            out = json.loads(res.stdout)
            if len(out["nodes"]) == len(skews) and all(n["seq"] for n in out["nodes"]):
                break
        nodes = {n["id"]: n for n in out["nodes"]}
        assert set(nodes) == set(skews), res.stdout + res.stderr
        off = "(most nodes agree: this node's is off)"
        assert nodes["gpu0001"]["findings"] == [
            f"T1 clock 8 s ahead of the fleet's {off}"], nodes["gpu0001"]
        assert nodes["gpu0002"]["findings"] == [
            f"T1 clock 300 s ahead of the fleet's {off}; over 10 s ahead of this console, it "
            "refuses as expired the commands of a console that has not heard its samples"
        ], nodes["gpu0002"]
        for node in ("gpu0001", "gpu0002"):
            assert nodes[node]["verdict"] == "degraded"
            assert nodes[node]["action"].startswith(
                "check the node's time sync (chronyc tracking)"), nodes[node]
        for node in ("gpu0003", "gpu0004", "gpu0005"):
            assert nodes[node]["findings"] == [] and nodes[node]["verdict"] == "ok", nodes[node]
        assert out["clock"]["reference"] == "fleet" and out["clock"]["console_off"] is None

        # (gpu0002 may read waiting here: the console's keyframe ask to it expires before it
        # arrives, so a one-shot status waits for its periodic keyframe, every 30 s.)
        text = run_cli("status", "--broker", url, "--cluster", CLUSTER, "--wait", "4")
        assert "T1 clock 8 s ahead of the fleet's" in text.stdout, text.stdout
    finally:
        for proc in agents:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
