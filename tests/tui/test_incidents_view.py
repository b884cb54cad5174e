"""The incidents view (6): one root-cause line per incident, its timeline, its nodes, and the
job interruption report with the effective training time ratio — from the store when the
console has one, else from what the session saw."""

import pytest

from fleetdeck.console.session import ConsoleSession
from fleetdeck.console.tui.screens.incidents import REPORT_EVERY_S, IncidentsScreen
from fleetdeck.console.tui.screens.node_detail import NodeDetailScreen
from fleetdeck.console.tui.screens.nodes import NodesScreen
from fleetdeck.protocol.messages import JobState
from tests.tui.conftest import SIZE
from tests.tui.fleet import CLUSTER, Clock, SynthFleet, job_status, publish_job
from tests.tui.test_views import text_of


async def test_incidents_are_root_causes_worst_first_with_timeline_and_nodes(world):
    async with world.app.run_test(size=SIZE) as pilot:
        await pilot.press("6")
        world.tick()
        await pilot.pause()
        screen = world.app.screen
        assert isinstance(screen, IncidentsScreen)
        # Three nodes' mlx5_ib2 down on rail switch leaf00-r2: one switch incident, not three
        # node rows; the throttled gpu0003 is its own incident and names the job it slows.
        kinds = [(r.kind, r.key) for r in screen.rows]
        assert kinds[0] == ("switch", "switch:leaf00-r2")
        assert ("node", "node:gpu0003") in kinds
        assert len(screen.rows) == 2
        text = text_of(world.app)
        assert "leaf00-r2 suspect" in text and "gpu[0009,0013,0017]" in text
        assert "slows job 41" in text
        assert "do not drain" in text  # the switch's action, shown for the selected row
        assert "no job interruptions (this session)" in text
        # A report longer than the screen is cut with "…", not wrapped: its last words stood
        # alone on a line of their own (seen in make demo at 160x48).
        line = screen.query_one("#interruptions")
        line.update("x " * 200)
        await pilot.pause()
        assert line.content_region.height == 1
        await pilot.press("down")
        await pilot.pause()
        assert "gpu0003" in screen.query_one("#incident-detail").render().plain
        await pilot.press("up", "enter")
        await pilot.pause()
        world.tick()
        await pilot.pause()
        nodes = world.app.screen
        assert isinstance(nodes, NodesScreen)
        assert sorted(nodes.shown) == ["gpu0009", "gpu0013", "gpu0017"]


async def test_enter_on_a_one_node_incident_opens_the_node(world):
    async with world.app.run_test(size=SIZE) as pilot:
        await pilot.press("6")
        world.tick()
        await pilot.pause()
        screen = world.app.screen
        assert isinstance(screen, IncidentsScreen)
        assert screen.table.move_to_key("node:gpu0003")
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(world.app.screen, NodeDetailScreen)
        assert world.app.screen.node_id == "gpu0003"


async def test_no_incidents_says_so(world):
    healthy = SynthFleet(4, world.clock)
    world.app.sessions[CLUSTER].reset()
    healthy.birth(world.ingest)
    healthy.telemetry(world.ingest)
    async with world.app.run_test(size=SIZE) as pilot:
        await pilot.press("6")
        world.tick()
        await pilot.pause()
        assert "no incidents: every node is ok" in text_of(world.app)


