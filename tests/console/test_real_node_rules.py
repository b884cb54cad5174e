"""What real nodes' agents report, judged as the rules mean it (a real-node audit): a port
reported with nothing read, an agent that reads no GPUs."""

import msgspec

from fleetdeck.console.health import NodeHistory, evaluate, still_healthy
from fleetdeck.protocol.fast import IbPortSample
from tests.helpers import FakeNode


def test_a_port_reported_with_nothing_read_fails_the_node():
    """An HCA that left sysfs while the agent runs (off the bus, driver unloaded): it read ok,
    7 of 8 ports up, every port rule skipping the unknown state."""
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
        "N7", "drain", f"{gone.dev}:1")
    assert "gone from sysfs" in str(finding)


def test_an_agent_that_reads_no_gpus_expects_none():
    """``agent --source sysfs`` (InfiniBand only) failed every node by G1 "0/8 GPUs visible",
    with "RMA gpu0…gpu7" for advice (a real-node audit)."""
    import msgspec as ms

    from fleetdeck.console.health import gpus_expected

    node = FakeNode()
    birth = node.birth()
    ib_only = birth.model_copy(update={"source": "sysfs", "gpus": [], "gpus_expected": 0})
    t = ms.structs.replace(node.telemetry(), gpus=[])
    hist = NodeHistory()
    hist.update(t)
    assert gpus_expected(ib_only) == 0
    assert evaluate(ib_only, t, hist) == [] and still_healthy(ib_only, t, hist)
    told = ib_only.model_copy(update={"gpus_expected": 8})
    assert [f.rule for f in evaluate(told, t, hist)] == ["G1"]
    assert gpus_expected(ib_only.model_copy(update={"source": "nvml"})) == 8


def test_hcas_gone_on_one_rail_are_each_hosts_fault_not_a_switchs():
    """Three nodes that lost mlx5_ib3 behind one leaf made a suspect switch of it, and each read
    "check switch …; do not drain" (a review): an HCA that left the host is the host's."""
    from fleetdeck.console.ingest import Ingest
    from fleetdeck.console.judgements import (
        PORT_GONE,
        bad_ports,
        recommended_action,
        suspect_switches,
    )
    from fleetdeck.console.session import ConsoleSession
    from fleetdeck.console.summary import fleet_summary
    from tests.tui.fleet import CLUSTER, Clock, SynthFleet

    def gone(tel):
        return msgspec.structs.replace(tel, ib_ports=[
            IbPortSample(dev=p.dev, port=p.port) if p.dev == "mlx5_ib3" else p
            for p in tel.ib_ports])

    clock = Clock()
    session = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    fleet = SynthFleet(8, clock)
    fleet.birth(session.ingest)
    for _ in range(2):
        clock.advance(1.0)
        fleet.telemetry(session.ingest, faults={n: gone for n in ("gpu0001", "gpu0004",
                                                                  "gpu0006")})
        session.tick()
    state = session.state
    assert suspect_switches(state) == []
    st = state.nodes["gpu0004"]
    assert st.verdict.value == "failed" and [f.rule for f in st.findings] == ["N7"]
    assert [s for s, _p in bad_ports(st)] == [PORT_GONE]
    action = recommended_action(st, state)
    assert "HCA left the host" in action and "cable" not in action, action
    out = fleet_summary(state, clock())
    assert out["suspect_switches"] == []


def test_four_hcas_gone_are_one_step_naming_them_all():
    """4 of 8 HCAs gone: the action said "find why mlx5_ibN:1's HCA left the host …" once per
    HCA, and "(+2 more)" hid two of them (a real-node drill): one step names all four."""
    from fleetdeck.console.ingest import Ingest
    from fleetdeck.console.judgements import recommended_action
    from fleetdeck.console.session import ConsoleSession
    from tests.tui.fleet import CLUSTER, Clock, SynthFleet

    lost = ("mlx5_ib1", "mlx5_ib3", "mlx5_ib5", "mlx5_ib7")

    def gone(tel):
        return msgspec.structs.replace(tel, ib_ports=[
            IbPortSample(dev=p.dev, port=p.port) if p.dev in lost else p
            for p in tel.ib_ports])

    clock = Clock()
    session = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    fleet = SynthFleet(4, clock)
    fleet.birth(session.ingest)
    for _ in range(2):
        clock.advance(1.0)
        fleet.telemetry(session.ingest, faults={"gpu0002": gone})
        session.tick()
    state = session.state
    st = state.nodes["gpu0002"]
    assert [f.rule for f in st.findings] == ["N7"] * 4
    action = recommended_action(st, state)
    assert action.count("left the host") == 1 and "more)" not in action, action
    assert ("the HCAs of mlx5_ib1:1, mlx5_ib3:1, mlx5_ib5:1 and mlx5_ib7:1 left the host"
            in action), action


