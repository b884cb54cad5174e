"""The agent's own look back: error-counter increments over the windows the console's rules
read (``errors_1h`` per port, ``pcie_replay_1m`` per GPU; docs/protocol.md, "Agent windows"),
and the thermal holds of rules G12 and G13 (``throttled_last_ts``, ``hot_last_ts``;
``ThermalHolds``).

A console judges N2 ("a fatal IB counter increased in the last hour"), N3 (symbol errors per
hour) and G11 (PCIe replays per minute) from the increments it saw itself, so a console that has
watched a node for seconds — a one-shot ``fleetdeck status``, a collector restarted after a
crash — missed a flap of ten minutes before and called the node ok. The agent runs all along,
so it counts the window and sends it with every sample; the console takes whichever of its own
count and the agent's is larger. Counted from the counters' totals of consecutive samples, as
the console does, so it works for every source (simulated or sysfs) alike.

Kept across the agent's own restarts (``ErrorWindows.snapshot``/``restore``, saved by the agent
in its state directory beside its drain, agents/state.py): a port that flapped twice, then an
agent restart (an upgrade, an OOM kill, a crash loop) read healthy for the rest of its hour. The
counters' baselines are kept with the windows, so what moved while the agent was down counts at
its first sample, and an increment after the last save is counted again from the counters, not
lost or counted twice.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from operator import attrgetter, itemgetter
from typing import Any, TypeVar

import msgspec
from pydantic import BaseModel

from fleetdeck.protocol import fast
from fleetdeck.protocol.ib_counters import (
    ALL_ONES,
    ERRORS_WINDOW_S,
    HOUR_COUNTED,
    PCIE_WINDOW_S,
)
from fleetdeck.protocol.thermal import (
    TEMP_CLEAR_C,
    TEMP_WARN_C,
    THERMAL_BITS,
    THROTTLE_BITS,
    THROTTLE_IDLE_HOLD_MS,
    follow_uuids,
    gpu_uuids,
    thermal_sample,
    throttle_hold,
)

BASELINES_KEPT_S = 600.0
"""How old saved baselines may be and still count what moved while no agent ran (a restart,
an upgrade; ``ErrorWindows.restore``)."""
U32_MAX = 2**32 - 1
"""The fields' bound: a count past it (a 64-bit counter's storm) is sent as the bound, not as
a value that would make the console reject the whole sample."""

Row = TypeVar("Row")
Ident = tuple[Any, ...]
"""A component's name in a row's key: (dev, port) or (index,)."""
Columns = list[tuple[Any, ...]]
"""Rows as columns, one per field of the row Struct in field order (``wire2.Columns``)."""

_GPU_AT = {f.name: i for i, f in enumerate(msgspec.structs.fields(fast.GpuSample))}
_PORT_AT = {f.name: i for i, f in enumerate(msgspec.structs.fields(fast.IbPortSample))}
"""Where each field's column is in :data:`Columns` of GPUs and of ports."""


class CountWindow:
    """Increments per name over a sliding window of ``span_s``: ``counts(now)`` sums each
    name's increments of the last ``span_s`` (only names with some). Made on a component's
    first increment and dropped once empty: 16,384 simulated nodes carry 16 components each
    and nearly all have nothing to count."""

    __slots__ = ("_items", "_span_ms", "_totals")

    def __init__(self, span_s: float) -> None:
        self._span_ms = int(span_s * 1000)
        self._items: deque[tuple[int, str, int]] = deque()
        self._totals: dict[str, int] = {}

    def __bool__(self) -> bool:
        return bool(self._items)

    def add(self, ts_ms: int, name: str, n: int) -> None:
        self._items.append((ts_ms, name, n))
        self._totals[name] = self._totals.get(name, 0) + n

    def expires_at(self) -> int:
        """When the oldest increment leaves the window (no expiry while empty)."""
        return self._items[0][0] + self._span_ms if self._items else 2**63

    def items(self) -> list[tuple[int, str, int]]:
        return list(self._items)

    def counts(self, now_ms: int) -> dict[str, int]:
        items, totals, horizon = self._items, self._totals, now_ms - self._span_ms
        while items and items[0][0] <= horizon:
            _, name, n = items.popleft()
            left = totals[name] - n
            if left:
                totals[name] = left
            else:
                del totals[name]
        return dict(totals)


