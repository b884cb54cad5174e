"""``fleetdeck inject power_cap`` into a real ``fleetdeck sim`` on a real Mosquitto: the console
names the capped GPU's rank a straggler with its limit lowered below its job's other nodes', on
raw telemetry and on the digests of ``fleetdeck collect --shard 1/1``. The judgement
(console/judgements.py ``PowerCap``) had no real process that made a power cap: the simulator's
limit was a constant (docs/scenarios.md, ``power_cap``)."""

import json
import time

import pytest

from tests.conftest import run_cli, spawn, stop_process

CLUSTER = "pcap"
LOWERED = ("GPU power-capped by software (gpu3 sw power cap: ",
           "limit 400 W, below its job's other nodes' 700 W)")


def _inject(url: str, *args: str, deadline: float) -> str:
    """Inject until the simulator answers (it takes a few seconds to subscribe)."""
    while True:
        res = run_cli("inject", "--broker", url, "--cluster", CLUSTER, *args, "--wait", "2")
        if res.returncode == 0 or time.monotonic() > deadline:
            assert res.returncode == 0, res.stderr
            return res.stdout.strip()


def _capped(url: str, *extra: str) -> tuple[dict | None, dict]:
    """The job's straggler and the capped node, as ``status --json`` (``extra``) says them."""
    res = run_cli("status", "--broker", url, "--cluster", CLUSTER, "--json", "--wait", "3",
                  *extra)
    assert res.returncode in (0, 1), res.stderr  # 1: a node not ok somewhere
    out = json.loads(res.stdout)
    slow = next((j["straggler"] for j in out["jobs"] if j.get("straggler")), None)
    node = next((n for n in out["nodes"] if n["id"] == "gpu0002"), {})
    return slow, node


def _wait_lowered(url: str, deadline: float, *extra: str) -> tuple[dict, dict]:
    while True:
        slow, node = _capped(url, *extra)
        if (slow is not None and slow["power_limit"] == "lowered") or time.monotonic() > deadline:
            assert slow is not None, node
            return slow, node


@pytest.mark.timeout(240)
def test_an_injected_power_cap_is_a_lowered_limit_on_raw_telemetry_and_digests(mosquitto,
                                                                                  tmp_path):
    url = str(mosquitto.url)
    sim = spawn("sim", "--broker", url, "--cluster", CLUSTER, "--nodes", "6", "--seed", "4",
                log=tmp_path / "sim.log")
    col = spawn("collect", "--broker", url, "--cluster", CLUSTER, "--shard", "1/1", "--db",
                str(tmp_path / "c.db"), log=tmp_path / "collect.log")
    try:
        deadline = time.monotonic() + 60
        said = _inject(url, "submit", "name=train", "nodes=4", "steps=100000", "step_time=1",
                       deadline=deadline)
        assert said.startswith("injected: submit"), said
        # First-fit placement in name order: the job runs on gpu0001-0004.
        said = _inject(url, "power_cap", "node=gpu0002", "gpu=3", "limit=400",
                       deadline=deadline)
        assert said == "injected: power_cap node=gpu0002 gpu=3 limit=400.0", said
        bad = run_cli("inject", "--broker", url, "--cluster", CLUSTER, "power_cap",
                      "node=gpu0002", "limit=50", "--wait", "2")
        assert bad.returncode != 0
        assert "power_cap: limit must be in [100, 700], not '50'" in bad.stderr, bad.stderr

        deadline = time.monotonic() + 90
        for extra in ((), ("--digests",)):
            slow, node = _wait_lowered(url, deadline, *extra)
            assert (slow["node"], slow["rank"]) == ("gpu0002", 8 + 3), (extra, slow)
            assert (slow["power_limit"], slow["power_limit_w"], slow["peer_limit_w"]) == (
                "lowered", 400, 700), (extra, slow)
            assert slow["causes"] == ["power_capped"], (extra, slow)
            assert slow["cause"].startswith(LOWERED[0]) and slow["cause"].endswith(LOWERED[1]), (
                extra, slow["cause"])
            assert slow["slower_pct"] > 30, (extra, slow)  # 0.75 x 645/400 + 0.25: ~1.46x
            assert node["verdict"] == "ok", (extra, node)  # no rule judges bit 0x4
            # Put back live, not drained: a drain loses the job's work since its checkpoint.
            assert node["action"].endswith("power limit (nvidia-smi -q -d POWER: lowered by "
                                           "nvidia-smi -pl or a power budget?) and restore it"), (
                extra, node["action"])
    finally:
        assert stop_process(col) == 0, (tmp_path / "collect.log").read_text()[-2000:]
        assert stop_process(sim) == 0, (tmp_path / "sim.log").read_text()[-2000:]
