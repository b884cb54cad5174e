"""The simulated node hands the agent's v2 encoder its GPUs and ports as columns
(``SimNode.read_columns``, ``NodeAgent.columns``; docs/performance.md, "Simulator capacity"):
every payload a faulted fleet publishes must be the bytes of the row path it replaces (row
Structs, the windows on rows, the encoder transposing them), keyframes and deltas, while the
agents' windows and holds (``errors_1h``, ``pcie_replay_1m``, the thermal holds) are set and
age out, and a GPU falls off the bus."""

import types

import pytest

import fleetdeck.agents.agent as agent_module
from fleetdeck.agents.agent import NodeAgent
from fleetdeck.agents.sim.node import SimNode
from fleetdeck.agents.sim.spec import parse_action
from fleetdeck.agents.sim.world import SimWorld, WorldOptions
from fleetdeck.agents.source import Reading
from fleetdeck.brokerurl import BrokerURL
from fleetdeck.protocol import wire2

NODES = 32
SPAN_S = 150

FAULTS = (
    {"fault": "thermal", "node": 1, "gpu": 2, "temp": 95, "at": 3, "duration": 40},
    {"fault": "thermal", "node": 9, "gpu": 6, "temp": 88, "clock_mhz": 1200, "at": 20},
    {"fault": "xid79", "node": 2, "gpu": 1, "at": 4},
    {"fault": "xid", "node": 10, "gpu": 3, "code": 94, "then": 63, "at": 30},
    {"fault": "ib_flap", "node": 3, "port": 2, "count": 3, "at": 2},
    {"fault": "ib_flap", "node": 11, "port": 0, "count": 2, "down": 4, "at": 60},
    {"fault": "symbol_storm", "node": 4, "port": 1, "rate": 5000, "at": 2, "duration": 50},
    {"fault": "ecc_dbe", "node": 5, "gpu": 3, "at": 5},
    {"fault": "pcie_replay", "node": 6, "gpu": 0, "per_min": 50, "at": 1, "duration": 30},
    {"fault": "nvlink", "node": 7, "gpu": 4, "links": 2, "at": 6},
    {"fault": "link_down", "node": 8, "port": 5, "at": 3, "duration": 20},
    {"fault": "power_cap", "node": 1, "gpu": 2, "limit": 300, "at": 10, "duration": 60},
    {"fault": "power_cap", "node": 12, "gpu": 5, "limit": 450, "at": 8},
    {"fault": "repair", "node": 12, "at": 120},
    {"fault": "repair", "node": 2, "at": 100},
    {"fault": "repair", "node": 3, "at": 110},
)


def fleet(columns: bool) -> tuple[SimWorld, list[NodeAgent]]:
    world = SimWorld(WorldOptions(nodes=NODES, background_jobs=4, seed=11,
                                  epoch_ms=1_700_000_000_000))
    agents = []
    for node in world.nodes:
        agent = NodeAgent(cluster="t", node_id=node.node_id, source=node,
                          url=BrokerURL("127.0.0.1", 1), keyframe_every_s=10.0,
                          clock=lambda: world.epoch_ms / 1000 + world.t)
        agent.columns = columns
        agents.append(agent)
    return world, agents


def inject_due(world: SimWorld, k: int) -> None:
    """The faults ``at`` step ``k`` (a world applies what it is given at its next tick)."""
    names = [n.node_id for n in world.nodes]
    for raw in FAULTS:
        if raw["at"] == k:
            world.inject(parse_action({**raw, "node": names[raw["node"]], "at": 0}))


@pytest.fixture
def steady_collect(monkeypatch: pytest.MonkeyPatch) -> None:
    """``collect_ms`` is the read's wall time, in every payload: one value for both paths."""
    monkeypatch.setattr(agent_module, "time", types.SimpleNamespace(
        perf_counter=lambda: 0.0, monotonic=agent_module.time.monotonic))


def payloads(columns: bool, reads: list[str]) -> list[bytes]:
    world, agents = fleet(columns)
    out = []
    for k in range(SPAN_S):
        inject_due(world, k)
        world.step()
        for agent in agents:
            if k == 75 and agent is agents[4]:
                agent.encoder.request_keyframe()  # a console asked: a keyframe off schedule
            out.append(agent.telemetry_payload())
    for node in world.nodes:
        reads.append(f"{node.node_id} {node._last_t}")
    return out


