"""A real agent saving its error windows must not take the node's inventory again: the saves ran
``source.inventory()`` for its boot id, which re-ran nvidia-smi / NVML and reset the readers and
the kernel-log map (docs/real-nodes.md, "Drains survive agent restarts")."""

import time
from datetime import UTC, datetime

from fleetdeck.agents.agent import NodeAgent
from fleetdeck.agents.real.kernel_log import FileFollower
from fleetdeck.agents.real.nvsmi import NvsmiReader
from fleetdeck.agents.real.source import HostReader, RealSource
from fleetdeck.agents.real.sysfs_ib import IbReader
from fleetdeck.agents.state import StateStore
from fleetdeck.brokerurl import BrokerURL

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


def test_a_gpu_lost_before_a_reconnect_stays_in_the_new_birth_and_keeps_its_xid(tmp_path):
    """The agent takes the inventory again at every reconnect (its new birth). gpu3, off the
    bus since the first, was left out of it: telemetry stopped saying ``present: false``, and
    its XID 79 went to "pci:0000:04:00", so after a broker restart the console's G2 for it was
    gone (a real-node audit)."""
    log = tmp_path / "kern.log"
    log.write_text("")
    smi = FakeSmi(eight_gpu_csv())
    src = RealSource("nvsmi", gpu=NvsmiReader(runner=smi), kernel_log=FileFollower(log),
                     host=HostReader(fake_proc(tmp_path / "proc")))
    now = time.time()
    assert len(src.inventory().gpus) == 8
    smi.stdout, smi.rc = eight_gpu_csv(lost=3), 15
    again = src.inventory()  # the reconnect's birth
    assert [g.index for g in again.gpus] == list(range(8))
    assert again.gpus[3].pci_bus_id == "00000000:04:00.0"
    src.read(now)  # the log is followed from here
    iso = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%S+0000")
    with log.open("a") as fh:
        fh.write(f"{iso} gpu0001 kernel: NVRM: Xid (PCI:0000:04:00): 79, pid=7, name=python, "
                 "GPU has fallen off the bus.\n")
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
