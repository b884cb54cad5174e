"""The node detail is one screen, kept and reused (``FleetdeckApp.open_node``): a new one per
open left ~5,000 objects of cyclic garbage that only the periodic full sweep frees
(docs/performance.md, "The node detail's garbage"). Reused, it must still read as a new one:
every frame shows the node asked for, never the one shown before, from the live tables, and
its raw samples are asked for while it is open only (on digests:
tests/tui/test_digest_console.py)."""

import gc
from collections.abc import Iterable

from textual._compositor import ChopsUpdate, LayoutUpdate
from textual.strip import Strip

from fleetdeck.console.tui import render_cycles
from fleetdeck.console.tui.app import FleetdeckApp
from fleetdeck.console.tui.history_view import HistoryView
from fleetdeck.console.tui.replay_app import ReplayApp
from fleetdeck.console.tui.screens.node_detail import NodeDetailScreen
from fleetdeck.console.tui.screens.overview import OverviewScreen
from tests.tui.conftest import SIZE, World, pilot_until
from tests.tui.fleet import port_down
from tests.tui.test_history_view import (
    stored_world,  # noqa: F401 (a fixture)
    wait_loaded,
)
from tests.tui.test_replay_app import FIXTURE, frozen_wall, settle
from tests.tui.test_views import text_of

OPENS = 8
GARBAGE_PER_OPEN = 300
"""Cyclic garbage allowed per open and close of a detail: 0 measured (bench/detail_garbage.py),
~5,100 when each open built a new screen, ~700 when a reopened one was restyled each time."""


def _strips_text(strips: Iterable[Strip | None]) -> str:
    return "".join(seg.text for strip in strips if strip is not None for seg in strip)


class Frames:
    """The text of every update Textual sends to the terminal while a node detail is the
    screen: what the operator sees, frame by frame (``App._display``, Textual's own)."""

    def __init__(self, app: FleetdeckApp) -> None:
        self.texts: list[str] = []
        display = app._display

        def record(screen, renderable) -> None:
            if isinstance(screen, NodeDetailScreen):
                if isinstance(renderable, LayoutUpdate):
                    self.texts.append("\n".join(_strips_text(line) for line in renderable.strips))
                elif isinstance(renderable, ChopsUpdate):
                    self.texts.append("\n".join(_strips_text(chop.values())
                                                for chop in renderable.chops))
            display(screen, renderable)

        app._display = record  # type: ignore[method-assign]


async def _close(world: World, pilot) -> None:
    await pilot.press("escape")
    await pilot.pause()
    assert isinstance(world.app.screen, OverviewScreen)


async def test_a_detail_opened_again_shows_only_the_new_node_from_its_first_frame(world):
    app = world.app
    async with app.run_test(size=(80, 24)) as pilot:  # the detail scrolls
        world.tick()
        await pilot.pause()
        app.open_node("gpu0009", gpu=5)  # a port down: its port table says so
        world.tick()
        await pilot.pause()
        before = text_of(app)
        assert "node gpu0009" in before and "Polling" in before and "▶5" in before
        first = app.screen
        await pilot.press("pagedown")  # scrolled down: a new detail starts at its top
        await pilot.pause()
        assert first.query_one("#detail").scroll_y > 0
        await _close(world, pilot)

        frames = Frames(app)
        app.open_node("gpu0001")
        assert app.screen is first  # the same screen, shown again
        await pilot.pause()
        world.tick()
        await pilot.pause()
        assert frames.texts, "no frame painted"
        for shown in frames.texts:
            assert "gpu0009" not in shown and "Polling" not in shown and "▶" not in shown, shown
        assert any("node gpu0001" in shown for shown in frames.texts)
        text = text_of(app)
        assert text.splitlines()[2].lstrip().startswith("gpu0001"), text  # its top: summary
        assert "LinkUp" in text and "jobs: 41" in text
        assert app.screen.query_one("#detail").scroll_y == 0
        assert app.focused is app.screen.query_one("#detail")

        # A node's own updates follow it: gpu0001's port goes down while it is open.
        world.fleet.telemetry(world.ingest, faults={"gpu0001": port_down()})
        world.tick()
        await pilot.pause()
        assert "Polling" in text_of(app)
        await _close(world, pilot)


