"""An HCA that leaves sysfs while the agent runs (off the bus, driver unloaded): the agent keeps
reporting its port with nothing read, and the node fails by N1. It read ok, 7 of 8 ports up,
every port rule skipping the unknown state (a real-node audit)."""

import msgspec

from fleetdeck.console.health import NodeHistory, evaluate, still_healthy
from fleetdeck.protocol.fast import IbPortSample
from tests.helpers import FakeNode


def test_a_port_reported_with_nothing_read_fails_the_node():
    node = FakeNode()
    birth = node.birth()
    hist = NodeHistory()
    first = node.telemetry()
    hist.update(first)
    assert evaluate(birth, first, hist) == []
    t = node.telemetry()
    gone = t.ib_ports[3]
    t = msgspec.structs.replace(t, ib_ports=[*t.ib_ports[:3], IbPortSample(dev=gone.dev, port=1),
                                             *t.ib_ports[4:]])
    hist.update(t)
    assert not still_healthy(birth, t, hist)
    (finding,) = evaluate(birth, t, hist)
    assert (finding.rule, finding.severity.value, finding.component) == (
        "N1", "drain", f"{gone.dev}:1")
    assert "gone from sysfs" in str(finding)
