"""What the node list's kept sort orders (NodeOrder) leave for the GC's periodic full sweep to
walk: nothing per node. The sweep (``fleetdeck/runtime.py`` ``sweep``) follows every reference
of every tracked object; a list of 16,384 ids or values kept between re-sorts is 16,384
references walked every sweep, a stall the operator sees (issue 12). What NodeOrder keeps is
held in tuples of untracked items, which the GC stops tracking once it has looked at them."""

import gc
from collections import deque
from types import BuiltinFunctionType, FunctionType, ModuleType
from typing import Any

from fleetdeck.console import node_order
from fleetdeck.console.commands import jobs_by_node
from fleetdeck.console.node_order import NodeOrder
from fleetdeck.console.state import FleetState, NodeState
from tests.console.test_node_order import KEYS, Fleet, want

N = 300
_NOT_KEPT = (NodeState, FleetState, type, ModuleType, FunctionType, BuiltinFunctionType)
"""Not the order's: the fleet's state, and the code (its globals reach everything)."""


def kept(order: NodeOrder, jobs: object) -> tuple[list[Any], int]:
    """The containers of ``N`` items or more that ``order`` holds, and the references a full
    collection follows from what it holds (the fleet's own state and the caller's job map
    aside: they are not the order's)."""
    long: list[Any] = []
    refs = 0
    seen = {id(order)}
    todo: deque[object] = deque([order])
    while todo:
        o = todo.popleft()
        if isinstance(o, (tuple, list, dict, set)) and len(o) >= N:
            long.append(o)
        if gc.is_tracked(o):
            refs += len(gc.get_referents(o))
        for r in gc.get_referents(o):
            if id(r) in seen or r is jobs or isinstance(r, _NOT_KEPT):
                continue
            seen.add(id(r))
            todo.append(r)
    return long, refs


def sweep_twice() -> None:
    # A tuple is untracked by the collection that looks at it once what it holds is: the
    # second looks at the tuples of tuples (each column's (counter, signatures)).
    gc.collect()
    gc.collect()


def test_kept_orders_values_and_signatures_leave_the_gcs_view(monkeypatch) -> None:
    fleet = Fleet(N)
    state, names = fleet.state, fleet.fleet.names
    jobs = jobs_by_node(state)
    order = NodeOrder()
    for key in KEYS:  # every column sorted once: ids, nodes, signatures, values, orders
        assert tuple(order.ids(state, key, jobs)) == want(state, key, jobs)
    # A few nodes moved (their values read again one by one), then most (one pass), then a
    # stream read a chunk a call (values filled in place, READ_CHUNK): every way values are
    # kept.
    fleet.samples(names[20:26], seed=5)
    fleet.tick()
    for key in KEYS:
        assert tuple(order.ids(state, key, jobs)) == want(state, key, jobs)
    monkeypatch.setattr(node_order, "HOLD_MIN_NODES", 1)
    monkeypatch.setattr(node_order, "READ_CHUNK", 100)
    order.ids(state, "util", jobs, now=0.0)
    fleet.samples(names[: N - 4], shift=1)
    fleet.tick()
    t = node_order.LIVE_HOLD_S
    calls = 1
    got = order.ids(state, "util", jobs, now=t)
    while order.held:
        got = order.ids(state, "util", jobs, now=t)
        calls += 1
    assert calls > 1 and tuple(got) == want(state, "util", jobs)
    sweep_twice()
    long, refs = kept(order, jobs)
    assert len(long) >= len(KEYS) + 2  # an order a column, the ids, the nodes, ...
    tracked = [f"{type(o).__name__} of {len(o)}" for o in long if gc.is_tracked(o)]
    assert tracked == [], "per-node containers the sweep walks"
    # What is left is a few objects a column, whatever the fleet's size.
    assert refs < N, refs