def test_nodes_that_say_no_leaf_make_no_suspect_switch():
    """Real agents without --leaf all sat in one "(no leaf)" group: three unrelated ports down
    on rail 5 made a suspect switch "(no leaf)-r5", each node degraded and "do not drain" (a
    real-node drill)."""
    from fleetdeck.console.ingest import Ingest
    from fleetdeck.console.judgements import suspect_switches
    from fleetdeck.console.session import ConsoleSession
    from fleetdeck.protocol.messages import Topology
    from tests.tui.fleet import CLUSTER, Clock, SynthFleet, port_down

    clock = Clock()
    session = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    fleet = SynthFleet(8, clock, leaves=1)
    for name in fleet.names:
        fleet.src(name).topology = Topology()  # as a real agent started without --leaf
    fleet.birth(session.ingest)
    down = port_down("mlx5_ib5")
    for _ in range(2):
        clock.advance(1.0)
        fleet.telemetry(session.ingest, faults={n: down for n in ("gpu0001", "gpu0004",
                                                                  "gpu0006")})
        session.tick()
    assert suspect_switches(session.state) == []
    assert {session.state.nodes[n].verdict.value for n in ("gpu0001", "gpu0004",
                                                          "gpu0006")} == {"failed"}


def test_an_hca_missing_at_birth_is_not_told_to_check_a_cable():
    """N1 "7/8 IB ports found" said "check ib: reseat or replace its cable" (a real-node
    drill: an agent restarted while an HCA was gone)."""
    from fleetdeck.console.ingest import Ingest
    from fleetdeck.console.judgements import recommended_action
    from fleetdeck.console.state import FleetState
    from fleetdeck.protocol import codec
    from fleetdeck.protocol.topics import Kind

    node = FakeNode()
    ingest = Ingest(node.cluster)
    state = FleetState(node.cluster, ingest.malformed)
    birth = node.birth()
    short = birth.model_copy(update={"ib_ports": birth.ib_ports[:7], "ib_ports_expected": 8})
    ingest.handle(node.topic(Kind.BIRTH), codec.encode(short), node.now)
    node.feed(ingest, node.status(), Kind.STATUS)
    t = node.telemetry()
    node.feed(ingest, msgspec.structs.replace(t, ib_ports=t.ib_ports[:7]), Kind.TELEMETRY)
    state.apply(ingest.take_batch(), node.now)
    st = state.nodes[node.node_id]
    assert [(f.rule, f.component) for f in st.findings] == [("N1", "ib")]
    action = recommended_action(st, state)
    assert "find why an HCA is missing" in action and "cable" not in action, action


def _one_node(birth_update: dict, **telemetry: object):
    """A fleet of one node with this birth and sample, judged once."""
    node, state = _one_node_fleet(birth_update, **telemetry)
    (st,) = state.nodes.values()
    return node, st


def _one_node_fleet(birth_update: dict, **telemetry: object):
    """``_one_node``'s node and its fleet."""
    from fleetdeck.console.ingest import Ingest
    from fleetdeck.console.state import FleetState
    from fleetdeck.protocol import codec
    from fleetdeck.protocol.topics import Kind, topic_for

    node = FakeNode()
    ingest = Ingest(node.cluster)
    ingest.handle(topic_for(node.cluster, Kind.BIRTH, node.node_id),
                  codec.encode(node.birth().model_copy(update=birth_update)), node.now)
    ingest.handle(topic_for(node.cluster, Kind.TELEMETRY, node.node_id),
                  codec.encode(msgspec.structs.replace(node.telemetry(), **telemetry)),
                  node.now)
    state = FleetState(node.cluster, ingest.malformed)
    state.apply(ingest.take_batch(), node.now)
    return node, state


def test_a_gpu_less_node_is_not_drawn_as_eight_missing_gpus():
    """A storage node's agent (``--source sysfs``: no GPU reader, none expected) read ok, and
    the overview's grid drew it as eight red missing GPUs (a fault drill): its cells say it has
    no GPU, its ports' faults still show on their rails, and a GPU node whose reader found none
    still shows its eight GPUs missing."""
    from fleetdeck.console.rows import Cell, gpu_cells, gpu_less
    from fleetdeck.protocol.fast import IbPortSample

    ib_only = {"source": "sysfs", "gpus": [], "gpus_expected": 0}
    node, st = _one_node(ib_only, gpus=[])
    assert st.verdict.value == "ok" and gpu_less(st)
    assert gpu_cells(st) == (Cell.NO_GPU,) * 8
    assert gpu_cells(st, "temp") == (Cell.NO_GPU,) * 8

    ports = list(node.telemetry().ib_ports)
    ports[3] = msgspec.structs.replace(ports[3], state="DOWN", phys_state="Polling")
    _node, down = _one_node(ib_only, gpus=[], ib_ports=ports)
    assert down.verdict.value == "failed"
    cells = gpu_cells(down)
    assert cells[3] == Cell.RAIL_FAILED and Cell.MISSING not in cells
    assert isinstance(ports[3], IbPortSample)

    _node, no_reader = _one_node({"source": "sysfs+nvml", "gpus": [], "gpus_expected": 8},
                                 gpus=[])
    assert not gpu_less(no_reader)
    assert gpu_cells(no_reader) == (Cell.MISSING,) * 8


