"""RealSource: composing the readers, never raising out of read(), and the systemd unit."""

import configparser
import logging
from pathlib import Path

import pytest

from fleetdeck.agents.real.common import GpuInventoryResult, cap_errors, normalize_pci
from fleetdeck.agents.real.kernel_log import FileFollower
from fleetdeck.agents.real.source import (
    RealSource,
    make_real_source,
    pair_by_bus_order,
    parse_kind,
)
from fleetdeck.agents.real.sysfs_ib import IbReader, read_devices
from fleetdeck.agents.source import Source
from fleetdeck.protocol import codec, messages
from fleetdeck.protocol.fast import GpuSample, Telemetry
from fleetdeck.protocol.messages import (
    Birth,
    DrainMode,
    DrainState,
    GpuInventory,
    Severity,
)

from .conftest import DATA
from .test_real_sysfs_ib import make_port

REPO = Path(__file__).resolve().parents[2]


def fake_proc(root: Path) -> Path:
    (root / "sys" / "kernel" / "random").mkdir(parents=True)
    (root / "sys" / "kernel" / "random" / "boot_id").write_text("0f5d6c1e-boot\n")
    (root / "stat").write_text("cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 1 2 3 4\n")
    (root / "meminfo").write_text("MemTotal:       1000 kB\nMemAvailable:    250 kB\n")
    (root / "uptime").write_text("12345.67 99999.00\n")
    return root


class FakeGpus:
    """A GpuReader with a fixed inventory, like NVML on a healthy node."""

    name = "fake"

    def __init__(self, bus_ids: list[str], fail: bool = False) -> None:
        self.bus_ids = bus_ids
        self.fail = fail
        self.closed = False

    def inventory(self) -> GpuInventoryResult:
        return GpuInventoryResult(
            gpus=[GpuInventory(index=i, pci_bus_id=b, name="NVIDIA H100 80GB HBM3")
                  for i, b in enumerate(self.bus_ids)],
            driver_version="590.48.01", cuda_version="13.1")

    def read(self) -> tuple[list[GpuSample], list[str]]:
        if self.fail:
            raise RuntimeError("driver wedged")
        return [GpuSample(index=i, power_w=100.0) for i in range(len(self.bus_ids))], []

    def close(self) -> None:
        self.closed = True


def test_parse_kind():
    assert parse_kind("sysfs") == ("sysfs",)
    assert parse_kind("sysfs+nvml") == ("sysfs", "nvml")
    assert parse_kind("nvsmi+sysfs") == ("nvsmi", "sysfs")
    for bad in ("", "dcgm", "nvml+nvsmi", "sysfs+sysfs", "sim"):
        with pytest.raises(ValueError):
            parse_kind(bad)


def test_sysfs_source_on_node_exporter_fixture(node_exporter_sys, tmp_path):
    src = make_real_source("sysfs", node_exporter_sys, proc_root=fake_proc(tmp_path / "proc"))
    as_source: Source = src  # the protocol the agent takes (checked by mypy)
    assert as_source is src
    assert (src.name, src.mode) == ("sysfs", "real")
    inv = src.inventory()
    assert [(p.dev, p.port) for p in inv.ib_ports] == [("i40iw0", 1), ("mlx4_0", 1), ("mlx4_0", 2)]
    assert inv.gpus == [] and inv.boot_id == "0f5d6c1e-boot"
    first = src.read(100.0)
    second = src.read(110.0)
    assert len(second.ib_ports) == 3 and second.errors == first.errors == []
    assert second.ib_ports[1].xmit_Bps == 0.0  # nothing moved between the two reads
    assert second.host.mem_used_pct == 75.0 and second.host.uptime_s == 12345.67
    assert src.take_events() == []
    assert src.busy() is False
    src.on_drain(DrainState.DRAINING, DrainMode.FINISH)  # no-op, no scheduler on real nodes
    # The whole reading fits the protocol models (what the agent will publish).
    birth = Birth(cluster="c", node="n", bdSeq=0, ts=1, source=src.name, gpus=inv.gpus,
                  ib_ports=inv.ib_ports, errors=inv.errors)
    tel = Telemetry(node="n", seq=1, bdSeq=0, ts=1, gpus=second.gpus, ib_ports=second.ib_ports,
                    host=second.host)
    codec.decode(messages.Telemetry, codec.encode(tel))
    assert birth.ib_ports[0].dev == "i40iw0"


def test_sysfs_root_may_be_the_class_directory(node_exporter_sys):
    src = make_real_source("sysfs", node_exporter_sys / "class" / "infiniband")
    assert len(src.inventory().ib_ports) == 3


def test_missing_hardware_degrades_without_raising(tmp_path, caplog):
    src = make_real_source("sysfs+nvsmi", tmp_path / "no-sys", nvidia_smi="/nonexistent/nvidia-smi",
                           proc_root=fake_proc(tmp_path / "proc"))
    with caplog.at_level(logging.WARNING, logger="fleetdeck.agent.real"):
        inv = src.inventory()
        r1 = src.read(1.0)
        r2 = src.read(2.0)
    assert inv.gpus == [] and inv.ib_ports == []
    assert any("nvidia-smi: not found" in e for e in inv.errors)
    assert any("no InfiniBand driver" in e for e in r1.errors)
    assert r1.errors == r2.errors and r1.gpus == [] and r1.ib_ports == []
    # Logged once per change, not once per interval.
    smi = [r for r in caplog.records if "nvidia-smi: not found" in r.getMessage()]
    assert len(smi) == 1


