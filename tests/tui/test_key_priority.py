"""A key goes before the rest of a backlog: while a large batch is applied slice by slice, a
view switch shows the new view before the backlog is through, and every sample is still
applied."""

import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

from textual import events

from fleetdeck.console.tui.screens.nodes import NodesScreen
from tests.tui.conftest import SIZE, World, pilot_until


@contextlib.asynccontextmanager
async def running(nodes: int) -> AsyncIterator[tuple[World, Any, Any]]:
    """A console over ``nodes`` born nodes, its first tick applied and painted."""
    world = World(nodes)
    world.fleet.birth(world.ingest)
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        yield world, world.app, pilot


async def test_a_view_switch_goes_before_the_rest_of_a_backlog(monkeypatch: Any) -> None:
    from fleetdeck.console.tui import app as app_module

    # The order under test, not the clock: a key waits at most KEY_FIRST_S for its view, which a
    # starved CI machine can exceed; here it may wait as long as it takes.
    monkeypatch.setattr(app_module, "KEY_FIRST_S", 30.0)
    async with running(256) as (world, app, pilot):
        session = app.session
        session.apply_max_nodes = 2  # 128 slices, each scheduled by the one before
        tick = session.tick

        def slow_tick(now: float | None = None) -> Any:
            time.sleep(0.01)  # a slice costs its budget, as at fleet size
            return tick(now)

        monkeypatch.setattr(session, "tick", slow_tick)
        applied = session.state.applied
        world.fleet.telemetry(world.ingest)
        shown: list[tuple[int, int]] = []
        refresh = NodesScreen.refresh_view

        def spy(screen: NodesScreen, now: float) -> None:
            shown.append((app.ticks, session.backlog))
            refresh(screen, now)

        monkeypatch.setattr(NodesScreen, "refresh_view", spy)
        # When the key reaches the app: a slice already due may run before that (on a busy
        # machine the key takes longer than a slice's 1 ms timer); none may run after it.
        key_at: list[int] = []
        on_event = app.on_event

        async def seen(event: events.Event) -> None:
            if isinstance(event, events.Key):
                key_at.append(app.ticks)
            await on_event(event)

        monkeypatch.setattr(app, "on_event", seen)
        world.tick()  # the first slice; the rest follow on their own
        assert session.backlog == 254
        await pilot.press("2")
        await pilot_until(pilot, lambda: shown, "the node list's refresh", interval=0.001)
        first_ticks, backlog = shown[0]
        # Between the key and the new view's refresh at most the slice already on its way ran
        # (on an idle machine none; on a CPU-starved one, such as a CI runner under other
        # tests, one now and then), not the backlog. This does not tell a console with key
        # priority from one without (one slice at most went first either way here); what the
        # priority buys shows in bench/console_scale.py's switches under a feed.
        assert key_at, "the key never reached the app"
        assert first_ticks - key_at[0] <= 1, f"{first_ticks - key_at[0]} slices went before"
        assert backlog > 200
        assert isinstance(app.screen, NodesScreen)
        # Then the backlog drains: nothing lost.
        await pilot_until(pilot, lambda: not session.backlog, "the backlog drained", interval=0.005)
        assert session.state.applied - applied == 256


async def test_the_tick_timer_waits_for_a_key_in_flight(monkeypatch: Any) -> None:
    """A tick of the tick timer that falls between a key and its paint is put off until the
    key's effect is on screen (at most KEY_FIRST_S), then runs: nothing is skipped."""
    from fleetdeck.console.tui import app as app_module

    monkeypatch.setattr(app_module, "KEY_FIRST_S", 30.0)
    async with running(16) as (world, app, pilot):
        world.fleet.telemetry(world.ingest)
        app._key_at = time.perf_counter()  # a key in flight, its paint not yet done
        ticks = app.ticks
        app.timer_tick()
        assert app.ticks == ticks, "the timer ticked in front of the key"
        await pilot.pause(0.05)
        assert app.ticks == ticks  # still waiting for the key's paint
        app._key_shown(app._keys)  # the key's effect painted: the tick goes on at once
        await pilot_until(pilot, lambda: app.ticks > ticks, "the tick put off", interval=0.005)
        assert app.ticks == ticks + 1
        assert all(st.telemetry is not None for st in app.state.nodes.values())
        # No key in flight, but a redraw is on its way (a step of its own, as after the
        # put-off tick's; that one may have run by now): the timer's tick follows it as a
        # slice, not at the timer's next tick.
        app._paint_later()
        assert app._next_paint is not None
        app.timer_tick()
        assert app.ticks == ticks + 1
        await pilot_until(pilot, lambda: app.ticks == ticks + 2, "the tick owed", interval=0.005)
        await pilot.pause(0.05)
        assert app.ticks == ticks + 2  # once
        app.timer_tick()  # nothing on its way: at once
        assert app.ticks == ticks + 3


