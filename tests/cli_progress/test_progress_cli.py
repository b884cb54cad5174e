"""Long CLI work shows progress on stderr, as plain lines when stderr is not a terminal (these
run with pipes), and stdout stays for the JSON: record, replay --headless, collect and sim
against a real Mosquitto."""

import json
import os
import re
import shutil
import subprocess
import time

import pytest

from fleetdeck.console.cli.progress import DELAY_ENV
from tests.conftest import REPO, fleetdeck_cmd, require_binaries, run_cli, spawn, stop_process

FIXTURE = REPO / "fixtures" / "leaf_switch.jsonl.gz"


@pytest.fixture(autouse=True)
def _show_progress_at_once(monkeypatch):
    """These runs are shorter than the 2 s before progress shows; the processes inherit it."""
    monkeypatch.setenv(DELAY_ENV, "0")


def test_quick_work_prints_no_progress_by_default(monkeypatch):
    monkeypatch.delenv(DELAY_ENV)
    res = run_cli("replay", str(FIXTURE), "--headless", "--summary-json")
    assert res.returncode == 0 and res.stderr == ""
    json.loads(res.stdout)


def test_replay_headless_progress_lines_and_clean_json(tmp_path):
    res = run_cli("replay", str(FIXTURE), "--headless", "--summary-json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)  # nothing but the JSON on stdout
    assert out["cluster"]
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("replaying leaf_switch")]
    assert len(lines) >= 2, res.stderr
    assert re.search(r"100% \(.* of .*\), \d+ s of recorded time$", lines[-1])
    assert "\r" not in res.stderr and "\x1b[" not in res.stderr  # plain: no bar redraws


def test_replay_headless_until_counts_recorded_seconds(tmp_path):
    res = run_cli("replay", str(FIXTURE), "--headless", "--summary-json", "--until", "10")
    assert res.returncode == 0, res.stderr
    json.loads(res.stdout)
    assert "replaying leaf_switch.jsonl.gz: 100% (10 of 10 s of recorded time)" in res.stderr


def test_sim_record_and_collect_say_how_start_up_goes(mosquitto, tmp_path):
    url = str(mosquitto.url)
    sim_log = tmp_path / "sim.log"
    sim = spawn("sim", "--broker", url, "--cluster", "prog", "--nodes", "6", log=sim_log)
    collect = None
    try:
        deadline = time.monotonic() + 30
        while "all 6 agents connected" not in sim_log.read_text():
            assert time.monotonic() < deadline, sim_log.read_text()
            assert sim.poll() is None, sim_log.read_text()
            time.sleep(0.1)
        assert "sim prog: agents connecting:" in sim_log.read_text()

        out = tmp_path / "p.jsonl"
        res = run_cli("record", "--broker", url, "--cluster", "prog", "--out", str(out),
                      "--duration", "3")
        assert res.returncode == 0, res.stderr
        err = res.stderr
        assert "recording p.jsonl: connected to" in err
        ticks = re.findall(r"recording p\.jsonl: +(\d+)% \((\d+) of 3 s\), ([\d,]+) messages",
                           err)
        assert ticks and ticks[-1][0] == "100", err
        assert "recorded " in err and res.stdout == ""

        db = tmp_path / "c.db"
        collect = subprocess.Popen(
            fleetdeck_cmd("collect", "--broker", url, "--cluster", "prog", "--db", str(db)),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
            start_new_session=True)
        seen: list[str] = []
        deadline = time.monotonic() + 30
        assert collect.stderr is not None
        while not any("caught up" in line for line in seen):
            assert time.monotonic() < deadline, seen
            line = collect.stderr.readline()
            assert line, seen  # collect ended early
            seen.append(line.rstrip("\n"))
        text = "\n".join(seen)
        assert f"collect prog: store {db} open" in text
        assert "collect prog: connected to" in text
        assert "collect prog: caught up, 6 of 6 nodes reporting" in text
    finally:
        if collect is not None:
            collect.terminate()
            collect.communicate(timeout=20)
        stop_process(sim)


@pytest.mark.timeout(120)
def test_collect_waits_for_agents_that_sample_less_often(mosquitto, tmp_path):
    """Agents on --interval 12 (the shipped unit's is 10, docs/real-nodes.md) send the first
    sample a new collector can read up to two intervals after it connects: a fixed 10 s
    catch-up read "caught up, 0 of 2 nodes reporting (2 silent so far)" over a healthy fleet."""
    url = str(mosquitto.url)
    sim_log = tmp_path / "sim.log"
    sim = spawn("sim", "--broker", url, "--cluster", "slow", "--nodes", "2", "--interval", "12",
                log=sim_log)
    collect = None
    try:
        deadline = time.monotonic() + 30
        while "all 2 agents connected" not in sim_log.read_text():
            assert time.monotonic() < deadline, sim_log.read_text()
            assert sim.poll() is None, sim_log.read_text()
            time.sleep(0.1)
        # Past their first samples (a session's first is a keyframe): the collector connects
        # between two deltas, asks for a keyframe at the next one, and reads it at the one after.
        time.sleep(13.0)
        collect = subprocess.Popen(
            fleetdeck_cmd("collect", "--broker", url, "--cluster", "slow", "--db",
                          str(tmp_path / "c.db")),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
            start_new_session=True)
        assert collect.stderr is not None
        seen: list[str] = []
        deadline = time.monotonic() + 60
        while not any("caught up" in line for line in seen):
            assert time.monotonic() < deadline, seen
            line = collect.stderr.readline()
            assert line, seen  # collect ended early
            seen.append(line.rstrip("\n"))
        assert "collect slow: caught up, 2 of 2 nodes reporting; writing the store" in seen, seen
    finally:
        if collect is not None:
            collect.terminate()
            collect.communicate(timeout=20)
        stop_process(sim)


def test_progress_goes_to_a_terminal_as_a_bar(tmp_path):
    """Under a pseudo-terminal (script(1)) replay --headless draws a rich bar instead."""
    require_binaries("script")
    script = shutil.which("script")
    assert script is not None
    cmd = " ".join(fleetdeck_cmd("replay", str(FIXTURE), "--headless", "--summary-json"))
    res = subprocess.run([script, "-qec", f"{cmd} > {tmp_path / 'out.json'}", "/dev/null"],
                         capture_output=True, text=True, timeout=60, cwd=REPO,
                         env={**os.environ, "TERM": "xterm-256color", "COLUMNS": "120"},
                         check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "━" in res.stdout and "replaying leaf_switch.jsonl.gz" in res.stdout
    json.loads((tmp_path / "out.json").read_text())


def test_a_spread_sim_counts_the_agents_of_every_process(mosquitto, tmp_path):
    log = tmp_path / "sim.log"
    sim = spawn("sim", "--broker", str(mosquitto.url), "--cluster", "spread", "--nodes", "6",
                "--procs", "2", log=log)
    try:
        deadline = time.monotonic() + 60
        while "all 6 agents connected" not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()
            assert sim.poll() is None, log.read_text()
            time.sleep(0.2)
        counts = re.findall(r"agents connecting: +\d+% \((\d+) of 6 agents\)", log.read_text())
        assert counts and counts[-1] == "6"
        assert [int(c) for c in counts] == sorted(int(c) for c in counts)
    finally:
        stop_process(sim)
