"""A console whose connect burst the broker may have cut shows a fleet short of the nodes whose
births it dropped, smaller and healthier than it is. The timeline said so once a connection,
a line that scrolls away in a busy fleet: the header says it for as long as it lasts
(docs/reliability.md, "The retained burst")."""

import asyncio
from unittest.mock import patch

import fleetdeck.console.live as live_mod
from fleetdeck.console.audit import MemoryAudit
from fleetdeck.console.tui.app import FleetdeckApp
from fleetdeck.console.tui.screens.events import EventsScreen
from tests.conftest import eventually
from tests.console.test_retained_burst_cut import NODES, tiny_queue_mosquitto
from tests.console.test_statuses_the_broker_dropped import _retain_dead_agents
from tests.tui.fleet import CLUSTER, Clock, SynthFleet
from tests.tui.test_views import text_of

__all__ = ["tiny_queue_mosquitto"]  # the fixture, used by name

MISSING = "NODES MAY BE MISSING (see events)"


async def test_the_header_says_nodes_may_be_missing_when_the_burst_was_cut(
        tiny_queue_mosquitto):
    fleet = SynthFleet(NODES, Clock(), leaves=1)
    await _retain_dead_agents(tiny_queue_mosquitto, fleet)
    with patch.object(live_mod, "RECEIVE_MAXIMUM", 8):
        app = FleetdeckApp(cluster=CLUSTER, url=tiny_queue_mosquitto.url, auto_tick=False,
                           audit=MemoryAudit(), operator="t")
        async with app.run_test(size=(200, 48)) as pilot:
            await eventually(lambda: (app.tick(), app.session.burst_cut)[1], 10,
                             message="the cut seen")
            await pilot.pause()
            assert len(app.state.nodes) < NODES
            screen = text_of(app)
            assert MISSING in screen.splitlines()[0], screen
            await pilot.press("5")
            app.tick()
            await pilot.pause()
            assert isinstance(app.screen, EventsScreen)
            screen = " ".join(text_of(app).split())
            assert "burst_cut" in screen and "may have dropped part of the fleet's" in screen, (
                screen)


async def test_a_whole_burst_says_nothing_missing(tiny_queue_mosquitto):
    fleet = SynthFleet(NODES, Clock(), leaves=1)
    await _retain_dead_agents(tiny_queue_mosquitto, fleet)
    app = FleetdeckApp(cluster=CLUSTER, url=tiny_queue_mosquitto.url, auto_tick=False,
                       audit=MemoryAudit(), operator="t")
    async with app.run_test(size=(200, 48)) as pilot:
        await eventually(lambda: (app.tick(), len(app.state.nodes) == NODES)[1], 10,
                         message="every node")
        await asyncio.sleep(0.5)
        app.tick()
        await pilot.pause()
        assert MISSING not in text_of(app)
        assert not app.session.burst_cut
