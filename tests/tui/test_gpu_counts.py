"""GPUs counted by what they can do, alike in the overview, ``status --json`` and the clusters
view: a node failed for an IB port puts its sound GPUs out, not failed; only a GPU with a fault
of its own (here: fallen off the bus) is failed; a cluster gone silent has no usable GPU left,
whatever its last samples said (a UX audit saw 256/256 beside an overview of 0 usable)."""

from msgspec.structs import replace

from fleetdeck.console.summary import fleet_summary
from fleetdeck.console.tui.screens.clusters import ClustersScreen
from tests.tui.conftest import SIZE, World
from tests.tui.fleet import port_down
from tests.tui.test_views import text_of


def gpu_gone(index: int):
    def apply(tel):
        return replace(tel, gpus=[replace(g, present=False) if g.index == index else g
                                  for g in tel.gpus])
    return apply


async def test_gpus_failed_only_for_their_own_fault_and_views_agree():
    world = World()
    world.fleet.birth(world.ingest)
    world.fleet.telemetry(world.ingest, faults={"gpu0009": port_down(),
                                                "gpu0010": gpu_gone(2)})
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        text = text_of(world.app)
        assert "Health ok 22  failed 2" in text
        # 22 sound nodes x 8 free; gpu0009's 8 and gpu0010's 7 sound GPUs out, its gpu2 failed.
        assert "GPUs 192  in use 0  free 176  failed 1  out 15" in text
        totals = fleet_summary(world.app.state, world.clock())["totals"]
        assert (totals["gpus_in_use"], totals["gpus_free"], totals["gpus_failed"],
                totals["gpus_out"], totals["gpus_waiting"]) == (0, 176, 1, 15, 0)
        await pilot.press("0")
        await pilot.pause()
        assert isinstance(world.app.screen, ClustersScreen)
        [row] = world.app.screen.rows
        assert (row.gpus_usable, row.gpus_failed, row.gpus_out) == (176, 1, 15)
        assert "GPUS USABLE" in text_of(world.app) and "176/192" in text_of(world.app)

        # The fleet falls silent (its simulator died): nothing is usable, in every view.
        world.tick(10.0)
        await pilot.pause()
        [row] = world.app.screen.rows
        assert row.gpus_usable == 0 and "0/192" in text_of(world.app)
        totals = fleet_summary(world.app.state, world.clock())["totals"]
        assert totals["gpus_in_use"] + totals["gpus_free"] == 0
        # gpu0010's gpu2 is still failed (last known); the rest is out, not failed.
        assert (totals["gpus_failed"], totals["gpus_out"]) == (1, 191)
        await pilot.press("1")
        await pilot.pause()
        assert "in use 0  free 0" in text_of(world.app)
