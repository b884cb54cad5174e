"""What the periodic GC sweep costs a console holding a whole fleet (fleetdeck/runtime.py).

A console collects its young objects often and its whole state only at ``runtime.sweep``
(``gc.collect(2)``, every ``SWEEP_EVERY_S``, from the tick), which frees the reference cycles
that outlived the young collections (Textual makes one at every layout). Start-up objects are
frozen for good, so the sweep walks the state alone: its cost is one pass over that, which is
what this measures on a fleet applied through the real path (bench/apply_cost.py's payloads,
``Ingest.handle``, ``ConsoleSession.tick``), with a fixed amount of cyclic garbage moved into
gen 2 while alive, so the sweep has something to free (and the benchmark fails if it frees
nothing).

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
        gc.collect(1)  # into gen 2 while alive: a layout's map that outlived young collections

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

    runtime.sweep = cpu_sweep  # sweep_tick calls the module's ``sweep`` by name

    def timed_sweep() -> tuple[float, int]:
        """A sweep called between two rounds, not from a tick."""
        make_garbage()
        c0 = time.perf_counter()
        got = runtime.sweep()
        return time.perf_counter() - c0, got

    def tick_sweep() -> tuple[float, int]:
        """A sweep as the ticks run it: come due, the next tick runs it (telemetry goes on)."""
        make_garbage()
        st = runtime.SWEEPS
        sweeps, freed_before = st.sweeps, st.freed
        st.due = time.monotonic()
        while st.sweeps == sweeps:
            apply(1)
        return st.last_s, st.freed - freed_before

    apply(args.rounds)
    first, _ = timed_sweep()
    runtime.SWEEPS.sweeps = len(runtime.SETTLING_S)  # settled: the sweeps below are periodic
    runtime.sweep_tick()  # arms the tick's sweeps
    runtime.SWEEPS.due = math.inf  # none but those below
    took, freed, at_once, walked = [], [], [], []
    took_cpu, at_once_cpu = [], []
    # What a live console's sweep meets: a minute of telemetry since the sweep before, every
    # node's keyframe replaced in it (V2_CYCLE s). Each round measures the tick's sweep and one
    # called at once, alternating.
    for _ in range(args.sweeps):
        apply(between)
        walked.append(sum(len(gc.get_objects(g)) for g in range(3)))
        t, f = tick_sweep()
        runtime.SWEEPS.due = math.inf
        took.append(t)
        took_cpu.append(cpu[-1])
        freed.append(f)
        apply(between)
        at_once.append(timed_sweep()[0])
        at_once_cpu.append(cpu[-1])
    idle, _ = timed_sweep()
    live.check()
    require(min(freed) >= CYCLES, f"a sweep freed {min(freed)} objects, {CYCLES} cycles made")
    frozen = gc.get_freeze_count()
    print(f"{'nodes':>8} {'walked objects':>15} {'frozen':>9} {'sweep ms (median)':>18} "
          f"{'CPU ms':>7} {'max':>7} {'at once':>8} {'CPU ms':>7} {'first':>7} {'idle':>7} "
          f"{'freed':>7} {'every s':>8} {'share of wall':>14}")
    med = statistics.median(took)
    every = max(runtime.SWEEP_EVERY_S, med / runtime.SWEEP_SHARE)
    print(f"{n:>8,} {int(statistics.median(walked)):>15,} {frozen:>9,} {med * 1000:>18.1f} "
          f"{statistics.median(took_cpu) * 1000:>7.1f} {max(took) * 1000:>7.1f} "
          f"{statistics.median(at_once) * 1000:>8.1f} "
          f"{statistics.median(at_once_cpu) * 1000:>7.1f} {first * 1000:>7.1f} "
          f"{idle * 1000:>7.1f} {min(freed):>7,} {every:>8.0f} {100 * med / every:>13.2f}%")
    print(f"(each sweep after {between} rounds of telemetry; walked: the tracked objects outside "
          "the frozen start-up ones before the sweep; CPU ms: the sweep's thread CPU time beside "
          "its wall time; sweep: as the ticks run it; at once: called between two rounds; "
          "first: after start-up; idle: right after another)")
    return 0


if __name__ == "__main__":
    main_guard(main)
