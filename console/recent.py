"""Recent per-GPU history for sparklines: a preallocated ring buffer per node, no allocation
per sample.

Each node owns one ``bytearray`` of ``samples`` slots of 3 x n half-precision floats (util,
temperature, power for n GPUs, IEEE 754 binary16 as ``struct``'s ``e``), written in place by one
``struct.pack_into``: recording a sample allocates nothing the GC must track and frees nothing
(issue 12: per-sample ``bytes``/tuples were a share of the apply cost and of the GC's work), and
costs ~0.5 µs where quantising 24 values to bytes in Python cost ~3 (16,384 samples a second,
docs/performance.md). A half float keeps three significant digits, enough for a sparkline:
util to 0.06 %, temperature to 0.06 °C, 700 W to 0.5 W. 60 samples of 8 GPUs are 2,880 B a node,
45 MiB at 16,384 nodes. NaN marks "not reported" (a GPU gone, a reading missing).
"""

import math
import struct
from collections.abc import Iterable, Sequence
from itertools import pairwise

import msgspec

from fleetdeck.protocol.fast import Telemetry
from fleetdeck.protocol.wire2 import Pending, Sample

SAMPLES = 60
METRICS = ("util", "temp", "power")
COLUMNS = ("index", "present", "util_pct", "temp_c", "power_w")
"""The v2 GPU columns a slot is made of, in ``record_columns``' order."""
HALF_MAX = 65504.0
"""The largest finite half float: a reading beyond it is kept as this (it cannot be drawn
truer on a sparkline anyway)."""
_NAN = math.nan
_SLOT: dict[int, struct.Struct] = {}
"""GPU count -> the struct of one slot (3 x n half floats)."""


def _slot(n: int) -> struct.Struct:
    s = _SLOT.get(n)
    if s is None:
        s = _SLOT[n] = struct.Struct(f"<{3 * n}e")
    return s


_IOTA: dict[int, tuple[list[int], tuple[int, ...]]] = {}
"""GPU count -> 0..n-1 as a list and a tuple: the index column of nearly every sample (a
decoded column is a list, a held keyframe's shared one a tuple)."""


def _ascending(index: Sequence[int]) -> bool:
    iota = _IOTA.get(len(index))
    if iota is None:
        iota = _IOTA[len(index)] = (list(range(len(index))), tuple(range(len(index))))
    if index == iota[0] or index == iota[1]:  # in C (~0.1 µs; the pairwise loop ~3)
        return True
    return all(a < b for a, b in pairwise(index))


def _half(v: float | None) -> float:
    """A reading as a half float stores it: None as NaN, beyond the largest finite half float
    as that (an infinity as itself, as the packed fast path keeps it)."""
    if v is None:
        return _NAN
    try:
        f = float(v)
    except OverflowError:  # an int beyond any float
        return math.inf if v > 0 else -math.inf
    if math.isnan(f) or math.isinf(f):
        return f
    return HALF_MAX if f > HALF_MAX else -HALF_MAX if f < -HALF_MAX else f


class _Ring(msgspec.Struct, gc=False):
    """One node's ring. A Struct with ``gc=False``: it holds a bytearray, numbers and a
    ``struct.Struct``, so it can be in no reference cycle, and a ring a node was one more
    object each GC sweep walked (docs/performance.md, "Fewer objects for the GC to walk")."""

    buf: bytearray
    gpus: int
    slot: struct.Struct
    next: int = 0
    """Slot the next sample goes to."""
    count: int = 0

    @classmethod
    def of(cls, samples: int, gpus: int) -> "_Ring":
        slot = _slot(gpus)
        return cls(bytearray(samples * slot.size), gpus, slot)

    # A struct.Struct cannot be pickled (a replay's snapshot pickles the session): the ring
    # is saved without it and takes the shared one for its GPU count again.
    def __reduce__(self) -> tuple[object, tuple[bytearray, int, int, int]]:
        return _ring_again, (self.buf, self.count, self.gpus, self.next)


def _ring_again(buf: bytearray, count: int, gpus: int, next_: int) -> _Ring:
    return _Ring(buf, gpus, _slot(gpus), next_, count)


