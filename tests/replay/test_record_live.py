"""`fleetdeck record` against a live fleet, then `replay --headless` and `replay --to-broker`."""

import json
import time

from fleetdeck.broker import ManagedBroker
from tests.conftest import run_cli, spawn, stop_process


def test_record_then_replay_headless_reaches_the_live_verdicts(mosquitto, tmp_path):
    url = str(mosquitto.url)
    out = tmp_path / "live.jsonl.gz"
    sim = spawn("sim", "--broker", url, "--cluster", "rec", "--nodes", "4",
                log=tmp_path / "sim.log")
    try:
        res = run_cli("record", "--broker", url, "--cluster", "rec", "--out", str(out),
                      "--duration", "4")
        assert res.returncode == 0, res.stderr
        assert "recorded" in res.stderr
        live = json.loads(run_cli("status", "--broker", url, "--cluster", "rec", "--json",
                                  "--wait", "1.5").stdout)
    finally:
        stop_process(sim)
    rep = run_cli("replay", str(out), "--headless", "--summary-json")
    assert rep.returncode == 0, rep.stderr
    replayed = json.loads(rep.stdout)
    assert replayed["cluster"] == "rec"
    assert replayed["totals"]["nodes"] == live["totals"]["nodes"] == 4
    assert replayed["totals"]["by_verdict"]["ok"] == 4
    assert {n["id"] for n in replayed["nodes"]} == {n["id"] for n in live["nodes"]}
    table = run_cli("replay", str(out), "--headless")
    assert table.returncode == 0 and "gpu0001" in table.stdout


def test_replay_into_a_broker_feeds_a_live_status(mosquitto, tmp_path):
    url = str(mosquitto.url)
    out = tmp_path / "live.jsonl"
    sim = spawn("sim", "--broker", url, "--cluster", "rep", "--nodes", "3",
                log=tmp_path / "sim.log")
    try:
        # The fleet is up before the 3 s recording starts: on a loaded machine the simulator's
        # start alone can take longer than that, and an empty recording replays nothing.
        deadline = time.monotonic() + 30
        while (up := run_cli("status", "--broker", url, "--cluster", "rep", "--wait", "1")
               ).returncode != 0 and time.monotonic() < deadline:
            pass
        assert up.returncode == 0, up.stderr
        assert run_cli("record", "--broker", url, "--cluster", "rep", "--out", str(out),
                       "--duration", "3").returncode == 0
    finally:
        stop_process(sim)
    with ManagedBroker("mosquitto", workdir=tmp_path) as other:
        pusher = spawn("replay", str(out), "--to-broker", str(other.url), "--speed", "2",
                       log=tmp_path / "push.log")
        assert pusher.wait(timeout=30) == 0
        # The recorded births and statuses were re-published retained: a status started now
        # (however late on a loaded machine) sees the replayed fleet.
        status = run_cli("status", "--broker", str(other.url), "--cluster", "rep", "--json",
                         "--wait", "2")
    assert status.returncode == 0, status.stderr
    data = json.loads(status.stdout)
    assert data["totals"]["nodes"] == 3


def test_replay_errors_are_one_sentence(tmp_path):
    res = run_cli("replay", str(tmp_path / "missing.jsonl"), "--headless")
    assert res.returncode != 0 and "does not exist" in res.stderr
    assert "Traceback" not in res.stderr
    # One sentence for every speed out of range, 0 included (it had a sentence of its own).
    for speed in ("500", "0", "0.1"):
        res = run_cli("replay", str(tmp_path / "x"), "--speed", speed, "--headless")
        assert f"--speed must be between 0.5 and 100, not {speed}" in res.stderr