class _Tracker:
    """One kind of component (IB ports, GPUs): each one's previous counters (the baseline of
    the next increment), the windows that hold something, and what the rows get meanwhile."""

    __slots__ = ("_base", "_held", "_ident", "_key", "_key_columns", "_last_columns",
                 "_last_key", "_names", "_out", "_saturates", "_span_s", "_until", "_windows",
                 "revision")

    def __init__(self, ident: int, key: tuple[str, ...], at: dict[str, int],
                 names: tuple[str, ...], span_s: float,
                 saturates: tuple[str, int] | None = None) -> None:
        self._ident = ident
        """How many leading fields of a row's key name the component ((dev, port); (index,))."""
        self._key = attrgetter(*key)
        """A row's key: the fields ``key`` names (the component's, then its counters)."""
        self._key_columns = itemgetter(*(at[name] for name in key))
        """The same fields' columns out of :data:`Columns` (``at``: the field positions)."""
        self._names = names
        self._span_s = span_s
        self._base: dict[Ident, tuple[Any, ...]] = {}
        self._windows: dict[Ident, CountWindow] = {}
        self._last_key: tuple[Any, ...] | None = None
        self._last_columns: tuple[Any, ...] | None = None
        """The key's columns of the last sample read as columns (``apply_columns``) while
        ``_last_key`` is its key; None after a sample read as rows."""
        self._out: dict[Ident, dict[str, int]] = {}
        self._until = 0
        """When ``_out`` must be made again: the earliest expiry of any window."""
        self._saturates = None if saturates is None else (names.index(saturates[0]),
                                                          saturates[0], saturates[1])
        self.revision = 0
        """Bumped when a window or the held counts change: what a save must keep moved."""
        self._held: dict[Ident, int] = {}
        """A saturated counter's count, kept past its window while it stays saturated.

        A counter at its all-ones value counts nothing more (IBTA saturation,
        protocol/ib_counters.py): a symbol-error storm that goes on reads as one that stopped,
        and its hour would empty while it still rages. While the counter stays at all ones
        the figure it reached is kept (the console's ``storm_hour`` does the same for N3)."""

    def counts(self, rows: list[Any], now_ms: int) -> tuple[tuple[Any, ...],
                                                             dict[Ident, dict[str, int]]]:
        """The rows' keys and ``{component: counts}`` of the components with some. The common
        case — nothing moved, nothing due to expire — is one tuple comparison."""
        self._last_columns = None  # rows moved the baseline: the columns cache is stale
        return self._counts(tuple(map(self._key, rows)), now_ms)

    def _counts(self, key: tuple[Any, ...],
                now_ms: int) -> tuple[tuple[Any, ...], dict[Ident, dict[str, int]]]:
        if key != self._last_key:
            self._last_key = key
            self._track(key, now_ms)
            self._until = 0
        if now_ms >= self._until:
            self._refresh(now_ms)
        return key, self._out

    def apply(self, rows: list[Row], now_ms: int,
              put: Callable[[Row, dict[str, int]], Row]) -> list[Row]:
        """``rows`` with ``put`` applied to those whose component's window holds counts (the
        same list when none does: the common case allocates nothing)."""
        key, counts = self.counts(rows, now_ms)
        if not counts:
            return rows
        out = list(rows)
        n = self._ident
        for i, k in enumerate(key):
            c = counts.get(k[:n])
            if c:
                out[i] = put(rows[i], c)
        return out

    def apply_columns(self, cols: Columns, now_ms: int, at: int,
                      put: Callable[[dict[str, int]], Any]) -> Columns:
        """:meth:`apply` on :data:`Columns`: column ``at`` holds ``put(counts)`` on the rows
        whose component's window holds counts (the same list when none does). The same keys
        as the rows', so a sample of either kind follows one of the other."""
        columns = self._key_columns(cols) if cols else ()
        key: tuple[Any, ...] | None = None
        if columns != self._last_columns:
            key, counts = self._counts(tuple(zip(*columns, strict=True)), now_ms)
            self._last_columns = columns
        else:
            # The same key as the last sample's (``_last_key``): as ``_counts`` then, without
            # making the rows' keys (one tuple per row) to compare.
            if now_ms >= self._until:
                self._refresh(now_ms)
            counts = self._out
        if not counts:
            return cols
        if key is None:
            key = tuple(zip(*columns, strict=True))
        col = list(cols[at])
        n = self._ident
        for i, k in enumerate(key):
            c = counts.get(k[:n])
            if c:
                col[i] = put(c)
        out = list(cols)
        out[at] = tuple(col)
        return out

    def _track(self, key: tuple[Any, ...], now_ms: int) -> None:
        n = self._ident
        for k in key:
            ident, cur = k[:n], k[n:]
            prev = self._base.get(ident)
            if prev == cur:
                continue
            self._base[ident] = cur
            if prev is None:
                continue  # the first sample is the baseline, as for the console
            for name, new, old in zip(self._names, cur, prev, strict=True):
                if new is not None and old is not None and new > old:
                    window = self._windows.get(ident)
                    if window is None:
                        window = self._windows[ident] = CountWindow(self._span_s)
                    window.add(now_ms, name, new - old)
                    self.revision += 1

    def _refresh(self, now_ms: int) -> None:
        out: dict[Ident, dict[str, int]] = {}
        until = 2**63
        for ident, window in list(self._windows.items()):
            counts = window.counts(now_ms)
            if counts:
                out[ident] = counts
                until = min(until, window.expires_at())
            else:
                del self._windows[ident]
        if self._saturates is not None:
            at, name, all_ones = self._saturates
            held = self._held
            for ident, cur in self._base.items():
                if cur[at] != all_ones:
                    held.pop(ident, None)
                    continue
                n = max(held.get(ident, 0), out.get(ident, {}).get(name, 0))
                if n:
                    if held.get(ident) != n:
                        self.revision += 1
                    held[ident] = n
                    out.setdefault(ident, {})[name] = n
        self._out = {ident: {k: min(v, U32_MAX) for k, v in c.items()}
                     for ident, c in out.items()}
        self._until = until

    def forget(self) -> None:
        """Empty every window, keep the baselines: an increment after this counts at once."""
        self._windows.clear()
        self._held.clear()
        self._out = {}
        self._until = 0
        self.revision += 1

    def snapshot(self, baselines: bool = True) -> dict[str, Any]:
        """Counter names, baselines, windows and held counts as JSON values (``restore``
        takes them back). A baseline is kept only with the windows that go with it: saved
        together, an increment after the save is counted again from the counters at the next
        start."""
        return {
            "names": list(self._names),
            "base": ([[list(ident), list(cur)] for ident, cur in self._base.items()]
                     if baselines else []),
            "windows": [[list(ident), [list(i) for i in w.items()]]
                        for ident, w in self._windows.items()],
            "held": [[list(ident), n] for ident, n in self._held.items()],
        }

    def restore(self, snap: dict[str, Any], baselines: bool = True) -> None:
        """Take back what ``snapshot`` gave, with its baselines only if ``baselines`` (the
        next sample is then compared with them). Raises ValueError on a snapshot of other
        counters (an agent of another version) or of another shape (a damaged file), having
        taken nothing: the next sample is a first one."""
        self.restore_nothing()
        if snap.get("names") != list(self._names):
            raise ValueError("the snapshot counts other counters")
        width = self._ident + len(self._names)
        base = {}
        for ident, cur in snap.get("base", []) if baselines else []:
            key = tuple(ident) + tuple(cur)
            if len(key) != width or not all(_counter(v) for v in key[self._ident:]):
                raise ValueError(f"a baseline of another shape: {key!r}")
            base[tuple(ident)] = tuple(cur)
        windows = {}
        for ident, items in snap.get("windows", []):
            window = CountWindow(self._span_s)
            for ts_ms, name, n in items:
                if name not in self._names or not _counter(n) or not _counter(ts_ms):
                    raise ValueError(f"a window item of another shape: {ts_ms!r} {name!r}")
                if n:
                    window.add(ts_ms, name, n)
            if window:
                windows[tuple(ident)] = window
        held = {}
        for ident, n in snap.get("held", []):
            if not _counter(n):
                raise ValueError(f"a held count of another shape: {n!r}")
            held[tuple(ident)] = n
        self._base, self._windows, self._held = base, windows, held

    def restore_nothing(self) -> None:
        """No baselines, no windows: the next sample is a first one."""
        self._base, self._windows, self._held = {}, {}, {}
        self._last_key = self._last_columns = None
        self._out = {}
        self._until = 0