@pytest.mark.usefixtures("steady_collect")
def test_every_payload_of_a_faulted_fleet_is_the_row_paths(monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    # The column path never reads rows: a call of the row read would fail it.
    row_read = SimNode.read
    monkeypatch.setattr(SimNode, "read", lambda self, now: pytest.fail("a row read"))
    fast_reads: list[str] = []
    ours = payloads(True, fast_reads)
    monkeypatch.setattr(SimNode, "read", row_read)
    row_reads: list[str] = []
    theirs = payloads(False, row_reads)
    assert fast_reads == row_reads
    assert len(ours) == len(theirs) == NODES * SPAN_S
    for i, (mine, want) in enumerate(zip(ours, theirs, strict=True)):
        assert mine == want, (f"sample {i // NODES + 1} of node {i % NODES}", mine, want)
    # What the fleet went through, as the console reads it: windows set and aged out, holds,
    # a GPU gone and back, keyframes and deltas.
    kinds = [wire2.decode(p) for p in theirs]
    keyframes = sum(m.keyframe for m in kinds)
    assert NODES * SPAN_S // 10 <= keyframes < NODES * SPAN_S // 5
    joined = b"\n".join(theirs)
    for seen in (b'"errors_1h":[{},{"symbol_error":', b'"errors_1h":[{},{},{"link_downed":1',
                 b'"pcie_replay_1m":[', b'"throttled_last_ts":[null,null,17',
                 b'"hot_last_ts":[null,null,17', b'"present":[true,false',
                 b'"ecc.dbe_vol":[0,0,0,1,', b'"nvlink.links_up":[18,18,18,18,16,',
                 b'"DOWN","ACTIVE","ACTIVE"]'):
        assert seen in joined, seen
    node6 = [p for i, p in enumerate(theirs) if i % NODES == 6]
    assert b'"pcie_replay_1m":' in node6[40] and b'"pcie_replay_1m":' not in node6[140], \
        "the PCIe minute emptied after the fault"


def test_a_simulated_agent_reads_columns_and_a_row_source_rows() -> None:
    world, (agent, other, *_) = fleet(True)
    world.step()
    calls: list[str] = []
    node = agent.source
    assert isinstance(node, SimNode)
    node.read = lambda now: calls.append("rows")  # type: ignore[method-assign]
    agent.telemetry_payload()
    assert calls == []
    other.columns = False
    other.source.read = lambda now: calls.append("rows") or SimNode.read(  # type: ignore[method-assign]
        other.source, now)
    other.telemetry_payload()
    assert calls == ["rows"]


def test_a_node_that_reads_its_own_way_is_read_that_way() -> None:
    """A SimNode subclass with its own ``read`` (tests/test_no_lost_events.py logs an event at
    each) is read through it: its columns would pass it by."""
    calls: list[float] = []

    class Counting(SimNode):
        def read(self, now: float) -> Reading:
            calls.append(now)
            return super().read(now)

    agent = NodeAgent(cluster="t", node_id="gpu0001", source=Counting("gpu0001", seed=1),
                      url=BrokerURL("127.0.0.1", 1), clock=lambda: 1_700_000_000.0)
    assert wire2.decode(agent.telemetry_payload()).keyframe
    assert calls == [1_700_000_000.0]


def test_a_node_whose_read_or_sample_comes_from_elsewhere_is_read_its_way() -> None:
    """Only a ``read`` of the subclass itself sent it to the row path: one from a mixin, or
    its own ``sample``, was passed by (a review)."""

    class Logging:
        def read(self, now: float) -> Reading:
            return super().read(now)  # type: ignore[misc, no-any-return]

    class Mixed(Logging, SimNode):
        pass

    class Sampling(SimNode):
        def sample(self, t: float, dt: float, t0: float, wall_ms: int) -> Reading:
            return super().sample(t, dt, t0, wall_ms)

    class Columns(SimNode):
        pass

    assert Mixed.columns is False and Sampling.columns is False
    assert Columns.columns is SimNode.columns