def test_ports_a_node_expects_but_did_not_find_are_its_ports_everywhere():
    """A node that found no InfiniBand of the 8 its SKU has: N1 said "0/8 IB ports found",
    and ``status`` "IB up 0/0" (its row "0", the fleet's total 8 ports fewer); one short of an
    HCA read "7/7" beside "7/8"; the node detail "no IB ports reported". The expected count
    is the denominator everywhere."""
    from fleetdeck.console.rows import ib_text
    from fleetdeck.console.summary import fleet_summary
    from fleetdeck.console.tui.screens.node_detail import ports_title

    for found in (0, 7):
        node = FakeNode()
        birth = node.birth()
        t = node.telemetry()
        _node, state = _one_node_fleet({"ib_ports": birth.ib_ports[:found],
                                        "ib_ports_expected": 8}, ib_ports=t.ib_ports[:found])
        (st,) = state.nodes.values()
        assert any(f.rule == "N1" and f.text.startswith(f"{found}/8 IB ports found")
                   for f in st.findings), st.findings
        assert (st.ib_ports, st.ib_ports_up) == (8, found)
        assert ib_text(st) == f"{found}/8"
        out = fleet_summary(state, node.now)
        (row,) = out["nodes"]
        assert (row["ib_ports_up"], row["ib_ports"]) == (found, 8)
        assert (out["totals"]["ib_ports_up"], out["totals"]["ib_ports"]) == (found, 8)
        assert out["totals"]["ib_ports_down"] == 8 - found
        assert ports_title(st, found) == f"InfiniBand ports: {found} of 8 found"


def test_the_fabric_counts_a_heard_nodes_missing_ports_down_as_status_does():
    """The fabric's leaf read "0 ports" of a node that found none of its 8 (``status``: "0/8",
    down 8), "7 ports, 7 up" of one whose HCA vanished from its samples, and its port table
    "every IB port is ACTIVE/LinkUp without errors"; once silent the same leaf read "8
    silent". The missing ports are down there too, each with a row."""
    from fleetdeck.console.rows import fabric

    node = FakeNode()
    birth, t = node.birth(), node.telemetry()
    cases = [({"ib_ports": [], "ib_ports_expected": 8}, [], ["ib"]),
             ({"ib_ports": birth.ib_ports[:7], "ib_ports_expected": 8}, t.ib_ports[:7], ["ib"]),
             ({}, t.ib_ports[:7], [f"{t.ib_ports[7].dev}:{t.ib_ports[7].port}"])]
    for update, ports, named in cases:
        _node, state = _one_node_fleet(update, ib_ports=ports)
        (st,) = state.nodes.values()
        (leaf,), rows = fabric(state)
        assert (leaf.ports, leaf.up, leaf.down, leaf.silent) == (
            st.ib_ports, st.ib_ports_up, st.port_use().down, 0) == (8, len(ports),
                                                                    8 - len(ports), 0)
        assert [(r.port, r.status) for r in rows] == [(n, "gone") for n in named], rows


def test_a_node_waiting_for_its_first_sample_has_not_found_none_of_its_ports():
    """Born with 8 ports and no telemetry yet: the node detail read "InfiniBand ports: 0 of 8
    found" in red, as if the node had looked and found none."""
    from fleetdeck.console.ingest import Ingest
    from fleetdeck.console.state import FleetState
    from fleetdeck.console.tui.screens.node_detail import NodeDetailScreen
    from fleetdeck.protocol import codec
    from fleetdeck.protocol.topics import Kind, topic_for

    node = FakeNode()
    ingest = Ingest(node.cluster)
    ingest.handle(topic_for(node.cluster, Kind.BIRTH, node.node_id),
                  codec.encode(node.birth().model_copy(update={"ib_ports_expected": 8})),
                  node.now)
    state = FleetState(node.cluster, ingest.malformed)
    state.apply(ingest.take_batch(), node.now)
    (st,) = state.nodes.values()
    assert st.waiting and st.ib_ports == 8
    text = NodeDetailScreen._ports(None, st)  # type: ignore[arg-type]  # self is not read
    assert "found" not in str(text), str(text)
    _node, state = _one_node_fleet({"ib_ports": [], "ib_ports_expected": 8}, ib_ports=())
    (st,) = state.nodes.values()
    assert str(NodeDetailScreen._ports(None, st)) == "InfiniBand ports: 0 of 8 found"  # type: ignore[arg-type]
