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


LONG_JOB = """
[fleet]
nodes = 6

[[job]]
name = "llama-pretrain"
nodes = 6
steps = 1000000
step_time = "1s"
"""


def audit_of(path, rid: str | None = None) -> list[dict]:
    import json

    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if rid is None or r["request_id"] == rid]


def test_a_drain_left_open_by_a_killed_console_is_settled_by_the_next(mosquitto, tmp_path):
    """kill -9 while a drain (finish) is DRAINING: its record stayed "requested" for ever, the
    ack and "status now DRAINING" the operator saw nowhere in the audit, and a restarted console
    never settled it. Now the restarted console appends one outcome, from the node's status."""
    scenario = tmp_path / "long.toml"
    scenario.write_text(LONG_JOB)
    sim = spawn("sim", "--broker", str(mosquitto.url), "--cluster", "crash", "--scenario",
                str(scenario), "--interval", "0.5", log=tmp_path / "sim.log")
    db, audit = tmp_path / "console.db", tmp_path / "audit.jsonl"
    session = f"fd-orphan-{int(time.time() * 1000) % 10**8}"
    tmux("new-session", "-d", "-s", session, "-x", "160", "-y", "48",
         "sleep 1; " + console_cmd(mosquitto.url, db, audit))
    tmux("set-option", "-t", session, "window-size", "manual")
    tmux("resize-window", "-t", session, "-x", "160", "-y", "48")
    tmux("set-option", "-t", session, "remain-on-exit", "on")
    try:
        wait_for(session, "Nodes 6")
        tmux("send-keys", "-t", session, ":")
        tmux("send-keys", "-t", session, "-l", "drain gpu0003")
        tmux("send-keys", "-t", session, "Enter")
        wait_for(session, "Drain 1 node: gpu0003")
        tmux("send-keys", "-t", session, "-l", "bad DIMM OPS-7")
        tmux("send-keys", "-t", session, "Enter")
        # Its job runs on: the drain stays open, DRAINING (cut at the pane's edge).
        wait_for(session, "status now DRA")
        pid = int(tmux("display", "-p", "-t", session, "#{pane_pid}").strip())
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)
        [left] = audit_of(audit)
        assert left["outcome"] == "requested" and left["writer"]["pid"] == pid
        rid = left["request_id"]
        tmux("respawn-pane", "-k", "-t", session, console_cmd(mosquitto.url, db, audit))
        wait_for(session, "Nodes 6")
        shown = time.monotonic()
        while len(audit_of(audit, rid)) < 2:
            assert time.monotonic() < shown + 30, audit_of(audit)
            time.sleep(0.1)
        print(f"settled {time.monotonic() - shown:.2f} s after the restarted console showed "
              "its nodes")
        tmux("send-keys", "-t", session, "5")
        wait_for(session, "done  drain gpu0003 [")  # its line in the restarted timeline
        time.sleep(1.0)  # a second settlement, were there one, would be written by now
    finally:
        tmux("kill-session", "-t", session)
        stop_process(sim)
    recs = audit_of(audit, rid)
    assert [r["outcome"] for r in recs] == ["requested", "done"]
    assert recs[1]["who"] == "erin" and recs[1]["writer"]["pid"] != pid
    assert f"(pid {pid} on " in recs[1]["detail"] and "gpu0003 DRAINING" in recs[1]["detail"]
    con = sqlite3.connect(db)
    rows = con.execute("SELECT outcome FROM audit WHERE request_id = ?", (rid,)).fetchall()
    con.close()
    assert ("done",) in rows  # the restarted console's store has the outcome too
