"""A real agent saving its error windows must not take the node's inventory again: the saves ran
``source.inventory()`` for its boot id, which re-ran nvidia-smi / NVML and reset the readers and
the kernel-log map (docs/real-nodes.md, "Drains survive agent restarts")."""

import time
from datetime import UTC, datetime
from pathlib import Path

from fleetdeck.agents.agent import NodeAgent
from fleetdeck.agents.real.common import GpuInventoryResult
from fleetdeck.agents.real.kernel_log import FileFollower
from fleetdeck.agents.real.nvsmi import NvsmiReader
from fleetdeck.agents.real.source import HostReader, RealSource
from fleetdeck.agents.real.sysfs_ib import IbReader
from fleetdeck.agents.state import StateStore
from fleetdeck.brokerurl import BrokerURL
from fleetdeck.protocol.fast import GpuSample
from fleetdeck.protocol.messages import GpuInventory

from .test_real_nvsmi import FakeSmi, eight_gpu_csv
from .test_real_source import fake_proc
from .test_real_sysfs_ib import make_port, write


def test_a_gpu_lost_while_a_port_flaps_keeps_its_index_and_its_xid(tmp_path):
    """gpu3 falls off the bus and a port goes down in the same minute: the windows save that
    follows the link_downed increment re-ran the inventory, which left gpu3 out of the readers
    (telemetry dropped it instead of saying ``present: false``) and out of the kernel log's
    map (its XID 79 went to "pci:0000:04:00", no GPU: no G2 on the console)."""
    sysfs = tmp_path / "infiniband"
    port = make_port(sysfs)
    log = tmp_path / "kern.log"
    log.write_text("")
    smi = FakeSmi(eight_gpu_csv())
    src = RealSource("sysfs+nvsmi", ib=IbReader(sysfs), gpu=NvsmiReader(runner=smi),
                     kernel_log=FileFollower(log), host=HostReader(fake_proc(tmp_path / "proc")))
    now = [time.time()]
    agent = NodeAgent(cluster="c", node_id="gpu0001", source=src, url=BrokerURL("127.0.0.1", 1),
                      clock=lambda: now[0], state=StateStore(tmp_path / "state", "gpu0001"))
    agent.bd_seq = agent._next_bd_seq()
    birth = agent.birth()
    assert len(birth.gpus) == 8 and birth.boot_id == "0f5d6c1e-boot"
    agent.telemetry()
    # gpu3 (bus 04) is lost; the port goes down once.
    smi.stdout, smi.rc = eight_gpu_csv(lost=3), 15
    write(port, link_downed=1)
    now[0] += 1
    t = agent.telemetry()
    agent.keep_windows(at_once=True)
    assert t.ib_ports[0].errors_1h == {"link_downed": 1}
    inventories = sum(1 for c in smi.calls if len(c) == 1)  # the plain `nvidia-smi` of inventory
    assert inventories == 1, "the windows save took the inventory again"
    iso = datetime.fromtimestamp(now[0], UTC).strftime("%Y-%m-%dT%H:%M:%S+0000")
    with log.open("a") as fh:
        fh.write(f"{iso} gpu0001 kernel: NVRM: Xid (PCI:0000:04:00): 79, pid=7, name=python, "
                 "GPU has fallen off the bus.\n")
    now[0] += 1
    t = agent.telemetry()
    lost = [g for g in t.gpus if g.index == 3]
    assert len(lost) == 1 and lost[0].present is False and lost[0].xid_last == 79
    (xid,) = [e for e in src.take_events() if e.kind == "xid"]
    assert xid.component == "gpu3"


def _nvsmi_node(tmp_path: Path) -> tuple[FakeSmi, RealSource, Path]:
    """A real source on a fake nvidia-smi of eight GPUs and a kernel log file."""
    log = tmp_path / "kern.log"
    log.write_text("")
    smi = FakeSmi(eight_gpu_csv())
    src = RealSource("nvsmi", gpu=NvsmiReader(runner=smi), kernel_log=FileFollower(log),
                     host=HostReader(fake_proc(tmp_path / "proc")))
    return smi, src, log


def _xid79_of_bus_04(src: RealSource, log: Path, now: float) -> None:
    """The kernel says the GPU on bus 04 (gpu3) fell off the bus, after the log is followed."""
    src.read(now)
    iso = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%S+0000")
    with log.open("a") as fh:
        fh.write(f"{iso} gpu0001 kernel: NVRM: Xid (PCI:0000:04:00): 79, pid=7, name=python, "
                 "GPU has fallen off the bus.\n")


