"""Cyclic garbage a node detail leaves per open and close, by type (fleetdeck issue 12).

Cyclic garbage is freed only by the console's periodic full sweep (fleetdeck/runtime.py), which
walks every tracked object (~0.28 s at 16,384 nodes): what each open of a detail leaves brings
sweeps on. The census is the one of docs/performance.md, "Textual's render garbage": every
collection under ``gc.DEBUG_SAVEALL`` keeps what it would have freed in ``gc.garbage``.

The real app, headless (``run_test``), on a synthetic fleet through the real Ingest: the
overview's grid cursor moves one node on, enter opens its detail, a tick redraws it, esc closes
it; ``--opens`` times. The same moves and ticks without the enter/esc are counted apart, so
what is the detail's own is the difference. Also printed: the median time from enter to the
detail shown (Pilot's press and pause, ticks excluded).

    .venv/bin/python bench/detail_garbage.py [--nodes 48] [--opens 20] [--history]
"""

import argparse
import asyncio
import gc
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import main_guard, require


class _Probe:
    me: object = None


async def census(nodes: int, opens: int, history: bool,
                 open_ms: list[float]) -> tuple[Counter[str], Counter[str]]:
    """(garbage with a detail opened and closed each round, garbage of the same rounds
    without it), by type name; each counted open's enter→shown time appended to
    ``open_ms``."""
    from fleetdeck.console.audit import MemoryAudit
    from fleetdeck.console.ingest import Ingest
    from fleetdeck.console.tui import render_cycles
    from fleetdeck.console.tui.app import FleetdeckApp
    from fleetdeck.console.tui.screens.node_detail import NodeDetailScreen
    from tests.tui.fleet import CLUSTER, Clock, SynthFleet

    render_cycles.install()  # as the console does: what is left is not the strips'
    clock = Clock()
    ingest = Ingest(CLUSTER)
    fleet = SynthFleet(nodes, clock)
    fleet.birth(ingest)
    fleet.telemetry(ingest)
    app = FleetdeckApp(cluster=CLUSTER, ingest=ingest, clock=clock, connect=False,
                       auto_tick=False, audit=MemoryAudit())

    async def rounds(pilot: object, n: int, detail: bool) -> None:
        for _ in range(n):
            await pilot.press("right")  # type: ignore[attr-defined]
            if detail:
                t0 = time.perf_counter()
                await pilot.press("enter")  # type: ignore[attr-defined]
                await pilot.pause()  # type: ignore[attr-defined]
                open_ms.append((time.perf_counter() - t0) * 1000)
                require(isinstance(app.screen, NodeDetailScreen), "enter opened no detail")
                if history:
                    await pilot.press("h")  # type: ignore[attr-defined]
                    await pilot.pause()  # type: ignore[attr-defined]
            clock.advance(0.5)
            fleet.telemetry(ingest)
            app.tick()
            await pilot.pause()  # type: ignore[attr-defined]
            if detail:
                await pilot.press("escape")  # type: ignore[attr-defined]
                if history:
                    await pilot.press("escape")  # type: ignore[attr-defined]
                await pilot.pause()  # type: ignore[attr-defined]
                require(not isinstance(app.screen, NodeDetailScreen), "esc left the detail")

    async def counted(pilot: object, detail: bool) -> Counter[str]:
        gc.collect()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            await rounds(pilot, opens, detail)
            probe = _Probe()  # one known cycle: a census that finds none measured nothing
            probe.me = probe
            del probe
            gc.collect()
            found = Counter(type(o).__qualname__ for o in gc.garbage)
            require(found.pop(_Probe.__qualname__, 0) == 1, "the census missed a known cycle")
            return found
        finally:
            gc.set_debug(0)
            gc.garbage.clear()

    async with app.run_test(size=(160, 48)) as pilot:
        app.tick()
        await pilot.pause()
        await rounds(pilot, 3, True)  # first opens: CSS, caches, lazy imports
        open_ms.clear()
        with_detail = await counted(pilot, True)
        without = await counted(pilot, False)
    return with_detail, without


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=48)
    ap.add_argument("--opens", type=int, default=20)
    ap.add_argument("--history", action="store_true", help="press h in each detail too")
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args()
    open_ms: list[float] = []
    with_detail, without = asyncio.run(census(args.nodes, args.opens, args.history, open_ms))
    own = with_detail.copy()
    own.subtract(without)
    total_with, total_without = with_detail.total(), without.total()
    n = args.opens
    print(f"node detail garbage: {args.nodes} nodes, {n} opens and closes"
          f"{' with h (history) in each' if args.history else ''}, 160x48")
    own_total = total_with - total_without
    print(f"cyclic garbage per round: {total_with / n:,.0f} objects with the detail, "
          f"{total_without / n:,.0f} without; the detail's own {own_total / n:,.0f}")
    print(f"enter→detail shown (Pilot press and pause): median {statistics.median(open_ms):.1f} ms")
    print(f"{'type':<40} {'per open':>10}")
    for name, count in sorted(own.items(), key=lambda kv: -kv[1])[:args.top]:
        if count > 0:
            print(f"{name:<40} {count / n:>10,.1f}")
    return 0


if __name__ == "__main__":
    main_guard(main)
