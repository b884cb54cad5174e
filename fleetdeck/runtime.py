"""Process-wide tuning for long-running, allocation-heavy processes (console, collector, sim),
and the last way out of one whose orderly exit hangs (``force_exit``)."""

import contextlib
import gc
import os
from collections.abc import Callable
from typing import NoReturn

_freeze_ticks = False

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
    ingest allocate. The price: a reference cycle created before a freeze is never collected.
    Only processes that called ``tune_gc`` (the console front ends) do this; tests do not.
    """
    if _freeze_ticks:
        gc.freeze()


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