async def test_the_tick_timer_leaves_a_backlog_to_its_slices() -> None:
    """While a backlog's next slice is on its way, the tick timer's tick does not tick too:
    both calls land in the app's queue, which Textual runs without yielding, so a slice and
    the timer's tick made one event-loop step of two ticks under a feed. Nothing is skipped:
    the slices apply it all."""
    async with running(64) as (world, app, pilot):
        session = app.session
        session.apply_max_nodes = 8
        world.fleet.telemetry(world.ingest)
        app._cancel_slice()
        app._slice_later(30.0)  # a slice scheduled, not yet run
        ticks = app.ticks
        app.timer_tick()
        assert app.ticks == ticks, "the timer ticked beside a scheduled slice"
        app._cancel_slice()
        app.timer_tick()  # none scheduled: at once, and its slices take the rest
        assert app.ticks == ticks + 1 and session.backlog
        await pilot_until(pilot, lambda: not session.backlog, "the backlog applied",
                          interval=0.005)
        assert all(st.telemetry is not None for st in app.state.nodes.values())


async def test_a_view_composed_before_is_switched_to_without_textuals_mask() -> None:
    """Textual's switch_mode holds every update for 50 ms to hide the change of screen; at
    16,384 nodes that was most of a view switch (p50 ~55 ms against ~10 ms of work). Only the
    first visit of a view, which composes it, keeps the mask; the switch back paints at once."""
    async with running(16) as (_world, app, pilot):
        first = app.current_mode
        app.action_view("nodes")  # never shown before: composed, and masked meanwhile
        assert app._batch_count == 1
        # The mask ends on a timer whose call goes through the app's queue.
        await pilot_until(pilot, lambda: app._batch_count == 0, "the mask lifted")
        assert isinstance(app.screen, NodesScreen)
        app.action_view(first)  # the start view was composed at start-up
        assert app._batch_count == 0
        await pilot.pause()
        app.action_view("nodes")
        assert app._batch_count == 0
        await pilot.pause()
        assert isinstance(app.screen, NodesScreen)


async def test_each_scheduled_slice_ticks_once(monkeypatch: Any) -> None:
    """A backlog's next slice is scheduled on a Textual timer, whose call goes through the
    app's queue: stopping the timer (a key painted, or a tick of the tick timer that did the
    slice's work) does not take back a call already queued. Such a stale call must not tick:
    two or three ticks in one go held the loop 60-120 ms under a 16,384-node feed
    (bench/console_scale.py)."""
    from fleetdeck.console.tui import app as app_module

    # The slices under test, not the redraws between them: a tick BACKLOG_PAINT_S after the
    # last paint schedules a redraw first and the slice after it, and a loaded CI machine took
    # longer than that between the first paint and this test's tick (no slice was scheduled).
    monkeypatch.setattr(app_module, "BACKLOG_PAINT_S", 30.0)
    async with running(64) as (world, app, pilot):
        session = app.session
        session.apply_max_nodes = 4  # a backlog of 60 after the first slice
        world.fleet.telemetry(world.ingest)
        app.tick()
        assert session.backlog == 60 and app._next_slice is not None
        stale = app._slice_gen
        app.tick()  # the tick timer's tick: it did the pending slice's work
        assert session.backlog == 56 and app._next_slice is not None
        ticks = app.ticks
        app._backlog_slice(stale)  # the stopped timer's call, already queued by Textual
        assert app.ticks == ticks and session.backlog == 56
        live = app._slice_gen
        app._key_at = time.perf_counter()
        app._key_shown(app._keys)  # a key painted: the slice goes on at once, rescheduled
        app._backlog_slice(live)
        assert app.ticks == ticks, "a slice rescheduled after a key ran twice"
        # The rest is applied by the slices that follow, each once.
        await pilot_until(pilot, lambda: not session.backlog, "the backlog drained", interval=0.005)
        assert app.ticks - ticks == 14


async def test_a_view_is_restyled_on_return_only_when_what_its_styles_rest_on_changed(
        monkeypatch: Any) -> None:
    """Textual restyles every widget of a resumed screen (~12-20 ms a switch at 16,384
    nodes); a view whose app-level basis (theme, app focus and classes, CSS, size) is as it
    was when it was left is not restyled. After a theme change it is, and shows the theme."""
    from textual.app import App

    restyled: list[str] = []
    update = App.update_styles

    def spy(self: App[Any], node: Any, animate: bool = True) -> None:
        if isinstance(node, NodesScreen):
            restyled.append(type(node).__name__)
        update(self, node, animate)

    monkeypatch.setattr(App, "update_styles", spy)
    async with running(16) as (_world, app, pilot):
        await pilot.press("2")  # composed and styled on its first visit
        await pilot.pause()
        await pilot.press("1")
        await pilot.pause()
        restyled.clear()
        await pilot.press("2")
        await pilot.pause()
        assert isinstance(app.screen, NodesScreen) and restyled == []
        dark = app.screen.styles.background
        await pilot.press("1")
        await pilot.pause()
        app.app_focus = False  # the terminal lost focus (App:blur) while the view was away
        await pilot.pause()
        app.action_view("nodes")  # not a key: a key gives the app its focus back
        await pilot.pause()
        assert restyled == ["NodesScreen"], "a view came back styled for a focused app"
        app.app_focus = True
        await pilot.pause()
        await pilot.press("1")
        await pilot.pause()
        app.theme = "textual-light"  # Textual's switch_mode refreshes changed CSS itself
        await pilot.pause()
        await pilot.press("2")
        await pilot.pause()
        assert isinstance(app.screen, NodesScreen)
        assert app.screen.styles.background != dark, "the view kept the old theme"


