"""Thermal holds (rules G12 and G13): the thresholds, and how a throttle's hold ends, in one
place for the console's rules (console/health.py) and the agent's own watch of them
(agents/windows.py, ``ThermalHolds``; docs/protocol.md, "Agent windows").

The console holds G12 and G13 from what it watched; a console that watched for seconds (a
one-shot ``fleetdeck status``, a restarted collector) saw none of a throttle that ended before
it started, and said "ok ... do not drain" of a GPU the TUI held degraded for its failed cooling
(a fault drill). The agent runs all along, so it applies the same rule and sends each GPU's last
throttle (``throttled_last_ts``) and last hot reading (``hot_last_ts``) while they hold.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

TEMP_WARN_C = 87.0  # max operating
TEMP_CLEAR_C = 84.0
"""G13 hysteresis: a GPU that reached TEMP_WARN_C stays flagged until it reads below this. The
firmware's own thermal slowdown holds a hot GPU a degree or two under its limit and readings
jitter by a degree, so a clear at 87 strobed; a healthy GPU under load runs 55-80 °C
(docs/architecture.md, "Thermal findings hold")."""
THROTTLE_BITS = 0x8 | 0x20 | 0x40 | 0x80  # HW slowdown, SW/HW thermal, power brake
THERMAL_BITS = 0x20 | 0x40
"""The throttles that are the GPU's own cooling (SW and HW thermal slowdown): they, or a grown
thermal violation counter, hold G12 past its minute on an idle GPU (``thermal_sample``). HW
slowdown and power brake alone come with a facility's power cap, on every node at once, and
clear as before (a review)."""
THROTTLE_HOLD_S = 60.0
"""G12 hysteresis: a GPU stays flagged this long after its last throttled sample, the window of
DCGM's thermal watch ("violation time grew in the last minute"); the throttle bits of a GPU at
its limit come and go from one sample to the next (docs/architecture.md, "Thermal findings
hold")."""
THROTTLE_HOLD_MS = int(THROTTLE_HOLD_S * 1000)
THROTTLE_IDLE_HOLD_S = 3600.0
"""A GPU that throttled and then went idle (its job ended or was requeued) cannot show that it
is fixed: an idle GPU does not throttle. G12 holds until it has worked THROTTLE_HOLD_S without
throttling, or for this long idle: it was forgotten a minute after its job's requeue, and the
node went back to the pool to slow the next job (a 3 a.m. drive)."""
THROTTLE_IDLE_HOLD_MS = int(THROTTLE_IDLE_HOLD_S * 1000)
BUSY_UTIL_PCT = 50
"""A GPU this busy (utilisation %) is under load: it would throttle again if its cooling were
still bad."""


def thermal_sample(reasons: int, grew: bool) -> bool:
    """Whether a throttled sample was of the GPU's cooling: a thermal bit (THERMAL_BITS), or its
    thermal violation time grew, whatever bits it has. The hold's flag is sticky: set by any
    such sample and lowered only when the hold ends. A sample's reason bits are of its moment
    (NVML): a job that ends mid-throttle leaves an idle (0x1) or power-cap (0x4) last sample,
    and a thermal throttle followed by a power-brake sample, or the counter grown beside HW
    slowdown (0x8, raised for heat too) or power brake (0x80), read as a power throttle and
    cleared a minute later on the idle GPU (reviews)."""
    return grew or bool(reasons & THERMAL_BITS)


def throttle_hold(last_ms: int, thermal: bool, proven_ms: int | None, util: float | None,
                  now_ms: int, present: bool = True) -> tuple[int | None, int | None]:
    """A throttled GPU's hold at an unthrottled sample: ``(last_ms, proven_ms)`` after it, last
    None once the hold ended. ``thermal``: the hold's sticky flag (``thermal_sample``);
    ``proven_ms``: the first sample of the current run of busy, unthrottled samples.

    A minute of work without throttling clears it, as an hour since the throttle does
    (THROTTLE_IDLE_HOLD_S) whatever the GPU did meanwhile: busy all that hour it would have
    cleared a minute in, so a GPU read again after an hour unread (gone from the rows, an
    index this console did not see) is not held a minute more. A throttle not of its cooling
    clears after its minute, busy or not. A GPU off the bus (``present`` False, XID 79 is
    often heat) is idle: it cannot show that its cooling is fixed (a review: read as busy
    for its missing utilisation, its hold was proven and cleared in a minute).

    A ``last_ms`` ahead of ``now_ms`` (the clock stepped back, or an agent whose clock ran
    ahead saved it) counts from now: it never aged (as ``BD_SEQ_AHEAD_MS`` for a saved bdSeq,
    agents/agent.py)."""
    last_ms = min(last_ms, now_ms)
    if now_ms - last_ms > THROTTLE_IDLE_HOLD_MS:
        return None, None
    if not thermal and now_ms - last_ms > THROTTLE_HOLD_MS:
        return None, None
    if present and (util is None or util >= BUSY_UTIL_PCT):  # no utilisation read: as busy
        if proven_ms is None:
            proven_ms = now_ms
        if now_ms - proven_ms >= THROTTLE_HOLD_MS and now_ms - last_ms > THROTTLE_HOLD_MS:
            return None, None
        return last_ms, proven_ms
    return last_ms, None


def gpu_uuids(pairs: Iterable[tuple[int, str]]) -> dict[int, str]:
    """``{index: uuid}`` of an inventory's ``(index, uuid)`` pairs, the uuid '' (unknown) where
    it names no one GPU: a uuid listed at two indices, or an index listed with two uuids. A
    birth is network input (a buggy source, a forged one): taken as it came, the last pair won,
    a hold moved to the wrong GPU and another's was dropped, and births that repeated it moved
    the hold back and forth (a review). Unknown, the holds stay where they are (the agent's
    ``ThermalHolds.inventory``, the console's ``NodeHistory.inventory``)."""
    at: dict[int, set[str]] = {}
    of: dict[str, set[int]] = {}
    for index, uuid in pairs:
        at.setdefault(index, set()).add(uuid)
        if uuid:
            of.setdefault(uuid, set()).add(index)
    out: dict[int, str] = {}
    for index, named in at.items():
        uuid = named.pop() if len(named) == 1 else ""
        out[index] = uuid if uuid and len(of[uuid]) == 1 else ""
    return out


_T = TypeVar("_T")


def follow_uuids(known: dict[int, str], uuids: dict[int, str],
                 items: dict[int, _T]) -> dict[int, _T] | None:
    """``items`` (a GPU's thermal hold, on the agent; its history, on the console) keyed by
    index again after a birth whose known uuids are ``uuids`` ({index: uuid}, none '': see
    ``gpu_uuids``), given ``known``, the last uuid known at each index; None where nothing
    moves. One rule for both sides (agents/windows.py ``ThermalHolds.inventory``,
    console/health.py ``NodeHistory.inventory``; docs/protocol.md, "Agent windows"):

    - an item whose uuid the birth shows at another index moves there (NVML renumbered the
      rest after a GPU dropped off PCIe; two GPUs swapped between slots);
    - one whose uuid is absent, with another known uuid at its index, was replaced: dropped;
    - one of an unknown uuid stays, unless a GPU known at another index moved to its index
      (it was not that GPU's, which inherited it only when it had none of its own, a review).
    """
    where = {uuid: index for index, uuid in uuids.items()}
    came = {where[u] for i, u in known.items() if where.get(u, i) != i}
    moved: dict[int, _T] = {}
    stay: dict[int, _T] = {}
    changed = False
    for index, item in items.items():
        had = known.get(index)
        if had and had in where:
            moved[where[had]] = item
            changed |= where[had] != index
        elif had and uuids.get(index, had) != had:
            changed = True  # replaced: the old GPU is gone, another is at its index
        elif not had and index in came:
            changed = True  # an unknown GPU's item, and a known one moved to its index
        else:
            stay[index] = item
    return stay | moved if changed else None
