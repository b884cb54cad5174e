"""The fabric view's and the overview's caches keep what they hold per node out of the GC's
view: the console's periodic full collection walks every tracked object and follows its
references (``runtime.sweep``, issue 12: no stall over 50 ms at 16,384 nodes), and these
caches held a summary, a birth and a member name per node in tracked objects
(bench/tui_sweep.py's census)."""

import dataclasses
import gc
from typing import Any

import msgspec

from fleetdeck.console.audit import MemoryAudit
from fleetdeck.console.fabric_map import (
    FabricMapCache,
    SwitchHealthCache,
    fabric_map,
    plan,
    switch_health,
)
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.rows import FabricCache, fabric
from fleetdeck.console.session import ConsoleSession
from tests.tui.fleet import CLUSTER, Clock, SynthFleet, port_down

NODES = 384


def _walk(root: object) -> tuple[int, int]:
    """The tracked objects among what ``root`` holds (itself included), and the references a
    collection follows from them: through containers, dataclasses and msgspec Structs."""
    seen: set[int] = set()
    tracked = refs = 0
    todo: list[Any] = [root]
    while todo:
        o = todo.pop()
        if id(o) in seen or isinstance(o, (str, int, float, bool, type(None))):
            continue
        seen.add(id(o))
        if isinstance(o, dict):
            held: list[Any] = [*o.keys(), *o.values()]
        elif isinstance(o, (list, tuple, set, frozenset)):
            held = list(o)
        elif isinstance(o, msgspec.Struct):
            held = [getattr(o, f) for f in o.__struct_fields__]
        elif dataclasses.is_dataclass(o):
            held = [getattr(o, f.name) for f in dataclasses.fields(o)]
        else:
            raise AssertionError(f"unexpected {type(o)} in a fabric cache")
        if gc.is_tracked(o):
            tracked += 1
            refs += len(held)
        todo.extend(held)
    return tracked, refs


def test_the_fabric_caches_hold_nothing_per_node_the_sweep_walks() -> None:
    clock = Clock()
    fleet = SynthFleet(NODES, clock, leaves=6)
    ingest = Ingest(CLUSTER)
    session = ConsoleSession(CLUSTER, ingest=ingest, clock=clock, audit=MemoryAudit())
    fleet.birth(ingest)
    sick = fleet.names[5]
    for _ in range(3):
        clock.advance(1.0)
        fleet.telemetry(ingest, faults={sick: port_down("mlx5_ib3")})
        session.tick()
    state = session.state
    tables, map_cache, switch_cache = FabricCache(), FabricMapCache(), SwitchHealthCache()
    _leaves, ports = fabric(state, tables)
    fm = fabric_map(state, map_cache)
    summary = switch_health(state, cache=switch_cache)
    # What the views show: the fault is in every table, and every node in the matrix.
    assert [p.node for p in ports] == [sick]
    assert [r.nodes for r in summary.rows] == [(sick,)]
    layout = plan(fm, 160, 48)
    assert sorted(n for band in layout.bands for b in band for c in b.columns
                  for n in c.nodes) == sorted(state.nodes)
    gc.collect()
    gc.collect()  # as the console's sweep: tuples, then dicts of untracked values, untracked
    for cache in (tables, map_cache, switch_cache):
        tracked, refs = _walk(cache)
        # A few per leaf group (its sums, its switch shapes), none per node.
        assert tracked < NODES / 20 and refs < NODES / 4, (type(cache).__name__, tracked, refs)
