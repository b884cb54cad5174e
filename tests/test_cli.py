"""The CLI a user types: plain one-sentence errors, --once output, schema."""

import json

import pytest

from fleetdeck.broker import free_port
from tests.conftest import run_cli


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["status", "--broker", "http://x:1"], "must start with mqtt://"),
        (["status", "--broker", "mqtt://127.0.0.1:notaport"], "is not valid"),
        (["status", "--wait", "-1"], "--wait must be greater than 0"),
        (["status", "--cluster", "a/b"], "cluster 'a/b'"),
        (["agent", "--node-id", "gpu#1", "--once"], "node id 'gpu#1'"),
        (["sim", "--nodes", "lots"], "--nodes must be a number"),
        (["agent", "--source", "bogus", "--once", "--node-id", "n1"], "unknown reader(s) bogus"),
        (["nosuchcommand"], "invalid choice"),
        (["broker", "--kind", "amqtt", "--bind", "0.0.0.0", "--port", "1"], "loopback only"),
    ],
)
def test_bad_arguments_get_one_plain_sentence(args, needle):
    res = run_cli(*args)
    assert res.returncode != 0
    assert needle in res.stderr
    assert "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_unreachable_broker_is_one_sentence():
    res = run_cli("status", "--broker", f"mqtt://127.0.0.1:{free_port()}", "--wait", "1")
    assert res.returncode != 0
    assert "cannot reach the MQTT broker" in res.stderr
    assert "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_agent_once_prints_birth_and_telemetry_without_a_broker():
    res = run_cli("agent", "--node-id", "gpu0042", "--source", "sim", "--once",
                  "--broker", "mqtt://127.0.0.1:1")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    birth, tel = out["birth"], out["telemetry"]
    assert birth["node"] == tel["node"] == "gpu0042"
    assert len(birth["gpus"]) == 8 and len(birth["ib_ports"]) == 8
    assert {p["dev"] for p in birth["ib_ports"]} == {f"mlx5_ib{i}" for i in range(8)}
    assert tel["seq"] == 1 and tel["bdSeq"] == birth["bdSeq"]
    assert all(p["rate_gbps"] == 400 and p["state"] == "ACTIVE" for p in tel["ib_ports"])


def test_schema_prints_every_message():
    res = run_cli("schema")
    assert res.returncode == 0
    assert set(json.loads(res.stdout)) >= {"birth", "status", "telemetry", "command", "ack"}
