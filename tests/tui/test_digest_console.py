"""``console --digests`` against real node agents and a real sharded collector over a real
Mosquitto: the views show the collector's verdicts and owner, node detail receives the node's
raw telemetry only while open, and a drain from the digest console ends DRAINED."""

import asyncio
import time

from fleetdeck.agents.agent import NodeAgent
from fleetdeck.agents.sim.node import SimNode
from fleetdeck.console.audit import MemoryAudit
from fleetdeck.console.commands import Phase
from fleetdeck.console.health import Verdict
from fleetdeck.console.tui.app import FleetdeckApp
from fleetdeck.console.tui.modals import DrainScreen
from fleetdeck.console.tui.screens.node_detail import NodeDetailScreen
from fleetdeck.protocol.topics import node_filter
from tests.conftest import eventually, start_collector

CLUSTER = "dig"


async def test_digest_console_views_detail_and_drain(mosquitto):
    stop = asyncio.Event()
    agents = [NodeAgent(cluster=CLUSTER, node_id=f"gpu{i:04d}", source=SimNode(f"gpu{i:04d}"),
                        url=mosquitto.url, interval_s=0.2, phase_s=0.0) for i in (1, 2, 3)]
    tasks = [asyncio.create_task(a.run(stop)) for a in agents]
    tasks.append(start_collector(CLUSTER, mosquitto.url, stop)[2])
    audit = MemoryAudit()
    app = FleetdeckApp(cluster=CLUSTER, url=mosquitto.url, auto_tick=False, audit=audit,
                       operator="erin", digests=True)
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            await eventually(lambda: (app.tick(), len(app.state.nodes) == 3 and all(
                st.verdict is Verdict.OK for st in app.state.nodes.values()))[1], timeout=20,
                message="three nodes from digests")
            st = app.state.nodes["gpu0002"]
            assert st.digest is not None and st.digest.by == "shard-1"
            assert st.birth is not None and st.birth.source == "digest"  # no raw birth read
            assert not st.raw and st.gpus_present == 8
            link = app.session.feed.link
            watched = node_filter(CLUSTER, "gpu0002")
            assert watched not in link.filters

            app.open_node("gpu0002")
            await pilot.pause()
            assert isinstance(app.screen, NodeDetailScreen)
            assert watched in link.filters
            assert "on digests, 1 collector" in app.header_text(time.time())
            await eventually(lambda: (app.tick(), st.raw and st.birth is not None
                                      and st.birth.source != "digest")[1], timeout=10,
                             message="the node's raw birth and telemetry while open")
            assert st.verdict is Verdict.OK and st.digest is not None  # still the collector's
            await pilot.press("escape")
            await pilot.pause()
            assert watched not in link.filters and not st.raw
            # Another node's detail (the same screen, reused) watches that node only, and
            # goes on watching it under a dialog; closed, it watches none.
            other = node_filter(CLUSTER, "gpu0001")
            app.open_node("gpu0001")
            await pilot.pause()
            assert other in link.filters and watched not in link.filters
            await pilot.press("r")
            await pilot.pause()
            assert isinstance(app.screen, DrainScreen) and other in link.filters
            await pilot.press("escape", "escape")
            await pilot.pause()
            assert not isinstance(app.screen, NodeDetailScreen)
            assert other not in link.filters and watched not in link.filters

            app.request_drain(["gpu0003"])
            await pilot.pause()
            assert isinstance(app.screen, DrainScreen)
            await pilot.press(*"bad fan", "enter")
            await pilot.pause()
            req = next(iter(app.tracker.requests.values()))
            await eventually(lambda: (app.tick(), req.phase is Phase.DONE)[1], timeout=20,
                             message="DRAINED seen in the collector's digest")
            drained = app.state.nodes["gpu0003"]
            assert drained.drain.reason == "bad fan" and drained.digest is not None
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
