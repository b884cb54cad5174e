"""The real program in tmux against a real Mosquitto and ``fleetdeck sim``: drain with a reason."""

import subprocess
import sys
import time

import pytest

from tests.conftest import REPO, spawn, stop_process

pytestmark = [pytest.mark.tmux, pytest.mark.needs("tmux", "mosquitto")]


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, check=False).stdout


def wait_for(session: str, text: str, timeout: float = 30.0) -> str:
    """Until ``text`` is on the pane's screen: a program's start-up (Python, Textual, its
    first connect) takes seconds on an idle machine and several times that on a loaded one."""
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = tmux("capture-pane", "-p", "-t", session)
        if text in screen:
            return screen
        time.sleep(0.2)
    size = tmux("display", "-p", "-t", session, "#{window_width}x#{window_height}")
    raise AssertionError(f"'{text}' never appeared ({size.strip()}); last screen:\n{screen}")


def test_drain_in_tmux(mosquitto, tmp_path):
    sim = spawn("sim", "--broker", str(mosquitto.url), "--cluster", "e2e", "--nodes", "6",
                "--interval", "0.5", log=tmp_path / "sim.log")
    session = f"fd-e2e-{int(time.time() * 1000) % 10**8}"
    audit = tmp_path / "audit.jsonl"
    # Start after the size is pinned: a tmux server started without a client may begin at
    # 80x24 whatever -x/-y say.
    cmd = (f"sleep 1; cd {REPO} && exec {sys.executable} -m fleetdeck.cli console "
           f"--broker {mosquitto.url} --cluster e2e --operator erin --audit-log {audit} --tick 0.3")
    tmux("new-session", "-d", "-s", session, "-x", "160", "-y", "48", cmd)
    tmux("set-option", "-t", session, "window-size", "manual")
    tmux("resize-window", "-t", session, "-x", "160", "-y", "48")
    try:
        wait_for(session, "Nodes 6")
        tmux("send-keys", "-t", session, "2")
        wait_for(session, "gpu0006")
        tmux("send-keys", "-t", session, "-l", "/")
        wait_for(session, "applies as you type")
        tmux("send-keys", "-t", session, "-l", "gpu0004")
        tmux("send-keys", "-t", session, "Enter")
        wait_for(session, "1/6 nodes")
        tmux("send-keys", "-t", session, "r")
        wait_for(session, "Drain 1 node: gpu0004")
        tmux("send-keys", "-t", session, "-l", "PSU fault INC-42")
        tmux("send-keys", "-t", session, "Enter")
        screen = wait_for(session, "drain  ")  # the STATE column says drain (DRAINED)
        assert "gpu0004" in screen
        tmux("send-keys", "-t", session, "Enter")
        wait_for(session, "DRAINED Reason=PSU fault INC-42 [erin@")
        tmux("send-keys", "-t", session, "5")
        wait_for(session, "done (DRAINED)")
        assert '"outcome": "done"' in audit.read_text()
    finally:
        tmux("kill-session", "-t", session)
        stop_process(sim)
