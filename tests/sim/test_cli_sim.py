"""`fleetdeck sim` + `fleetdeck inject` as real processes against Mosquitto."""

import json
import time

from tests.conftest import run_cli, spawn, stop_process


def test_inject_into_a_running_sim_shows_in_status(mosquitto, tmp_path):
    url = str(mosquitto.url)
    sim = spawn("sim", "--broker", url, "--cluster", "inj", "--nodes", "8", "--seed", "2",
                log=tmp_path / "sim.log")
    try:
        deadline = time.monotonic() + 30
        while True:
            res = run_cli("inject", "--broker", url, "--cluster", "inj", "xid79",
                          "node=gpu0003", "gpu=1", "--wait", "2")
            if res.returncode == 0 or time.monotonic() > deadline:
                break
        assert res.returncode == 0, res.stderr
        assert res.stdout.strip() == "injected: xid79 node=gpu0003 gpu=1"
        bad = run_cli("inject", "--broker", url, "--cluster", "inj", "ib_flap",
                      "node=gpu0100")
        assert bad.returncode != 0 and "no node 'gpu0100'" in bad.stderr
        while True:
            out = run_cli("status", "--broker", url, "--cluster", "inj", "--json", "--wait", "2")
            nodes = {n["id"]: n for n in json.loads(out.stdout)["nodes"]}
            if nodes.get("gpu0003", {}).get("verdict") == "failed" or time.monotonic() > deadline:
                break
        assert nodes["gpu0003"]["verdict"] == "failed" and "G1" in nodes["gpu0003"]["reasons"]
        assert nodes["gpu0001"]["verdict"] == "ok"
    finally:
        assert stop_process(sim) == 0


def test_inject_without_a_simulator_says_so(mosquitto):
    res = run_cli("inject", "--broker", str(mosquitto.url), "--cluster", "nobody", "agent_death",
                  "node=gpu0001", "--wait", "1")
    assert res.returncode != 0 and "no simulator answered" in res.stderr


def test_sim_refuses_an_unknown_scenario():
    res = run_cli("sim", "--scenario", "nosuch", "--broker", "mqtt://127.0.0.1:1")
    assert res.returncode != 0 and "no built-in scenario 'nosuch'" in res.stderr


def test_a_fleet_without_its_broker_says_so_in_a_few_lines(mosquitto, tmp_path):
    """With the broker down, `sim --nodes 64` logged 267 lines in 10 s, one per agent per
    retry, and its scheduler said "connection lost" of a broker it never reached (a
    newcomer's run): the fleet's agents say it in one line every 10 s, and once, when the
    broker is there, that they are all connected again (a 3 a.m. drive: the log ended on
    "cannot reach")."""
    import signal
    import time

    mosquitto.stop()
    log = tmp_path / "sim.log"
    sim = spawn("sim", "--broker", str(mosquitto.url), "--cluster", "down", "--nodes", "64",
                log=log)
    try:
        time.sleep(12)
        warnings = [ln for ln in log.read_text().splitlines() if "WARNING" in ln]
        mosquitto.start()
        deadline = time.monotonic() + 60
        while "agents connected to the broker" not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.5)
    finally:
        sim.send_signal(signal.SIGINT)
        sim.wait(timeout=30)
    assert 2 <= len(warnings) <= 6, warnings
    assert any("64 of 64 agents: cannot reach the MQTT broker" in ln for ln in warnings), warnings
    assert not any("connection lost" in ln for ln in warnings), warnings
    assert log.read_text().count("all 64 agents connected to the broker") == 1
