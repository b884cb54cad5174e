"""NodeOrder (the node list's kept sort orders) gives ``node_sort_key``'s order for every column,
ties and all, and stays right as nodes change, are born, forgotten, or the state is replaced."""

from typing import Any

import msgspec
import pytest

from fleetdeck.console.commands import jobs_by_node
from fleetdeck.console.node_order import NodeOrder
from fleetdeck.console.rows import NODE_COLUMNS, SORT_KEYS, node_sort_key
from fleetdeck.console.session import ConsoleSession
from fleetdeck.console.state import FleetState
from fleetdeck.protocol.messages import DrainState
from tests.tui.fleet import (
    CLUSTER,
    Clock,
    SynthFleet,
    job_status,
    port_down,
    publish_job,
    throttled,
)

KEYS = [key for _title, key, _w in NODE_COLUMNS] + ["gaps"]
N = 48


def _gpus(tel: Any, **changes: Any) -> Any:
    return msgspec.structs.replace(
        tel, gpus=[msgspec.structs.replace(g, **changes) for g in tel.gpus])


def util(v: float | None) -> Any:
    return lambda tel: _gpus(tel, util_pct=v, temp_c=None if v is None else 40 + v % 7)


def missing(index: int) -> Any:
    def apply(tel: Any) -> Any:
        return msgspec.structs.replace(tel, gpus=[
            msgspec.structs.replace(g, present=False) if g.index == index else g
            for g in tel.gpus])
    return apply


def no_gpus(tel: Any) -> Any:
    return msgspec.structs.replace(tel, gpus=[])


class Fleet:
    """A console session over a synthetic fleet with ties in every column: equal utilisations,
    missing GPUs, ports down, jobs on some nodes, drained ones, nodes that never sent
    telemetry and nodes gone stale."""

    def __init__(self, n: int = N) -> None:
        from fleetdeck.console.ingest import Ingest

        self.clock = Clock()
        self.ingest = Ingest(CLUSTER)
        self.fleet = SynthFleet(n, self.clock)
        self.session = ConsoleSession(CLUSTER, ingest=self.ingest, follow_up=False,
                                      clock=self.clock)
        names = self.fleet.names
        self.fleet.birth(self.ingest)
        publish_job(self.ingest, job_status("41", names[:6], self.clock), self.clock)
        publish_job(self.ingest, job_status("7", names[4:9], self.clock), self.clock)
        self.samples(names[: n - 4])  # the last 4: born, no telemetry (waiting)
        self.fleet.status(self.ingest, names[10], DrainState.DRAINED, "disk", "alice")
        self.fleet.status(self.ingest, names[11], DrainState.DRAINING, "ib", "bob")
        self.tick()

    def samples(self, names: list[str], seed: int = 0, shift: int = 0) -> None:
        """``shift`` moves the utilisations alone (the same faults, the same shapes)."""
        faults: dict[str, Any] = {}
        for i, name in enumerate(names):
            k = (i + seed) % 9
            faults[name] = (util(float((i * 3 + seed + shift) % 4 * 25)) if k < 4
                            else util(None) if k == 4 else missing(i % 8) if k == 5
                            else port_down() if k == 6 else throttled(i % 8) if k == 7
                            else no_gpus)
        jobs = {name: "99" for name in names[12:16]}
        self.fleet.telemetry(self.ingest, names=names, job=jobs, faults=faults)

    def tick(self, seconds: float = 0.5) -> None:
        self.clock.advance(seconds)
        self.session.tick()

    @property
    def state(self) -> FleetState:
        return self.session.state


def want(state: FleetState, key: str, jobs: dict[str, list[str]]) -> tuple[str, ...]:
    return tuple(sorted(state.nodes,
                        key=lambda n: node_sort_key(state.nodes[n], key, jobs.get(n, []))))


def check(order: NodeOrder, state: FleetState) -> None:
    jobs = jobs_by_node(state)
    for key in KEYS:
        got = order.ids(state, key, jobs)
        assert got == want(state, key, jobs), key
        assert order.ids(state, key, jobs) is got, f"{key}: kept while nothing changed"


