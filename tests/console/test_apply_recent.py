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
