"""Process-wide tuning for long-running, allocation-heavy processes (console, collector, sim),
and the last way out of one whose orderly exit hangs (``force_exit``)."""

import asyncio
import contextlib
import gc
import logging
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

log = logging.getLogger("fleetdeck.runtime")

_sweeps = False

SWEEP_EVERY_S = 60.0
"""How often a console runs one collection of its whole state (``sweep``): young collections
free the cycles that die young; one that lived past two of them (Textual's layout maps while
on screen) is freed only so."""
SWEEP_SHARE = 0.005
"""At most this share of wall time in sweeps: a sweep that took T waits at least T / share."""
SETTLING_S = (2.0, 4.0, 8.0, 16.0, 32.0)
"""Seconds after the first tick of the sweeps that settle the screen: each collects gen 2 and
then freezes what it leaves for good (the views composed, their widgets and caches, the
state's long-lived containers), so the periodic sweeps after them walk what changed since,
not the screen's ~200,000 references of Textual objects at every size: 50 -> 17 ms of CPU at
16,384 nodes (bench/tui_sweep.py, docs/performance.md "The sweep walks the state alone").
Several, close together while the console fills: one settle a minute in walked everything
since start-up, 120 ms of CPU at 16,384 nodes; one after every round of telemetry was 33 ms
for the first and 10-17 after. Only these five: each freezes what happens to be alive then too,
and what of it later dies in a cycle (a dialog open then, a cleared line cache's ring, the
broker client of that connection) is kept until views are removed (another context, the kept
node detail dropped), which asks the next sweep to unfreeze everything first
(``unsettle_later``): a frozen object that becomes cyclic garbage is never freed, nor
anything it refers to, however new (a review: a context switch kept every view and its
per-node caches). Views composed after the last settle are walked by every sweep (a review
found settling them too froze more of such passing garbage). Unlike the frozen ticks of
before (12-20 MB a minute), what is frozen is what the screen held in its first half
minute."""

GEN0_THRESHOLD = 10_000
"""Net new tracked objects between young collections. A gen-0 collection walks every young
object (~0.23 µs each on the 2-vCPU bench machine): at 50,000 each one paused the event loop
12-17 ms, and one landing inside a 30-40 ms tick made a stall past 50 ms; at 10,000 the longest
was 4.4 ms, for ~0.8 % of a core more in all (bench/ingest.py with FLEETDECK_BENCH_STALLS, 2,048
nodes live: docs/performance.md, "Where the stalls come from")."""

GEN1_THRESHOLD = 1
"""Every second gen-0 collection is followed by a gen-1 one, which walks the survivors of the
last two and moves them into gen 2: no young collection walks more than two batches, and what
reaches gen 2 was looked at twice (a tuple whose items are untracked leaves the GC's view when
a collection looks at it; a tuple of tuples needs two looks)."""

NO_AUTOMATIC_FULL = 1 << 30
"""Gen-2 threshold: never reached, so gen 2 is collected only by ``sweep``. At CPython's
default (10, with its 25 %-growth rule) a fleet state applied at 16,384 nodes made full
collections of the whole state several times a minute (223-465 ms pauses at 2,048-4,096
nodes, issue 12)."""

GEN0_THRESHOLD_UNFROZEN = 50_000
"""The simulator's (``tune_gc(console=False)``): every gen-0 survivor moves on to gen 1 and 2
at CPython's own pace, and fewer collections mean fewer walks of those."""


@dataclass
class SweepStats:
    sweeps: int = 0
    freed: int = 0
    """Objects the sweeps found unreachable (cycles that outlived the young collections)."""
    last_s: float = 0.0
    longest_s: float = 0.0
    due: float = 0.0
    """``time.monotonic()`` of the next sweep (0: not armed yet)."""
    armed_at: float = 0.0
    """``time.monotonic()`` of the first tick (``SETTLING_S`` counts from it)."""
    unsettle: bool = False
    """The next sweep unfreezes everything first (``unsettle_later``)."""


SWEEPS = SweepStats()


def tune_gc(console: bool = True) -> None:
    """Make Python's cyclic GC cheap for a process that holds a large, long-lived fleet state.

    Both kinds of process first freeze what start-up made (modules, functions, types,
    schemas: ~290,000 references, ~20 ms of every full collection) into the permanent
    generation, for good.

    A console (``console=True``: TUI, status, collector, replay) then collects its young
    objects often and in small batches (``GEN0_THRESHOLD``, ``GEN1_THRESHOLD``) and never its
    whole state on its own (``NO_AUTOMATIC_FULL``): the state is acyclic, a replaced sample is
    freed by reference counting, and what cycles outlive the young collections are freed by the
    tick's periodic ``sweep``, a ``gc.collect(2)`` that walks the state alone, not the frozen
    start-up objects; what the first sweeps leave (the screen settled) is frozen too
    (``SETTLING_S``; docs/performance.md, "The sweep walks the state alone").

    The simulator (``console=False``, :func:`fleetdeck.agents.fleet`): fewer collections,
    CPython's own full collections, since it has no tick to sweep from and cycles made later
    (reconnects, killed agents) must stay collectable.
    """
    global _sweeps
    gc.freeze()
    if not console:
        gc.set_threshold(GEN0_THRESHOLD_UNFROZEN, 20, 100)
        return
    gc.set_threshold(GEN0_THRESHOLD, GEN1_THRESHOLD, NO_AUTOMATIC_FULL)
    _sweeps = True