@pytest.fixture
def fleet() -> Fleet:
    return Fleet()


def test_every_column_orders_as_node_sort_key_ties_by_id(fleet: Fleet) -> None:
    state = fleet.state
    jobs = jobs_by_node(state)
    order = NodeOrder()
    check(order, state)
    # The fleet has ties where it matters: the id breaks them.
    for key in ("util", "state", "gpus", "ib", "job", "reasons", "verdict"):
        values = [node_sort_key(st, key, jobs.get(n, []))[0] for n, st in state.nodes.items()]
        assert len(set(map(repr, values))) < len(values), f"{key}: no ties to break"
    # Nodes with text (jobs, reasons) first, then the rest by id.
    assert state.nodes[order.ids(state, "job", jobs)[0]].node_id in jobs
    assert not jobs.get(order.ids(state, "job", jobs)[-1])


def test_orders_follow_changes_to_a_few_nodes_and_to_most(fleet: Fleet) -> None:
    order = NodeOrder()
    check(order, fleet.state)
    names = fleet.fleet.names
    fleet.samples(names[20:26], seed=5)  # a few nodes: recomputed one by one
    fleet.tick()
    check(order, fleet.state)
    fleet.samples(names[: N - 4], seed=2)  # most of them: recomputed in one pass
    fleet.tick()
    check(order, fleet.state)
    fleet.fleet.status(fleet.ingest, names[30], DrainState.DRAINED, "psu", "carol")
    fleet.tick()
    check(order, fleet.state)
    fleet.tick(60)  # nothing heard for a minute: every node goes stale (shape, not data)
    check(order, fleet.state)


