"""Process-wide tuning for long-running, allocation-heavy processes (console, collector, sim),
and the last way out of one whose orderly exit hangs (``force_exit``)."""

import contextlib
import gc
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

log = logging.getLogger("fleetdeck.runtime")

_freeze_ticks = False

SWEEP_EVERY_S = 60.0
"""How often a freezing process unfreezes everything and runs one full collection
(``freeze_tick``): what was frozen and later became cyclic garbage is freed only so."""
SWEEP_SHARE = 0.005
"""At most this share of wall time in sweeps: a sweep that took T waits at least T / share."""
SWEEP_GROWTH = 20_000
"""A due sweep runs only if the frozen objects grew by this many since the last one: a fleet
state in its steady state replaces what it froze (the old sample freed by its reference
count), so growth is garbage kept or a fleet that grew; a headless collector with nothing
cyclic to free pays for a full pass only while its fleet grows (start-up)."""


@dataclass
class SweepStats:
    sweeps: int = 0
    freed: int = 0
    """Objects the sweeps found unreachable (cyclic garbage that freezing had kept)."""
    last_s: float = 0.0
    longest_s: float = 0.0
    due: float = 0.0
    """``time.monotonic()`` of the next sweep."""
    look_until: float = 0.0
    """While a due sweep waits for ``LOOK_S`` of ticks to look at what they made (0: none)."""
    looks: int = 0
    """Ticks that collected gen 0 before their freeze (``LOOK_S``)."""
    frozen_after: int = 0
    """``gc.get_freeze_count()`` after the last sweep (or when sweeps were armed)."""
    skipped: int = 0


SWEEPS = SweepStats()

LOOK_S = 1.5
"""A due sweep runs after this long, during which each tick collects gen 0 before it freezes:
a tuple leaves the GC's view only once a collection looked at it, and a tick freezes what it
made unlooked-at, so a sweep found every node's latest sample's columns still tracked (~1.7
million references at 16,384 nodes; docs/performance.md, "Out of the collector's view").
Looking at every tick cost +1-1.4 µs a message; looking only in the last 1.5 s before a
sweep (three 0.5 s ticks, every node's latest sample at 1 Hz) costs that for 1.5 s a minute."""

GEN0_THRESHOLD = 10_000
"""Net new tracked objects between gen-0 collections. A gen-0 collection walks every young
object (~0.23 µs each on the 2-vCPU bench machine): at 50,000 each one paused the event loop
12-17 ms, and one landing inside a 30-40 ms tick made a stall past 50 ms; at 10,000 the longest
was 4.4 ms, for ~0.8 % of a core more in all (bench/ingest.py with FLEETDECK_BENCH_STALLS, 2,048
nodes live: docs/performance.md, "Where the stalls come from"). Survivors are frozen after each
one (``_freeze_survivors``), so gen 1 and gen 2 stay small whatever this is."""

GEN0_THRESHOLD_UNFROZEN = 50_000
"""The same for a process that does not freeze survivors (the simulator): there each gen-0
survivor moves on to gen 1 and 2, and fewer collections mean fewer walks of those."""


def tune_gc(freeze_survivors: bool = True) -> None:
    """Make Python's cyclic GC cheaper for a process that holds a large, long-lived fleet state.

    Each validated telemetry sample allocates a few hundred objects, and with thousands of nodes'
    samples alive, the default thresholds (700/10/10) trigger full collections that rescan the
    whole state many times a second: measured in bench/ingest.py as 3-4x the cost of ingest
    itself. Our state holds no reference cycles worth collecting eagerly, so collect less often
    and move start-up objects (modules, models, schemas) out of the GC's view. From here on,
    each console tick also freezes what it kept (``freeze_tick``).

    ``freeze_survivors=False`` (the simulator, :func:`tune_gc_for_sim`): no freezing after each
    collection, so reference cycles made later (reconnects, killed agents) are still collected.
    """
    global _freeze_ticks
    gc.freeze()
    if not freeze_survivors:
        gc.set_threshold(GEN0_THRESHOLD_UNFROZEN, 20, 100)
        return
    gc.set_threshold(GEN0_THRESHOLD, 20, 100)
    _freeze_ticks = True
    if _freeze_survivors not in gc.callbacks:
        gc.callbacks.append(_freeze_survivors)