def _counter(v: object) -> bool:
    """A counter's value as a snapshot holds it: a non-negative int (not a bool), or None for
    a counter the source does not have."""
    return v is None or (type(v) is int and v >= 0)


_PORT_KEY = ("dev", "port", *HOUR_COUNTED)
_GPU_KEY = ("index", "pcie_replay_total")


def _with(sample: Row, **values: Any) -> Row:
    """``sample`` with ``values`` set: a msgspec Struct or a pydantic model (the simulator can
    build either, agents/sim/node.py)."""
    if isinstance(sample, msgspec.Struct):
        return msgspec.structs.replace(sample, **values)
    assert isinstance(sample, BaseModel)
    return sample.model_copy(update=values)


def _errors_1h(counts: dict[str, int]) -> dict[str, int]:
    return counts


def _pcie_replay_1m(counts: dict[str, int]) -> int:
    return counts["pcie_replay"]


def _put_errors_1h(row: Row, counts: dict[str, int]) -> Row:
    return _with(row, errors_1h=counts)


def _put_pcie_replay_1m(row: Row, counts: dict[str, int]) -> Row:
    return _with(row, pcie_replay_1m=counts["pcie_replay"])


_VIOLATION = attrgetter("thermal_violation_ns")
_INDEX = attrgetter("index")
_REASONS = attrgetter("clock_event_reasons")
_UTIL = attrgetter("util_pct")
_PRESENT = attrgetter("present")
_TEMP = attrgetter("temp_c")
_THERMAL_READ = itemgetter(*(_GPU_AT[name] for name in (
    "index", "clock_event_reasons", "thermal_violation_ns", "util_pct", "present", "temp_c")))
