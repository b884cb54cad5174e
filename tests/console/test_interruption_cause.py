"""A node drained by a command is the operator's interruption only when nothing else is wrong
with it: draining a node whose link flaps is the network's lost time, carried out by the
operator (a newcomer's ``report`` booked it as "operator")."""

from fleetdeck.console.health import Finding, Severity
from fleetdeck.console.interruptions import node_cause
from fleetdeck.console.state import NodeState
from fleetdeck.protocol.messages import DrainInfo, DrainState

FLAP = Finding("N2", Severity.DRAIN, "mlx5_ib3:1", "link_downed increased")
XID79 = Finding("G2", Severity.DRAIN, "gpu3", "XID 79: fell off the bus")
HOT = Finding("G13", Severity.WARN, "gpu1", "90 °C above slowdown")


def node(*findings: Finding, drained_by_command: bool = True) -> NodeState:
    st = NodeState("gpu0035", online=True)
    st.findings = list(findings)
    if drained_by_command:
        st.drain = DrainInfo(state=DrainState.DRAINING, cmd_id="c-1", reason="flapping")
    return st


def test_the_drain_of_a_failed_node_is_its_faults_interruption():
    assert node(FLAP).all_findings == [FLAP]
    assert node(FLAP).drain.state is DrainState.DRAINING  # drained, by a command
    assert node_cause(node(FLAP)) == "network"
    assert node_cause(node(XID79)) == "gpu"


def test_the_drain_of_a_sound_or_merely_warm_node_is_the_operators():
    assert node_cause(node()) == "operator"
    assert node_cause(node(HOT)) == "operator"


def test_a_sound_node_no_one_drained_is_no_cause():
    assert node_cause(node(drained_by_command=False)) is None
    assert node_cause(node(FLAP, drained_by_command=False)) == "network"
