"""`fleetdeck agent --source sysfs --sysfs-root DIR --once` on real captured sysfs trees."""

import json
import os
import subprocess

import pytest

from tests.conftest import run_cli
from tests.security.deploy import DEPLOY, needs_tools


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


@needs_tools
def test_the_documented_check_config_shows_what_the_unit_runs(tmp_path):
    """docs/real-nodes.md's agent.env, read by a shell as its check step says, and the check
    command it gives: ``FLEETDECK_AGENT_ARGS=--interval 10 --kernel-log …`` unquoted made the
    shell run ``10`` ("command not found") and set nothing, and ``fleetdeck agent
    --check-config`` alone printed ``"source": "sim"`` and none of the unit's flags (a
    real-node audit): the installer checked settings the unit does not run with."""
    import re
    import shlex

    from tests.conftest import REPO, fleetdeck_cmd

    doc = (REPO / "docs" / "real-nodes.md").read_text()
    env = re.search(r"tee /etc/fleetdeck/agent\.env >/dev/null <<EOF\n(.*?)\nEOF\n", doc,
                    re.DOTALL)
    assert env, "docs/real-nodes.md no longer writes /etc/fleetdeck/agent.env"
    # A real CA: a --ca that holds no certificate is refused when the URL is read
    # (tests/security/test_tls_file_contents.py).
    subprocess.run(["bash", str(DEPLOY / "mkcerts.sh"), str(tmp_path / "pki"), "broker"],
                   check=True, capture_output=True, timeout=60)
    ca = tmp_path / "pki" / "ca.crt"
    text = (env.group(1).replace("$node", "gpu0001").replace("$pass", "pw")
            .replace("/etc/fleetdeck/ca.crt", str(ca)))
    (tmp_path / "agent.env").write_text(text + "\n")
    (check,) = [ln for ln in doc.splitlines() if "--check-config'" in ln]
    unit = (REPO / "agents" / "systemd" / "fleetdeck-agent.service").read_text()
    (exec_start,) = [ln for ln in unit.splitlines() if ln.startswith("ExecStart=")]
    flags = exec_start.split(" agent ", 1)[1].replace("${STATE_DIRECTORY}", "/var/lib/fleetdeck")
    assert f"agent {flags} --check-config'" in check, "the check runs the unit's flags"
    agent = " ".join(shlex.quote(a) for a in fleetdeck_cmd("agent"))
    script = (check.removeprefix("sudo sh -c '").removesuffix("'")
              .replace("/etc/fleetdeck/agent.env", str(tmp_path / "agent.env"))
              .replace("/opt/fleetdeck/venv/bin/fleetdeck agent", agent))
    res = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60,
                         check=False, cwd=REPO, env={"PATH": os.environ.get("PATH", "")})
    assert res.returncode == 0 and res.stderr == "", res.stderr
    shown = json.loads(res.stdout)
    assert (shown["source"], shown["kernel_log"], shown["interval_s"]) == (
        "sysfs+nvml", "journal", 10.0)
    assert (shown["expect_gpus"], shown["expect_ib_ports"], shown["leaf"]) == (8, 8, "leaf03")
    assert shown["cluster"] == "ndv5-east" and shown["ca"] == str(ca)
    assert shown["broker"] == "mqtts://gpu0001@mqtt.example.internal:8883"


def ended_with_a_wedged_reader(monkeypatch, error: BaseException) -> str:
    """``fleetdeck agent`` whose agent ends by raising ``error`` while its GPU reader's close
    blocks (``nvmlShutdown`` on a wedged driver): how it exits, ``force_exit(CODE)`` (the exit
    without the usual clean-up, which may wait on the same driver) or how else."""
    import threading

    from fleetdeck import runtime
    from fleetdeck.agents import run
    from fleetdeck.agents.agent import NodeAgent
    from fleetdeck.agents.real import source as real_source
    from fleetdeck.agents.real.source import RealSource
    from fleetdeck.cli import main

    from .test_real_source import FakeGpus

    wedged = threading.Event()

    class WedgedGpus(FakeGpus):
        def close(self) -> None:
            wedged.wait(30)  # nvmlShutdown on a wedged driver

    async def ends(self, stop) -> None:
        raise error

    def exited(code: int):
        raise SystemExit(f"force_exit({code})")

    monkeypatch.setattr(real_source, "CLOSE_WAIT_S", 0.2)
    monkeypatch.setattr(run, "make_source",
                        lambda cfg: RealSource("nvml", gpu=WedgedGpus(["0000:01:00.0"])))
    monkeypatch.setattr(NodeAgent, "run", ends)
    monkeypatch.setattr(runtime, "force_exit", exited)
    try:
        main(["agent", "--broker", "mqtt://127.0.0.1:1", "--node-id", "gpu0001",
              "--source", "nvml", "--interval", "1"])
    except SystemExit as exit_:
        return str(exit_)
    else:
        return "returned"
    finally:
        wedged.set()


