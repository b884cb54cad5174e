"""A re-sort of the node list starts it at its head, the cursor kept on its node: the list kept
its old scroll, and after a reversed sort left at its far end, HEALTH showed its 4th worst node
as the first row, the 3 worst above it out of sight with the screen room to show them (an SRE
run, 512 nodes at 200x50)."""

from fleetdeck.console.tui.screens.nodes import NodesScreen
from tests.tui.conftest import World, open_view


async def test_a_resort_shows_the_head_of_the_list_with_the_cursor_kept():
    world = World(n=64)
    world.populate()
    async with world.app.run_test(size=(160, 30)) as pilot:
        world.tick()
        await pilot.pause()
        screen = await open_view(world, pilot, "2", NodesScreen)
        table = screen.table
        worst = list(screen.shown[:4])
        assert worst == ["gpu0003", "gpu0009", "gpu0013", "gpu0017"]
        await pilot.press("O", "end", "up", "up", "up")  # the worst four are last, reversed
        world.tick()
        await pilot.pause()
        assert table.current_key == "gpu0017" and table.top > 4
        await pilot.press("O")  # worst first again
        world.tick()
        await pilot.pause()
        assert table.current_key == "gpu0017"
        assert table.top == 0, "the three worst nodes were scrolled out of sight above"
        await pilot.press("end", "o")  # another column: its head too
        world.tick()
        await pilot.pause()
        assert table.top == 0 or table.cursor >= table.visible_rows
