"""``fleetdeck drain`` waiting for DRAINED while its broker hangs (SIGSTOP: the link stays up, the
broker says nothing). A 3 a.m. drill (Mosquitto stopped 20 s under ``sim --nodes 300``): the
drain said no word of it for the whole wait, then ended "the node is still draining (its jobs
run to completion first)", exit 6, from what it had heard before the hang; the console and
``collect`` beside it said "the broker has not answered for 15 s (hung?)"."""

import json
import os
import signal
import subprocess
import threading
import time

import pytest

from tests.conftest import fleetdeck_cmd, run_cli, spawn, stop_process

CLUSTER = "hung"


@pytest.mark.timeout(180)
def test_a_drain_waiting_through_a_hung_broker_says_so_and_claims_nothing_it_did_not_hear(
        mosquitto, tmp_path):
    url = str(mosquitto.url)
    sim = spawn("sim", "--broker", url, "--cluster", CLUSTER, "--nodes", "4", "--jobs", "1",
                "--interval", "0.5", log=tmp_path / "sim.log")
    broker = mosquitto.proc
    assert broker is not None
    stopped = False
    try:
        busy = None
        deadline = time.monotonic() + 60
        while busy is None:
            assert time.monotonic() < deadline, "no node took the simulator's job"
            out = run_cli("status", "--json", "--broker", url, "--cluster", CLUSTER,
                          "--wait", "1")
            if out.returncode == 0:
                busy = next((n["id"] for n in json.loads(out.stdout)["nodes"]
                             if n["job"] and n["state"] == "alloc"), None)
        proc = subprocess.Popen(
            fleetdeck_cmd("drain", busy, "--reason", "hung drill", "--broker", url,
                          "--cluster", CLUSTER, "--audit-log", str(tmp_path / "audit.jsonl"),
                          "--timeout", "14"),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        assert proc.stdout is not None
        lines: list[str] = []
        draining = threading.Event()

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line)
                if "status now DRAINING" in line:
                    draining.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        assert draining.wait(60), "".join(lines)
        os.kill(broker.pid, signal.SIGSTOP)  # hung, not dead: the sockets stay open
        stopped = True
        code = proc.wait(timeout=60)
        reader.join(10)
    finally:
        if stopped:
            os.kill(broker.pid, signal.SIGCONT)
        stop_process(sim)
    text = "".join(lines)
    assert code == 6, text  # the drain took (acknowledged, DRAINING): unchanged
    hung = [line for line in lines if "has not answered for" in line]
    assert len(hung) == 1 and "(hung?)" in hung[0] and "stays in effect" in hung[0], text
    last = lines[-1]
    assert "the node is still draining" not in last, text
    assert "it was draining when this command lost the broker" in last, text
    assert "not known" in last, text
