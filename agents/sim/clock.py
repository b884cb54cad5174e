"""One timer for the telemetry slots of every simulated agent in a process.

A :class:`~agents.agent.NodeAgent` sleeps until each of its slots (``start + k * interval``):
with 4,096 agents in one process that is 4,096 ``asyncio.sleep`` calls a second, each a future,
a timer in asyncio's heap (ordered by a Python ``__lt__``), a task wake-up and a resume through
the agent's coroutines — ~15 % of the simulator's CPU (docs/performance.md, "Simulator
capacity"). :class:`TelemetryClock` keeps every slot in one heap of plain tuples and calls each
agent's sample-and-publish function from a single timer, at the same moments: never before a
slot, and slots more than one interval behind are skipped as NodeAgent skips them (the gap
shows in ``seq``).
"""

import asyncio
import heapq
import itertools
import math
from collections.abc import Callable

SLICE_S = 0.02
"""Longest run of publishes in one callback: a backlog (after a stall) must not keep the loop
from reading sockets, ticking the world or answering commands for longer than this."""

Fire = Callable[[], bool]
"""Sample and publish now; False ends the slot (the session is over)."""


class Slot:
    """One agent's schedule on the clock."""

    __slots__ = ("active", "fire", "interval", "k", "start")

    def __init__(self, start: float, interval: float, fire: Fire) -> None:
        self.start = start
        self.interval = interval
        self.fire = fire
        self.k = 0
        self.active = True

    def cancel(self) -> None:
        self.active = False


class TelemetryClock:
    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Slot]] = []
        self._order = itertools.count()
        self._timer: asyncio.TimerHandle | asyncio.Handle | None = None
        self._armed_for = float("inf")
        self.fired = 0
        self.skipped = 0

    def __len__(self) -> int:
        return sum(1 for _, _, slot in self._heap if slot.active)

    def add(self, start: float, interval: float, fire: Fire) -> Slot:
        """Call ``fire`` at ``start``, ``start + interval``, … (loop time) until it returns
        False or the slot is cancelled."""
        slot = Slot(start, interval, fire)
        self._push(start, slot)
        return slot

    def _push(self, due: float, slot: Slot) -> None:
        heapq.heappush(self._heap, (due, next(self._order), slot))
        if due < self._armed_for:
            if self._timer is not None:
                self._timer.cancel()
            self._armed_for = due
            self._timer = asyncio.get_running_loop().call_at(due, self._run)

    def _run(self) -> None:
        self._timer, self._armed_for = None, float("inf")
        loop = asyncio.get_running_loop()
        now = loop.time
        heap = self._heap
        until = now() + SLICE_S
        while heap:
            t = now()
            due, _, slot = heap[0]
            if due > t:
                break
            if t > until:  # the rest after a turn of the loop
                self._armed_for = due
                self._timer = loop.call_soon(self._run)
                return
            heapq.heappop(heap)
            if not slot.active:
                continue
            k = slot.k
            if t - due > slot.interval:
                # More than a period behind (CPU starved): skip to the latest slot that is not,
                # as NodeAgent's loop does.
                # NodeAgent skips slot k while start + k * interval < now - interval: the first
                # one kept is the last that began at most a period ago.
                first = math.ceil((t - slot.start) / slot.interval - 1)
                self.skipped += max(0, first - k)
                k = max(k, first)
            slot.k = k + 1
            self.fired += 1
            try:
                keep = slot.fire()
            except Exception as err:  # one agent's bug must not stop every other agent's slots
                keep = False
                loop.call_exception_handler({"message": "telemetry slot failed",
                                             "exception": err})
            if not keep:
                slot.active = False
                continue
            if slot.active:
                heapq.heappush(heap, (slot.start + slot.k * slot.interval, next(self._order),
                                      slot))
        if heap:
            self._armed_for = heap[0][0]
            self._timer = loop.call_at(heap[0][0], self._run)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._armed_for = None, float("inf")
        for _, _, slot in self._heap:
            slot.active = False
        self._heap.clear()
