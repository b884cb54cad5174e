"""At 80 columns the footer keeps the keys every view needs (help, quit, filter, the command
line, the commands) and leaves off the view's lesser ones, which `?` lists: it dropped
"/ Filter" and ": cmd" at 80x24 while it showed "w/W Worst" and "{/} Leaf"."""

import pytest

from tests.tui.conftest import World
from tests.tui.test_views import text_of


async def footer_of_view(world, pilot, key: str) -> str:
    """The footer line once ``key`` switched views and a tick painted it."""
    world.tick()
    await pilot.pause()
    await pilot.press(key)
    world.tick()
    await pilot.pause()
    await pilot.pause()
    return text_of(world.app).splitlines()[-1]


@pytest.mark.parametrize(("key", "wanted"), [
    ("1", ["? Help", "q Quit", "/ Filter nodes", ": :cmd"]),
    ("2", ["? Help", "q Quit", "/ Filter", ": :cmd", "r Drain"]),
    ("5", ["? Help", "q Quit", "/ Filter", ": :cmd"]),
], ids=["overview", "nodes", "events"])
async def test_the_80_column_footer_keeps_filter_and_the_command_line(key, wanted):
    world = World()
    world.populate()
    async with world.app.run_test(size=(80, 24)) as pilot:
        footer = await footer_of_view(world, pilot, key)
        for k in wanted:
            assert f" {k} " in footer, footer


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
@pytest.mark.parametrize(("key", "wanted"), [
    ("3", ["⏎ Its nodes"]),
    ("6", ["⏎ Its nodes", "↑↓ Timeline"]),
], ids=["jobs", "incidents"])
async def test_the_jobs_and_incidents_footers_say_what_enter_and_the_arrows_do(key, wanted,
                                                                              size):
    """The jobs view's footer named only "r Restart" under a line that said "enter: its
    nodes", and the incidents view's had no key of its own, where the overview's and the
    fabric's say "⏎ Detail" and "⏎ Node" (a newcomer's run). Enter still does it."""
    world = World()
    world.populate()
    async with world.app.run_test(size=size) as pilot:
        footer = await footer_of_view(world, pilot, key)
        for k in wanted:
            assert f" {k} " in footer, footer
        await pilot.press("enter")
        world.tick()
        await pilot.pause()
        assert world.app.current_mode == "nodes"


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (160, 48)],
                         ids=["80x24", "100x30", "160x48"])
@pytest.mark.parametrize("key", list("123456"))
async def test_the_footer_shows_only_keys_that_fit_whole(key, size):
    """At 80x24 the overview's footer ended "w/W ▏^p palette": the key, its label "Worst" cut
    under the palette's (a newcomer's run). A key that does not fit whole is left off (`?`
    lists it); one that fits is not."""
    world = World()
    world.populate()
    async with world.app.run_test(size=size) as pilot:
        footer = await footer_of_view(world, pilot, key)
        keys = [part.strip() for part in footer.split("▏")[0].split("  ") if part.strip()]
        assert all(" " in k for k in keys), footer  # each key with its label
        if key == "1" and size[0] >= 100:
            assert " w/W Worst " in footer, footer
