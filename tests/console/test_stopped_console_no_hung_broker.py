"""A TUI console SIGSTOPped past its keepalive, then SIGCONT: the tick it resumed said "broker
connection lost (the broker has not answered for 28 s (hung?))", then "back after 29 s",
beside its own "this console did not run for 28 s" (2026-12-07 drill, in tmux): what the
broker sent meanwhile waited unread in the socket, and the tick came before the link read it.
The broker's silence counts from the resume (console/sight_watch.py)."""

import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO, spawn, stop_process

pytestmark = [pytest.mark.tmux, pytest.mark.needs("tmux", "mosquitto")]

CLUSTER = "stopped"


def connection_lines(db) -> list[str]:
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return [row[0] for row in con.execute(
                "SELECT message FROM events WHERE kind = 'connection' ORDER BY ts")]
        finally:
            con.close()
    except sqlite3.OperationalError:
        return []  # not made yet


@pytest.mark.timeout(150)
def test_a_console_that_did_not_run_does_not_call_its_broker_hung(mosquitto, tmp_path):
    socket = f"fd-stopped-{os.getpid()}"

    def tmux(*args: str) -> str:
        return subprocess.run(["tmux", "-L", socket, *args], capture_output=True, text=True,
                              check=False).stdout

    db = tmp_path / "console.db"
    sim = spawn("sim", "--broker", str(mosquitto.url), "--cluster", CLUSTER, "--nodes", "2",
                log=tmp_path / "sim.log")
    tmux("new-session", "-d", "-s", "c", "-x", "160", "-y", "48",
         # Not exec'd: tmux sends SIGCONT at once to a pane's own process that stops.
         f"cd {REPO} && {sys.executable} -m fleetdeck.cli console --broker {mosquitto.url} "
         f"--cluster {CLUSTER} --db {db} --audit-log {tmp_path / 'audit.jsonl'}; sleep 60")
    try:
        deadline = time.monotonic() + 60
        while "Nodes 2" not in tmux("capture-pane", "-p", "-t", "c"):
            assert time.monotonic() < deadline, tmux("capture-pane", "-p", "-t", "c")
            time.sleep(0.3)
        time.sleep(3)  # its first keyframes heard, its store written
        shell = tmux("display", "-p", "-t", "c", "#{pane_pid}").strip()
        pid = int(subprocess.run(["pgrep", "-P", shell], capture_output=True, text=True,
                                 check=True).stdout.split()[0])
        os.kill(pid, signal.SIGSTOP)
        time.sleep(20)  # past 1.5 x its keepalive (10 s): the silence it would call a hang
        os.kill(pid, signal.SIGCONT)
        deadline = time.monotonic() + 40
        while not any("did not run" in line for line in connection_lines(db)):
            assert time.monotonic() < deadline, (connection_lines(db),
                                                 tmux("capture-pane", "-p", "-t", "c"))
            time.sleep(0.5)
        time.sleep(8)  # what it says of its broker once it reads again (stored each tick)
        lines = connection_lines(db)
    finally:
        tmux("kill-server")
        stop_process(sim)
    assert not [line for line in lines if "has not answered" in line or "hung?" in line], lines
