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


def test_a_node_clock_ahead_of_the_console_is_drained_or_told_why_not(mosquitto, tmp_path):
    url = str(mosquitto.url)
    ahead = skewed_agent(url, "gpu0001", 4, tmp_path)
    far = skewed_agent(url, "gpu0002", 300, tmp_path)
    try:
        # 4 s ahead, within the command's 10 s: drained. (A command gets no allowance past its
        # lifetime for clocks: it expires with the console's wait, so a hung agent never acts
        # on it after the operator read "timed out", agents/guard.py EXPIRY_SKEW_MS.)
        near = drain(url, "gpu0001", tmp_path)
        assert near.returncode == 0, near.stdout + near.stderr
        assert "done (DRAINED)" in near.stdout, near.stdout

        # 5 min ahead: still refused, and the answer says how late and that a clock may be why.
        off = drain(url, "gpu0002", tmp_path)
        assert off.returncode == 3, off.stdout + off.stderr
        assert "expired before it arrived" in off.stdout, off.stdout
        assert "by this node's clock" in off.stdout, off.stdout
        assert "check its time sync" in off.stdout, off.stdout
    finally:
        for proc in (ahead, far):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


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
            "refuses commands as expired"], nodes["gpu0002"]
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
