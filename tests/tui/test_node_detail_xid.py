"""The node detail's XID column shows the XID that matters, as the findings name it: after
XID 119 then 45 (the driver's clean-up) it read 45 beside "G2 gpu3: XID 119"."""

import pytest

from fleetdeck.console.health import Severity, worst_xid
from tests.tui.conftest import World
from tests.tui.test_views import open_first_node


def _xid_then_45(world: World, node: str = "gpu0001", gpu: int = 3) -> None:
    src = world.fleet.src(node)
    src.xid(gpu, [119, 45], 0.0, int(world.clock() * 1000))
    world.clock.advance(1)
    world.fleet.telemetry(world.ingest)


def test_worst_xid_is_the_gravest_of_the_window_not_the_last():
    world = World()
    world.fleet.src("gpu0001").xid(3, [119, 45], 0.0, int(world.clock() * 1000))
    world.clock.advance(1)
    tel = world.fleet.agents["gpu0001"].telemetry()
    g = next(g for g in tel.gpus if g.index == 3)
    assert g.xid_last == 45
    assert worst_xid(g, tel.ts) == (119, Severity.DRAIN)
    other = next(g for g in tel.gpus if g.index == 2)
    assert worst_xid(other, tel.ts) is None


@pytest.mark.parametrize("size", [(160, 48), (80, 24)], ids=["160x48", "80x24"])
async def test_node_detail_xid_column_shows_the_drain_class_xid(size):
    world = World()
    world.populate()
    _xid_then_45(world)
    async with world.app.run_test(size=size) as pilot:
        world.tick()
        await pilot.pause()
        text = await open_first_node(world, pilot)
        header = next(ln for ln in text.splitlines() if ln.split()[:1] == ["GPU"])
        at = header.index("XID")
        row = next(ln for ln in text.splitlines() if ln.lstrip().startswith("3 "))
        assert row[at:at + 4].strip() == "119", text