class RecentHistory:
    """``node -> ring``; each slot holds util[n], temp[n], power[n] for n GPUs."""

    def __init__(self, samples: int = SAMPLES) -> None:
        self.samples = samples
        self._rings: dict[str, _Ring] = {}

    def record(self, node: str, t: Sample) -> None:
        if type(t) is Pending and not t.built:
            # Columns straight from the v2 delta and its keyframe: no rows built for this.
            self.record_columns(node, *t.gpu_columns(*COLUMNS))
            return
        gpus = t.gpus
        self.record_columns(node, [g.index for g in gpus], [g.present for g in gpus],
                            [g.util_pct for g in gpus], [g.temp_c for g in gpus],
                            [g.power_w for g in gpus])

    def record_columns(self, node: str, index: Sequence[int], present: Sequence[bool],
                       util: Sequence[float | None], temp: Sequence[float | None],
                       power: Sequence[float | None]) -> None:
        """One sample given as its GPU columns, in row order (the caller may have read them
        already: ``ConsoleSession._record_history`` shares them with the node list's figures)."""
        n = len(index)
        ring = self._rings.get(node)
        if ring is None or ring.gpus != n:
            ring = self._rings[node] = _Ring.of(self.samples, n)
        base = ring.next * ring.slot.size
        if all(present) and _ascending(index):
            try:
                # Every GPU present, in index order, each reading a finite float (a healthy
                # node, nearly every sample): one C call. None or a value beyond a half float
                # raises, and the rows go by the loop below.
                ring.slot.pack_into(ring.buf, base, *util, *temp, *power)
            except (struct.error, OverflowError, TypeError):
                self._pack_rows(ring, base, index, present, util, temp, power)
        else:
            self._pack_rows(ring, base, index, present, util, temp, power)
        ring.next = (ring.next + 1) % self.samples
        if ring.count < self.samples:
            ring.count += 1

    @staticmethod
    def _pack_rows(ring: _Ring, base: int, index: Sequence[int], present: Sequence[bool],
                   util: Sequence[float | None], temp: Sequence[float | None],
                   power: Sequence[float | None]) -> None:
        """The general case: slots in GPU index order, NaN where not reported, clamped."""
        n = len(index)
        order = range(n) if _ascending(index) else sorted(range(n), key=index.__getitem__)
        values = [_NAN] * (3 * n)
        for i, k in enumerate(order):
            if present[k]:
                values[i] = _half(util[k])
                values[n + i] = _half(temp[k])
                values[2 * n + i] = _half(power[k])
        ring.slot.pack_into(ring.buf, base, *values)

    def record_many(self, items: Iterable[tuple[str, Telemetry]]) -> None:
        for node, t in items:
            self.record(node, t)

    def series(self, node: str, gpu_pos: int, metric: str) -> list[float | None]:
        """Values of one GPU (position in index order) and metric, oldest first."""
        ring = self._rings.get(node)
        if ring is None or not 0 <= gpu_pos < ring.gpus:
            return []
        offset = METRICS.index(metric) * ring.gpus + gpu_pos
        first = (ring.next - ring.count) % self.samples
        unpack, size, buf = ring.slot.unpack_from, ring.slot.size, ring.buf
        out: list[float | None] = []
        for k in range(ring.count):
            v = unpack(buf, ((first + k) % self.samples) * size)[offset]
            out.append(None if math.isnan(v) else v)
        return out

    def __len__(self) -> int:
        return len(self._rings)

    def forget(self, node: str) -> None:
        self._rings.pop(node, None)


SPARK = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float | None], lo: float, hi: float, width: int) -> str:
    """The last ``width`` values as block characters scaled to [lo, hi]; gaps as spaces."""
    vals = values[-width:]
    span = max(1e-9, hi - lo)
    out = []
    for v in vals:
        if v is None:
            out.append(" ")
        else:
            k = int((min(hi, max(lo, v)) - lo) / span * (len(SPARK) - 1) + 0.5)
            out.append(SPARK[k])
    return "".join(out).rjust(width)
