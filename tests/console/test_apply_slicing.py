"""A tick applies at most a budget of the received telemetry and carries the rest: latest wins,
nothing lost or reordered, counters exact, and the tick report says what it did."""

from fleetdeck.console.ingest import Ingest
from fleetdeck.console.session import APPLY_MIN_NODES, ConsoleSession, TickReport
from fleetdeck.protocol.topics import Kind
from tests.helpers import FakeNode

NODES = 300
T0 = 1_000_000.0


def _fleet() -> tuple[ConsoleSession, Ingest, list[FakeNode]]:
    ingest = Ingest("test")
    session = ConsoleSession("test", ingest=ingest, follow_up=False, clock=lambda: T0)
    nodes = [FakeNode(f"gpu{i:04d}", t0=T0) for i in range(NODES)]
    for n in nodes:
        n.feed(ingest, n.birth(), Kind.BIRTH)
        n.feed(ingest, n.status(), Kind.STATUS)
    return session, ingest, nodes


def _round(ingest: Ingest, nodes: list[FakeNode]) -> list[int]:
    seqs = []
    for n in nodes:
        t = n.telemetry()
        n.feed(ingest, t, Kind.TELEMETRY)
        seqs.append(t.seq)
    return seqs


def test_a_large_batch_is_applied_in_slices_newest_sample_once_per_node() -> None:
    session, ingest, nodes = _fleet()
    session.apply_max_nodes = 50
    first = session.tick(T0 + 1)
    assert first.messages == 2 * NODES and first.backlog == 0  # births and statuses: all
    _round(ingest, nodes)
    r = session.tick(T0 + 2)
    # The first 50 nodes in arrival order, no more: the rest is carried.
    assert r.changed == {n.node_id for n in nodes[:50]} and r.messages == 50
    assert r.backlog == NODES - 50 and session.backlog == NODES - 50
    newest = _round(ingest, nodes)  # newer samples arrive while 250 older ones wait
    shape_rev = session.state.nodes[nodes[0].node_id].shape_rev
    applied: dict[str, int] = {}
    ticks = 0
    while True:
        r = session.tick(T0 + 3)
        ticks += 1
        assert len(r.changed) <= 50
        if ticks > 1 and r.backlog:
            # Same clock, backlog left: only the slice, not the O(fleet) pass.
            assert r.verdicts == []
            assert session.state.nodes[nodes[0].node_id].shape_rev == shape_rev
        for node in r.changed:
            applied[node] = applied.get(node, 0) + 1
        if not r.backlog:
            break
    assert ticks == NODES // 50
    # The slice that emptied the backlog judged every node at its latest data.
    assert all(st.judge_key and st.judge_key[0] is (st.findings or None)
               for st in session.state.nodes.values())
    assert applied == {n.node_id: 1 for n in nodes}  # exactly once each, after the second round
    for n, seq in zip(nodes, newest, strict=True):
        st = session.state.nodes[n.node_id]
        assert st.telemetry is not None and st.telemetry.seq == seq
        assert st.seq_gaps == 0  # superseded samples' seqs still counted
    state = session.state
    assert state.applied == ingest.received == 4 * NODES  # every message counted once
    assert state.superseded == NODES - 50  # the carried first-round samples
    assert session.backlog == 0


def test_time_budget_bounds_the_nodes_per_tick() -> None:
    session, ingest, nodes = _fleet()
    session.tick(T0 + 1)
    session.apply_budget_s = 1e-9  # far below one node's cost: the floor applies
    _round(ingest, nodes)
    r = session.tick(T0 + 2)
    assert len(r.changed) == APPLY_MIN_NODES and r.backlog == NODES - APPLY_MIN_NODES
    while r.backlog:
        r = session.tick(T0 + 2)
    assert all(st.telemetry is not None for st in session.state.nodes.values())


def test_without_a_budget_a_tick_applies_everything() -> None:
    session, ingest, nodes = _fleet()
    session.tick(T0 + 1)
    _round(ingest, nodes)
    r = session.tick(T0 + 2)
    assert len(r.changed) == NODES and r.backlog == 0 and r.messages == NODES


async def test_watch_ticks_again_at_once_while_a_budget_leaves_a_backlog() -> None:
    import asyncio

    session, ingest, nodes = _fleet()
    session.tick(T0 + 1)
    session.apply_max_nodes = 50
    _round(ingest, nodes)
    slices: list[int] = []

    def on_tick(report: TickReport) -> bool:
        slices.append(len(report.changed))
        return report.backlog == 0

    # tick_s far beyond duration_s: only immediate re-ticks can drain 6 slices in time.
    await session.watch(asyncio.Event(), tick_s=60, on_tick=on_tick, duration_s=30)
    assert slices == [50] * (NODES // 50)


def test_seqs_of_superseded_and_carried_samples_count_gaps_and_messages_once() -> None:
    """A node's seq list is kept only when it sent more than one sample in a batch (or its
    carried sample was superseded): gaps and message counts are the same either way."""
    session, ingest, nodes = _fleet()
    session.tick(T0 + 1)
    session.apply_max_nodes = 50
    _round(ingest, nodes)  # seq 1 everywhere
    session.tick(T0 + 2)  # 50 applied, 250 carried
    a, b = nodes[0], nodes[-1]  # applied, carried
    for n in (a, b):
        n.telemetry()  # seq 2: lost on the way
        for _ in range(2):  # seqs 3 and 4 in one batch
            n.feed(ingest, n.telemetry(), Kind.TELEMETRY)
    while session.tick(T0 + 3).backlog:
        pass
    for n in (a, b):
        st = session.state.nodes[n.node_id]
        assert st.telemetry is not None and st.telemetry.seq == 4
        assert st.seq_gaps == 1, n.node_id
    state = session.state
    assert state.applied == ingest.received == 2 * NODES + NODES + 4
    assert state.superseded == 1 + 2  # a's seq 3; b's carried seq 1 and its seq 3
    assert state.seq_lost == 2
