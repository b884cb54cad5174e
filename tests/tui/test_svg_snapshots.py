"""Colour snapshots (SVG, pytest-textual-snapshot) of the main screens, so a colour or theme
regression fails a test; the plain-text snapshots (test_snapshots.py) keep the layout. The
fleet is synthetic with a fixed seed and a frozen clock. After an intended change:
``pytest tests/tui/test_svg_snapshots.py --snapshot-update`` and review the report."""

import pytest
from rich.color import Color as RichColor
from rich.color import ColorSystem
from rich.segment import Segment
from rich.style import Style
from textual.color import Color
from textual.filter import LineFilter

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


class EightBit(LineFilter):
    """Colours as a 256-colour terminal (tmux's default) shows them: each style's colours
    downgraded the way the terminal driver does before they are drawn."""

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        return [Segment(text, _eight_bit(style) if style is not None else None, control)
                for text, style, control in segments]


def _eight_bit(style: Style) -> Style:
    def down(c: RichColor | None) -> RichColor | None:
        if c is None or c.triplet is None:
            return c
        return RichColor.from_triplet(c.downgrade(ColorSystem.EIGHT_BIT).get_truecolor())

    return style + Style.from_color(down(style.color), down(style.bgcolor))


SIZES = [(80, 24), (220, 60)]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize(("name", "keys"), [("overview", []), ("fabric", ["4"])])
def test_screen_colours_at_other_sizes(snap_compare, name, keys, size):
    """The overview's panels and the fabric matrix at tmux's default and at a wide screen."""
    world = World()
    world.populate()

    async def settle(pilot) -> None:
        world.tick()
        await pilot.pause()
        for key in keys:
            await pilot.press(key)
            await pilot.pause()
        world.app.refresh_view()
        await pilot.pause()

    assert snap_compare(world.app, terminal_size=size, run_before=settle)


@pytest.mark.parametrize(("name", "keys"), [("overview", []), ("fabric", ["4"])])
def test_screen_colours_at_256(snap_compare, name, keys):
    """The same screens through a 256-colour palette: the states still differ in colour and
    glyph where tmux's default terminal shows them."""
    world = World()
    world.populate()
    world.app._filters.append(EightBit())

    async def settle(pilot) -> None:
        world.tick()
        await pilot.pause()
        for key in keys:
            await pilot.press(key)
            await pilot.pause()
        world.app.refresh_view()
        await pilot.pause()

    assert snap_compare(world.app, terminal_size=SIZE, run_before=settle)
