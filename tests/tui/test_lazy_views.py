"""The views build the rows of the nodes they show, not of the fleet: a healthy v2 fleet's quiet
samples stay unbuilt (``wire2.Pending``) through every view, metric sorts and the grid's metric
colours (issue 12: building 16 rows a sample for 16,384 nodes is what the console stopped
doing at ingest; a view that read every node's rows would do it again, at a key press)."""

from fleetdeck.protocol import wire2
from fleetdeck.protocol.topics import Kind, topic_for
from tests.tui.conftest import CLUSTER, SIZE, World


def _send_v2(world: World) -> None:
    f = world.fleet
    for name in f.names:
        world.ingest.handle(topic_for(CLUSTER, Kind.TELEMETRY, name),
                            f.agents[name].telemetry_payload(), world.clock())


def _built(world: World) -> int:
    return sum(1 for st in world.app.state.nodes.values()
               if type(st.sample) is wire2.Pending and st.sample.built)


def _unbuilt(world: World) -> int:
    return sum(1 for st in world.app.state.nodes.values()
               if type(st.sample) is wire2.Pending and not st.sample.built)


async def test_views_build_only_the_rows_they_show() -> None:
    n = 512
    world = World(n)
    world.fleet.birth(world.ingest)
    async with world.app.run_test(size=SIZE) as pilot:
        for _ in range(3):  # a keyframe, then quiet deltas
            _send_v2(world)
            world.tick(1.0)
            await pilot.pause()
        keys = ["1", "m", "m", "m", "2", *(["o"] * 6), "O", "3", "4", "5", "1"]
        for key in keys:
            _send_v2(world)
            world.tick(1.0)
            assert _unbuilt(world) > n // 2, "the fleet's samples were not quiet"
            await pilot.press(key)
            await pilot.pause()
            # At most the rows on screen (the node list shows < 60 of 512 at SIZE).
            assert _built(world) <= 80, (key, _built(world))
