"""`fleetdeck agent --source sysfs --sysfs-root DIR --once` on real captured sysfs trees."""

import json

from tests.conftest import run_cli


def test_once_reads_the_node_exporter_sysfs_tree(node_exporter_sys):
    res = run_cli("agent", "--source", "sysfs", "--sysfs-root", str(node_exporter_sys),
                  "--once", "--node-id", "ib-host")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    devs = {(p["dev"], p["port"]) for p in out["birth"]["ib_ports"]}
    assert ("mlx4_0", 1) in devs and ("mlx4_0", 2) in devs
    # Telemetry leaves out what equals the default (port 1): docs/protocol.md.
    ports = {(p["dev"], p.get("port", 1)): p for p in out["telemetry"]["ib_ports"]}
    assert ports[("mlx4_0", 1)]["state"] == "ACTIVE"
    assert out["telemetry"]["gpus"] == []
    assert out["birth"]["source"] == "sysfs"


def test_once_without_infiniband_reports_why_instead_of_failing(tmp_path):
    res = run_cli("agent", "--source", "sysfs", "--sysfs-root", str(tmp_path), "--once",
                  "--node-id", "bare")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["birth"]["ib_ports"] == []
    assert any("infiniband" in e for e in out["birth"]["errors"])
    assert "Traceback" not in res.stderr


def test_nvml_without_a_driver_gives_a_degraded_birth():
    res = run_cli("agent", "--source", "nvml", "--once", "--node-id", "nogpu")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["birth"]["gpus"] == []
    assert out["birth"]["errors"], "a degraded birth says why it has no GPUs"
