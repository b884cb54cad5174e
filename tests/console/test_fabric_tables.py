"""The fabric view's leaf and port tables catch up from the state's shape log (``rows.fabric``
with a ``FabricCache``) and always equal the tables summed from scratch: through every
simulated IB fault (a flapping port, a port down, a symbol storm, a rail switch), agent death,
births again, a node forgotten, and a replay's new state."""

from fleetdeck.console import rows
from fleetdeck.console.audit import MemoryAudit
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.judgements import correlate
from fleetdeck.console.rows import FabricCache, fabric
from fleetdeck.console.session import ConsoleSession
from fleetdeck.console.state import FleetState
from fleetdeck.protocol import codec
from fleetdeck.protocol.topics import Kind, topic_for
from tests.console.test_apply_precheck import SCENARIO
from tests.console.test_quiet_apply import _V2Feed
from tests.sim.harness import Harness
from tests.tui.fleet import CLUSTER, Clock, SynthFleet, port_down


def test_cached_fabric_tables_equal_fresh_ones_through_every_fault() -> None:
    h = Harness(nodes=16, actions=SCENARIO)
    state = FleetState("t")
    state.correlate = correlate
    feed = _V2Feed(h, [state])
    cache = FabricCache()
    bad_seen = set()
    for i in range(90):
        feed.tick()
        if i == 40:  # an agent restarts: births again, same leaves
            for name, birth in h.births.items():
                feed._handle(topic_for("t", Kind.BIRTH, name), codec.encode(birth))
            feed._apply()
        if i == 60:
            state.forget("gpu0012")
        leaves, ports = fabric(state, cache)
        assert (leaves, ports) == fabric(state), (i, h.now)
        bad_seen.update(p.status for p in ports)
    assert len(bad_seen) >= 2, bad_seen  # down and flapping or erroring ports were shown
    assert "gpu0012" not in {p.node for p in ports}
    assert sum(lr.nodes for lr in leaves) == len(state.nodes) == 15


def test_a_refresh_visits_what_changed_not_the_fleet(monkeypatch) -> None:
    visited: list[str] = []
    summarise = rows._fabric_node

    def counting(st):
        visited.append(st.node_id)
        return summarise(st)

    monkeypatch.setattr(rows, "_fabric_node", counting)
    clock = Clock()
    fleet = SynthFleet(64, clock, leaves=4)
    ingest = Ingest(CLUSTER)
    session = ConsoleSession(CLUSTER, ingest=ingest, clock=clock, audit=MemoryAudit())
    fleet.birth(ingest)
    fleet.telemetry(ingest)
    session.tick()
    cache = FabricCache()
    fabric(session.state, cache)
    assert len(visited) == 64
    sick = fleet.names[5]
    for _ in range(3):  # healthy samples: nothing to visit
        clock.advance(1.0)
        visited.clear()
        fleet.telemetry(ingest)
        session.tick()
        fabric(session.state, cache)
        assert visited == []
    for _ in range(3):  # one port down: that node, on every refresh (its counters move)
        clock.advance(1.0)
        visited.clear()
        fleet.telemetry(ingest, faults={sick: port_down("mlx5_ib3")})
        session.tick()
        leaves, ports = fabric(session.state, cache)
        assert visited == [sick]
        assert [p.node for p in ports] == [sick] and (leaves, ports) == fabric(session.state)


def test_a_new_state_is_summed_from_scratch() -> None:
    h = Harness(nodes=8, actions=SCENARIO[:3])
    first, second = FleetState("t"), FleetState("t")
    cache = FabricCache()
    feed = _V2Feed(h, [first])
    for _ in range(10):
        feed.tick()
    fabric(first, cache)
    assert fabric(second, cache) == fabric(second) == ([], [])


def test_the_sessions_tables_catch_up_a_burst_of_changes_over_several_ticks() -> None:
    """Every node goes stale at once: a live session's ``Summaries`` catch up at most
    SUMMARY_CATCH_UP nodes a tick, report the rest as backlog (the front end ticks again at
    once), and end equal to tables summed from scratch, before any view read them."""
    from fleetdeck.console.rows import CountsCache, Summaries, fleet_counts
    from fleetdeck.console.session import SUMMARY_CATCH_UP

    n = 2 * SUMMARY_CATCH_UP + 100
    clock = Clock()
    fleet = SynthFleet(n, clock, leaves=8)
    ingest = Ingest(CLUSTER)
    session = ConsoleSession(CLUSTER, ingest=ingest, clock=clock, audit=MemoryAudit())
    session.summaries = Summaries()
    fleet.birth(ingest)
    fleet.telemetry(ingest)
    session.tick()
    assert session.summaries.pending == 0
    clock.advance(30.0)  # silence: every node goes stale on the next pass
    reports = [session.tick()]
    while reports[-1].backlog:
        reports.append(session.tick())
    assert len(reports) == 3
    assert [r.backlog for r in reports] == [n - SUMMARY_CATCH_UP, n - 2 * SUMMARY_CATCH_UP, 0]
    counts = session.summaries.counts
    assert counts.pending == {} and session.summaries.fabric.pending == {}
    assert fleet_counts(session.state, CountsCache()) == fleet_counts(session.state, counts)
    assert fleet_counts(session.state).states.get("stale") == n
    assert fabric(session.state, session.summaries.fabric) == fabric(session.state)


def test_a_silent_node_never_heard_from_is_out_not_failed() -> None:
    """Its GPUs are not known: out of service, as the live console counts a node it saw die."""
    from fleetdeck.console.ingest import Ingest
    from fleetdeck.console.rows import fleet_counts
    from fleetdeck.console.session import ConsoleSession
    from fleetdeck.protocol.topics import Kind
    from tests.helpers import FakeNode

    t0 = 1_000_000.0
    ingest = Ingest("test")
    session = ConsoleSession("test", ingest=ingest, follow_up=False, clock=lambda: t0)
    dead, seen_dying = FakeNode("gpu0001", t0=t0), FakeNode("gpu0002", t0=t0)
    for node in (dead, seen_dying):
        node.feed(ingest, node.birth(), Kind.BIRTH)
    seen_dying.feed(ingest, seen_dying.telemetry(advance=0.0), Kind.TELEMETRY)
    for node in (dead, seen_dying):
        node.feed(ingest, node.status().model_copy(update={"online": False}), Kind.STATUS)
    session.tick(t0)
    counts = fleet_counts(session.state)
    assert counts.verdicts.get("offline") == 2
    assert counts.gpus_failed == 0
    assert counts.gpus_out == 16
