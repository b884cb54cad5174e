"""agents/sim/clock.py: the one timer for every simulated agent's telemetry slots keeps
NodeAgent's schedule (never before a slot, slots more than a period behind skipped), lets the
loop run between slices of a backlog, and ends a slot when asked.

On an event loop with a virtual clock (``VirtualTimeLoop``): the loop's time moves only when it
would wait (to its next timer) or when a test says work took time (``advance``), so what is
checked is the clock's schedule, not how promptly a loaded CI machine ran the process (a slice
measured 36 ms against a 35 ms bound with two busy cores)."""

import asyncio
import selectors
from collections.abc import Awaitable, Callable

from fleetdeck.agents.sim.clock import SLICE_S, TelemetryClock


class _NoWait(selectors.DefaultSelector):
    """Polls instead of blocking; the loop's clock jumps over the wait instead."""

    def __init__(self, loop: "VirtualTimeLoop") -> None:
        super().__init__()
        self.loop = loop

    def select(self, timeout: float | None = None) -> list:
        if timeout is not None and timeout > 0:
            self.loop.skip_to_next_timer()
            timeout = 0
        return super().select(timeout)


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An asyncio loop whose ``time()`` is virtual: the wall clock never enters."""

    def __init__(self) -> None:
        self.now = 1000.0
        super().__init__(_NoWait(self))

    def time(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """``seconds`` of work (or starvation) while the loop does not run."""
        self.now += seconds

    def skip_to_next_timer(self) -> None:
        # The loop computed its wait from this timer: land on its time exactly, so a callback
        # due then sees the time it was due (no float drift below it, no early call).
        if self._scheduled:  # type: ignore[attr-defined]
            self.now = max(self.now, self._scheduled[0].when())  # type: ignore[attr-defined]


def on_virtual_time(test: Callable[[VirtualTimeLoop], Awaitable[None]]) -> Callable[[], None]:
    def run() -> None:
        with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
            loop = runner.get_loop()
            assert isinstance(loop, VirtualTimeLoop)
            runner.run(test(loop))  # type: ignore[arg-type]
    run.__name__, run.__doc__ = test.__name__, test.__doc__
    return run


@on_virtual_time
async def test_slots_fire_in_order_never_early(loop: VirtualTimeLoop):
    clock = TelemetryClock()
    fired: list[tuple[str, float, float]] = []
    t0 = loop.time()

    def recorder(name: str, start: float, interval: float):
        k = [0]

        def fire() -> bool:
            fired.append((name, loop.time(), start + k[0] * interval))
            k[0] += 1
            return True
        return fire

    for i, name in enumerate("abcd"):
        start = t0 + 0.01 + i * 0.02
        clock.add(start, 0.1, recorder(name, start, 0.1))
    await asyncio.sleep(0.45)
    clock.close()
    assert len(fired) >= 14
    assert all(at >= due for _, at, due in fired), "a sample before its slot"
    assert max(at - due for _, at, due in fired) < 0.05
    assert [f[0] for f in fired[:8]] == list("abcdabcd")
    assert [at for _, at, _ in fired] == sorted(at for _, at, _ in fired)


@on_virtual_time
async def test_a_starved_slot_skips_as_nodeagent_does(loop: VirtualTimeLoop):
    """More than one interval behind: the slots that are are skipped, the first one that began
    at most a period ago is kept (NodeAgent._telemetry_loop's ``continue``)."""
    clock = TelemetryClock()
    start = loop.time() + 0.01
    calls: list[float] = []

    def fire() -> bool:
        calls.append(loop.time())
        return True

    slot = clock.add(start, 0.05, fire)
    await asyncio.sleep(0.02)
    assert len(calls) == 1
    loop.advance(0.23)  # the loop starved for 4.6 periods
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    # The one slot kept is within a period of now, and 3 or 4 slots were skipped.
    assert len(calls) >= 2
    late = calls[1] - (start + (slot.k - 1) * 0.05)
    assert 0 <= late <= 0.05 + 0.01
    assert clock.skipped in (3, 4)
    clock.close()


@on_virtual_time
async def test_fire_false_or_cancel_ends_the_slot(loop: VirtualTimeLoop):
    clock = TelemetryClock()
    n = {"a": 0, "b": 0}

    def once() -> bool:
        n["a"] += 1
        return False

    def forever() -> bool:
        n["b"] += 1
        return True

    clock.add(loop.time(), 0.01, once)
    slot = clock.add(loop.time(), 0.01, forever)
    await asyncio.sleep(0.055)
    slot.cancel()
    seen = n["b"]
    await asyncio.sleep(0.05)
    assert n["a"] == 1
    assert 3 <= seen == n["b"]
    assert len(clock) == 0


@on_virtual_time
async def test_a_backlog_yields_to_the_loop_between_slices(loop: VirtualTimeLoop):
    """Thousands of slots due at once (after a stall) must not hold the loop for longer than
    a slice: other callbacks (socket reads, the world tick, commands) run in between."""
    clock = TelemetryClock()
    # Due now: the probe's turns take no virtual time, so a later start would never come.
    start = loop.time()

    def slow() -> bool:
        loop.advance(0.001)  # a sample's work
        return False

    for _ in range(200):  # ~200 ms of work, all due at the same moment
        clock.add(start, 1.0, slow)
    gaps: list[float] = []
    last = loop.time()

    async def probe() -> None:
        nonlocal last
        deadline = loop.time() + 5
        while clock.fired < 200 and loop.time() < deadline:
            await asyncio.sleep(0)
            now = loop.time()
            gaps.append(now - last)
            last = now

    await probe()
    assert clock.fired == 200
    assert len(gaps) > 5  # the probe ran between the slices
    assert max(gaps) < SLICE_S + 0.015


@on_virtual_time
async def test_a_failing_slot_ends_alone(loop: VirtualTimeLoop):
    """An exception in one agent's sample ends that slot (reported to the loop's exception
    handler); every other slot keeps its schedule."""
    reported: list[dict] = []
    loop.set_exception_handler(lambda _loop, ctx: reported.append(ctx))
    clock = TelemetryClock()
    n = {"ok": 0}

    def bad() -> bool:
        raise RuntimeError("model bug")

    def good() -> bool:
        n["ok"] += 1
        return True

    clock.add(loop.time(), 0.01, bad)
    clock.add(loop.time(), 0.01, good)
    await asyncio.sleep(0.06)
    clock.close()
    assert n["ok"] >= 4
    assert len(reported) == 1 and isinstance(reported[0]["exception"], RuntimeError)