def test_births_forgotten_nodes_and_a_new_state(fleet: Fleet) -> None:
    order = NodeOrder()
    check(order, fleet.state)
    state = fleet.state
    gone = sorted(state.nodes)[3]
    state.forget(gone)
    check(order, state)
    assert gone not in order.ids(state, "util", jobs_by_node(state))
    late = SynthFleet(N + 3, fleet.clock)  # three more nodes, ids after the others
    late.birth(fleet.ingest, names=late.names[N:])
    fleet.tick()
    check(order, state)
    # One forgotten and one born between two sorts: as many nodes as before, not the same.
    state.forget(sorted(state.nodes)[0])
    late = SynthFleet(N + 4, fleet.clock)
    late.birth(fleet.ingest, names=late.names[N + 3:])
    fleet.tick()
    check(order, state)
    # A node forgotten and born again: same ids, a new NodeState (revision from 0).
    again = sorted(state.nodes)[5]
    state.forget(again)
    fleet.fleet.birth(fleet.ingest, names=[again])
    fleet.samples([again], seed=4)
    fleet.tick()
    check(order, state)
    fresh = Fleet(N // 2)  # a replay that seeks builds a new state: nothing kept applies
    check(order, fresh.state)


def test_a_new_job_map_reorders_the_jobs_column(fleet: Fleet) -> None:
    order = NodeOrder()
    state = fleet.state
    jobs = jobs_by_node(state)
    assert order.ids(state, "job", jobs) == want(state, "job", jobs)
    moved = {n: list(v) for n, v in jobs.items()}
    moved[sorted(state.nodes)[-1]] = ["0001"]
    assert order.ids(state, "job", moved) == want(state, "job", moved)


def test_sort_keys_of_rows_agree_on_the_same_fleet(fleet: Fleet) -> None:
    """The formatted rows' keys (SORT_KEYS, what the screen shows) give the same order."""
    from fleetdeck.console.rows import node_row

    state = fleet.state
    jobs = jobs_by_node(state)
    order = NodeOrder()
    for key in KEYS:
        if key == "age":
            continue  # rows hold the age at one instant; the node sorts by last heard
        by_row = sorted(state.nodes, key=lambda n, k=key: SORT_KEYS[k](
            node_row(state.nodes[n], fleet.clock(), jobs.get(n, []))))
        assert list(order.ids(state, key, jobs)) == by_row, key


def test_jobs_on_gives_jobs_by_node_from_the_schedulers_map(fleet: Fleet) -> None:
    from fleetdeck.console.commands import jobs_on, scheduled_jobs_by_node

    state = fleet.state
    every = jobs_by_node(state)
    scheduled = scheduled_jobs_by_node(state)
    assert any(n not in scheduled for n in every)  # some nodes' jobs come from their sample
    for node_id, st in state.nodes.items():
        assert jobs_on(st, scheduled, state) == every.get(node_id, []), node_id


def test_health_order_is_kept_while_only_samples_change(fleet: Fleet) -> None:
    """HEALTH follows the nodes' shape: new samples that change no verdict keep its order (no
    pass over the fleet), a changed verdict re-sorts."""
    order = NodeOrder()
    state = fleet.state
    before = order.ids(state, "verdict")
    names = fleet.fleet.names
    fleet.samples(names[: N - 4])  # the same faults again: new data, the same shapes
    fleet.clock.advance(0.5)
    fleet.session.tick()
    assert state.revisions and order.ids(state, "verdict") is before
    fleet.samples(names[: N - 4], seed=3)  # other faults: verdicts move
    fleet.tick()
    assert order.ids(state, "verdict") == want(state, "verdict", {})


def test_with_a_clock_an_order_only_samples_moved_waits_live_hold_s(fleet: Fleet,
                                                                    monkeypatch) -> None:
    """Under a 1 Hz stream every node's sample moves every second: with a clock, a column read
    from samples is read again at most every LIVE_HOLD_S, and ``held`` says so; a change of
    shape (a new verdict) or of members is never held; a small fleet is never held."""
    from fleetdeck.console import node_order
    from fleetdeck.console.node_order import LIVE_HOLD_S

    state, names = fleet.state, fleet.fleet.names
    jobs = jobs_by_node(state)
    small = NodeOrder()
    small.ids(state, "util", jobs, now=0.0)
    fleet.samples(names[: N - 4], shift=3)
    fleet.tick()
    assert small.ids(state, "util", jobs, now=0.5) == want(state, "util", jobs)
    assert N < node_order.HOLD_MIN_NODES and not small.held
    monkeypatch.setattr(node_order, "HOLD_MIN_NODES", 1)  # as for a large fleet
    order = NodeOrder()
    t = 100.0
    first = order.ids(state, "util", jobs, now=t)
    assert first == want(state, "util", jobs) and not order.held
    fleet.samples(names[: N - 4], shift=1)  # utilisations move; no shape does
    fleet.tick()
    shapes = state.shape_revisions
    assert order.ids(state, "util", jobs, now=t + 0.5) == first and order.held
    assert want(state, "util", jobs) != first  # the order it holds back is not the new one
    got = order.ids(state, "util", jobs, now=t + LIVE_HOLD_S)
    assert got == want(state, "util", jobs) and not order.held
    assert state.shape_revisions == shapes
    # A port goes down on a node: its shape moves, the order follows at once.
    fleet.samples(names[: N - 4], shift=2)
    fleet.fleet.telemetry(fleet.ingest, names=[names[0]], faults={names[0]: port_down()})
    fleet.tick()
    assert state.shape_revisions != shapes
    assert order.ids(state, "ib", jobs, now=t + LIVE_HOLD_S + 0.1) == want(state, "ib", jobs)
    # Without a clock nothing is held (status, tests, the order's own checks).
    assert order.ids(state, "util", jobs) == want(state, "util", jobs) and not order.held


def test_many_moved_values_are_read_a_chunk_a_call(fleet: Fleet, monkeypatch) -> None:
    """More nodes moved than READ_CHUNK: each call with a clock reads one chunk, says it
    ``held`` the rest, and the calls that follow finish; the order then is the true one."""
    from fleetdeck.console import node_order

    monkeypatch.setattr(node_order, "READ_CHUNK", 10)
    monkeypatch.setattr(node_order, "HOLD_MIN_NODES", 1)
    state, names = fleet.state, fleet.fleet.names
    jobs = jobs_by_node(state)
    order = NodeOrder()
    order.ids(state, "util", jobs, now=0.0)
    fleet.samples(names[: N - 4], shift=1)
    fleet.tick()
    moved = N - 4
    t = node_order.LIVE_HOLD_S
    calls = 0
    while True:
        got = order.ids(state, "util", jobs, now=t)
        calls += 1
        if not order.held:
            break
    assert calls == moved // 10 + 1  # chunks of 10, then the rest in the call that ends it
    assert got == want(state, "util", jobs)
    # A re-sort by another column (the operator's o) reads all it needs at once.
    fleet.samples(names[: N - 4], shift=3)
    fleet.tick()
    assert order.ids(state, "temp", jobs, now=t + 5) == want(state, "temp", jobs)
    assert not order.held
    got = order.ids(state, "util", jobs, now=t + 5)
    # Caught up: held again for LIVE_HOLD_S as before.
    fleet.samples(names[: N - 4], shift=2)
    fleet.tick()
    assert order.ids(state, "util", jobs, now=t + 0.1) == got and order.held


def test_a_live_metric_sorts_in_steps_so_busy_nodes_keep_their_places() -> None:
    """Nodes at 94-99 % swapped places every second, the selected row jumping 12 -> 15 -> 6
    -> 20 (an operator's walkthrough): within a step, the name decides."""
    from fleetdeck.console.rows import UNKNOWN, metric_sort_value

    def order(utils: dict[str, float]) -> list[str]:
        return sorted(utils, key=lambda n: (metric_sort_value("util", utils[n]), n))

    assert order({"gpu0001": 96.0, "gpu0002": 99.0, "gpu0003": 40.0}) == order(
        {"gpu0001": 99.0, "gpu0002": 96.0, "gpu0003": 40.0}) == ["gpu0001", "gpu0002",
                                                                 "gpu0003"]
    assert order({"gpu0001": 50.0, "gpu0002": 80.0}) == ["gpu0002", "gpu0001"]
    assert metric_sort_value("temp", UNKNOWN) > metric_sort_value("temp", 20.0)  # unknown last


def test_health_puts_the_nodes_no_one_acted_on_first_of_each_verdict() -> None:
    """Of one verdict, HEALTH lists the nodes no one has acted on before the drained or
    draining ones, as the incidents and the top problems do: sorted by the verdict alone, a
    failed node drained an hour ago came above one no one had touched when its name came
    first. A resume (a drain state alone changes) moves the node back among the others."""
    from fleetdeck.console.ingest import Ingest

    clock = Clock()
    ingest = Ingest(CLUSTER)
    fleet = SynthFleet(8, clock)
    session = ConsoleSession(CLUSTER, ingest=ingest, follow_up=False, clock=clock)
    fleet.birth(ingest)
    fleet.status(ingest, "gpu0002", DrainState.DRAINED, "ib", "alice")
    fleet.status(ingest, "gpu0003", DrainState.DRAINING, "ib", "alice")
    fleet.status(ingest, "gpu0006", DrainState.DRAINED, "disk", "bob")
    bad = {n: port_down() for n in ("gpu0002", "gpu0003", "gpu0004")}
    clock.advance(1)
    fleet.telemetry(ingest, faults=bad)
    session.tick()
    state = session.state
    order = NodeOrder()
    assert order.ids(state, "verdict") == ("gpu0004", "gpu0002", "gpu0003",  # failed
                                           "gpu0001", "gpu0005", "gpu0007", "gpu0008",
                                           "gpu0006")  # ok, the drained one last
    assert order.ids(state, "verdict") == want(state, "verdict", {})
    fleet.status(ingest, "gpu0003", DrainState.NONE)  # resumed, still failed
    clock.advance(1)
    fleet.telemetry(ingest, faults=bad)
    session.tick()
    assert order.ids(state, "verdict")[:3] == ("gpu0003", "gpu0004", "gpu0002")