async def test_a_backlogs_redraw_runs_between_slices_not_inside_one(monkeypatch: Any) -> None:
    """While a backlog is applied slice by slice, the view is redrawn every BACKLOG_PAINT_S in a
    callback of its own between two slices, not at the end of a slice: a slice and a redraw in
    one callback held the loop 55-73 ms under a 16,384-node feed. The slice that takes the
    last of it redraws in a step of its own too (a tick and a refresh in one step were the
    53-57 ms the stall rows missed by), and nothing is lost."""
    from fleetdeck.console.tui import app as app_module

    monkeypatch.setattr(app_module, "BACKLOG_PAINT_S", 0.0)  # a redraw due after every slice
    async with running(64) as (world, app, pilot):
        session = app.session
        session.apply_max_nodes = 8
        log: list[tuple[str, int]] = []
        inside = [False]
        tick, refresh = app.tick, app.refresh_view

        def logged_tick(*args: Any, **kwargs: Any) -> Any:
            inside[0] = True
            try:
                return tick(*args, **kwargs)
            finally:
                inside[0] = False
                log.append(("tick", session.backlog))

        def logged_refresh(now: float | None = None) -> None:
            log.append(("refresh-in-tick" if inside[0] else "refresh", session.backlog))
            refresh(now)

        monkeypatch.setattr(app, "tick", logged_tick)  # the slices call self.tick
        monkeypatch.setattr(app, "refresh_view", logged_refresh)
        world.fleet.telemetry(world.ingest)
        app.tick()
        await pilot_until(pilot, lambda: not session.backlog and app._next_paint is None
                          and app._next_slice is None, "the backlog drained", interval=0.005)
        inner = [b for what, b in log if what == "refresh-in-tick"]
        assert inner == [], f"a slice redrew inline while {inner} were left"
        between = [b for what, b in log if what == "refresh"]
        assert len(between) >= 5, log
        assert log[-1] == ("refresh", 0), log  # the last slice's redraw, in a step of its own
        assert all(st.telemetry is not None for st in app.state.nodes.values())


async def test_views_rebuilt_for_another_context_are_masked_on_their_first_visit() -> None:
    """A context switch builds every view anew: the first switch to each then composes it
    and keeps Textual's update mask, as on a first visit; later switches go without."""
    from fleetdeck.console.audit import MemoryAudit
    from fleetdeck.console.tui.app import FleetdeckApp

    app = FleetdeckApp(cluster="east", contexts=["west"], connect=False, auto_tick=False,
                       audit=MemoryAudit(), operator="t")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        for view in ("nodes", "overview"):  # both composed under east
            app.action_view(view)
            await pilot_until(pilot, lambda: app._batch_count == 0, f"{view}'s mask lifted")
        app.action_view("nodes")
        assert app._batch_count == 0
        await pilot.pause(0.1)
        app.use_context("west")
        await pilot_until(pilot, lambda: app.active == "west" and app.current_mode == "nodes"
                          and app._batch_count == 0, "the switch to west's nodes view")
        app.action_view("overview")  # a new screen under west: composed, so masked
        assert app._batch_count == 1
        await pilot_until(pilot, lambda: app._batch_count == 0, "the mask lifted")
        app.action_view("nodes")
        assert app._batch_count == 0


async def test_a_backlogs_redraw_gives_way_to_a_tick_that_painted_and_to_a_key(
        monkeypatch: Any) -> None:
    """A redraw asked for between two slices is dropped when a tick painted since (a second
    refresh for nothing), and waits out a key in flight (the key's own paint goes first); the
    next slice is still scheduled either way."""
    async with running(16) as (_world, app, _pilot):
        refreshed: list[float | None] = []
        monkeypatch.setattr(app, "refresh_view", lambda now=None: refreshed.append(now))
        app._backlog_left = 5
        asked = app._last_paint
        app._last_paint = asked + 1.0  # a tick painted after the redraw was asked for
        app._backlog_paint(app._paint_gen, asked)
        assert refreshed == [] and app._next_slice is not None
        app._cancel_slice()
        app._key_at = time.perf_counter()  # a key in flight, its paint not done
        app._backlog_paint(app._paint_gen, app._last_paint)
        assert refreshed == [] and app._next_slice is not None
        app._cancel_slice()
        app._key_at = None
        app._backlog_paint(app._paint_gen, app._last_paint)
        assert len(refreshed) == 1
