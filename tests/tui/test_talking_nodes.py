"""Nodes that talk unread (their deltas heard, the keyframe they need not come: a ``viewer``
console, whose keyframe asks the ACL drops) read ``waiting`` in the console as in ``status``:
the views said "stale", the top problems listed every node, and ``w`` jumped to them, while
``status`` said "waiting" of the same nodes (``NodeState.unread_talking``)."""

from fleetdeck.protocol.topics import Kind, topic_for
from tests.tui.conftest import SIZE, World
from tests.tui.fleet import CLUSTER
from tests.tui.test_views import text_of


def _talk(world: World, names: list[str], seconds: int) -> None:
    """Each second, a delta of each node in ``names``, and a console tick."""
    for _ in range(seconds):
        world.clock.advance(1)
        for name in names:
            world.ingest.handle(topic_for(CLUSTER, Kind.TELEMETRY, name),
                                world.fleet.agents[name].telemetry_payload(), world.clock())
        world.app.tick()


async def test_talking_nodes_read_waiting_in_views_detail_and_worst_jumps():
    world = World(n=16)
    for agent in world.fleet.agents.values():
        agent.telemetry_payload()  # the keyframe this console never saw; the next in 30 s
    world.fleet.birth(world.ingest)
    names = world.fleet.names
    async with world.app.run_test(size=SIZE) as pilot:
        _talk(world, names, 10)
        await pilot.pause()
        state = world.app.session.state
        assert all(st.unread_talking for st in state.nodes.values())
        text = text_of(world.app)
        counts = next(line for line in text.splitlines() if "Health" in line)
        assert "Health waiting 16" in counts and "not responding" not in counts, counts
        problems = next(line for line in text.splitlines() if "Top problems" in line)
        assert "none so far: 16 nodes heard, their keyframe awaited" in problems, problems
        from fleetdeck.console.tui.fleet_grid import FleetGrid

        assert world.app.screen.query_one(FleetGrid).worst() == []  # nothing for w/W
        await pilot.press("2")
        await pilot.pause()
        rows = [line for line in text_of(world.app).splitlines() if "gpu00" in line]
        assert rows and all("waiting" in line and "stale" not in line for line in rows), rows
        await pilot.press("enter")
        await pilot.pause()
        detail = text_of(world.app)
        head = next(line for line in detail.splitlines() if line.startswith(" gpu0001"))
        assert "waiting" in head and "stale" not in head, head
        await pilot.press("escape")
        # The rack r01 loses power: its nodes are silent, stale, and listed.
        _talk(world, names[:8], 8)
        await pilot.press("1")
        await pilot.pause()
        assert state.nodes["gpu0012"].verdict_shown == "stale"
        assert state.nodes["gpu0003"].verdict_shown == "waiting"
        text = text_of(world.app)
        assert "r01" in text.split("Top problems")[1], text


async def test_the_overview_and_status_count_the_talking_nodes_alike():
    """Of the waiting nodes, those heard talking are one count of the fleet's
    (``Totals.talking_unread``): the overview's "heard, their keyframe awaited", and the same
    number in ``status --json``'s totals, where a script could not tell them from nodes never
    heard. It follows the fleet as nodes go quiet."""
    from fleetdeck.console.rows import fleet_counts
    from fleetdeck.console.summary import fleet_summary

    world = World(n=16)
    for agent in world.fleet.agents.values():
        agent.telemetry_payload()  # the keyframe this console never saw; the next in 30 s
    names = world.fleet.names
    world.fleet.birth(world.ingest, names=names[:10])
    async with world.app.run_test(size=SIZE) as pilot:
        _talk(world, names[:10], 10)
        world.fleet.birth(world.ingest, names=names[10:])  # born just now, not heard yet
        _talk(world, names[:10], 1)
        await pilot.pause()
        state = world.app.session.state
        problems = next(line for line in text_of(world.app).splitlines()
                        if "Top problems" in line)
        assert ("none so far: no telemetry yet from 6 nodes; 10 nodes heard, their keyframe "
                "awaited") in problems, problems
        totals = fleet_summary(state, world.clock())["totals"]
        assert totals["by_verdict"]["waiting"] == 16 and totals["talking_unread"] == 10
        assert state.talking_unread() == names[:10]
        _talk(world, names[:3], 8)  # 7 of the 10 stop talking: silent, stale
        await pilot.pause()
        assert state.totals().talking_unread == 3
        assert fleet_counts(state, world.app.session.summaries.counts).talking_unread == 3


async def test_status_json_combined_row_counts_the_talking_nodes_as_each_cluster_does():
    """Several clusters' ``status --json`` had ``talking_unread`` in each cluster's totals but
    not in ``combined``, their sum (``ClusterRow.as_json``): a script reading the site at a
    glance could not tell nodes heard talking from nodes never heard."""
    from fleetdeck.console.contexts import cluster_row, combined
    from fleetdeck.console.summary import fleet_summary

    world = World(n=8)
    for agent in world.fleet.agents.values():
        agent.telemetry_payload()  # the keyframe this console never saw; the next in 30 s
    world.fleet.birth(world.ingest)
    names = world.fleet.names
    async with world.app.run_test(size=SIZE) as pilot:
        _talk(world, names[:5], 10)
        await pilot.pause()
        state = world.app.session.state
        assert fleet_summary(state, world.clock())["totals"]["talking_unread"] == 5
        row = cluster_row(state, dated=False)
        assert row.as_json()["talking_unread"] == 5
        both = combined([row, row]).as_json()
        assert both["talking_unread"] == 10 and both["nodes"] == 16, both