@pytest.mark.parametrize("size", [SIZE, (100, 30)], ids=["160x48", "100x30"])
async def test_a_job_interruption_shows_by_cause_with_ettr(world, size):
    """Its line fits the width, in fewer words where it must: "…fleetdeck rep…" at 160
    columns, the figures cut at 100 (a 3 a.m. drive)."""
    async with world.app.run_test(size=size) as pilot:
        await pilot.press("6")
        world.tick()
        await pilot.pause()
        # Job 41 (on gpu0001-0004) fails with nothing worse than a throttled GPU on its nodes:
        # a software interruption, 32 GPUs x the 30 min since its checkpoint lost.
        failed = job_status("41", world.fleet.names[:4], world.clock, state=JobState.NF)
        publish_job(world.ingest, failed, world.clock)
        world.tick(1.0)
        world.tick(REPORT_EVERY_S)
        await pilot.pause()
        for worker in list(world.app.workers):
            if worker.group == "interruption-report":
                await worker.wait()
        await pilot.pause()
        screen = world.app.screen
        assert isinstance(screen, IncidentsScreen)
        assert screen.report_text.startswith(
            "1 job interruption (this session): software 1; ETTR ")
        assert "(16.0 GPU-h of work since their checkpoints lost, of " in screen.report_text
        line = screen.query_one("#interruptions").render().plain
        print(line)
        assert "…" not in line and len(line) <= size[0] - 2, line
        assert "1 job interruption (this session)" in text_of(world.app)


async def test_the_report_comes_from_the_store_when_one_is_open(tmp_path):
    clock = Clock()
    session = ConsoleSession(CLUSTER, clock=clock, follow_up=False)
    await session.open_store(tmp_path / "history.db")
    fleet = SynthFleet(4, clock)
    fleet.birth(session.ingest)
    names = fleet.names
    # 40 minutes of the job running, its scheduler status (checkpoint 30 min back) each minute.
    for _ in range(40):
        publish_job(session.ingest, job_status("7", names, clock), clock)
        clock.advance(60.0)
        fleet.telemetry(session.ingest, job={n: "7" for n in names})
        session.tick()
    publish_job(session.ingest, job_status("7", names, clock, state=JobState.NF), clock)
    for _ in range(2):
        clock.advance(11.0)
        fleet.telemetry(session.ingest, job={n: "7" for n in names})
        session.tick()
    await session.flush()
    rep = await session.interruption_report()
    assert rep["source"] == "store"
    assert rep["interruptions"] == 1
    assert rep["by_cause"]["software"]["count"] == 1  # no node looked unhealthy
    assert rep["job_gpu_hours"] > 0 and rep["lost_gpu_hours"] > 0
    # 32 GPUs held for 40 min, the 30 min since the last checkpoint lost: (21.3 - 16.6) / 21.3
    assert 16.0 <= rep["lost_gpu_hours"] < 17.0  # and the minute or so to the failure
    assert abs(rep["job_gpu_hours"] - 32 * 40 / 60) < 0.6
    assert 0.2 < rep["effective_training_time_ratio"] < 0.3
    await session.close()
    # Without a store, the same session's own figures.
    rep = await session.interruption_report()
    assert rep["source"] == "session" and rep["interruptions"] == 1


async def test_a_switch_incident_ages_from_its_ports_not_an_older_fault_behind_it():
    """A node behind the switch was degraded by a GPU fault of its own 200 s before the
    switch's ports went: the switch's AGE counts from the ports (a UX audit read 3m for an
    80 s old switch incident, the age of an earlier XID on one of its nodes)."""
    from tests.tui.conftest import World
    from tests.tui.fleet import port_down, throttled

    world = World()
    fleet = world.fleet
    fleet.birth(world.ingest)
    fleet.telemetry(world.ingest, faults={"gpu0005": throttled(3)})
    world.tick()
    world.clock.advance(200)
    down = port_down()  # mlx5_ib2: rail switch leaf00-r2 of gpu0005, gpu0009, gpu0013

    def both(tel):
        return down(throttled(3)(tel))

    faults = {"gpu0005": both, "gpu0009": down, "gpu0013": down}
    fleet.telemetry(world.ingest, faults=faults)
    world.tick()
    async with world.app.run_test(size=SIZE) as pilot:
        for _ in range(40):  # 80 s of telemetry and ticks
            world.clock.advance(1.0)
            fleet.telemetry(world.ingest, faults=faults)
            world.tick(1.0)
        await pilot.press("6")
        await pilot.pause()
        screen = world.app.screen
        assert isinstance(screen, IncidentsScreen)
        rows = {r.key: r for r in screen.rows}
        assert rows["switch:leaf00-r2"].age == "80s"
        assert rows["node:gpu0005"].age == "5m"  # its own fault keeps its own age


