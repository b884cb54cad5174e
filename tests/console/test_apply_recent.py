"""Recent history is a preallocated ring per node: right values, oldest first, and recording a
sample creates no object the cyclic GC tracks."""

import gc
import struct

from fleetdeck.console.recent import HALF_MAX, RecentHistory
from tests.helpers import FakeNode


def half(v: float) -> float:
    """What a value reads back as from a half-precision slot."""
    return struct.unpack("<e", struct.pack("<e", v))[0]


def test_ring_keeps_the_newest_samples_oldest_first() -> None:
    node = FakeNode()
    recent = RecentHistory(samples=5)
    samples = [node.telemetry() for _ in range(12)]
    for t in samples:
        recent.record("n", t)
    for pos in range(8):
        g = [sorted(t.gpus, key=lambda g: g.index)[pos] for t in samples[-5:]]
        assert recent.series("n", pos, "util") == [half(x.util_pct) for x in g]
        assert recent.series("n", pos, "temp") == [half(x.temp_c) for x in g]
        assert recent.series("n", pos, "power") == [half(x.power_w) for x in g]
        assert all(abs(half(x.power_w) - x.power_w) <= 0.5 for x in g)
    assert recent.series("n", 8, "util") == []
    assert recent.series("other", 0, "util") == []
    assert len(recent) == 1
    recent.forget("n")
    assert len(recent) == 0


def test_ring_not_yet_full_returns_what_it_has() -> None:
    node = FakeNode()
    recent = RecentHistory(samples=60)
    for _ in range(3):
        recent.record("n", node.telemetry())
    assert len(recent.series("n", 0, "temp")) == 3


def test_recording_allocates_no_tracked_object_per_sample() -> None:
    node = FakeNode()
    recent = RecentHistory(samples=60)
    samples = [node.telemetry() for _ in range(10)]
    for i in range(200):
        recent.record(f"n{i}", samples[0])  # every ring allocated up front
    gc.collect()
    before = len(gc.get_objects())
    for k in range(20):
        for i in range(200):
            recent.record(f"n{i}", samples[k % 10])
    assert len(gc.get_objects()) - before < 10


def test_every_kind_of_sample_reads_back_in_index_order() -> None:
    """A healthy node's slot is packed in one call; a sample that cannot be (a GPU gone, no
    reading, a value beyond a half float, rows out of index order) goes by the row loop,
    which puts the slots in index order, None where not reported, and clamps."""
    index = list(range(4))
    present = [True] * 4
    cases = [
        (index, present, [10.4, 99.5, 100.0, 0.0], [40.5, 41.5, 250.0, 30.0],
         [700.0, 2.0, 6.0, 10.0]),                                    # healthy
        (index, present, [10.0, 20.0, 30.0, 40.0], [-5.0, 30.0, 30.0, 30.0],
         [1e9, 5000.0, 100.0, 100.0]),                                # beyond a half float
        (index, present, [10.0, 20.0, 30.0, 40.0], [30.0] * 4,
         [10**400, float("inf"), 100.0, 100.0]),                      # beyond any float
        (index, present, [None, 20.0, 30.0, 40.0], [30.0, None, 30.0, 30.0],
         [100.0, 100.0, None, 100.0]),                                # no reading
        (index, [True, False, True, True], [1.0, 2.0, 3.0, 4.0], [30.0] * 4, [100.0] * 4),
        ([3, 1, 2, 0], present, [1.0, 2.0, 3.0, 4.0], [31.0, 32.0, 33.0, 34.0],
         [100.0, 200.0, 300.0, 400.0]),                               # out of index order
    ]

    def expect(v: float | None) -> float | None:
        if v is None:
            return None
        if v == float("inf") or v > 1e308:
            return float("inf")
        return half(max(-HALF_MAX, min(HALF_MAX, v)))

    for idx, pres, util, temp, power in cases:
        recent = RecentHistory(samples=3)
        for _ in range(2):  # twice: the ring's second slot too
            recent.record_columns("n", idx, pres, util, temp, power)
        order = sorted(range(len(idx)), key=idx.__getitem__)
        for pos, k in enumerate(order):
            for metric, values in (("util", util), ("temp", temp), ("power", power)):
                want = None if not pres[k] else expect(values[k])
                assert recent.series("n", pos, metric) == [want, want], (metric, idx, pos)