"""The columns :meth:`ThermalHolds.apply_columns` reads, out of a GPU :data:`Columns`."""
_HELD_AT = (_GPU_AT["throttled_last_ts"], _GPU_AT["throttled_last_reasons"],
            _GPU_AT["hot_last_ts"])


class ThermalHolds:
    """Each GPU's thermal holds as the console's rules G12 and G13 hold them
    (fleetdeck/protocol/thermal.py): the last throttled sample (a throttle bit, or
    ``thermal_violation_ns`` grew) and its reasons until the GPU has worked a minute without
    throttling (or an hour idle; a power throttle a minute), the last reading at or above
    TEMP_WARN_C until one below TEMP_CLEAR_C. Sent as ``throttled_last_ts`` /
    ``throttled_last_reasons`` / ``hot_last_ts`` while they hold: after a thermal fault that
    ended, a one-shot ``status`` (a 3.5 s watch) said "ok ... do not drain" of a GPU whose
    failed cooling the TUI held degraded (a fault drill).

    Nearly every sample of a fleet has nothing held, nothing hot or throttled and no violation
    counter moved: that is one tuple made and compared and a look at two fields per GPU, and
    the rows go out as they came (the simulator runs thousands of agents on its CPU,
    docs/performance.md)."""

    __slots__ = ("_holds", "_indices", "_uuids", "_violation", "revision")

    def __init__(self) -> None:
        self._holds: dict[int, list[int | None]] = {}
        """index -> [last throttled ms, its reasons, proven ms, last hot ms, thermal (0 or 1:
        sticky while the throttle holds, ``thermal_sample``)] while one holds."""
        self._uuids: dict[int, str] = {}
        """index -> the uuid of the GPU there, from the birth's inventory (``inventory``) or
        the saved file: the GPU the holds at that index are of. Samples name a GPU by index
        only."""
        self._violation: tuple[int | None, ...] | None = None
        """The previous sample's ``thermal_violation_ns`` per row: the baseline of a growth."""
        self._indices: tuple[int, ...] = ()
        """Which GPU each of ``_violation`` is (an agent's rows keep their order)."""
        self.revision = 0

    def apply(self, rows: list[Row], now_ms: int) -> list[Row]:
        """``rows`` with the holds set on the GPUs that have one (the same list when none)."""
        if not rows:
            # No GPU read this sample (the read raised, NVML not open: agents/real/source.py):
            # it says nothing of any GPU. Taken as "all gone" it ended every hold while the
            # console kept its own: the TUI held G12 and status said ok (a review). A GPU off
            # the bus keeps its row (``present`` False).
            return rows
        violation = tuple(map(_VIOLATION, rows))
        if (not self._holds and violation == self._violation
                and self._quiet(map(_REASONS, rows), map(_TEMP, rows))):
            return rows
        self._track(tuple(map(_INDEX, rows)), tuple(map(_REASONS, rows)), violation,
                    tuple(map(_UTIL, rows)), tuple(map(_PRESENT, rows)),
                    tuple(map(_TEMP, rows)), now_ms)
        holds = self._holds
        if not holds:
            return rows
        out = list(rows)
        for i, g in enumerate(rows):
            st = holds.get(g.index)  # type: ignore[attr-defined]
            if st is not None:
                last = st[0]
                out[i] = _with(g, throttled_last_ts=last,
                               throttled_last_reasons=None if last is None else st[1],
                               hot_last_ts=st[3])
        return out

    def apply_columns(self, cols: Columns, now_ms: int) -> Columns:
        """:meth:`apply` on :data:`Columns` of GPUs: the holds' columns set on the rows that
        have one (the same list when none)."""
        if not cols:
            return cols  # no GPU read this sample (``apply``)
        indices, reasons, violation, util, present, temp = _THERMAL_READ(cols)
        if not self._holds and violation == self._violation and self._quiet(reasons, temp):
            return cols
        self._track(indices, reasons, violation, util, present, temp, now_ms)
        holds = self._holds
        if not holds:
            return cols
        out = list(cols)
        last_ts, last_reasons, hot = (list(cols[i]) for i in _HELD_AT)
        for i, index in enumerate(indices):
            st = holds.get(index)
            if st is not None:
                last = st[0]
                last_ts[i], last_reasons[i], hot[i] = (
                    last, None if last is None else st[1], st[3])
        for i, col in zip(_HELD_AT, (last_ts, last_reasons, hot), strict=True):
            out[i] = tuple(col)
        return out

    @staticmethod
    def _quiet(reasons: Iterable[int | None], temps: Iterable[float | None]) -> bool:
        """No GPU throttles or reads hot: nothing to track when nothing is held either."""
        for r, temp in zip(reasons, temps, strict=True):
            if (r and r & THROTTLE_BITS) or (temp is not None and temp >= TEMP_WARN_C):
                return False
        return True

    def _track(self, indices: tuple[int, ...], reasons_of: tuple[int | None, ...],
               violation: tuple[int | None, ...], utils: tuple[float | None, ...],
               presents: tuple[bool, ...], temps: tuple[float | None, ...],
               now_ms: int) -> None:
        """The holds after a sample whose GPUs (``indices``, in row order) read these fields."""
        before = (dict(zip(self._indices, self._violation, strict=True))
                  if self._violation is not None else {})
        self._violation, self._indices = violation, indices
        holds = self._holds
        gone = holds.keys() - self._indices if holds else ()
        for index in gone:
            # A GPU gone from the rows (a node rebuilt with fewer, a source that drops it) is
            # not read: its holds age as an idle GPU's, over after the idle hour, as the
            # console's for a GPU it no longer sees (thermal.throttle_hold). Deleted at once,
            # the TUI held what a new status read ok (a review); kept for ever, it kept the
            # fast path off.
            unread = holds[index]
            if unread[0] is not None:
                unread[0], unread[2] = throttle_hold(unread[0], bool(unread[4]), unread[2], None,
                                                     now_ms, False)
                if unread[0] is None:
                    unread[4] = 0
            if unread[3] is not None and now_ms - unread[3] > THROTTLE_IDLE_HOLD_MS:
                unread[3] = None
            if unread[0] is None and unread[3] is None:
                del holds[index]
                self.revision += 1
        for index, read_reasons, cur, util, present, temp in zip(
                indices, reasons_of, violation, utils, presents, temps, strict=True):
            st = holds.get(index)
            reasons = read_reasons or 0
            old = before.get(index)
            grew = old is not None and cur is not None and cur > old
            if reasons & THROTTLE_BITS or grew:
                # As the console's ``NodeHistory.update``: the reasons of the sample, whatever
                # they are (a grown counter without a throttle bit reads as thermal).
                if st is None:
                    st = holds[index] = [None, 0, None, None, 0]
                held = st[0] is not None and st[4]
                st[0], st[1], st[2] = now_ms, reasons, None
                st[4] = int(bool(held) or thermal_sample(reasons, grew))
                self.revision += 1
            elif st is not None and st[0] is not None:
                last, proven = throttle_hold(st[0], bool(st[4]), st[2], util, now_ms,
                                             present)
                if last is None:
                    st[4] = 0
                    self.revision += 1
                st[0], st[2] = last, proven
            if temp is not None and temp >= TEMP_WARN_C:
                if st is None:
                    st = holds[index] = [None, 0, None, None, 0]
                st[3] = now_ms
                self.revision += 1
            elif st is not None and st[3] is not None and (
                    (temp is not None and temp < TEMP_CLEAR_C)
                    or (temp is None and (present or now_ms - st[3] > THROTTLE_IDLE_HOLD_MS))):
                # Off the bus it reads no temperature: its heat before is why it may have
                # gone, held the idle hour as the console holds it (console/health.py
                # ``GONE_HOT``); dropped here, a one-shot status read G1 alone.
                st[3] = None
                self.revision += 1
            if st is not None and st[0] is None and st[3] is None:
                del holds[index]

    def inventory(self, gpus: dict[int, str] | Iterable[tuple[int, str]]) -> None:
        """The GPUs of a birth's inventory, ``{index: uuid}`` or its ``(index, uuid)`` pairs.
        Samples name a GPU by index only, so the holds follow the uuid they were recorded for:
        a GPU the inventory shows at another index (NVML renumbered the rest after one dropped
        off PCIe, docs/real-nodes.md; two GPUs swapped between slots) takes its holds there,
        and a GPU absent from it with another at its index was replaced: its holds are dropped,
        else the new one inherited them, the node just repaired held degraded for up to an hour
        with the advice to drain it (docs/protocol.md, "Agent windows"). An unknown uuid ('': a
        source without one, a file of an earlier agent, a stand-in birth without GPUs; a uuid
        listed at two indices, an index listed with two, ``gpu_uuids``) keeps the hold where it
        is, as before, unless a GPU known at another index moved to that index: the hold was
        not its own, and it inherited it only when it had none of its own (a review). The last
        uuid known at an index is kept for the next birth."""
        uuids = {i: u for i, u in gpu_uuids(gpus.items() if isinstance(gpus, dict)
                                            else gpus).items() if u}
        if not uuids:
            return
        known = self._uuids
        holds = follow_uuids(known, uuids, self._holds)
        self._uuids = {i: u for i, u in known.items() if u not in uuids.values()} | uuids
        if holds is not None:
            self._holds = holds
            self.revision += 1
            # The violation counters are the GPUs', not the indices': no growth from them.
            self._violation, self._indices = None, ()

    def snapshot(self) -> list[list[int | None]]:
        """``[[index, last throttled ms, reasons, last hot ms], ...]`` (``restore``). Four, as
        the agent before the thermal flag reads them: a fifth made it refuse the whole file, and
        an agent rolled back to it started with every window empty, the hour of IB errors and
        the PCIe minute too (a review). The flags go beside them (``flags``)."""
        return [[index, st[0], st[1], st[3]] for index, st in self._holds.items()]

    def flags(self) -> list[list[int]]:
        """``[[index, thermal], ...]`` of the holds (``snapshot``): saved under a key of its
        own, which an earlier agent does not read."""
        return [[index, int(bool(st[4]))] for index, st in self._holds.items()]

    def uuids(self) -> list[list[int | str]]:
        """``[[index, uuid], ...]`` of the held GPUs whose uuid is known (``inventory``):
        saved under a key of its own, as ``flags``, which an earlier agent does not read."""
        return [[index, uuid] for index in self._holds if (uuid := self._uuids.get(index))]

    def restore(self, snap: object, now_ms: int, flags: object = None,
                uuids: object = None) -> None:
        """Take back what ``snapshot`` gave: a GPU that throttled before an agent restart is
        held as before (the run of work that proves it restarts). A throttle older than the
        idle hold is over; a hot reading holds until a reading below TEMP_CLEAR_C, however old,
        as a running agent holds it (a restart dropped one over an hour old: the TUI kept G13,
        status said ok; a review). One ahead of ``now_ms`` (this clock ran ahead when it saved)
        counts from now, or it never aged. A hold of an earlier agent (no thermal flag) is
        thermal as that agent read it. The flags (``flags``) are ``[[index, thermal], ...]``;
        a hold saved with its flag as a fifth element (an agent of a few commits) is read too.
        The uuids (``uuids``) are ``[[index, uuid], ...]``: a hold follows its GPU to the
        index the inventory shows it at, and one of a GPU absent from it with another at its
        index (replaced while no agent ran) is left out (``inventory``); a uuid of another
        shape is an unknown one. Raises ValueError on holds or flags of another shape, having
        taken nothing."""
        self.restore_nothing()
        holds: dict[int, list[int | None]] = {}
        if not isinstance(snap, list):
            raise ValueError("thermal holds of another shape")
        saved_uuids: dict[int, str] = {}
        if isinstance(uuids, list):
            # A pair of another shape is left out (that GPU's uuid unknown, its hold kept),
            # never the file: refusing it threw away every window saved with it (a review).
            # A uuid named at two indices is neither's, and an index named with two uuids has
            # none (``gpu_uuids``): the last pair won, its hold went with whichever came last.
            pairs = [(pair[0], pair[1]) for pair in uuids
                     if isinstance(pair, list) and len(pair) == 2 and type(pair[0]) is int
                     and pair[0] >= 0 and isinstance(pair[1], str) and pair[1]]
            saved_uuids = {i: u for i, u in gpu_uuids(pairs).items() if u}
        saved_flags: dict[int, int] = {}
        if flags is not None:
            if not isinstance(flags, list):
                raise ValueError("thermal flags of another shape")
            for pair in flags:
                if (not isinstance(pair, list) or len(pair) != 2 or type(pair[0]) is not int
                        or pair[0] < 0 or type(pair[1]) is not int or pair[1] not in (0, 1)):
                    raise ValueError(f"a thermal flag of another shape: {pair!r}")
                saved_flags[pair[0]] = pair[1]
        for item in snap:
            if (not isinstance(item, list) or len(item) not in (4, 5)
                    or not all(_counter(v) for v in item) or item[0] is None
                    or (len(item) == 5 and item[4] not in (0, 1))):
                raise ValueError(f"a thermal hold of another shape: {item!r}")
            index, last, reasons, hot = item[:4]
            reasons = reasons or 0
            flag = saved_flags.get(index, item[4] if len(item) == 5 else None)
            thermal = (flag if flag is not None
                       else int(not reasons & THROTTLE_BITS or bool(reasons & THERMAL_BITS)))
            if last is not None:
                last = None if now_ms - last > THROTTLE_IDLE_HOLD_MS else min(last, now_ms)
            if hot is not None:
                hot = min(hot, now_ms)
            if last is not None or hot is not None:
                holds[index] = [last, reasons, None, hot, thermal if last is not None else 0]
        # Restored before any birth (none taken yet): the next inventory compares with the
        # saved uuids. After one: compared now (replaced or moved while no agent ran).
        born, self._holds, self._uuids = self._uuids, holds, saved_uuids
        self.inventory(born)
        self._violation, self._indices = None, ()

    def restore_nothing(self) -> None:
        """No holds; the inventory's uuids stay (they are the GPUs', not a hold)."""
        self._holds = {}
        self._violation, self._indices = None, ()


