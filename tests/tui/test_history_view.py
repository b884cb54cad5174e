"""Node detail's history charts, driven with Pilot against a real SQLite store whose rows the
test writes through the store API (``Store.write_rows``): the charts, the span key, the time
cursor and its values; and the plain sentence when there is no store."""

import asyncio

import pytest

from fleetdeck.console.node_history import SPANS
from fleetdeck.console.store import Store, TickRows
from fleetdeck.console.tui.history_view import PLOT_AFTER_S, ChartBox, HistoryView
from fleetdeck.console.tui.screens.node_detail import NodeDetailScreen
from tests.tui.conftest import SIZE, World, pilot_until
from tests.tui.test_snapshots import check
from tests.tui.test_views import text_of

NODE = "gpu0001"
MINUTES = 30
"""Rows for the last 30 minutes: more than the 15 min span, less than 1 h."""


def gpu_temp(gpu: int, minute: int) -> float:
    return 50.0 + gpu + minute % 7


def rows_for(now: float) -> TickRows:
    last = int(now // 60)
    gpu, ports = [], []
    for minute in range(last - MINUTES, last):
        for g in range(8):
            gpu.append((NODE, g, minute, 60, 90.0, gpu_temp(g, minute), 400.0 + g, 1980.0, 1))
        for p in range(8):
            ports.append((NODE, f"mlx5_ib{p}", minute, 60, 2.5e10, 2.4e10,
                          3 if (p == 2 and minute == last - 5) else 0, 0, 0))
    return TickRows(gpu=gpu, ports=ports)


@pytest.fixture
async def stored_world(tmp_path):
    world = World()
    world.populate()
    db = tmp_path / "history.db"
    store = await Store.open(db)
    try:
        await store.write_rows(rows_for(world.clock()))
    finally:
        await store.close()
    world.app.stores[world.app.cluster] = db
    return world


async def open_history(world: World, pilot) -> HistoryView:
    world.tick()
    await pilot.pause()
    await pilot_until(pilot, lambda: world.app.session.store is not None, "the store opened",
                      interval=0.05)
    await pilot.press("colon", *f"node {NODE}", "enter")  # as an operator opens it
    await pilot.pause()
    assert isinstance(world.app.screen, NodeDetailScreen)
    assert world.app.screen.node_id == NODE
    view = world.app.screen.query_one(HistoryView)
    loads = view.loads
    await pilot.press("h")
    await wait_loaded(pilot, view, loads)
    return view


async def wait_loaded(pilot, view: HistoryView, loads: int) -> None:
    """Until the store's read (a worker) is shown, its plots drawn (once laid out)."""
    await pilot_until(pilot, lambda: view.loads > loads, "the store's read", interval=0.02)
    hist = view.hist
    if view.error is None and hist is not None and not hist.empty:
        await wait_plotted(pilot, view)
    await pilot.pause()


def plotted_at_cursor(view: HistoryView) -> bool:
    hist = view.hist
    return (hist is not None and view.plotted is not None
            and view.plotted[1] == view.cursor.where(hist))


async def wait_plotted(pilot, view: HistoryView) -> None:
    """Until the plots show the cursor where it is: after a move they are drawn by a timer,
    PLOT_AFTER_S after the last key (a fixed pause was too short on a loaded machine)."""
    await pilot_until(pilot, lambda: plotted_at_cursor(view), "the plots at the cursor",
                      interval=PLOT_AFTER_S)
    await pilot.pause()


async def test_history_charts_span_and_cursor(stored_world):
    world = stored_world
    async with world.app.run_test(size=SIZE) as pilot:
        view = await open_history(world, pilot)
        text = text_of(world.app)
        assert "History of gpu0001" in text
        for title in ("GPU temperature (max)", "GPU power", "SM clock (min)", "IB transmit",
                      "IB receive", "IB symbol errors", "IB link downed"):
            assert title in text
        hist = view.hist
        assert hist is not None and hist.span == SPANS[0]
        # 15 min shown: the window's minutes only, though the store holds 30.
        last = int(world.clock() // 60)
        assert hist.minutes == list(range(last - 15, last))
        # The cursor follows the newest minute; its values are printed above each chart.
        newest = last - 1
        temp_line = str(view.query_one("#chart-temp", ChartBox).query_one(".chart-values")
                        .render())
        assert f"3:{gpu_temp(3, newest):.0f}" in temp_line
        # Braille plot cells are drawn (a real plot, not an empty box).
        assert any("\u2800" < ch <= "\u28ff" for ch in text)

        await pilot.press("left", "left", "left", "left", "left")
        await pilot.pause()
        at = last - 6
        assert view.cursor.where(hist) == at
        text = text_of(world.app)
        from fleetdeck.console.node_history import hhmm

        assert f"cursor {hhmm(at)} UTC" in text
        temp_line = str(view.query_one("#chart-temp", ChartBox).query_one(".chart-values")
                        .render())
        assert f"3:{gpu_temp(3, at):.0f}" in temp_line
        await pilot.press("right")
        await pilot.pause()
        sym = str(view.query_one("#chart-ib_symbol", ChartBox).query_one(".chart-values")
                  .render())
        assert "2:3" in sym  # mlx5_ib2 had 3 symbol errors in that minute
        await pilot.press("end")
        assert view.cursor.following

        loads = view.loads
        await pilot.press("s")
        await wait_loaded(pilot, view, loads)
        assert view.hist is not None and view.hist.span == SPANS[1]
        assert len(view.hist.minutes) == MINUTES
        assert "1 h" in text_of(world.app)

        await pilot.press("escape")  # back to the live tables, still in node detail
        await pilot.pause()
        assert isinstance(world.app.screen, NodeDetailScreen)
        assert not world.app.screen.showing_history


async def test_ib_throughput_is_gbits_live_and_in_history(stored_world):
    """One unit for IB, as link rates are given (400 Gb/s): the live port table and the
    history charts read the same traffic alike (a UX audit saw Gb/s live, GB/s in history)."""
    from fleetdeck.console.rows import ib_throughput_text

    world = stored_world
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        await pilot.press("colon", *f"node {NODE}", "enter")
        await pilot.pause()
        text = text_of(world.app)
        for header in ("RATE Gb/s", "TX Gb/s", "RX Gb/s"):
            assert header in text
        port = world.app.state.nodes[NODE].telemetry.ib_ports[0]
        assert port.xmit_Bps is not None
        assert ib_throughput_text(25e9) == "200" and ib_throughput_text(9e3) == "<0.1"
        assert "mlx5_ib0:1" in text and ib_throughput_text(port.xmit_Bps) in text
        view = world.app.screen.query_one(HistoryView)
        loads = view.loads
        await pilot.press("h")
        await wait_loaded(pilot, view, loads)
        text = text_of(world.app)
        assert "IB transmit Gb/s" in text and "IB receive Gb/s" in text
        tx = str(view.query_one("#chart-ib_tx", ChartBox).query_one(".chart-values").render())
        assert "0:200 " in tx  # 2.5e10 bytes/s stored = 200 Gb/s, as the live table says
        assert "GB/s" not in text


async def test_no_store_says_so(world):
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        await pilot.press("2", "enter")
        await pilot.pause()
        await pilot.press("h")
        await pilot.pause()
        text = text_of(world.app)
        assert "No history store" in text and "--no-store" in text
        assert "GPU temperature" not in text


async def test_store_without_rows_yet_says_so(world, tmp_path):
    world.app.stores[world.app.cluster] = tmp_path / "empty.db"
    async with world.app.run_test(size=SIZE) as pilot:
        view = await open_history(world, pilot)
        assert view.hist is not None and view.hist.empty
        text = text_of(world.app)
        assert "No history of gpu0001 in the last 15 min yet" in text


@pytest.mark.parametrize("size", [(80, 24), (220, 60)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_history_fits_small_and_large_terminals(stored_world, size):
    world = stored_world
    async with world.app.run_test(size=size) as pilot:
        await open_history(world, pilot)
        text = text_of(world.app)
        lines = text.splitlines()
        assert len(lines) == size[1] and all(len(line) <= size[0] for line in lines)
        assert "GPU utilisation" in text
        assert any("\u2800" < ch <= "\u28ff" for ch in text)


@pytest.mark.parametrize("size", [SIZE, (80, 24), (220, 60)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_history_snapshot(stored_world, size):
    """The charts as text (tests/tui/snapshots/node_history_data*.txt): fixed rows, a frozen
    clock, so plotext draws the same cells every run."""
    world = stored_world
    async with world.app.run_test(size=size) as pilot:
        view = await open_history(world, pilot)
        await pilot.press("left", "left")
        await wait_plotted(pilot, view)
        name = "node_history_data"
        check(name if size == SIZE else f"{name}@{size[0]}x{size[1]}", text_of(world.app))


async def test_a_store_that_fails_to_read_is_a_sentence_not_a_dead_worker(stored_world):
    world = stored_world
    async with world.app.run_test(size=SIZE) as pilot:
        view = await open_history(world, pilot)
        store = world.app.session.store
        assert store is not None
        await store.db.execute("DROP TABLE port_minutes")  # the next read fails in SQLite
        loads = view.loads
        await pilot.press("s")
        await wait_loaded(pilot, view, loads)
        text = text_of(world.app)
        assert "Cannot read the history store: no such table: port_minutes" in text
        assert "worker" not in text.splitlines()[0]  # the header names no failed worker
        assert not world.app.session.problems


def test_history_colours(snap_compare, tmp_path):
    """The charts in colour (SVG, pytest-textual-snapshot): each series' line and its label in
    the readout share a colour, the cursor line is the theme's text colour."""
    world = World()
    world.populate()
    db = tmp_path / "history.db"

    async def write() -> None:
        store = await Store.open(db)
        try:
            await store.write_rows(rows_for(world.clock()))
        finally:
            await store.close()

    asyncio.run(write())

    async def settle(pilot) -> None:
        # The app's first tick (after its first refresh) applies the populated fleet; waited
        # for, so the header's "upd … ago" does not depend on whether it ran before or after
        # open_history's tick (it read 0.0s or 0.5s by the race, and the snapshot failed).
        await pilot_until(pilot, lambda: world.app.state.last_update is not None,
                          "the app's first tick")
        world.app.stores[world.app.cluster] = db
        await world.app.session.open_store(db)
        view = await open_history(world, pilot)
        await pilot.press("left", "left")
        await wait_plotted(pilot, view)

    assert snap_compare(world.app, terminal_size=SIZE, run_before=settle)


async def test_small_terminal_pages_through_the_charts(stored_world):
    world = stored_world
    async with world.app.run_test(size=(80, 24)) as pilot:
        await open_history(world, pilot)
        assert "GPU utilisation" in text_of(world.app)
        assert "IB link downed" not in text_of(world.app)
        for _ in range(8):
            await pilot.press("pagedown")
        await pilot.pause()
        assert "IB link downed" in text_of(world.app)
        await pilot.press("home")  # the cursor's key, not the scroll: the charts stay put
        await pilot.pause()
        assert "IB link downed" in text_of(world.app)


async def test_the_plots_follow_the_cursor_when_textual_drops_one_shot_timers(
        stored_world, monkeypatch):
    """A moved cursor's plots were a one-shot timer PLOT_AFTER_S on, and Textual 8.2's one-shot
    timer skips its only call when its task's two clock reads are more than its delay apart
    (a loaded host): the charts kept the old cursor's line until the next reload, RELOAD_S
    later (docs/reliability.md, "The console's tick"). Here every read of the timers' clock is
    2 ms on from the last, as if preempted each time, and the plot is due 1 ms after a move."""
    import textual.timer
    from textual import _time

    from fleetdeck.console.tui import history_view

    world = stored_world
    ahead = [0.0]

    def preempted() -> float:
        ahead[0] += 0.002
        return _time.get_time() + ahead[0]

    clock = type("Clock", (), {"get_time": staticmethod(preempted),
                               "sleep": staticmethod(_time.sleep)})
    async with world.app.run_test(size=SIZE) as pilot:
        view = await open_history(world, pilot)
        hist = view.hist
        assert hist is not None and plotted_at_cursor(view)
        monkeypatch.setattr(history_view, "PLOT_AFTER_S", 0.001)
        monkeypatch.setattr(textual.timer, "_time", clock)
        await pilot.press("left", "left")
        assert view.cursor.where(hist) == hist.minutes[-3]
        # Well inside RELOAD_S (20 s), whose reload plots the cursor as well.
        await pilot_until(pilot, lambda: plotted_at_cursor(view), "the plots at the cursor",
                          timeout=5)