async def test_a_detail_opened_again_shows_the_live_tables_not_the_last_ones_history(
        stored_world):  # noqa: F811 (the fixture)
    world = stored_world
    app = world.app
    async with app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        await pilot_until(pilot, lambda: app.session.store is not None, "the store opened",
                          interval=0.05)
        await pilot.press("colon", *"node gpu0001", "enter")
        await pilot.pause()
        view = app.screen.query_one(HistoryView)
        loads = view.loads
        await pilot.press("h")
        await wait_loaded(pilot, view, loads)
        loads = view.loads
        await pilot.press("s", "left", "left")  # 1 h, the cursor moved
        await wait_loaded(pilot, view, loads)
        assert "History of gpu0001" in text_of(app)
        await pilot.press("1")  # the overview itself: the detail closes in its history
        await pilot.pause()
        assert isinstance(app.screen, OverviewScreen)

        frames = Frames(app)
        await pilot.press("colon", *"node gpu0002", "enter")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, NodeDetailScreen) and not screen.showing_history
        assert app.focused is screen.query_one("#detail")  # as in a new one: its keys work
        assert "node gpu0002" in text_of(app) and "GPUs" in text_of(app)
        loads = view.loads
        await pilot.press("h")
        await wait_loaded(pilot, view, loads)
        text = text_of(app)
        assert "History of gpu0002" in text and "No history of gpu0002 in the last 15 min" in text
        for shown in frames.texts:
            assert "gpu0001" not in shown, shown
            assert not any("\u2800" < ch <= "\u28ff" for ch in shown), shown  # no old plot
        await pilot.press("escape", "escape")
        await pilot.pause()
        assert isinstance(app.screen, OverviewScreen)


async def test_a_detail_on_a_detail_is_its_own(world):
    """``:node`` typed in a detail opens another over it; esc comes back to the first."""
    app = world.app
    async with app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        app.open_node("gpu0009")
        await pilot.pause()
        await pilot.press("colon", *"node gpu0003", "enter")
        world.tick()
        await pilot.pause()
        assert "node gpu0003" in text_of(app)
        await pilot.press("escape")
        world.tick()
        await pilot.pause()
        assert isinstance(app.screen, NodeDetailScreen) and "node gpu0009" in text_of(app)
        await _close(world, pilot)
        app.open_node("gpu0005")
        world.tick()
        await pilot.pause()
        assert "node gpu0005" in text_of(app)


async def test_opening_and_closing_a_detail_leaves_no_garbage_for_the_sweep(world):
    """A census bound, not a timer: the cyclic garbage (what the periodic full sweep would
    free, ``gc.DEBUG_SAVEALL``) of opening and closing details of one node after another."""
    app = world.app
    assert render_cycles.install()  # as the console runs: the strips' cycles are not the detail's
    async with app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        for node in ("gpu0002", "gpu0003"):  # the first opens: CSS, caches, imports
            app.open_node(node)
            world.tick()
            await pilot.pause()
            await _close(world, pilot)
        gc.unfreeze()  # another test's tune_gc would hide what this one makes
        gc.collect()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            for i in range(OPENS):
                app.open_node(world.fleet.names[4 + i])
                world.tick()
                await pilot.pause()
                assert isinstance(app.screen, NodeDetailScreen)
                await _close(world, pilot)
            gc.collect()
            garbage = len(gc.garbage)
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
    assert garbage <= GARBAGE_PER_OPEN * OPENS, f"{garbage / OPENS:.0f} objects per open"


async def test_the_replay_consoles_detail_shows_each_node_asked_for_and_follows_a_seek(
        monkeypatch):
    frozen_wall(monkeypatch)
    app = ReplayApp(FIXTURE, speed=1.0)
    app.auto_tick = False
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.seek_to("+30")  # past the XID 79 at ~12 s: gpu0006 failed
        await settle(pilot, app)
        app.open_node("gpu0006")
        await pilot.pause()
        text = text_of(app)
        assert "node gpu0006" in text and "failed" in text and "r drain" not in text
        await pilot.press("escape")
        await pilot.pause()
        frames = Frames(app)
        app.open_node("gpu0002")
        await pilot.pause()
        text = text_of(app)
        assert "node gpu0002" in text and "failed" not in text
        assert frames.texts and not [shown for shown in frames.texts if "gpu0006" in shown]
        await pilot.press("escape")
        await pilot.pause()
        app.open_node("gpu0006")
        await pilot.pause()
        app.seek_to("-25")  # before the XID: the open detail shows the node ok again
        await settle(pilot, app)
        await pilot.pause()
        text = text_of(app)
        assert "node gpu0006" in text and "failed" not in text, text
