"""The overview's fabric panel claims all ports ok only when it has heard from them: a fleet
whose agents died (a SIGKILLed simulator) read "✓ all 24 rail switches ok: every port up"
under a header of "unknown 384"."""

from tests.tui.conftest import World
from tests.tui.test_overview_panels import overview, panel_text


async def test_fabric_panel_does_not_call_silent_ports_ok():
    world = World()
    world.fleet.birth(world.ingest)
    world.fleet.telemetry(world.ingest)
    async with world.app.run_test(size=(160, 48)) as pilot:
        screen = await overview(world, pilot)
        fabric = panel_text(screen, "fabric-panel")
        assert "✓ all 32 rail switches ok" in fabric, fabric
        world.tick(600)  # every agent silent since
        world.app.refresh_view()
        await pilot.pause()
        fabric = panel_text(screen, "fabric-panel")
        assert "ok" not in fabric.splitlines()[0], fabric
        assert "no data from 192 ports" in fabric, fabric
        assert "leaf00 r0-7 ········  6 nodes" in fabric, fabric


async def test_fabric_panel_says_how_many_ports_it_has_not_heard_from():
    world = World()
    world.fleet.birth(world.ingest)
    world.fleet.telemetry(world.ingest)
    async with world.app.run_test(size=(160, 48)) as pilot:
        screen = await overview(world, pilot)
        world.tick(600)
        world.fleet.telemetry(world.ingest, names=world.fleet.names[:20])  # 4 nodes silent
        world.tick()
        world.app.refresh_view()
        await pilot.pause()
        fabric = panel_text(screen, "fabric-panel")
        assert "every port up" not in fabric, fabric
        assert "no data from 32 of 192 ports (their nodes are silent)" in fabric, fabric


async def test_fabric_panel_tells_nodes_not_heard_from_yet_from_silent_ones():
    """Nodes born that had not sent their first sample yet (agents at --interval 10) read
    "(their nodes are silent)": they are not silent, only not heard from yet."""
    world = World()
    world.fleet.birth(world.ingest)
    world.fleet.telemetry(world.ingest, names=world.fleet.names[:20])  # 4 not heard from yet
    async with world.app.run_test(size=(160, 48)) as pilot:
        screen = await overview(world, pilot)
        fabric = panel_text(screen, "fabric-panel")
        assert ("no data from 32 of 192 ports (their nodes are not heard from yet)"
                in fabric), fabric


async def test_the_fabric_views_count_of_bad_ports_says_one_port_in_the_singular():
    """"1 bad ports in total" under one flapping port (a newcomer's run)."""
    from tests.tui.fleet import port_down
    from tests.tui.test_fabric_matrix import open_fabric

    world = World()
    world.fleet.birth(world.ingest)
    world.fleet.telemetry(world.ingest, faults={"gpu0006": port_down("mlx5_ib5")})
    async with world.app.run_test(size=(160, 48)) as pilot:
        screen = await open_fabric(world, pilot)
        hints = screen.query_one("#fabric-hints").render().plain
        assert hints.endswith("1 bad port in total"), hints


async def test_the_fabric_panel_says_silent_and_not_heard_yet_within_its_width():
    """Beside the jobs at 120 columns the panel is 58 cells: "(32 on silent nodes, 32 on…"
    hid how many ports were on nodes not heard from yet (a review)."""
    world = World()
    world.fleet.birth(world.ingest, names=world.fleet.names[:20])
    world.fleet.telemetry(world.ingest, names=world.fleet.names[:20])
    world.tick(600)
    world.fleet.telemetry(world.ingest, names=world.fleet.names[:16])  # 4 silent
    world.fleet.birth(world.ingest, names=world.fleet.names[20:])  # 4 not heard from yet
    async with world.app.run_test(size=(120, 40)) as pilot:
        screen = await overview(world, pilot)
        fabric = panel_text(screen, "fabric-panel")
        width = screen.query_one("#fabric-panel").content_size.width
        assert "no data from 64 of 192 ports" in fabric, fabric
        assert "32 on silent nodes, 32 on nodes not heard from yet" in fabric, fabric
        assert max(len(line) for line in fabric.splitlines()) <= width, (width, fabric)


async def test_the_fabric_panel_says_not_heard_yet_shorter_where_narrow():
    world = World()
    world.fleet.birth(world.ingest)
    world.fleet.telemetry(world.ingest, names=world.fleet.names[:20])  # 4 not heard from yet
    async with world.app.run_test(size=(120, 40)) as pilot:
        screen = await overview(world, pilot)
        fabric = panel_text(screen, "fabric-panel")
        width = screen.query_one("#fabric-panel").content_size.width
        assert "no data from 32 of 192 ports (not heard from yet)" in fabric, fabric
        assert max(len(line) for line in fabric.splitlines()) <= width, (width, fabric)
