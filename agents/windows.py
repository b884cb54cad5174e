"""The agent's own look back: error-counter increments over the windows the console's rules
read (``errors_1h`` per port, ``pcie_replay_1m`` per GPU; docs/protocol.md).

A console judges N2 ("a fatal IB counter increased in the last hour"), N3 (symbol errors per
hour) and G11 (PCIe replays per minute) from the increments it saw itself, so a console that has
watched a node for seconds — a one-shot ``fleetdeck status``, a collector restarted after a
crash — missed a flap of ten minutes before and called the node ok. The agent runs all along,
so it counts the window and sends it with every sample; the console takes whichever of its own
count and the agent's is larger. Counted from the counters' totals of consecutive samples, as
the console does, so it works for every source (simulated or sysfs) alike.

Not kept across the agent's own restarts: after one the window starts empty, as a console's.
"""

from __future__ import annotations

from collections import deque
from operator import attrgetter
from typing import Any

import msgspec

from fleetdeck.protocol.ib_counters import ERRORS_WINDOW_S, HOUR_COUNTED, PCIE_WINDOW_S


class CountWindow:
    """Increments per name over a sliding window: ``counts(now)`` is the sum of each name's
    increments newer than ``span`` (only names with some), the same dict object while it does
    not change (a v2 delta then leaves the column out)."""

    __slots__ = ("_items", "_out", "_span_ms", "_totals")

    def __init__(self, span_s: float) -> None:
        self._span_ms = int(span_s * 1000)
        self._items: deque[tuple[int, str, int]] = deque()
        self._totals: dict[str, int] = {}
        self._out: dict[str, int] = {}

    def __bool__(self) -> bool:
        return bool(self._items)

    def add(self, ts_ms: int, name: str, n: int) -> None:
        self._items.append((ts_ms, name, n))
        self._totals[name] = self._totals.get(name, 0) + n
        self._out = dict(self._totals)

    def counts(self, now_ms: int) -> dict[str, int]:
        items, horizon = self._items, now_ms - self._span_ms
        if items and items[0][0] <= horizon:
            totals = self._totals
            while items and items[0][0] <= horizon:
                _, name, n = items.popleft()
                left = totals[name] - n
                if left:
                    totals[name] = left
                else:
                    del totals[name]
            self._out = dict(totals)
        return self._out

    def total(self, now_ms: int) -> int:
        return sum(self.counts(now_ms).values())

    def clear(self) -> None:
        self._items.clear()
        self._totals.clear()
        self._out = {}


_COUNTERS = attrgetter(*HOUR_COUNTED)
_PCIE = attrgetter("pcie_replay_total")
_U32_MAX = 2**32 - 1  # the fields' bound (a minute of replays never nears it; be safe)


def _with(sample: Any, **values: Any) -> Any:
    """``sample`` with ``values`` set: a msgspec Struct or a pydantic model (the simulator can
    build either, agents/sim/node.py)."""
    if isinstance(sample, msgspec.Struct):
        return msgspec.structs.replace(sample, **values)
    return sample.model_copy(update=values)


class ErrorWindows:
    """One agent's windows: fed every sample it sends (``ports``, ``gpus``) and emptied when
    the node is returned to service (``forget``), as the console forgets its own then."""

    __slots__ = ("_gpu_totals", "_gpus", "_port_totals", "_ports", "_quiet_from")

    def __init__(self) -> None:
        self._ports: dict[tuple[str, int], tuple[tuple[int | None, ...], CountWindow]] = {}
        self._gpus: dict[int, tuple[int | None, CountWindow]] = {}
        # The common case (every sample of a healthy node, thousands a second in one simulator
        # process): nothing moved and every window is empty, answered by one comparison.
        self._port_totals: tuple[Any, ...] | None = None
        self._gpu_totals: tuple[Any, ...] | None = None
        self._quiet_from = 0
        """Unix ms from which every window is empty unless something is added."""

    def ports(self, ports: list[Any], now_ms: int) -> list[Any]:
        """``ports`` with ``errors_1h`` set on those whose window holds increments."""
        totals = tuple(map(_COUNTERS, ports))
        if totals == self._port_totals and now_ms >= self._quiet_from:
            return ports
        self._port_totals = totals
        out = ports
        for i, p in enumerate(ports):
            key = (p.dev, p.port)
            cur = _COUNTERS(p)
            known = self._ports.get(key)
            if known is None:
                self._ports[key] = (cur, CountWindow(ERRORS_WINDOW_S))
                continue  # the first sample is the baseline, as for the console
            prev, window = known
            if cur != prev:
                for name, new, old in zip(HOUR_COUNTED, cur, prev, strict=True):
                    if new is not None and old is not None and new > old:
                        window.add(now_ms, name, new - old)
                        self._quiet_from = max(self._quiet_from, now_ms + ERRORS_WINDOW_S * 1000)
                self._ports[key] = (cur, window)
            if window:
                counts = window.counts(now_ms)
                if counts:
                    if out is ports:
                        out = list(ports)
                    out[i] = _with(p, errors_1h=counts)
        return out

    def gpus(self, gpus: list[Any], now_ms: int) -> list[Any]:
        """``gpus`` with ``pcie_replay_1m`` set on those that replayed in the last minute."""
        totals = tuple(map(_PCIE, gpus))
        if totals == self._gpu_totals and now_ms >= self._quiet_from:
            return gpus
        self._gpu_totals = totals
        out = gpus
        for i, g in enumerate(gpus):
            cur = g.pcie_replay_total
            known = self._gpus.get(g.index)
            if known is None:
                self._gpus[g.index] = (cur, CountWindow(PCIE_WINDOW_S))
                continue
            prev, window = known
            if cur != prev:
                if cur is not None and prev is not None and cur > prev:
                    window.add(now_ms, "pcie_replay", cur - prev)
                    self._quiet_from = max(self._quiet_from, now_ms + PCIE_WINDOW_S * 1000)
                self._gpus[g.index] = (cur, window)
            if window:
                n = window.total(now_ms)
                if n:
                    if out is gpus:
                        out = list(gpus)
                    out[i] = _with(g, pcie_replay_1m=min(n, _U32_MAX))
        return out

    def forget(self) -> None:
        """Empty every window, keep the baselines: an increment after this counts at once."""
        for _, window in self._ports.values():
            window.clear()
        for _, window in self._gpus.values():
            window.clear()
        self._quiet_from = 0
