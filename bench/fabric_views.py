"""What the overview's panels and the fabric matrix cost per fleet change, at fleet scale:
synthetic births and telemetry through the real Ingest (one rail switch failing on 3 nodes,
so there is a suspect to find), then each fleet-wide pass timed cold (first call) and cached
(later calls on the same state, the case of a fleet whose nodes' shapes did not change).

    .venv/bin/python bench/fabric_views.py [--nodes 16384] [--repeat 7]

Prints a table: pass, what uses it, cold ms, cached ms p50. The overview runs
fleet_counts + suspect_switches + top_problems + switch_health once per fleet revision; the
fabric view fabric + fabric_map, and the matrix plan only on a new size or new members.
"""

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import main_guard, require
from fleetdeck.console.audit import MemoryAudit
from fleetdeck.console.fabric_map import (
    FabricMapCache,
    SwitchHealthCache,
    column_codes,
    fabric_map,
    plan,
    switch_health,
)
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.judgements import suspect_switches
from fleetdeck.console.rows import CountsCache, FabricCache, fabric, fleet_counts, top_problems
from fleetdeck.console.session import ConsoleSession
from tests.tui.fleet import CLUSTER, Clock, SynthFleet, port_down


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    t0 = time.perf_counter()
    fn()
    cold = (time.perf_counter() - t0) * 1000
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        runs.append((time.perf_counter() - t0) * 1000)
    return cold, statistics.median(runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=16384)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    n = args.nodes
    clock = Clock()
    ingest = Ingest(CLUSTER)
    leaves = max(1, n // 16)
    fleet = SynthFleet(n, clock, leaves=leaves)
    fleet.birth(ingest)
    bad = fleet.names[0:3 * leaves:leaves]  # three nodes of leaf00, one rail: a suspect
    fleet.telemetry(ingest, faults={name: port_down("mlx5_ib5") for name in bad})
    session = ConsoleSession(CLUSTER, ingest=ingest, clock=clock, audit=MemoryAudit())
    session.tick()
    state = session.state
    require(len(state.nodes) == n, f"the state holds {len(state.nodes)} of {n} nodes")
    suspects = suspect_switches(state)
    require([s.switch for s in suspects] == ["leaf00-r5"],
            f"the failing rail switch was not suspected: {[s.switch for s in suspects]}")
    counts_cache = CountsCache()
    fabric_cache = FabricCache()
    map_cache = FabricMapCache()
    health_cache = SwitchHealthCache()
    fm = fabric_map(state)
    layout = plan(fm, 158, 33)
    require(layout.lines <= 33, "the matrix plan does not fit 160x48")
    rows = [
        ("fleet_counts", "overview", lambda: fleet_counts(state, counts_cache)),
        ("suspect_switches", "overview, fabric", lambda: suspect_switches(state)),
        ("top_problems (suspects given)", "overview", lambda: top_problems(state, 6, suspects)),
        ("switch_health (suspects given)", "overview panel",
         lambda: switch_health(state, suspects, health_cache)),
        ("fabric (leaf/port tables)", "fabric", lambda: fabric(state, fabric_cache)),
        ("fabric_map", "fabric matrix", lambda: fabric_map(state, map_cache)),
        ("plan 160x48", "fabric matrix (new size)", lambda: plan(fm, 158, 33)),
        ("column_codes, every cell", "fabric matrix (new map)",
         lambda: [column_codes(fm, c, layout.rails)
                  for band in layout.bands for b in band for c in b.columns]),
    ]
    print(f"overview panels and fabric matrix: {n} nodes, {leaves} leaf groups x 8 rails, "
          f"3 ports down on one rail switch; matrix {layout.describe()}, {layout.lines} lines")
    head = ("pass", "used by", "cold ms", "cached ms p50")
    widths = (32, 26, 8, 13)
    print("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)))
    for name, used, fn in rows:
        cold, warm = timed(fn, args.repeat)
        cells = (name, used, f"{cold:.1f}", f"{warm:.1f}")
        print("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)))


if __name__ == "__main__":
    main_guard(main)
