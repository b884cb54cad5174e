"""A real agent reports every XID of the last 2 h from the kernel log, not only the last one."""

import time
from datetime import UTC, datetime

from fleetdeck.agents.agent import NodeAgent
from fleetdeck.agents.real.kernel_log import (
    DRAIN_XIDS,
    FileFollower,
    KernelLogMonitor,
    xid_severity,
)
from fleetdeck.agents.real.source import HostReader, RealSource
from fleetdeck.brokerurl import BrokerURL
from fleetdeck.console.health import XID_DRAIN, XID_WARN, Verdict
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.state import FleetState
from fleetdeck.protocol import codec
from fleetdeck.protocol.messages import Severity
from fleetdeck.protocol.topics import Kind, topic_for

from .test_real_source import FakeGpus, fake_proc

BUS = "00000000:2B:00.0"


def line(ts: float, code: int, text: str) -> str:
    iso = datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S+0000")
    return f"{iso} node-0042 kernel: NVRM: Xid (PCI:0000:2b:00): {code}, pid=7, name=python, {text}"


def test_event_severity_follows_the_console_classes():
    assert DRAIN_XIDS == XID_DRAIN
    assert all(xid_severity(c) is Severity.WARN for c in XID_WARN)
    assert all(xid_severity(c) is Severity.INFO for c in (13, 31, 43, 45))


def test_monitor_keeps_every_code_of_the_window():
    now = time.time()
    mon = KernelLogMonitor(gpu_by_pci={BUS: 3})
    mon.feed([line(now - 3 * 3600, 79, "GPU has fallen off the bus."),  # before the window
              line(now - 60, 119, "Timeout waiting for RPC from GSP!"),
              line(now - 59, 45, "Ch 00000010"),
              line(now - 30, 45, "Ch 00000010")], now)
    assert mon.xid_last(3) == (45, int(now - 30) * 1000)
    assert [(x.code, x.ts) for x in mon.xids(3, now)] == [
        (119, int(now - 60) * 1000), (45, int(now - 30) * 1000)]
    assert mon.xids(0, now) == []


def test_real_agent_telemetry_keeps_a_drain_xid_after_a_routine_one(tmp_path):
    log = tmp_path / "kern.log"
    log.write_text("")
    src = RealSource("fake", gpu=FakeGpus(["0000:2b:00.0"]), kernel_log=FileFollower(log),
                     host=HostReader(fake_proc(tmp_path / "proc")))
    now = [time.time()]
    agent = NodeAgent(cluster="c", node_id="node-0042", source=src,
                      url=BrokerURL("127.0.0.1", 1), clock=lambda: now[0])
    agent.bd_seq = agent._next_bd_seq()
    ingest = Ingest("c")
    state = FleetState("c", ingest.malformed)

    def send(kind: Kind, payload: bytes) -> None:
        ingest.handle(topic_for("c", kind, "node-0042"), payload, now[0])

    send(Kind.BIRTH, codec.encode(agent.birth()))
    send(Kind.STATUS, codec.encode(agent.status(True)))
    send(Kind.TELEMETRY, codec.encode(agent.telemetry()))
    state.apply(ingest.take_batch(), now[0])
    assert state.nodes["node-0042"].verdict is Verdict.OK
    with log.open("a") as fh:
        fh.write(line(now[0] - 2, 119, "Timeout waiting for RPC from GSP!") + "\n")
        fh.write(line(now[0] - 1, 45, "Ch 00000010") + "\n")
    now[0] += 1
    t = agent.telemetry()
    g = t.gpus[0]
    assert g.xid_last == 45 and [x.code for x in g.xids] == [119, 45]
    send(Kind.TELEMETRY, codec.encode(t))
    state.apply(ingest.take_batch(), now[0])
    st = state.nodes["node-0042"]
    assert st.verdict is Verdict.FAILED
    assert [f.text for f in st.findings if f.rule == "G2"] == ["XID 119"]