def test_reader_exception_becomes_an_error(tmp_path):
    src = RealSource("sysfs+fake", ib=IbReader(tmp_path), gpu=FakeGpus(["0000:01:00.0"], fail=True))
    src.inventory()
    reading = src.read(1.0)
    assert reading.gpus == []
    assert "fake read: RuntimeError: driver wedged" in reading.errors
    src.close()
    assert src.gpu.closed  # type: ignore[union-attr]


def test_errors_are_capped_for_the_protocol():
    errs = cap_errors([f"e{i}" for i in range(100)] + ["e1"])
    assert len(errs) == 32 and errs[-1] == "... and 69 more errors"
    assert len(cap_errors(["x" * 5000])[0]) == 2048


def test_kernel_log_feeds_xid_and_flaps(tmp_path):
    pci = tmp_path / "devices" / "0101:00:00.0"
    (pci / "net" / "ib0").mkdir(parents=True)
    root = tmp_path / "class" / "infiniband"
    make_port(root, "mlx5_ib0")
    (root / "mlx5_ib0" / "device").symlink_to(pci)
    log = tmp_path / "kern.log"
    log.write_text("")
    src = RealSource("sysfs+fake", ib=IbReader(root), gpu=FakeGpus(["00000001:00:00.0"]),
                     kernel_log=FileFollower(log))
    inv = src.inventory()
    assert inv.ib_ports[0].netdev == "ib0"
    assert inv.ib_ports[0].gpu_affinity == 0  # one GPU, one IB HCA: paired by bus order
    r = src.read(1000.0)
    assert r.ib_ports[0].carrier_losses_24h == 0 and r.gpus[0].xid_last is None
    with log.open("a") as fh:
        fh.write("[ 12.5] NVRM: Xid (PCI:0001:00:00): 79, pid=1, name=python, GPU has fallen off "
                 "the bus.\n")
        fh.write("[ 12.6] systemd-networkd[9]: ib0: lost carrier\n")
    r = src.read(1010.0)
    assert r.gpus[0].xid_last == 79 and r.gpus[0].xid_last_ts == 1_010_000
    assert r.ib_ports[0].carrier_losses_24h == 1
    events = src.take_events()
    assert [(e.kind, e.component, e.severity) for e in events] == [
        ("xid", "gpu0", Severity.ERROR), ("ib_flap", "mlx5_ib0:1", Severity.WARN)]


def test_pair_by_bus_order_skips_ethernet_and_mismatched_counts(tmp_path):
    root = tmp_path / "ib"
    for i, dev in enumerate(["mlx5_ib1", "mlx5_ib0", "mlx5_an0"]):
        make_port(root, dev)
        pci = tmp_path / "pci" / f"010{2 - i}:00:00.0" if dev != "mlx5_an0" else \
            tmp_path / "pci" / "0000:00:02.0"
        pci.mkdir(parents=True)
        (root / dev / "device").symlink_to(pci)
    (root / "mlx5_an0" / "ports" / "1" / "link_layer").write_text("Ethernet\n")
    devices, _ = read_devices(root)
    assert pair_by_bus_order(devices, {0: "00000001:00:00.0", 1: "00000002:00:00.0"}) == {
        "mlx5_ib0": 0, "mlx5_ib1": 1}
    assert pair_by_bus_order(devices, {0: "00000001:00:00.0"}) == {}


def test_normalize_pci():
    assert normalize_pci("00000000:2B:00.0") == "0000:2b:00"
    assert normalize_pci("PCI:0000:2b:00") == "0000:2b:00"
    assert normalize_pci("2b:00.0") == "0000:2b:00"


# --- systemd unit -------------------------------------------------------------------------------


def test_systemd_unit():
    text = (REPO / "agents" / "systemd" / "fleetdeck-agent.service").read_text()
    unit = configparser.ConfigParser(strict=False, interpolation=None, comment_prefixes=("#", ";"))
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read_string(text)
    svc = unit["Service"]
    assert svc["Type"] == "notify" and svc["WatchdogSec"] == "30"
    assert svc["Restart"] == "on-failure"
    assert svc["EnvironmentFile"] == "-/etc/fleetdeck/agent.env"
    assert svc["User"] == "fleetdeck"
    exec_start = "/opt/fleetdeck/venv/bin/fleetdeck agent --source sysfs+nvml"
    assert svc["ExecStart"].startswith(exec_start)
    # A reload is the agent's SIGHUP: the configuration checked again, never a stop.
    assert svc["ExecReload"] == "/bin/kill -HUP $MAINPID"
    for key, value in {"ProtectSystem": "strict", "ProtectHome": "yes", "NoNewPrivileges": "yes",
                       "PrivateTmp": "yes", "PrivateDevices": "no"}.items():
        assert svc[key] == value, key
    # NVML opens /dev/nvidiactl and /dev/nvidiaN read-write.
    allowed = [ln.split("=", 1)[1] for ln in text.splitlines() if ln.startswith("DeviceAllow=")]
    assert "/dev/nvidiactl rw" in allowed and "char-nvidia-frontend rw" in allowed
    assert unit["Install"]["WantedBy"] == "multi-user.target"