def test_an_agent_ended_by_an_error_with_a_wedged_reader_still_exits_at_once(
        monkeypatch, capsys):
    """The agent ended by an exception (a broker's) instead of a stop: its reader's close went
    unheard, and the exit waited on the driver after all (a review)."""
    from fleetdeck.errors import UserError

    how = ended_with_a_wedged_reader(monkeypatch, UserError(
        "the broker at 127.0.0.1:1 refused this agent: not authorized."))
    assert how == f"force_exit({UserError('').exit_code})", how
    assert "fleetdeck agent: the broker at 127.0.0.1:1 refused" in capsys.readouterr().err


@pytest.mark.parametrize(("code", "said", "exit_code"),
                         [(3, "", 3), (None, "", 0), ("no GPUs to watch", "no GPUs to watch", 1)])
def test_an_agent_ended_by_sys_exit_with_a_wedged_reader_exits_with_its_code(
        monkeypatch, capsys, code, said, exit_code):
    """``sys.exit`` in the agent: a traceback of SystemExit and exit 1, whatever its code."""
    how = ended_with_a_wedged_reader(monkeypatch, SystemExit(code))
    assert how == f"force_exit({exit_code})", how
    err = capsys.readouterr().err
    assert "Traceback" not in err and "SystemExit" not in err, err
    # What it says past the log's warnings (no --state-dir; the reader left open).
    assert [ln for ln in err.splitlines() if not ln.startswith("WARNING ")] == (
        [said] if said else []), err


@pytest.mark.parametrize("told", [None, 40.0])
def test_a_node_told_its_link_rate_is_judged_by_it(node_exporter_sys, told):
    """N1 wanted 400 Gb/s of every port: every port of an HDR (200) cluster failed "200 Gb/s,
    not 400" (a real-node audit). An agent told its rate (``--expect-ib-rate``) states it in
    its birth, and N1 judges by it; the fixture's mlx4 ports run at 40 (QDR)."""
    from fleetdeck.console.health import NodeHistory, evaluate
    from fleetdeck.protocol import codec
    from fleetdeck.protocol.fast import birth_of
    from fleetdeck.protocol.messages import Birth

    args = ["--expect-ib-rate", f"{told:g}"] if told else []
    res = run_cli("agent", "--source", "sysfs", "--sysfs-root", str(node_exporter_sys),
                  "--once", "--node-id", "ib-host", *args)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert {p.get("expected_rate_gbps") for p in out["birth"]["ib_ports"]} == {told}
    birth = birth_of(codec.decode(Birth, json.dumps(out["birth"]).encode()))
    tel = codec.decode_telemetry(json.dumps(out["telemetry"]).encode())
    hist = NodeHistory()
    hist.remember_inventory(birth)
    hist.update(tel)
    rates = [f.text for f in evaluate(birth, tel, hist) if f.rule == "N1" and "Gb/s" in f.text]
    if told:  # its one 10 Gb/s port (a port trained down) still fails, against 40
        assert rates == ["10 Gb/s, not 40"], rates
    else:
        assert sorted(rates) == ["10 Gb/s, not 400", "40 Gb/s, not 400", "40 Gb/s, not 400"]


def test_a_kernel_log_that_is_a_directory_is_refused_at_start(tmp_path):
    """``--kernel-log /var/log`` (the folder, not the file) ran, and its agent.errors said
    "kernel log: IsADirectoryError: [Errno 21] Is a directory" at each poll: refused at the
    start, in one sentence. A file not there yet is still followed (it may come)."""
    res = run_cli("agent", "--source", "sysfs", "--sysfs-root", str(tmp_path), "--once",
                  "--kernel-log", str(tmp_path))
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.strip().splitlines() == [
        f"fleetdeck agent: --kernel-log: {tmp_path} is a directory: give the log file the "
        "kernel's messages go to (/var/log/kern.log, /var/log/syslog) or 'journal'."]
    later = run_cli("agent", "--source", "sysfs", "--sysfs-root", str(tmp_path), "--once",
                    "--kernel-log", str(tmp_path / "kern.log"))
    assert later.returncode == 0, later.stderr