async def test_the_timeline_gets_the_room_the_list_leaves(world):
    """Two incidents at 160x48: the list takes its rows, the selected incident's timeline the
    rest, newest last (it was cut to 8 entries under a half-empty list)."""
    from fleetdeck.console.eventlog import EventLine

    now = world.clock()
    for i in range(20):
        world.app.session.log.add(EventLine(now + i, "gpu0003", "thermal", "warn",
                                            f"gpu3: 9{i % 10} °C, entry {i}", ("gpu0003",)))
    async with world.app.run_test(size=SIZE) as pilot:
        await pilot.press("6")
        world.tick()
        await pilot.pause()
        screen = world.app.screen
        assert isinstance(screen, IncidentsScreen)
        await pilot.press("down")
        await pilot.pause()
        assert screen.table.current_key == "node:gpu0003"
        detail = screen.query_one("#incident-detail")
        text = detail.render().plain
        shown = [n for n in range(20) if f"entry {n}\n" in text + "\n"]
        assert shown == list(range(20))  # every entry, the newest (19) included
        assert detail.size.height >= 24 and screen.table.size.height <= 6


async def test_the_interruption_line_follows_a_picture_put_back(world):
    """After a replay's seek back, the line kept the interruptions still to come: it was asked
    again only every 30 s of a clock that had gone back (a replay audit). A new interruption
    is said at once too."""
    async def report() -> str:
        for worker in list(world.app.workers):
            if worker.group == "interruption-report":
                await worker.wait()
        await pilot.pause()
        return world.app.screen.report_text

    async with world.app.run_test(size=SIZE) as pilot:
        session = world.app.session
        before = session.snapshot()
        await pilot.press("6")
        world.tick()
        await pilot.pause()
        assert (await report()).startswith("no job interruptions")
        failed = job_status("41", world.fleet.names[:4], world.clock, state=JobState.NF)
        publish_job(world.ingest, failed, world.clock)
        for _ in range(12):  # the cause is looked for 10 s
            world.tick(1.0)
            await pilot.pause()
        assert (await report()).startswith("1 job interruption (this session)")
        session.restore(before)
        world.tick(0.5)
        await pilot.pause()
        assert (await report()).startswith("no job interruptions")


async def test_nodes_of_one_job_failing_together_are_one_row_here_and_in_top_problems():
    """XID 79 on three nodes of one job, which the scheduler then ran elsewhere: one line
    naming the job in the incidents view and in the overview's top problems, and enter opens
    its three nodes (each drained from there), not three "no job on it" rows (an SRE drill)."""
    from tests.console.test_incidents import gpu_lost
    from tests.tui.conftest import World

    world = World()
    fleet, ingest, clock = world.fleet, world.ingest, world.clock
    fleet.birth(ingest)
    job_nodes = fleet.names[:4]
    publish_job(ingest, job_status("4104", job_nodes, clock), clock)
    on = {n: "4104" for n in job_nodes}
    fleet.telemetry(ingest, job=on)
    world.tick()
    struck = [job_nodes[0], job_nodes[1], job_nodes[3]]
    faults = {n: gpu_lost(0) for n in struck}
    world.clock.advance(1.0)
    fleet.telemetry(ingest, job=on, faults=faults)
    world.tick()
    moved = [job_nodes[2], *fleet.names[8:11]]
    publish_job(ingest, job_status("4104", moved, clock, requeues=1, started_offset_s=0), clock)
    world.clock.advance(1.0)
    fleet.telemetry(ingest, job={n: "4104" for n in moved}, faults=faults)
    world.tick()
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        text = text_of(world.app)
        assert "job 4104   nodes  3 of its nodes failed at once (gpu[0001-0002,0004])" in text
        assert "gpu0001    idle" not in text  # its nodes are that row, not rows of their own
        await pilot.press("6")
        world.tick()
        await pilot.pause()
        screen = world.app.screen
        assert isinstance(screen, IncidentsScreen)
        assert [r.key for r in screen.rows] == ["job:4104:failed"]
        assert "job 4104: 3 of its nodes failed at once" in text_of(world.app)
        await pilot.press("enter")
        await pilot.pause()
        world.tick()
        await pilot.pause()
        nodes = world.app.screen
        assert isinstance(nodes, NodesScreen)
        assert sorted(nodes.shown) == struck