def test_a_flap_only_the_kernel_log_saw_is_a_port_event(tmp_path):
    """mlx5_core logs a link or cable change by the HCA's PCI address: a flap between two
    samples (sysfs' state ACTIVE at both) made no event at all. An Ethernet NIC's lines (Azure's
    accelerated networking, mlx5 too) are no fabric port's."""
    pci = tmp_path / "devices" / "0101:00:00.0"
    (pci / "net" / "ib0").mkdir(parents=True)
    root = tmp_path / "class" / "infiniband"
    make_port(root, "mlx5_ib0")
    (root / "mlx5_ib0" / "device").symlink_to(pci)
    log = tmp_path / "kern.log"
    log.write_text("")
    src = RealSource("sysfs", ib=IbReader(root), kernel_log=FileFollower(log))
    src.inventory()
    src.read(1000.0)
    assert src.take_events() == []
    with log.open("a") as fh:
        fh.write("[ 20.1] mlx5_core 0101:00:00.0: Port module event: module 0, Cable unplugged\n")
        fh.write("[ 20.2] mlx5_core 0101:00:00.0 ib0: Link down\n")
        fh.write("[ 20.3] mlx5_core 0002:00:02.0 enP2s2: Link down\n")  # Ethernet: not ours
        fh.write("[ 20.4] mlx5_core 0101:00:00.0: Port module event: module 0, Cable plugged\n")
        fh.write("[ 20.5] mlx5_core 0101:00:00.0 ib0: Link up\n")
    r = src.read(1010.0)
    assert r.ib_ports[0].state == "ACTIVE"  # the sample missed it
    events = src.take_events()
    assert [(e.kind, e.component, e.severity, e.message) for e in events] == [
        ("ib_port_state", "mlx5_ib0:1", Severity.ERROR,
         "mlx5_ib0:1: Cable unplugged (kernel log: mlx5_core 0101:00:00.0)"),
        ("ib_port_state", "mlx5_ib0:1", Severity.ERROR,
         "mlx5_ib0:1: Link down (kernel log: mlx5_core 0101:00:00.0 ib0)"),
        ("ib_port_state", "mlx5_ib0:1", Severity.INFO,
         "mlx5_ib0:1: Cable plugged (kernel log: mlx5_core 0101:00:00.0)"),
        ("ib_port_state", "mlx5_ib0:1", Severity.INFO,
         "mlx5_ib0:1: Link up (kernel log: mlx5_core 0101:00:00.0 ib0)")]
    # The flap's carrier loss is counted by its carrier line and carrier_down_count, not twice.
    assert r.ib_ports[0].carrier_losses_24h == 0


def test_nd_h100_v5_topology_pairs_and_names_each_hca_by_its_pcie_switch(tmp_path):
    """aznhc's ndv5-topo.xml: each GPU shares a PCIe switch with one IB HCA. Bus order pairs
    them as the switches do, and a kernel-log line naming an HCA's PCI address names its port."""
    import xml.etree.ElementTree as ET

    from fleetdeck.agents.real.kernel_log import KernelLogMonitor

    switches = ET.parse(DATA / "ndv5-topo.xml").getroot().iter("pci")
    pairs = []  # (GPU bus id, HCA bus id) under one switch
    for sw in switches:
        kids = {p.get("class"): p.get("busid") for p in sw.findall("pci")}
        if "0x030200" in kids and "0x020700" in kids:
            pairs.append((kids["0x030200"], kids["0x020700"]))
    assert len(pairs) == 8
    root = tmp_path / "class" / "infiniband"
    for k, (_gpu, hca) in enumerate(sorted(pairs, key=lambda p: p[1])):
        pci = tmp_path / "devices" / hca
        (pci / "net" / f"ib{k}").mkdir(parents=True)
        make_port(root, f"mlx5_ib{k}")
        (root / f"mlx5_ib{k}" / "device").symlink_to(pci)
    devices, _ = read_devices(root)
    # nvidia-smi spells a bus id with an 8-digit domain; NVML indexes GPUs by it.
    gpus = {i: f"0000{bus.upper()}" for i, (bus, _hca) in enumerate(sorted(pairs))}
    paired = pair_by_bus_order(devices, gpus)
    by_hca = {d.pci_addr: paired[d.name] for d in devices}
    assert all(gpus[by_hca[hca]] == f"0000{gpu.upper()}" for gpu, hca in pairs)
    reader = IbReader(root)
    reader.scan()
    mon = KernelLogMonitor(ports_by_pci=reader.ports_by_pci())
    mon.feed(["[ 9.1] mlx5_core 0106:00:00.0: Port module event: module 0, Cable unplugged"],
             1000.0)
    assert [e.component for e in mon.take_events()] == ["mlx5_ib5:1"]
