"""What the periodic GC sweep costs in the TUI itself at N nodes, and what it walks there.

bench/gc_sweep.py measures the console core (session, ingest, fleet state). The TUI adds what
its views keep: sort orders, fabric and switch caches, event rows, widgets. This builds the
real ``FleetdeckApp`` headless (``run_test``, no MQTT, as bench/console_scale.py), feeds it N
nodes' births and ``--rounds`` of evolving telemetry through the real ``Ingest``, visits every
view (so each one's caches exist), then measures ``--sweeps`` sweeps, each after a round of
telemetry applied by two ticks and painted: the sweep's thread CPU time, and the tracked
objects and references it walked. ``--census K`` prints the K types holding the most
references, and the largest containers with what holds them.

    .venv/bin/python bench/tui_sweep.py                    # 16,384 nodes
    .venv/bin/python bench/tui_sweep.py --nodes 2048 --census 25
"""

import argparse
import asyncio
import collections
import gc
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import main_guard, require
from fleetdeck.runtime import SETTLING_S

CLUSTER = "bench"
VIEWS = "23451"


def walked() -> tuple[int, int]:
    """The tracked objects a sweep walks (all but the frozen) and the references it follows."""
    objs = gc.get_objects()
    return len(objs), sum(len(gc.get_referents(o)) for o in objs)


def census(top: int) -> None:
    count: collections.Counter[str] = collections.Counter()
    refs: collections.Counter[str] = collections.Counter()
    objs = gc.get_objects()
    for o in objs:
        t = type(o)
        name = f"{t.__module__.split('.')[0]}:{t.__qualname__}"
        count[name] += 1
        refs[name] += len(gc.get_referents(o))
    print(f"{'objects':>9} {'references':>11}  type")
    for name, r in refs.most_common(top):
        print(f"{count[name]:>9,} {r:>11,}  {name}")
    big = sorted((o for o in objs if isinstance(o, (list, dict, tuple, set)) and len(o) > 500),
                 key=len, reverse=True)
    print("largest containers (what holds each):")
    for o in big[:top]:
        holders = []
        for r in gc.get_referrers(o):
            if r is objs or r is big or type(r).__name__ in ("frame", "cell"):
                continue
            if isinstance(r, dict):
                keys = [k for k, v in r.items() if v is o][:1]
                holders.append(f"dict{keys}")
            else:
                holders.append(f"{type(r).__module__}:{type(r).__qualname__}")
        first = next(iter(o), None)
        print(f"  {type(o).__name__} of {len(o):,} ({type(first).__name__}) held by "
              f"{', '.join(holders[:3])}")
    del objs, big


async def measure(n: int, rounds: int, sweeps: int, top: int) -> dict[str, Any]:
    from bench._payloads import EvolvingFleet
    from bench.console_scale import feed_ingest, scale_app, telemetry_round
    from fleetdeck import runtime
    from fleetdeck.console.audit import MemoryAudit

    fleet = EvolvingFleet(n, CLUSTER, bd_seq=int(time.time() * 1000), personas=512, wire=2)
    runtime.tune_gc()  # as run_console does, before the app is built
    ingest = feed_ingest(CLUSTER)
    app = scale_app(cluster=CLUSTER, connect=False, auto_tick=False, ingest=ingest,
                    audit=MemoryAudit(), operator="bench")
    painted: list[Any] = []
    app.painted_hooks.append(painted.append)
    k = applied = 0

    async def round_() -> None:
        nonlocal k, applied
        applied += await telemetry_round(app, ingest, fleet, k, painted)
        k += 1

    out: dict[str, Any] = {}
    async with app.run_test(size=(160, 48)) as pilot:
        now = time.time()
        for i in range(n):
            ingest.handle(*fleet.birth(i), now)
            ingest.handle(*fleet.status(i, int(now * 1000)), now)
        app.tick()
        await pilot.pause()
        require(len(app.state.nodes) == n,
                f"the console knows {len(app.state.nodes)} of {n} nodes after the births")
        for _ in range(rounds):
            await round_()
        for key in VIEWS:  # every view's caches, as an operator who looked at each
            await pilot.press(key)
            await round_()
        first = time.thread_time()
        runtime.sweep()  # a settle if the schedule (runtime.SETTLING_S) has one left
        out["first_ms"] = 1000 * (time.thread_time() - first)
        out["settled_before"] = runtime.SWEEPS.sweeps - 1
        # The sweeps measured below are periodic ones: they freeze nothing.
        runtime.SWEEPS.sweeps = max(runtime.SWEEPS.sweeps, len(runtime.SETTLING_S))
        cpu, objs, refs, freed = [], [], [], []
        for _ in range(sweeps):
            for _r in range(3):
                await round_()
            o, r = walked()
            objs.append(o)
            refs.append(r)
            c0 = time.thread_time()
            freed.append(runtime.sweep())
            cpu.append(1000 * (time.thread_time() - c0))
        require(app.state.malformed.total == 0,
                f"the console rejected {app.state.malformed.total} messages: the payloads "
                "are broken")
        require(applied == k * n, f"ticks applied {applied} of {k * n} samples handled")
        if top:
            census(top)
        out.update(cpu=cpu, objs=objs, refs=refs, freed=freed)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=16384)
    ap.add_argument("--rounds", type=int, default=3, help="telemetry rounds before the views")
    ap.add_argument("--sweeps", type=int, default=3)
    ap.add_argument("--census", type=int, default=0, metavar="K",
                    help="print the K types holding most references and the largest containers")
    args = ap.parse_args()
    out = asyncio.run(measure(args.nodes, args.rounds, args.sweeps, args.census))
    print(f"{'nodes':>8} {'walked objects':>15} {'references':>11} {'sweep ms CPU (median)':>22} "
          f"{'max':>7} {'first':>7} {'frozen':>9}")
    print(f"{args.nodes:>8,} {int(statistics.median(out['objs'])):>15,} "
          f"{int(statistics.median(out['refs'])):>11,} {statistics.median(out['cpu']):>22.1f} "
          f"{max(out['cpu']):>7.1f} {out['first_ms']:>7.1f} {gc.get_freeze_count():>9,}")
    print(f"(the real FleetdeckApp headless, every view visited; each sweep after 3 rounds of "
          f"telemetry, each applied by two ticks and painted, periodic (no freeze); first: the "
          f"sweep right after the views were first built, {out['settled_before']} sweep(s) "
          f"before it, a settle if fewer than {len(SETTLING_S)})")
    return 0


if __name__ == "__main__":
    main_guard(main)
