"""What the periodic GC sweep costs a console holding a whole fleet (fleetdeck/runtime.py).

A console freezes what each tick keeps (the state is acyclic: frozen, no collection rescans it),
so a reference cycle alive at a freeze stays for ever; Textual makes one at every layout, and
the TUI grew 12-20 MB a minute. ``runtime.sweep`` (unfreeze, one full collection, freeze) frees
them every ``SWEEP_EVERY_S``: its cost is one pass over every tracked object, which is what
this measures on a fleet applied through the real path (bench/apply_cost.py's payloads,
``Ingest.handle``, ``ConsoleSession.tick``), with a fixed amount of cyclic garbage made between
freezes so the sweep has something to free (and the benchmark fails if it frees nothing).

    .venv/bin/python bench/gc_sweep.py                  # 16,384 nodes
    .venv/bin/python bench/gc_sweep.py --nodes 2048
"""

import argparse
import gc
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import main_guard, require

CYCLES = 10_000
"""Cycles made between sweeps (Textual's layouts make ~1 a second, each holding ~1,800 objects)."""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=16384)
    ap.add_argument("--rounds", type=int, default=3, help="telemetry rounds before the first sweep")
    ap.add_argument("--between", type=int, default=None,
                    help="telemetry rounds before each measured sweep (default: one keyframe "
                         "cycle, so every node's held keyframe is new since the sweep before)")
    ap.add_argument("--sweeps", type=int, default=3)
    args = ap.parse_args()

    from bench._live_fleet import LiveFleet
    from bench._payloads import V2_CYCLE
    from fleetdeck import runtime

    n = args.nodes
    between = V2_CYCLE if args.between is None else args.between
    live = LiveFleet(n)
    apply = live.apply

    def make_garbage() -> None:
        junk: list[object] = []
        for _ in range(CYCLES):
            a: list[object] = []
            a.append(a)
            junk.append(a)
        gc.freeze()  # as a tick does, while the cycles are alive

    # CPU time as well as wall time: on a shared host a sweep's wall time holds whatever ran
    # beside it (the same build measured 70 and 230 ms an hour apart); a sweep holds the GIL
    # and does no I/O, so its thread's CPU time is what it cost.
    cpu: list[float] = []
    real_sweep = runtime.sweep

    def cpu_sweep(now: float | None = None) -> int:
        c0 = time.thread_time()
        got = real_sweep(now)
        cpu.append(time.thread_time() - c0)
        return got

    runtime.sweep = cpu_sweep  # freeze_tick calls the module's ``sweep`` by name

    def timed_sweep() -> tuple[float, int]:
        """A sweep called at once (no tick looked at what it made first)."""
        make_garbage()
        c0 = time.perf_counter()
        got = runtime.sweep()
        return time.perf_counter() - c0, got

    def tick_sweep() -> tuple[float, int]:
        """A sweep as the ticks run it: come due, ``runtime.LOOK_S`` of ticks that look at what
        they made, then the sweep (rounds of telemetry go on meanwhile)."""
        make_garbage()
        st = runtime.SWEEPS
        sweeps, freed_before = st.sweeps, st.freed
        st.due, st.frozen_after = time.monotonic(), -runtime.SWEEP_GROWTH  # due, grown
        while st.sweeps == sweeps:
            apply(1)
        return st.last_s, st.freed - freed_before

    apply(args.rounds)
    first, _ = timed_sweep()
    runtime.freeze_tick()  # arms the tick's sweeps
    runtime.SWEEPS.due = math.inf  # none but those below
    took, freed, unlooked = [], [], []
    took_cpu, unlooked_cpu = [], []
    # What a live console's sweep meets: a minute of telemetry since the sweep before, every
    # node's keyframe replaced in it (V2_CYCLE s) and what the ticks kept frozen, not yet
    # looked at by any collection. A sweep right after another finds all of that already
    # untracked: that "idle" figure alone made the sweep look ~1.7x cheaper than it is. Each
    # round measures the tick's sweep (after its look) and one called at once, alternating.
    for _ in range(args.sweeps):
        apply(between)
        t, f = tick_sweep()
        runtime.SWEEPS.due = math.inf
        took.append(t)
        took_cpu.append(cpu[-1])
        freed.append(f)
        apply(between)
        unlooked.append(timed_sweep()[0])
        unlooked_cpu.append(cpu[-1])
    idle, _ = timed_sweep()
    live.check()
    require(min(freed) >= CYCLES, f"a sweep freed {min(freed)} objects, {CYCLES} cycles made")
    gc.unfreeze()
    tracked = len(gc.get_objects())
    gc.freeze()
    print(f"{'nodes':>8} {'tracked objects':>16} {'sweep ms (median)':>18} {'CPU ms':>7} "
          f"{'max':>7} {'no look':>8} {'CPU ms':>7} {'first':>7} {'idle':>7} {'freed':>7} "
          f"{'every s':>8} {'share of wall':>14}")
    med = statistics.median(took)
    every = max(runtime.SWEEP_EVERY_S, med / runtime.SWEEP_SHARE)
    print(f"{n:>8,} {tracked:>16,} {med * 1000:>18.1f} "
          f"{statistics.median(took_cpu) * 1000:>7.1f} {max(took) * 1000:>7.1f} "
          f"{statistics.median(unlooked) * 1000:>8.1f} "
          f"{statistics.median(unlooked_cpu) * 1000:>7.1f} {first * 1000:>7.1f} "
          f"{idle * 1000:>7.1f} {min(freed):>7,} {every:>8.0f} {100 * med / every:>13.2f}%")
    print(f"(each sweep after {between} rounds of telemetry; CPU ms: the sweep's thread CPU time "
          "beside its wall time; sweep: as the ticks run it, after "
          f"{runtime.LOOK_S:g} s of ticks that look first; no look: called at once; first: "
          "after start-up; idle: right after another)")
    return 0


if __name__ == "__main__":
    main_guard(main)
