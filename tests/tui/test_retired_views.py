"""A node retired (``fleetdeck retire``: its retained birth cleared, docs/protocol.md) while
the views show it: the console forgets it (tests/console/test_retire.py); here, what the node
detail open on it does then."""

from textual.pilot import Pilot

from fleetdeck.console.tui.screens.node_detail import NodeDetailScreen
from tests.console.test_retire import clear_retained
from tests.tui.conftest import SIZE, World
from tests.tui.test_views import text_of


def _retire(world: World, *names: str) -> None:
    clear_retained(world.app.session, list(names))


async def _tick(world: World, pilot: Pilot) -> None:
    world.tick()
    await pilot.pause()


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
