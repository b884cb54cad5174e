"""The tick timer survives a CancelledError raised inside the tick (``FleetdeckApp.timer_tick``).

Textual's timer loop takes a CancelledError for its own end and stops without a word, and the
tick is synchronous, so such an error can only be a cancelled future's ``result()`` read by code
the tick runs. And the tick goes on when Textual drops one of the one-shot timers it waits for: a
drill's console stopped ticking so, applying nothing for ten minutes while its header counted
"nothing heard" (docs/reliability.md, "The console's tick")."""
from __future__ import annotations

import asyncio
from typing import Any

from tests.tui.conftest import SIZE, World, pilot_until


async def test_the_tick_goes_on_after_a_cancelled_error_from_inside(monkeypatch: Any) -> None:
    world = World(8)
    world.fleet.birth(world.ingest)
    app = world.app
    app.auto_tick, app.tick_s = True, 0.05
    session_tick = app.session.tick
    raised: list[bool] = []
    calls = [0]

    def tick_once_cancelled(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] == 2 and not raised:  # the first is the mount's own; the second a timer's
            raised.append(True)
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            fut.cancel()
            fut.result()  # what a tick reading a cancelled look's result raises
        return session_tick(*args, **kwargs)

    async with app.run_test(size=SIZE) as pilot:
        monkeypatch.setattr(app.session, "tick", tick_once_cancelled)
        await pilot_until(pilot, lambda: bool(raised), timeout=5)
        after = app.ticks
        # The interval goes on: a stopped timer would leave the count where it was.
        await pilot_until(pilot, lambda: app.ticks >= after + 3, timeout=5)
        assert app.tick_errors == 1


async def test_a_cancelled_error_at_every_tick_is_logged_once(
        monkeypatch: Any, caplog: Any) -> None:
    # One that recurs at every tick wrote a traceback to console.log twice a second.
    world = World(8)
    world.fleet.birth(world.ingest)
    app = world.app
    app.auto_tick, app.tick_s = True, 0.05

    def tick_cancelled(*_args: Any, **_kwargs: Any) -> Any:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        fut.cancel()
        fut.result()

    async with app.run_test(size=SIZE) as pilot:
        monkeypatch.setattr(app.session, "tick", tick_cancelled)
        await pilot_until(pilot, lambda: app.tick_errors >= 5, timeout=5)
    said = [r for r in caplog.records if "CancelledError from inside" in r.getMessage()]
    assert len(said) == 1, [r.getMessage() for r in said]


async def test_the_tick_goes_on_when_textual_drops_a_slice_or_redraw(monkeypatch: Any) -> None:
    """Textual 8.2's one-shot timer (``set_timer``) reads its clock twice in its task and skips
    its only call when they are more than its delay apart: a 1 ms redraw or slice is lost when
    the loop's thread is preempted between them (a loaded host). The tick waited for it for ever
    (``timer_tick``: a slice or redraw on its way ticks instead): 2,048 nodes, a drain now, and
    the console applied nothing more while its header counted "nothing heard" (a drill). Here
    every read of the timers' clock is 2 ms on from the last, as if preempted each time."""
    import textual.timer
    from textual import _time

    from fleetdeck.console.tui import app as app_module

    world = World(8)
    world.fleet.birth(world.ingest)
    app = world.app
    app.auto_tick, app.tick_s = True, 0.05
    monkeypatch.setattr(app_module, "STEP_LOST_S", 0.2, raising=False)
    ahead = [0.0]

    def preempted() -> float:
        ahead[0] += 0.002
        return _time.get_time() + ahead[0]

    clock = type("Clock", (), {"get_time": staticmethod(preempted),
                               "sleep": staticmethod(_time.sleep)})
    async with app.run_test(size=SIZE) as pilot:
        await pilot_until(pilot, lambda: app.ticks >= 1)
        monkeypatch.setattr(textual.timer, "_time", clock)
        after = app.ticks
        # A tick's redraw is a 1 ms timer (``_paint_later``): each is lost; before, the
        # first lost one held every later tick (the count stayed where it was).
        await pilot_until(pilot, lambda: app.ticks >= after + 5, "ticks after a lost redraw",
                          timeout=10)
        assert app.lost_steps >= 1


