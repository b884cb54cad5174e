"""A node retired (``fleetdeck retire``: its retained birth cleared, docs/protocol.md) while
the views show it: the console forgets it (tests/console/test_retire.py); here, what the node
detail open on it and the overview's grid do then."""

from textual.pilot import Pilot

from fleetdeck.console.tui.screens.node_detail import NodeDetailScreen
from fleetdeck.console.tui.screens.overview import OverviewScreen
from tests.console.test_retire import clear_retained
from tests.tui.conftest import SIZE, World
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
