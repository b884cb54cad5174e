"""The node list and the overview's grid keep their nodes in containers the GC stops tracking:
the periodic full sweep (``fleetdeck/runtime.py`` ``sweep``) follows every reference of every
tracked object, and a list of every node id held by a view was 16,384 references walked per
sweep, each a cache miss, in a stall the operator sees (issue 12)."""

import gc

from fleetdeck.console.tui.screens.nodes import NodesScreen
from fleetdeck.console.tui.screens.overview import OverviewScreen
from tests.tui.conftest import SIZE, World
from tests.tui.fleet import port_down

N = 300


async def test_the_shown_nodes_and_the_grids_leave_the_gcs_view():
    world = World(N)
    fleet = world.fleet
    fleet.birth(world.ingest)
    fleet.telemetry(world.ingest, faults={n: port_down() for n in fleet.names[::7]})
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        overview = world.app.screen
        assert isinstance(overview, OverviewScreen)
        grid = overview.grid
        assert len(grid.node_ids) == N
        await pilot.press("2")
        await pilot.pause()
        nodes = world.app.screen
        assert isinstance(nodes, NodesScreen)
        seen = []
        for keys in (("o",), ("o",), ("O",), ("ctrl+z",), ("ctrl+z", "o")):
            await pilot.press(*keys)
            world.tick()
            await pilot.pause()
            shown = nodes.shown
            assert nodes.table.rows is shown
            gc.collect()
            gc.collect()
            seen.append((nodes.sort_key, nodes.sort_reverse, nodes.unhealthy_only, len(shown),
                         gc.is_tracked(shown)))
        gc.collect()
        gc.collect()
        # Every order the operator asked for, all N nodes or the unhealthy ones, none tracked.
        assert seen == [("gpus", False, False, N, False), ("util", False, False, N, False),
                        ("util", True, False, N, False),
                        ("util", True, True, len(fleet.names[::7]), False),
                        ("temp", False, False, N, False)]
        assert not gc.is_tracked(grid.node_ids)


async def test_the_rows_a_text_filter_built_leave_the_gcs_view():
    """A text filter (not a hostlist) reads every node's row, and the list keeps each one
    built: 16,384 tracked rows at full size, walked by every sweep."""
    world = World(N)
    world.fleet.birth(world.ingest)
    world.fleet.telemetry(world.ingest)
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.press("2")
        await pilot.pause()
        nodes = world.app.screen
        assert isinstance(nodes, NodesScreen)
        await pilot.press("slash", *"ok", "enter")
        world.tick()
        await pilot.pause()
        assert nodes.filter.text == "ok" and len(nodes.shown) == N
        kept = [row for _sig, row in nodes._rows.values()]
        assert len(kept) == N
        gc.collect()
        assert sum(map(gc.is_tracked, kept)) == 0