async def test_a_redraw_dropped_for_lost_after_its_call_was_queued_stays_dropped(
        monkeypatch: Any) -> None:
    """Textual's timer hands its call to the app's queue (``call_next``): a redraw whose call
    waited there past ``STEP_LOST_S`` is dropped by the tick, which asks a redraw of its own,
    and the queued call then ran all the same. It took the place of the tick's redraw
    (``_next_paint`` cleared while that one was on its way, so the next tick scheduled yet
    another) and redrew once more."""
    from fleetdeck.console.tui import app as app_module

    world = World(8)
    world.fleet.birth(world.ingest)
    app = world.app
    async with app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        refreshed: list[bool] = []
        calls: list[tuple[int, bool]] = []
        """Per redraw call, in the order run: how many redraws it made, and whether a redraw
        was still on its way after it."""
        monkeypatch.setattr(app, "refresh_view", lambda now=None: refreshed.append(True))
        backlog_paint = app._backlog_paint

        def paint(*args: Any) -> None:
            before = len(refreshed)
            backlog_paint(*args)
            calls.append((len(refreshed) - before, app._next_paint is not None))

        monkeypatch.setattr(app, "_backlog_paint", paint)
        app._paint_later()
        lost = app._next_paint
        assert lost is not None
        queued = lost._callback
        assert queued is not None
        lost.stop()  # its task is over: it fired ...
        queued()  # ... and its call waits in the app's queue, as Textual's call_next leaves it
        app._paint_due -= 2 * app_module.STEP_LOST_S  # for longer than STEP_LOST_S
        app.timer_tick()  # drops it for lost, ticks, and asks a redraw of its own
        assert app.lost_steps == 1
        ours = app._next_paint
        assert ours is not None and ours is not lost
        await pilot_until(pilot, lambda: len(calls) >= 2, "both redraw calls")
        assert calls == [(0, True), (1, False)], calls
        assert len(refreshed) == 1


def preempting_clock(step: float) -> Any:
    """Textual's timer clock with every read ``step`` on from the last, as if the loop's
    thread were preempted between any two: a one-shot timer shorter than ``step`` is lost."""
    from textual import _time

    ahead = [0.0]

    def preempted() -> float:
        ahead[0] += step
        return _time.get_time() + ahead[0]

    return type("Clock", (), {"get_time": staticmethod(preempted),
                              "sleep": staticmethod(_time.sleep)})


async def test_a_view_switchs_mask_is_lifted_when_textual_drops_its_timer(
        monkeypatch: Any) -> None:
    """A first visit to a view holds the screen's updates SWITCH_MASK_S (Textual's
    ``delay_update``, lifted by a one-shot timer): with that timer lost, nothing was painted
    again for the rest of the run, whatever arrived and whatever key was pressed."""
    import textual.timer

    from fleetdeck.console.tui import app as app_module

    world = World(8)
    world.fleet.birth(world.ingest)
    app = world.app
    app.auto_tick, app.tick_s = True, 0.05
    monkeypatch.setattr(app_module, "STEP_LOST_S", 0.2)
    monkeypatch.setattr(app_module, "SWITCH_MASK_S", 0.001)
    async with app.run_test(size=SIZE) as pilot:
        await pilot_until(pilot, lambda: app.ticks >= 1)
        monkeypatch.setattr(textual.timer, "_time", preempting_clock(0.002))
        app.action_view("jobs")  # never visited: composed, so masked
        await pilot_until(pilot, lambda: app.current_mode == "jobs", "the jobs view")
        await pilot_until(pilot, lambda: app._batch_count == 0, "the mask lifted", timeout=10)
        assert app.lost_steps >= 1


async def test_a_resize_is_laid_out_when_textual_drops_its_timer(monkeypatch: Any) -> None:
    """Textual hands a resize to the screen from a one-shot timer (8 ms) and, while that is
    set, a later resize waits for it: with it lost, the console kept the old size's layout
    for the rest of the run (cut off, or a corner of a bigger terminal)."""
    import textual.timer

    from fleetdeck.console.tui import app as app_module

    world = World(8)
    world.fleet.birth(world.ingest)
    app = world.app
    app.auto_tick, app.tick_s = True, 0.1
    monkeypatch.setattr(app_module, "STEP_LOST_S", 0.2)
    async with app.run_test(size=SIZE) as pilot:
        await pilot_until(pilot, lambda: app.ticks >= 1)
        monkeypatch.setattr(textual.timer, "_time", preempting_clock(0.01))
        await pilot.resize_terminal(80, 24)
        # The screen's region: its size is the app's, whether or not it was laid out.
        await pilot_until(pilot, lambda: app.screen.region.size == (80, 24),
                          "the new size laid out", timeout=10)
        await pilot.resize_terminal(120, 40)  # and the next one too
        await pilot_until(pilot, lambda: app.screen.region.size == (120, 40), "the next size",
                          timeout=10)
