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


def test_a_node_told_its_sku_counts_says_so_in_its_birth(node_exporter_sys):
    """--expect-gpus / --expect-ib-ports: a node that found fewer than it should have at start
    is judged against what it should have (tests/test_health.py), not against what it found."""
    from fleetdeck.console.health import NodeHistory, evaluate
    from fleetdeck.protocol import codec
    from fleetdeck.protocol.fast import birth_of
    from fleetdeck.protocol.messages import Birth

    res = run_cli("agent", "--source", "sysfs", "--sysfs-root", str(node_exporter_sys),
                  "--once", "--node-id", "ib-host", "--expect-gpus", "8",
                  "--expect-ib-ports", "8")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["birth"]["gpus_expected"] == 8 and out["birth"]["ib_ports_expected"] == 8
    birth = birth_of(codec.decode(Birth, json.dumps(out["birth"]).encode()))
    tel = codec.decode_telemetry(json.dumps(out["telemetry"]).encode())
    hist = NodeHistory()
    hist.update(tel)
    texts = [f"{f.rule} {f.text}" for f in evaluate(birth, tel, hist)]
    assert "G1 0/8 GPUs visible" in texts
    assert any(t.startswith("N1 ") and "/8 IB ports found" in t for t in texts), texts


def test_a_real_node_says_its_leaf_and_rack(node_exporter_sys, tmp_path):
    """Without them every real node sat in one "(no leaf)" group (a real-node drill): the
    agent takes them as flags or from its config file."""
    res = run_cli("agent", "--source", "sysfs", "--sysfs-root", str(node_exporter_sys),
                  "--once", "--node-id", "ib-host", "--leaf", "leaf03", "--rack", "r12")
    assert res.returncode == 0, res.stderr
    topology = json.loads(res.stdout)["birth"]["topology"]
    assert (topology["leaf"], topology["rack"]) == ("leaf03", "r12")
    cfg = tmp_path / "agent.toml"
    cfg.write_text('leaf = "leaf07"\nspine_group = "sg1"\n')
    res = run_cli("agent", "--config", str(cfg), "--source", "sysfs", "--sysfs-root",
                  str(node_exporter_sys), "--once", "--node-id", "ib-host")
    topology = json.loads(res.stdout)["birth"]["topology"]
    assert (topology["leaf"], topology["spine_group"]) == ("leaf07", "sg1")
