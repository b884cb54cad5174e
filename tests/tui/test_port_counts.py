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
        assert "IB up 191/192 (down 1, erroring 0)  " in status_line(world)
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
        assert "IB up 0/192 (down 0, erroring 0, unknown 192)" in status_line(world)
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


async def test_status_counts_gpus_and_ports_in_the_overview_headers_words():
    """`status` said "GPUs usable 464/512" beside the header's "in use 464" of another number,
    and had no erroring ports at all (a newcomer's run): the same words, the same figures."""
    import re

    from msgspec.structs import replace

    def symbol_storm(tel):
        return replace(tel, ib_ports=[
            replace(p, symbol_error=int(tel.ts // 1000) % 10**6 * 500)
            if p.dev == "mlx5_ib4" else p for p in tel.ib_ports])

    world = World()
    world.fleet.birth(world.ingest)
    world.fleet.telemetry(world.ingest, faults={"gpu0009": port_down(),
                                                "gpu0010": symbol_storm})
    async with world.app.run_test(size=SIZE) as pilot:
        for _ in range(3):
            world.fleet.telemetry(world.ingest, faults={"gpu0009": port_down(),
                                                        "gpu0010": symbol_storm})
            world.tick()
        await pilot.pause()
        header = text_of(world.app)
        line = status_line(world)
        for word in ("in use", "free", "failed", "out"):
            shown = re.search(rf"\b{word} (\d+)", header)
            said = re.search(rf"\b{word} (\d+)", line)
            assert shown and said and shown.group(1) == said.group(1), (word, line)
        erroring = re.search(r"erroring (\d+)", header)
        assert erroring and int(erroring.group(1)) > 0
        assert f"erroring {erroring.group(1)}" in line, line
        assert (fleet_summary(world.app.state, world.clock())["totals"]["ib_ports_erroring"]
                == int(erroring.group(1)))


async def test_the_fabric_leaves_table_does_not_call_its_clean_ports_up():
    """`status` says "IB up 504/512 (erroring 17)": an erroring port's link is up. The fabric
    view's leaves table counted only clean ports under "UP", apart from ERR: its column summed
    to 487 beside status's 504 (a 3 a.m. drive on the demo). Its clean ports are "OK", as the
    matrix's ■ok, and with ERR and FLAP they make status's up."""
    import re

    from msgspec.structs import replace

    from fleetdeck.console.tui.screens.fabric import FabricScreen

    def symbol_storm(tel):
        return replace(tel, ib_ports=[
            replace(p, symbol_error=int(tel.ts // 1000) % 10**6 * 500)
            if p.dev == "mlx5_ib4" else p for p in tel.ib_ports])

    world = World()
    world.fleet.birth(world.ingest)
    async with world.app.run_test(size=SIZE) as pilot:
        for _ in range(3):
            world.fleet.telemetry(world.ingest, faults={"gpu0010": symbol_storm})
            world.tick()
        await pilot.press("4")
        world.tick()
        await pilot.pause()
        screen = world.app.screen
        assert isinstance(screen, FabricScreen)
        assert sum(leaf.erroring for leaf in screen.leaves) == 1
        (head,) = [ln for ln in text_of(world.app).splitlines()
                   if "LEAF" in ln and "PORTS" in ln]
        assert re.search(r"\bOK\b", head) and not re.search(r"\bUP\b", head), head
        _, up, _, _ = port_totals(world)
        assert up == sum(leaf.up + leaf.erroring + leaf.flapping for leaf in screen.leaves)
