"""Console SIGKILL and restart, for real: the TUI process is killed with -9 in tmux and started
again; its picture comes back from retained MQTT state and its SQLite store, and no audit row is
written twice."""

import os
import signal
import sqlite3
import sys
import time

import pytest

from tests.conftest import REPO, spawn, stop_process
from tests.tui.test_tmux_e2e import tmux, wait_for

pytestmark = [pytest.mark.tmux, pytest.mark.needs("tmux", "mosquitto")]


def console_cmd(url, db, audit) -> str:
    return (f"cd {REPO} && exec {sys.executable} -m fleetdeck.cli console --broker {url} "
            f"--cluster crash --operator erin --db {db} --audit-log {audit} --tick 0.3")


def wait_stored(db, count_sql: str, timeout: float = 30.0) -> None:
    """Until ``count_sql`` counts a row in the console's SQLite store (read-only beside it)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
            try:
                if con.execute(count_sql).fetchone()[0]:
                    return
            finally:
                con.close()
        except sqlite3.OperationalError:
            pass  # not created yet, or its tables not yet
        assert time.monotonic() < deadline, f"never stored: {count_sql}"
        time.sleep(0.2)


def test_console_kill_9_and_restart(mosquitto, tmp_path):
    sim = spawn("sim", "--broker", str(mosquitto.url), "--cluster", "crash", "--nodes", "6",
                "--interval", "0.5", log=tmp_path / "sim.log")
    db, audit = tmp_path / "console.db", tmp_path / "audit.jsonl"
    session = f"fd-crash-{int(time.time() * 1000) % 10**8}"
    tmux("new-session", "-d", "-s", session, "-x", "160", "-y", "48",
         "sleep 1; " + console_cmd(mosquitto.url, db, audit))
    tmux("set-option", "-t", session, "window-size", "manual")
    tmux("resize-window", "-t", session, "-x", "160", "-y", "48")
    tmux("set-option", "-t", session, "remain-on-exit", "on")  # keep the pane to respawn it
    try:
        wait_for(session, "Nodes 6")
        tmux("send-keys", "-t", session, ":")
        tmux("send-keys", "-t", session, "-l", "drain gpu0003")
        tmux("send-keys", "-t", session, "Enter")
        wait_for(session, "Drain 1 node: gpu0003")
        tmux("send-keys", "-t", session, "-l", "bad DIMM OPS-7")
        tmux("send-keys", "-t", session, "Enter")
        wait_for(session, "drain 1")  # the modal is gone: keys reach the views again
        tmux("send-keys", "-t", session, "5")
        wait_for(session, "done (DRAINED)")
        # What the restarted console is to show from the store is there before the kill (the
        # store writer's ticks; a fixed 1 s was a guess a loaded machine can outlast).
        wait_stored(db, "SELECT COUNT(*) FROM events WHERE message LIKE '%bad DIMM OPS-7%'")
        wait_stored(db, "SELECT COUNT(*) FROM audit WHERE outcome = 'done'")
        pid = int(tmux("display", "-p", "-t", session, "#{pane_pid}").strip())
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)
        t0 = time.monotonic()
        tmux("respawn-pane", "-k", "-t", session, console_cmd(mosquitto.url, db, audit))
        wait_for(session, "Nodes 6")
        took = time.monotonic() - t0
        tmux("send-keys", "-t", session, "5")
        # The drain event came back from the store, the DRAINED state from retained status.
        wait_for(session, "bad DIMM OPS-7")
        tmux("send-keys", "-t", session, "2")
        screen = wait_for(session, "gpu0003")
        assert "drain " in screen
        print(f"console back with 6 nodes {took:.2f} s after the restart (process start included)")
    finally:
        tmux("kill-session", "-t", session)
        stop_process(sim)
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    rows = con.execute("SELECT request_id, outcome, COUNT(*) FROM audit GROUP BY 1, 2").fetchall()
    con.close()
    assert rows and all(n == 1 for _r, _o, n in rows)
    assert {o for _r, o, _n in rows} >= {"requested", "done"}