_young_queued = False


def sweep_tick() -> None:
    """Run the periodic ``sweep`` when it is due; called at the end of each console tick. Only
    processes that called ``tune_gc`` (the console front ends) sweep; tests do not.

    Under a running event loop (the TUI, a collector) the sweep is an event-loop step of its
    own, after the I/O and timers due by then: run at the end of the tick it made one step of
    both, 53-57 ms at 16,384 nodes under a feed where a tick alone took 20-38 ms and a sweep
    15-18 (docs/performance.md, "What the loop's longest steps are made of"). When no sweep is
    due, the young generations are collected in a step of their own instead
    (``collect_young``)."""
    global _young_queued
    if not _sweeps:
        return
    now = time.monotonic()
    st = SWEEPS
    if not st.due:
        st.armed_at, st.due = now, now + SETTLING_S[0]
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # a headless pass (status, replay): nothing else waits for a turn
        if now >= st.due:
            sweep(now)
        return
    if now >= st.due:
        st.due = math.inf  # one at a time: the sweep sets the next
        loop.call_later(0, sweep)
    elif not _young_queued:
        _young_queued = True
        loop.call_later(0, collect_young)


def collect_young() -> int:
    """Collect the young generations: a loop step of its own after each console tick.

    CPython counts tracked allocations *less deallocations* towards ``GEN0_THRESHOLD``, and a
    tick that replaces samples frees an old object for each new one: under a 16,384-node
    stream the young generation grew to ~45,000 objects before anything collected it, and
    that collection (20-56 ms) ran inside whatever step allocated next, a tick or a paint
    (docs/performance.md, "What the loop's longest steps are made of"). Collected after every
    tick, each walks what one tick left; gen 1 as often as ``GEN1_THRESHOLD`` has it."""
    global _young_queued
    _young_queued = False
    return gc.collect(1 if gc.get_count()[1] > GEN1_THRESHOLD else 0)


def sweep(now: float | None = None) -> int:
    """Collect gen 2 (the whole state, not the frozen start-up objects, nor what the first
    sweeps left, ``SETTLING_S``); return the objects freed.

    Textual builds a reference cycle at every layout (``Compositor._arrange_root``'s recursive
    ``add_widget`` closure holds the map of every widget it placed; console/tui/render_cycles.py
    breaks most of them); one that lived through two young collections is in gen 2, which
    nothing else collects: the console grew by 12-20 MB a minute when these were never freed
    (an operator's walkthrough; docs/performance.md, "Frozen garbage"). It runs every
    ``SWEEP_EVERY_S``, or less often where it is slow (``SWEEP_SHARE``)."""
    t0 = time.perf_counter()
    st = SWEEPS
    unsettle = _sweeps and st.unsettle
    if unsettle:
        gc.unfreeze()  # one walk of everything, start-up objects included
    freed = gc.collect(2)
    settling = _sweeps and st.sweeps < len(SETTLING_S)
    if _sweeps and (unsettle or settling):
        gc.freeze()
    st.unsettle = False
    took = time.perf_counter() - t0
    st.sweeps += 1
    st.freed += freed
    st.last_s = took
    st.longest_s = max(st.longest_s, took)
    now = time.monotonic() if now is None else now
    if settling and st.sweeps < len(SETTLING_S) and st.armed_at:
        # On schedule, no back-off: overdue settles run on the next ticks, each walking what
        # the one before left (little); backed off by SWEEP_SHARE, a slow first settle at
        # 16,384 nodes pushed the next past the views' composition and it walked 106 ms.
        st.due = st.armed_at + SETTLING_S[st.sweeps]
    else:
        st.due = now + max(SWEEP_EVERY_S, took / SWEEP_SHARE)
    log.debug("gc sweep: %d objects freed in %.1f ms", freed, took * 1000)
    return freed


def unsettle_later() -> None:
    """Views were removed (another context, the kept node detail dropped): what the settles
    froze with them is cyclic garbage now, so the next sweep unfreezes everything, collects,
    and freezes what is left (one walk of everything: ~0.1 s at 16,384 nodes, at an operator's
    context switch)."""
    SWEEPS.unsettle = True


_LAST_WORDS: list[Callable[[], object]] = []


def on_forced_exit(callback: Callable[[], object]) -> Callable[[], None]:
    """Run ``callback`` (once, errors ignored) should the process be ended by ``force_exit``:
    a front end that started child processes in sessions of their own (the demo's broker and
    simulator) stops them there, since no ``finally`` runs. Returns a function that removes
    the callback again (the orderly exit stopped them itself)."""
    _LAST_WORDS.append(callback)

    def remove() -> None:
        with contextlib.suppress(ValueError):
            _LAST_WORDS.remove(callback)

    return remove


def force_exit(code: int) -> NoReturn:
    """End the process now, after the ``on_forced_exit`` callbacks: for an orderly exit that
    hangs (an event loop blocked for ever on a write to a terminal that went away)."""
    while _LAST_WORDS:
        callback = _LAST_WORDS.pop()
        with contextlib.suppress(Exception):
            callback()
    os._exit(code)


def available_memory() -> int | None:
    """Bytes the kernel says a new workload can use without swapping (``MemAvailable`` of
    /proc/meminfo), or None where that is not known (not Linux)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None