def _freeze_survivors(phase: str, info: dict[str, int]) -> None:
    """After each gen-0 collection, freeze what survived it.

    Between two ticks the ingest alone allocates a round of samples (at 16,384 nodes with
    pydantic samples ~1.8 M tracked objects a second): frozen only at the tick, they still
    piled up in gen 1, whose collections paused 0.75-0.9 s of CPU (bench/apply_cost.py). What
    survives a gen-0 collection is, in this process, state that lives until replaced and is
    then freed by reference counting; frozen at once, gen 1 and gen 2 never hold more than one
    gen-0 batch. Same price as ``freeze_tick``: a cycle that becomes garbage after surviving a
    gen-0 collection is not collected.
    """
    if phase == "stop" and info.get("generation") == 0:
        gc.freeze()


def freeze_tick() -> None:
    """Move everything alive after a tick into the GC's permanent generation (O(1)).

    What a tick keeps (the new samples, findings, history) lives until a newer sample replaces
    it and is then freed by reference counting: the state is acyclic. Left in the young
    generations, it was rescanned by every gen-1/gen-2 collection, 223-465 ms pauses at 2,048-
    4,096 nodes (issue 12); frozen, the collector only ever sees what the current tick and
    ingest allocate. The price: a reference cycle created before a freeze is not collected
    until the next ``sweep``, which this runs every ``SWEEP_EVERY_S``. Only processes that
    called ``tune_gc`` (the console front ends) do this; tests do not.
    """
    if not _freeze_ticks:
        return
    now = time.monotonic()
    st = SWEEPS
    if now >= st.due:
        if not st.due:
            st.due, st.frozen_after = now + SWEEP_EVERY_S, gc.get_freeze_count()
        elif st.look_until:
            # Growth is judged once, when the look starts: the look itself lowers the frozen
            # count (what it untracks is not frozen, what it replaces is freed), and judged
            # again it skipped every due sweep of a fleet without much new garbage (a review).
            if now >= st.look_until:
                sweep(now)
        elif gc.get_freeze_count() - st.frozen_after < SWEEP_GROWTH:
            st.due, st.skipped = now + SWEEP_EVERY_S, st.skipped + 1
        else:
            st.look_until = now + LOOK_S
    if st.look_until:
        st.looks += 1
        gc.collect(0)  # ``_freeze_survivors`` freezes what it leaves
    gc.freeze()


def sweep(now: float | None = None) -> int:
    """Unfreeze, collect everything, freeze again; return the objects freed.

    Freezing keeps a reference cycle for ever once it was alive at a freeze: Textual builds
    one at every layout (``Compositor._arrange_root``'s recursive ``add_widget`` closure holds
    the map of every widget it placed), so the console grew by 12-20 MB a minute with 48 nodes
    until it was killed (an operator's walkthrough; docs/performance.md, "Frozen garbage").
    A sweep walks every tracked object once: it runs every ``SWEEP_EVERY_S``, or less often
    where it is slow (``SWEEP_SHARE``)."""
    t0 = time.perf_counter()
    gc.unfreeze()
    freed = gc.collect()
    gc.freeze()
    took = time.perf_counter() - t0
    st = SWEEPS
    st.sweeps += 1
    st.freed += freed
    st.last_s = took
    st.longest_s = max(st.longest_s, took)
    st.look_until = 0.0
    st.due = (time.monotonic() if now is None else now) + max(SWEEP_EVERY_S, took / SWEEP_SHARE)
    st.frozen_after = gc.get_freeze_count()  # a walk of the frozen list: once
    log.debug("gc sweep: %d objects freed in %.1f ms (%d frozen)", freed, took * 1000,
              st.frozen_after)
    return freed


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
