"""Colour snapshots (SVG, pytest-textual-snapshot) of the main screens, so a colour or theme
regression fails a test; the plain-text snapshots (test_snapshots.py) keep the layout. The
fleet is synthetic with a fixed seed and a frozen clock. After an intended change:
``pytest tests/tui/test_svg_snapshots.py --snapshot-update`` and review the report."""

import pytest

from tests.tui.conftest import SIZE, World


@pytest.mark.parametrize(("name", "keys"), [
    ("overview", []),
    ("nodes", ["2"]),
    ("jobs", ["3"]),
    ("fabric", ["4"]),
    ("incidents", ["6"]),
    ("node_detail", ["2", "enter"]),
    ("node_history", ["2", "enter", "h"]),
])
def test_screen_colours(snap_compare, name, keys):
    world = World()
    world.populate()

    async def ticked(pilot) -> None:
        world.tick()
        await pilot.pause()

    async def settle(pilot) -> None:
        await ticked(pilot)
        for key in keys:
            await pilot.press(key)
            await pilot.pause()
        world.app.refresh_view()
        await pilot.pause()

    assert snap_compare(world.app, terminal_size=SIZE, run_before=settle)