def test_a_gpu_lost_before_a_reconnect_stays_in_the_new_birth_and_keeps_its_xid(tmp_path):
    """The agent takes the inventory again at every reconnect (its new birth). gpu3, off the
    bus since the first, was left out of it: telemetry stopped saying ``present: false``, and
    its XID 79 went to "pci:0000:04:00", so after a broker restart the console's G2 for it was
    gone (a real-node audit)."""
    smi, src, log = _nvsmi_node(tmp_path)
    now = time.time()
    assert len(src.inventory().gpus) == 8
    smi.stdout, smi.rc = eight_gpu_csv(lost=3), 15
    again = src.inventory()  # the reconnect's birth
    assert [g.index for g in again.gpus] == list(range(8))
    assert again.gpus[3].pci_bus_id == "00000000:04:00.0"
    _xid79_of_bus_04(src, log, now)
    r = src.read(now + 1)
    assert [g.index for g in r.gpus] == list(range(8))
    assert r.gpus[3].present is False and r.gpus[3].xid_last == 79
    assert r.gpus[4].present and r.gpus[4].power_w == 631.95
    (xid,) = [e for e in src.take_events() if e.kind == "xid"]
    assert xid.component == "gpu3"
    # It answers again (a GPU reset): one of the found ones, no longer kept as lost.
    smi.stdout, smi.rc = eight_gpu_csv(), 0
    src.inventory()
    assert all(g.present for g in src.read(now + 2).gpus)


def test_a_gpu_lost_without_a_word_is_found_by_its_bus_at_the_reconnect(tmp_path):
    """gpu3 vanishes and nvidia-smi says nothing of it (no "Unable to determine the device
    handle" line): it numbers the rest 0-6, index 3 is gpu4's bus and gpu7's bus sits at 6.
    Tracked by index, nothing was lost at the reconnect's inventory and gpu3 silently left the
    birth (a review of the lost-GPU birth)."""
    smi, src, log = _nvsmi_node(tmp_path)
    now = time.time()
    first = {g.index: g.pci_bus_id for g in src.inventory().gpus}
    smi.stdout = "".join(ln for ln in eight_gpu_csv(lost=3).splitlines(keepends=True)
                         if not ln.startswith("Unable"))
    again = src.inventory()  # the reconnect's birth
    assert {g.index: g.pci_bus_id for g in again.gpus} == first
    _xid79_of_bus_04(src, log, now)
    r = src.read(now + 1)
    assert [g.index for g in r.gpus] == list(range(8))
    assert [g.index for g in r.gpus if not g.present] == [3]
    assert r.gpus[3].xid_last == 79 and r.gpus[7].power_w == 631.95
    (xid,) = [e for e in src.take_events() if e.kind == "xid"]
    assert xid.component == "gpu3"
    # It answers again (a GPU reset), numbered 3 by nvidia-smi once more: no longer lost.
    smi.stdout = eight_gpu_csv()
    assert {g.index: g.pci_bus_id for g in src.inventory().gpus} == first
    assert all(g.present for g in src.read(now + 2).gpus)


class RenumberingReader:
    """A GPU reader that numbers the GPUs it finds 0, 1, … with no word of a lost one."""

    name = "fake"

    def __init__(self, buses: list[int]) -> None:
        self.buses = buses

    def inventory(self) -> GpuInventoryResult:
        return GpuInventoryResult(gpus=[
            GpuInventory(index=i, uuid=f"GPU-{b}", name="H100", pci_bus_id=f"00000000:{b:02X}:00.0")
            for i, b in enumerate(self.buses)], devices=len(self.buses))

    def read(self) -> tuple[list[GpuSample], list[str]]:
        return [GpuSample(index=i, power_w=float(b)) for i, b in enumerate(self.buses)], []

    def close(self) -> None:
        return None


def test_a_reader_that_renumbers_cannot_hide_a_lost_gpu(tmp_path):
    """The lost GPU is the one whose PCI bus is missing, kept under its old index, and the rest
    keep theirs: judged by index, a reader that numbers the remaining seven 0-6 lost nothing
    (index 3 was there, gpu7's bus was there) and gpu3 silently left the birth (a review of
    the lost-GPU birth)."""
    gpu = RenumberingReader([1, 2, 3, 4, 5, 6, 7, 8])
    src = RealSource("fake", gpu=gpu, host=HostReader(fake_proc(tmp_path / "proc")))
    first = {g.index: g.pci_bus_id for g in src.inventory().gpus}
    gpu.buses = [1, 2, 3, 5, 6, 7, 8]  # bus 04, gpu3, is gone
    assert {g.index: g.pci_bus_id for g in src.inventory().gpus} == first
    r = src.read(time.time())
    assert [(g.index, g.present, g.power_w) for g in r.gpus] == [
        (0, True, 1.0), (1, True, 2.0), (2, True, 3.0), (3, False, None), (4, True, 5.0),
        (5, True, 6.0), (6, True, 7.0), (7, True, 8.0)]
    assert "gpu3 (00000000:04:00.0): lost since the agent started" in r.errors
    gpu.buses = [1, 2, 3, 4, 5, 6, 7, 8]  # it answers again
    assert {g.index: g.pci_bus_id for g in src.inventory().gpus} == first
    assert all(g.present for g in src.read(time.time()).gpus)
