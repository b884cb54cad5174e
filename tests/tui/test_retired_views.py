"""A node retired (``fleetdeck retire``: its retained birth cleared, docs/protocol.md) while
the views show it: the console forgets it (tests/console/test_retire.py); here, what the node
detail open on it, the overview's grid and problems and the node list's cursor do then."""

from textual.pilot import Pilot

from fleetdeck.console.tui.screens.node_detail import NodeDetailScreen
from fleetdeck.console.tui.screens.nodes import NodesScreen
from fleetdeck.console.tui.screens.overview import OverviewScreen
from tests.console.test_retire import clear_retained
from tests.tui.conftest import SIZE, World, open_view
from tests.tui.fleet import SynthFleet
from tests.tui.test_views import text_of


def _retire(world: World, *names: str) -> None:
    clear_retained(world.app.session, list(names))


async def _tick(world: World, pilot: Pilot) -> None:
    world.tick()
    await pilot.pause()


async def _overview(world: World, pilot: Pilot) -> OverviewScreen:
    await _tick(world, pilot)
    overview = world.app.screen
    assert isinstance(overview, OverviewScreen)
    return overview


async def test_a_detail_open_on_a_node_retired_says_so_and_drops_its_tables(world):
    """It kept the node's last GPU and port tables under "gpu0009 is not known (yet)", read
    as live, and offered drain and resume of a node no longer there."""
    app = world.app
    async with app.run_test(size=SIZE) as pilot:
        await _tick(world, pilot)
        app.open_node("gpu0009")  # a port down: "Polling" in its port table
        await _tick(world, pilot)
        text = text_of(app)
        assert "Polling" in text and "GPU  UTIL" in text and "r drain" in text

        _retire(world, "gpu0009")
        await _tick(world, pilot)
        assert isinstance(app.screen, NodeDetailScreen)
        text = " ".join(text_of(app).split())
        assert ("gpu0009 was retired at 00:00:01: its retained birth was cleared (fleetdeck "
                "retire), so it left the views, counts and incidents; who retired it, and why, "
                "is in the audit log of that retire (what: retire); the store keeps its "
                "history (h)") in text, text
        assert "not known" not in text
        for stale in ("Polling", "GPU UTIL", "InfiniBand ports", "LinkUp", "r drain"):
            assert stale not in text, stale
        # The console's own line stays in its timeline: where the node went, and when.
        assert "00:00:01 retire gpu0009 retired: its retained birth was cleared" in text

        # Born again under the name: a new node, shown live again.
        world.fleet.agents["gpu0009"].bd_seq = 2
        world.fleet.birth(world.ingest, names=["gpu0009"])
        world.fleet.telemetry(world.ingest)
        await _tick(world, pilot)
        text = text_of(app)
        assert "was retired" not in text and "GPU  UTIL" in text and "r drain" in text


async def test_the_overview_grid_drops_a_retired_node_when_another_is_born_meanwhile(world):
    """The grid's nodes were taken again only when their count changed: gpu0003 retired and
    gpu0025 born while a node detail covered the overview kept gpu0003 in the grid, and
    gpu0025 out of it."""
    app = world.app
    async with app.run_test(size=SIZE) as pilot:
        overview = await _overview(world, pilot)
        app.open_node("gpu0001")
        await _tick(world, pilot)
        _retire(world, "gpu0003")
        bigger = SynthFleet(25, world.clock)
        bigger.birth(world.ingest, names=["gpu0025"])
        bigger.telemetry(world.ingest, names=["gpu0025"])
        await _tick(world, pilot)
        await pilot.press("escape")
        await _tick(world, pilot)
        assert app.screen is overview
        ids = overview.grid.node_ids
        assert "gpu0003" not in ids and "gpu0025" in ids and len(ids) == 24


async def test_the_overview_cursor_on_a_retired_node_goes_to_the_next_and_its_problem_goes(
        world):
    """Left at its index, the grid's cursor on gpu0017 skipped gpu0018 for gpu0019 when
    gpu0003 went with it. The retired nodes' problems leave the top problems."""
    app = world.app
    async with app.run_test(size=SIZE) as pilot:
        overview = await _overview(world, pilot)
        grid = overview.grid
        await pilot.press("down")  # the grid's second line: gpu0017
        assert grid.current_node == "gpu0017"
        problems = text_of(app).split("Top problems")[1].split("■busy")[0]
        assert "gpu0003" in problems and "G12" in problems, problems  # throttled
        _retire(world, "gpu0003", "gpu0009", "gpu0017")
        await _tick(world, pilot)
        assert grid.current_node == "gpu0018"
        text = text_of(app)
        problems = text.split("Top problems")[1].split("■busy")[0]
        assert "gpu0003" not in problems and "G12" not in problems, problems
        assert "gpu0009" not in problems and "gpu0013" in problems, problems
        assert "gpu0018 gpu0" in text  # the status line under the grid follows the cursor

        grid.cursor_node = len(grid.node_ids) - 1
        assert grid.current_node == "gpu0024"
        _retire(world, "gpu0024")  # the last node: the cursor goes to the last one left
        await _tick(world, pilot)
        assert grid.current_node == "gpu0023"


async def test_the_node_list_cursor_on_a_retired_node_lands_on_the_next_and_marks_drop_it(
        world):
    """Left at its index, the cursor on gpu0017 skipped the row after it when gpu0009, above
    it, went too; a drain that follows names only nodes still there."""
    app = world.app
    async with app.run_test(size=SIZE) as pilot:
        await _tick(world, pilot)
        nodes = await open_view(world, pilot, "2", NodesScreen)
        table = nodes.table
        await pilot.press("down")
        assert table.current_key == "gpu0009"
        await pilot.press("space")  # marked, and the cursor goes on to gpu0013
        await pilot.press("down")
        assert table.marks == {"gpu0009"} and table.current_key == "gpu0017"
        after = nodes.shown[nodes.shown.index("gpu0017") + 1]
        _retire(world, "gpu0009", "gpu0017")
        await _tick(world, pilot)
        assert "gpu0009" not in nodes.shown and "gpu0017" not in nodes.shown
        assert table.current_key == after
        assert not table.marks
        assert nodes.targets() == [after]
        assert "22/22 nodes" in text_of(app) and "marked" not in text_of(app)
