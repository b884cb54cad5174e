"""`fleetdeck status --command-key` and `retire --command-key` sign their keyframe asks
(docs/security.md, "Signed commands"): they took the key and never used it, so a fleet whose
agents obey only signed commands rejected every ask ("unsigned command … give the sender
--command-key FILE", to a sender that had been given it), and status read the nodes waiting
until their periodic keyframe."""

import json
import time
from pathlib import Path

from tests.conftest import run_cli, spawn, stop_process

CLUSTER = "sgn"
NODES = 6


def wait_for_log(log: Path, text: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while text not in (log.read_text() if log.exists() else ""):
        assert time.monotonic() < deadline, f"never logged {text!r}: {log.read_text()}"
        time.sleep(0.2)


def test_status_signs_its_keyframe_asks_with_the_command_key(mosquitto, tmp_path):
    key = tmp_path / "command.key"
    key.write_bytes(b"s" * 32)
    key.chmod(0o600)
    log = tmp_path / "sim.log"
    sim = spawn("sim", "--broker", str(mosquitto.url), "--cluster", CLUSTER, "--nodes",
                str(NODES), "--command-key", str(key), log=log)
    try:
        wait_for_log(log, f"all {NODES} agents connected")
        # Past the agents' first keyframes: what status hears next are deltas, which it
        # reads only once a keyframe it asks for comes (docs/protocol.md, "Gaps").
        time.sleep(3)
        before = len(log.read_text())
        # An explicit --wait does not stretch to the agents' periodic keyframe (30 s): a node
        # whose ask was rejected is still 'waiting' at its end.
        res = run_cli("status", "--broker", str(mosquitto.url), "--cluster", CLUSTER,
                      "--command-key", str(key), "--wait", "4", "--json")
        assert res.returncode == 0, res.stderr
        verdicts = {n["id"]: n["verdict"] for n in json.loads(res.stdout)["nodes"]}
        assert verdicts == {f"gpu{i:04d}": "ok" for i in range(1, NODES + 1)}, res.stderr
        said = log.read_text()[before:]
        assert "rejected command" not in said, said
    finally:
        stop_process(sim)


def test_retire_signs_its_keyframe_asks_with_the_command_key(mosquitto, tmp_path):
    """retire took --command-key and sent its keyframe asks unsigned: a signed fleet's agents
    rejected each one ("unsigned command … give the sender --command-key FILE")."""
    key = tmp_path / "command.key"
    key.write_bytes(b"r" * 32)
    key.chmod(0o600)
    log = tmp_path / "sim.log"
    sim = spawn("sim", "--broker", str(mosquitto.url), "--cluster", CLUSTER, "--nodes",
                str(NODES), "--command-key", str(key), log=log)
    try:
        wait_for_log(log, f"all {NODES} agents connected")
        time.sleep(3)  # past the agents' first keyframes (as above)
        before = len(log.read_text())
        res = run_cli("retire", "gpu0002", "--broker", str(mosquitto.url), "--cluster", CLUSTER,
                      "--command-key", str(key), "--audit-log", str(tmp_path / "audit.jsonl"))
        assert res.returncode == 2, res.stdout + res.stderr
        assert "gpu0002 is online now (telemetry heard)" in res.stderr, res.stderr
        said = log.read_text()[before:]
        assert "rejected command" not in said, said
    finally:
        stop_process(sim)