async def test_a_restarted_console_shows_the_jobs_failed_nodes_as_one_row(tmp_path):
    """The same three nodes, the console restarted on its store after the requeue: view 6
    read three "no job on it" node incidents, where the console before had one naming the
    job (a drill)."""
    from fleetdeck.console.ingest import Ingest
    from tests.console.test_incidents import _lost_in_job, gpu_lost
    from tests.tui.conftest import World

    db = tmp_path / "history.db"
    world = World(n=16)
    struck = ["gpu0001", "gpu0002", "gpu0004"]
    moved = ["gpu0003", "gpu0009", "gpu0010", "gpu0011"]
    before = ConsoleSession(CLUSTER, clock=world.clock, ingest=Ingest(CLUSTER), follow_up=False)
    await before.open_store(db)
    _lost_in_job(None, struck, ["gpu0001", "gpu0002", "gpu0003", "gpu0004"], moved,
                 session=before)
    await before.close()

    world.clock.advance(30.0)
    await world.app.session.open_store(db)
    fleet, ingest, clock = world.fleet, world.ingest, world.clock
    fleet.birth(ingest)
    publish_job(ingest, job_status("4104", moved, clock, requeues=1, started_offset_s=30),
                clock)
    for _ in range(2):
        clock.advance(1.0)
        fleet.telemetry(ingest, job={n: "4104" for n in moved},
                        faults={n: gpu_lost(0) for n in struck})
        world.app.tick()
    async with world.app.run_test(size=SIZE) as pilot:
        await pilot.press("6")
        world.tick()
        await pilot.pause()
        screen = world.app.screen
        assert isinstance(screen, IncidentsScreen)
        assert [r.key for r in screen.rows] == ["job:4104:failed"]
        assert "job 4104: 3 of its nodes failed within 2 s" in text_of(world.app)
    await world.app.session.close()


async def test_an_incidents_age_moves_on_while_nothing_changes(world):
    """AGE grows with the clock even when no node and no event changes: a killed simulator's
    fleet, offline by its agents' wills, read "25s" in every row for minutes (a newcomer's
    run)."""
    from fleetdeck.protocol import codec
    from fleetdeck.protocol.topics import Kind, topic_for

    world.tick()
    for name, agent in world.fleet.agents.items():
        world.ingest.handle(topic_for(CLUSTER, Kind.STATUS, name),
                            codec.encode(agent.status(online=False)), world.clock())
    async with world.app.run_test(size=SIZE) as pilot:
        await pilot.press("6")
        for _ in range(8):
            world.tick(1.0)
        await pilot.pause()
        screen = world.app.screen
        assert isinstance(screen, IncidentsScreen)
        revision, seq = world.app.shown_revision, world.app.event_seq
        before = {r.key: r.age for r in screen.rows}
        for _ in range(6):
            world.tick(1.0)
        await pilot.pause()
        assert (world.app.shown_revision, world.app.event_seq) == (revision, seq)
        after = {r.key: r.age for r in screen.rows}
        assert after.keys() == before.keys() and after, after
        for key, age in before.items():
            assert after[key] == f"{int(age.removesuffix('s')) + 6}s", (key, before, after)
        assert f" {after[next(iter(after))]} " in text_of(world.app)
