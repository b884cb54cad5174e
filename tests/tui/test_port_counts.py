"""IB ports counted by what is known of them now, alike in the overview, ``status`` (its JSON
totals and its summary line) and the clusters view: a node heard from counts its ports up or
down; a silent node's ports are unknown, whatever its last sample said (a cluster whose
simulator died read 512/512 IB up beside 0 usable GPUs)."""

import io

from rich.console import Console

from fleetdeck.console.cli.status import render_summary
from fleetdeck.console.summary import fleet_summary
from fleetdeck.console.tui.screens.clusters import ClustersScreen
from tests.tui.conftest import SIZE, World
from tests.tui.fleet import port_down
from tests.tui.test_views import text_of


def status_line(world: World) -> str:
    out = io.StringIO()
    render_summary(fleet_summary(world.app.state, world.clock()), Console(file=out, width=300))
    return out.getvalue().splitlines()[0]


def port_totals(world: World) -> tuple[int, int, int, int]:
    t = fleet_summary(world.app.state, world.clock())["totals"]
    return t["ib_ports"], t["ib_ports_up"], t["ib_ports_down"], t["ib_ports_unknown"]


async def test_silent_nodes_ports_are_unknown_not_up_in_every_view():
    world = World()
    world.fleet.birth(world.ingest)
    world.fleet.telemetry(world.ingest, faults={"gpu0009": port_down()})
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        # 24 nodes x 8 ports, one down on gpu0009.
        assert "IB ports 192  down 1" in text_of(world.app)
        assert "unknown" not in text_of(world.app)
        assert port_totals(world) == (192, 191, 1, 0)
        assert "IB up 191/192  " in status_line(world)
        await pilot.press("0")
        await pilot.pause()
        assert isinstance(world.app.screen, ClustersScreen)
        [row] = world.app.screen.rows
        assert (row.ib_ports_up, row.ib_ports_unknown) == (191, 0)
        assert "191/192" in text_of(world.app)

        # The fleet falls silent (its simulator died): no port is known up, in every view.
        world.tick(10.0)
        await pilot.pause()
        [row] = world.app.screen.rows
        assert (row.ib_ports_up, row.ib_ports_unknown) == (0, 192)
        assert row.as_json()["ib_ports_unknown"] == 192
        assert "0/192" in text_of(world.app) and "192/192" not in text_of(world.app)
        assert port_totals(world) == (192, 0, 0, 192)
        assert "IB up 0/192 (unknown 192)" in status_line(world)
        await pilot.press("1")
        await pilot.pause()
        assert "IB ports 192  down 0" in text_of(world.app)
        assert "unknown 192" in text_of(world.app)

        # Half of it speaks again: their ports count, the rest stay unknown.
        world.fleet.telemetry(world.ingest, names=world.fleet.names[:12],
                              faults={"gpu0009": port_down()})
        world.tick()
        await pilot.pause()
        assert port_totals(world) == (192, 95, 1, 96)
        assert "unknown 96" in text_of(world.app)
