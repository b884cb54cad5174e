"""Recent history is a preallocated ring per node: right values, oldest first, and recording a
sample creates no object the cyclic GC tracks."""

import gc

from fleetdeck.console.recent import POWER_STEP_W, RecentHistory
from tests.helpers import FakeNode


def test_ring_keeps_the_newest_samples_oldest_first() -> None:
    node = FakeNode()
    recent = RecentHistory(samples=5)
    samples = [node.telemetry() for _ in range(12)]
    for t in samples:
        recent.record("n", t)
    for pos in range(8):
        g = [sorted(t.gpus, key=lambda g: g.index)[pos] for t in samples[-5:]]
        assert recent.series("n", pos, "util") == [float(round(x.util_pct)) for x in g]
        assert recent.series("n", pos, "temp") == [float(round(x.temp_c)) for x in g]
        assert recent.series("n", pos, "power") == [
            float(round(x.power_w / POWER_STEP_W) * POWER_STEP_W) for x in g]
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


def test_healthy_samples_take_the_fast_path_and_the_rest_quantise_as_before() -> None:
    """A healthy node's slot is written at C speed; what it writes is what the per-value loop
    writes, and a sample it cannot take (a GPU gone, no reading, out of a byte, a reading that
    would read as "not reported", rows out of order) goes by the loop, clamped."""
    from fleetdeck.console import recent as recent_mod

    def expect(v: float | None, step: float = 1.0) -> float | None:
        if v is None:
            return None
        return float(max(0, min(254, round(v / step))) * step)

    index = list(range(4))
    present = [True] * 4
    cases = [
        (index, present, [10.4, 99.5, 100.0, 0.0], [40.5, 41.5, 250.0, 30.0],
         [700.0, 2.0, 6.0, 10.0]),                                    # healthy: fast
        (index, present, [10.0, 20.0, 30.0, 40.0], [-5.0, 30.0, 30.0, 30.0],
         [1020.0, 5000.0, 100.0, 100.0]),                             # clamped: the loop
        (index, present, [None, 20.0, 30.0, 40.0], [30.0, None, 30.0, 30.0],
         [100.0, 100.0, None, 100.0]),                                # no reading
        (index, [True, False, True, True], [1.0, 2.0, 3.0, 4.0], [30.0] * 4, [100.0] * 4),
        ([3, 1, 2, 0], present, [1.0, 2.0, 3.0, 4.0], [31.0, 32.0, 33.0, 34.0],
         [100.0, 200.0, 300.0, 400.0]),                               # out of index order
    ]
    fast_taken = []
    real_fast = recent_mod._fast

    def spy(*args: object) -> bool:
        fast_taken.append(real_fast(*args))  # type: ignore[arg-type]
        return fast_taken[-1]

    recent_mod._fast = spy  # type: ignore[assignment]
    try:
        for idx, pres, util, temp, power in cases:
            recent = RecentHistory(samples=3)
            recent._record("n", idx, pres, util, temp, power)
            order = sorted(range(len(idx)), key=idx.__getitem__)
            for pos, k in enumerate(order):
                gone = not pres[k]
                assert recent.series("n", pos, "util") == [None if gone else expect(util[k])]
                assert recent.series("n", pos, "temp") == [None if gone else expect(temp[k])]
                assert recent.series("n", pos, "power") == [
                    None if gone else expect(power[k], POWER_STEP_W)]
    finally:
        recent_mod._fast = real_fast  # type: ignore[assignment]
    assert fast_taken == [True, False, False, False]  # the absent GPU never asks