class ErrorWindows:
    """One agent's windows: fed every sample it sends (``ports``, ``gpus``); the port windows
    are emptied when the node is returned to service (``forget_ports``), as the console
    forgets its own port windows then."""

    __slots__ = ("_gpus", "_ports", "_thermal")

    def __init__(self) -> None:
        self._ports = _Tracker(2, _PORT_KEY, _PORT_AT, HOUR_COUNTED, ERRORS_WINDOW_S,
                               saturates=("symbol_error", ALL_ONES["symbol_error"]))
        self._gpus = _Tracker(1, _GPU_KEY, _GPU_AT, ("pcie_replay",), PCIE_WINDOW_S)
        self._thermal = ThermalHolds()

    def ports(self, ports: list[Row], now_ms: int) -> list[Row]:
        """``ports`` with ``errors_1h`` set on those whose window holds increments."""
        return self._ports.apply(ports, now_ms, _put_errors_1h)

    def gpus(self, gpus: list[Row], now_ms: int) -> list[Row]:
        """``gpus`` with ``pcie_replay_1m`` set on those that replayed in the last minute, and
        the thermal holds on those that have one (``ThermalHolds``)."""
        return self._thermal.apply(self._gpus.apply(gpus, now_ms, _put_pcie_replay_1m), now_ms)

    def columns(self, gpus: Columns, ports: Columns,
                now_ms: int) -> tuple[Columns, Columns]:
        """:meth:`gpus` and :meth:`ports` on :data:`Columns` (a source that makes columns,
        agents/sim/node.py): the same windows, fed either kind of sample."""
        gpus = self._thermal.apply_columns(
            self._gpus.apply_columns(gpus, now_ms, _GPU_AT["pcie_replay_1m"], _pcie_replay_1m),
            now_ms)
        return gpus, self._ports.apply_columns(ports, now_ms, _PORT_AT["errors_1h"], _errors_1h)

    def inventory(self, gpus: dict[int, str] | Iterable[tuple[int, str]]) -> None:
        """A birth's GPUs, ``{index: uuid}`` or ``(index, uuid)`` pairs: a replaced GPU's
        thermal holds are dropped (``ThermalHolds.inventory``)."""
        self._thermal.inventory(gpus)

    def forget_ports(self) -> None:
        """The node was returned to service after its repair: its ports' hour is forgotten
        (the PCIe minute is not, as the console keeps its own)."""
        self._ports.forget()

    @property
    def revision(self) -> int:
        """Moves when anything a save keeps changed (``snapshot``)."""
        return self._ports.revision + self._gpus.revision + self._thermal.revision

    def snapshot(self, now_ms: int, boot_id: str) -> dict[str, Any]:
        """What ``restore`` takes back in the next agent of this node, stamped with when and
        in which boot it was saved (the baselines are that boot's counters)."""
        return {"v": 1, "saved_ms": now_ms, "boot_id": boot_id,
                "ports": self._ports.snapshot(), "gpus": self._gpus.snapshot(),
                "thermal": self._thermal.snapshot(), "thermal_flags": self._thermal.flags(),
                "thermal_uuids": self._thermal.uuids()}

    def restore(self, snap: object, now_ms: int, boot_id: str) -> str:
        """Windows an earlier agent of this node saved; '' when taken back whole, else what
        was left out and why. The baselines count only when saved in this boot and at most
        ``BASELINES_KEPT_S`` ago: the counters moved since counted as now, so a week-old
        baseline (an agent stopped for days) or one of the last boot (counters climbing again
        after a reboot) read as a flap this hour. The windows (stamped increments) are kept
        across a reboot, as a bad cable stays bad. A snapshot of another version or shape
        leaves everything empty, as at a first start (a file of other counters crashed the
        agent on its first sample, in a loop: a review)."""
        try:
            if not isinstance(snap, dict) or snap.get("v") != 1:
                raise ValueError("not a version 1 snapshot")
            saved = snap.get("saved_ms")
            fresh = (type(saved) is int and 0 <= now_ms - saved <= BASELINES_KEPT_S * 1000
                     and snap.get("boot_id") == boot_id)
            self._ports.restore(snap.get("ports", {}), baselines=fresh)
            self._gpus.restore(snap.get("gpus", {}), baselines=fresh)
            # An earlier agent's file without them: nothing held, as before.
            self._thermal.restore(snap.get("thermal", []), now_ms, snap.get("thermal_flags"),
                                  snap.get("thermal_uuids"))
        except (TypeError, ValueError, AttributeError) as err:
            self._ports.restore_nothing()
            self._gpus.restore_nothing()
            self._thermal.restore_nothing()
            return f"left out: {err}"
        return "" if fresh else "baselines left out (another boot, or saved too long ago)"
