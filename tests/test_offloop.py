"""agents/offloop.py: a hung call is waited for at most its deadline, never twice at once, and
what it returns late is dropped."""

import threading
import time

import pytest

from fleetdeck.agents.offloop import Overdue, Pending, Watched


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


async def test_an_inventory_that_answers_without_a_boot_id_is_the_boot_the_windows_keep():
    """A real inventory that could not read /proc's boot_id answers "": that is its boot, and
    the error windows are restored and saved under it. Only a stand-in birth's "" (no
    inventory answered in time) is not taken: the agent never restored nor saved its windows
    on such a node (a review)."""
    from fleetdeck.agents.agent import NodeAgent
    from fleetdeck.agents.source import Inventory, Reading

    class Source:
        name, mode, blocking, sku = "sysfs", "real", True, "x"

        def inventory(self) -> Inventory:
            return Inventory(sku="x", gpus=[], ib_ports=[], boot_id="")

        def read(self, now: float) -> Reading:
            return Reading(gpus=[], ib_ports=[])

        def take_events(self) -> list:
            return []

        def busy(self) -> bool:
            return False

        def on_drain(self, *args) -> None:
            return None

    agent = NodeAgent(cluster="c", node_id="n1", source=Source(), url=None, interval_s=1.0)
    agent.birth(await agent._inventory())
    assert agent._boot_id == ""
    agent._windows_saved = {"by": "an earlier agent"}
    agent._sample(Reading(gpus=[], ib_ports=[]), 1.0)
    assert agent._windows_saved is None, "the saved windows were never restored"


def test_a_slow_call_is_pending_not_hung_and_its_answer_is_the_next_asks():
    """The GPU reader's calls (``hung_after_s``): a call past the asker's wait is slow, not
    hung, until it has gone unanswered ``hung_after_s``; what it returns then is the next
    ask's answer, said to be late, while that ask's own call runs on (docs/reliability.md, "A
    slow GPU reader is not a hung one")."""
    w = Watched("nvsmi", 0.05, hung_after_s=5.0)
    calls: list[int] = []

    def slow() -> int:
        n = len(calls)
        calls.append(n)
        time.sleep(0.3)
        return n

    with pytest.raises(Pending, match=r"nvsmi: no answer for 0\.\d s yet"):
        w.ask(slow, "read")
    assert w.hung_since is None
    time.sleep(0.5)
    got = w.ask(slow, "read")
    assert (got.value, got.late) == (0, True) and calls == [0, 1]
    time.sleep(0.5)
    assert w.ask(slow, "read").value == 1 and w.dropped == 0
    # Of another kind (an inventory asked while a read ran): dropped, asked afresh.
    time.sleep(0.5)
    with pytest.raises(Pending):
        w.ask(slow, "inventory")
    assert w.dropped == 1 and calls == [0, 1, 2, 3]


def test_a_patient_call_in_flight_past_hung_after_is_overdue_at_once():
    w = Watched("nvml", 0.05, hung_after_s=0.2)
    release = threading.Event()
    with pytest.raises(Pending):
        w.ask(lambda: release.wait(10))
    t0 = time.monotonic()
    with pytest.raises(Overdue, match="nvml: no answer for 0 s"):
        w.ask(lambda: "fresh", wait_s=5.0)  # waited for until it counts as hung, not 5 s
    assert time.monotonic() - t0 < 0.3 and w.hung_since is not None
    t0 = time.monotonic()
    with pytest.raises(Overdue):
        w.ask(lambda: "fresh", wait_s=5.0)  # hung already: waited for a deadline only
    assert time.monotonic() - t0 < 0.1
    release.set()
    # Answered past hung_after_s: read before or during the hang, dropped.
    assert w.ask(lambda: "fresh").value == "fresh" and w.dropped == 1
