"""agents/offloop.py: a hung call is waited for at most its deadline, never twice at once, and
what it returns late is dropped."""

import threading

import pytest

from fleetdeck.agents.offloop import Overdue, Watched


def test_a_hung_call_is_overdue_stays_alone_and_its_late_answer_is_dropped():
    w = Watched("nvsmi", 0.1)
    release = threading.Event()
    started: list[str] = []

    def hung() -> str:
        started.append("hung")
        release.wait(10)
        return "read before the hang ended"

    def quick() -> str:
        started.append("quick")
        return "fresh"

    with pytest.raises(Overdue) as first:
        w.call(hung)
    assert str(first.value) == "nvsmi: no answer for 0 s"
    assert w.hung_since is not None
    # Still hung: nothing new starts, and it says how long the one in flight has run.
    with pytest.raises(Overdue) as second:
        w.call(quick)
    assert second.value.waited_s >= 0.2 and started == ["hung"]
    release.set()
    # It answered late: that answer is dropped, a new call reads afresh.
    assert w.call(quick) == "fresh"
    assert started == ["hung", "quick"] and w.dropped == 1 and w.hung_since is None


def test_a_call_that_raises_in_time_raises_as_is():
    def broken() -> None:
        raise RuntimeError("driver wedged")

    with pytest.raises(RuntimeError, match="driver wedged"):
        Watched("nvml", 1.0).call(broken)
