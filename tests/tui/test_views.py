"""Every view, driven with Pilot: injected ingest and clock, ticks driven by the test."""

from fleetdeck.console.tui.screens.events import EventsScreen
from fleetdeck.console.tui.screens.fabric import FabricScreen
from fleetdeck.console.tui.screens.jobs import JobsScreen
from fleetdeck.console.tui.screens.node_detail import NodeDetailScreen
from fleetdeck.console.tui.screens.nodes import NodesScreen
from fleetdeck.console.tui.screens.overview import OverviewScreen
from tests.tui.conftest import SIZE, open_view, pilot_until
from tests.tui.fleet import CLUSTER, port_down, throttled


def text_of(app) -> str:
    """Everything the screen shows, as plain text lines (what a terminal would display)."""
    strips = app.screen._compositor.render_strips()
    return "\n".join("".join(seg.text for seg in strip) for strip in strips)


async def open_first_node(world, pilot) -> str:
    """Enter on the overview's grid (its cursor starts on gpu0001): the node's detail, its
    text."""
    await pilot.press("enter")
    world.tick()
    await pilot.pause()
    assert isinstance(world.app.screen, NodeDetailScreen)
    return text_of(world.app)


async def test_overview_counts_problems_grid(world):
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        screen = world.app.screen
        assert isinstance(screen, OverviewScreen)
        text = text_of(world.app)
        assert "[RW]" in text and "malformed 0" in text
        assert "Nodes 24" in text and "alloc 4" in text
        # Ports down on three nodes of one rail: the switch's row names them, they have none.
        assert "Top problems" in text and "leaf00-r2" in text and "gpu[0009,0013,0017]" in text
        assert "gpu0003" in text  # throttled GPU -> degraded
        grid = screen.grid
        assert grid.node_ids[0] == "gpu0001" and len(grid.node_ids) == 24
        await pilot.press("right", "right", "down")
        assert grid.cursor_gpu == 2 and grid.cursor_node == grid.per_line
        await pilot.press("m")
        assert grid.metric == "util"
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(world.app.screen, NodeDetailScreen)
        assert world.app.screen.gpu == 2


async def test_top_problems_count_each_rail_switch_of_a_leaf_groups_row(world):
    # leaf02's eight rail switches dead and leaf04-r5 back: the heading read "2 switches"
    # (one per row) where the fabric panel beside it said "8 suspects, 1 recovered" (a
    # newcomer's run). Here two rails of one leaf group are one row, and two switches.
    def two_rails(tel):
        return port_down("mlx5_ib5")(port_down("mlx5_ib2")(tel))

    faults = {"gpu0003": throttled(3), **dict.fromkeys(("gpu0009", "gpu0013", "gpu0017"),
                                                        two_rails)}
    world.fleet.telemetry(world.ingest, job={n: "41" for n in world.fleet.names[:4]},
                          faults=faults)
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        text = text_of(world.app)
        assert "2 rail switches suspect (r2, r5)" in text, text
        heading = next(ln for ln in text.splitlines() if "Top problems" in ln)
        assert ", 2 switches," in heading, heading


async def test_top_problems_count_every_suspect_switch_not_the_rows_that_fit(world):
    # Below 40 rows the overview lists 3 problems: with a switch dead on each of four leaf
    # groups the heading read "3 switches" (the rows that fit), where the fabric panel beside
    # it said "4 suspects" and status --json listed four; its nodes were counted all along.
    from fleetdeck.console.judgements import suspect_switches

    faults = {f"gpu{n:04d}": port_down("mlx5_ib2") for leaf in range(4)
              for n in (leaf + 1, leaf + 5, leaf + 9)}
    world.fleet.telemetry(world.ingest, faults=faults)
    async with world.app.run_test(size=(160, 36)) as pilot:
        world.tick()
        await pilot.pause()
        assert len(suspect_switches(world.app.screen.fleet.state)) == 4
        text = text_of(world.app)
        assert "4 suspects" in text, text
        heading = next(ln for ln in text.splitlines() if "Top problems" in ln)
        assert "(4 switches," in heading, heading


async def test_node_detail_says_what_to_do_and_lists_its_verdict_changes(world):
    # Its timeline said "no events from this node yet" while the incident listed the node's
    # "ok -> degraded (G12)", and the action of incidents and status was not there.
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        world.fleet.telemetry(world.ingest, faults={"gpu0001": throttled(5)})
        world.tick()
        await pilot.pause()
        text = await open_first_node(world, pilot)
        assert "do: watch; drain it if it persists (no job on it)" in text, text
        line = next(ln for ln in text.splitlines() if "ok -> degraded" in ln)
        assert "verdict" in line and "G12" in line


async def test_escape_walks_back_through_each_view_once_and_stops_at_the_overview(world):
    # Twelve presses of Esc from the nodes view went to an old node detail, the overview,
    # fabric, another node detail, incidents, events, fabric, jobs … and never settled.
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await open_view(world, pilot, "2", NodesScreen)
        await pilot.press("enter")  # a node detail, left open on the nodes view
        world.tick()
        await pilot.pause()
        assert isinstance(world.app.screen, NodeDetailScreen)
        for key in ("3", "4", "3", "4", "5", "2"):
            await pilot.press(key)
            world.tick()
            await pilot.pause()
        # A view's key shows the view, not the detail left open on it (a 3 a.m. drive).
        assert isinstance(world.app.screen, NodesScreen)
        seen = []
        for _ in range(8):
            await pilot.press("escape")
            world.tick()
            await pilot.pause()
            seen.append(type(world.app.screen).__name__)
        # events -> fabric -> jobs -> overview, then it stays.
        assert seen[:4] == ["EventsScreen", "FabricScreen", "JobsScreen", "OverviewScreen"], seen
        assert set(seen[4:]) == {"OverviewScreen"}


async def test_not_responding_is_a_mark_on_the_node_states_not_one_more_state(world):
    from fleetdeck.protocol import codec
    from fleetdeck.protocol.topics import Kind, topic_for

    agent = world.fleet.agents["gpu0020"]
    world.ingest.handle(topic_for(CLUSTER, Kind.STATUS, "gpu0020"),
                        codec.encode(agent.status(online=False)), world.clock())
    async with world.app.run_test(size=SIZE) as pilot:
        for _ in range(5):
            world.fleet.telemetry(world.ingest,
                                  names=[n for n in world.fleet.names if n != "gpu0020"])
            world.tick(1)
        await pilot.pause()
        line = next(ln for ln in text_of(world.app).splitlines() if "Nodes 24" in ln)
        # "down 1  stale 1" summed to 25 nodes of 24.
        assert "down 1" in line and "(*not responding 1)" in line and "stale 1" not in line


async def test_header_escapes_markup(world):
    world.app.operator = "[bold]mallory[/]"
    world.ingest.handle("fleetdeck/v1/t/node/gpu0001/telemetry", b"[not json", 1.0)
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        text = text_of(world.app)
        assert "op [bold]mallory[/]" in text
        assert "malformed 1" in text


async def test_nodes_view_sort_filter_marks(world):
    async with world.app.run_test(size=SIZE) as pilot:
        await pilot.press("2")
        world.tick()
        await pilot.pause()
        screen = world.app.screen
        assert isinstance(screen, NodesScreen)
        # worst first; the three nodes whose mlx5_ib2 is down all hang off rail switch
        # leaf00-r2, so the switch is suspected and they read degraded ("do not drain")
        # like the throttled gpu0003, which sorts first by name
        assert list(screen.shown[:4]) == ["gpu0003", "gpu0009", "gpu0013", "gpu0017"]
        text = text_of(world.app)
        assert "alloc" in text and "idle" in text and "behind suspect switch leaf00-r2" in text
        await pilot.press("slash", *"gpu[0001-0004]", "enter")
        world.tick()
        assert list(screen.shown) == ["gpu0003", "gpu0001", "gpu0002", "gpu0004"]  # worst first
        await pilot.pause()
        # Read as typed: "(hostlist gpu[0001-0004])" said the same list twice.
        assert "filter gpu[0001-0004] (hostlist)" in text_of(world.app)
        await pilot.press("escape")
        world.tick()
        assert len(screen.shown) == 24
        # Brackets read as Slurm's hostlist, not a regex class, and the view says so: a
        # filter that matched nothing said only "no nodes match".
        await pilot.press("slash", *"gpu00[34]", "enter")
        world.tick()
        await pilot.pause()
        assert list(screen.shown) == []
        assert "filter gpu00[34] (hostlist gpu0034)" in text_of(world.app)
        await pilot.press("escape")
        await pilot.press("slash", *"G12", "enter")
        world.tick()
        assert list(screen.shown) == ["gpu0003"]
        await pilot.pause()
        assert "filter G12 (regex)" in text_of(world.app)
        await pilot.press("escape")
        await pilot.press("ctrl+z")
        world.tick()
        assert set(screen.shown) == {"gpu0003", "gpu0009", "gpu0013", "gpu0017"}
        await pilot.press("ctrl+z")
        screen.sort_key = "util"
        await pilot.press("o")  # util -> temp
        world.tick()
        assert screen.sort_key == "temp" and screen.shown[0] == "gpu0003"  # 90 °C
        await pilot.press("O")
        world.tick()
        assert screen.shown[-1] == "gpu0003"
        await pilot.press("home", "space", "space")
        assert len(screen.table.marks) == 2
        assert screen.targets() == sorted(screen.table.marks)


async def test_the_sort_arrow_shows_on_every_column():
    """GPUS and UTIL fill their 4 cells: sorted by them, the arrow took a cell from REASONS
    (it was cut off, "GPU…"); at 80 columns, with none to spare, the title gives way."""
    from tests.tui.conftest import World

    for size in (SIZE, (80, 24)):
        world = World()
        world.populate()
        async with world.app.run_test(size=size) as pilot:
            await pilot.press("2")
            world.tick()
            await pilot.pause()
            screen = world.app.screen
            assert isinstance(screen, NodesScreen)
            seen = []
            starts = set()
            for key in ("node", "state", "verdict", "gpus", "util", "temp"):
                screen.sort_key = key
                world.tick()
                await pilot.pause()
                header = text_of(world.app).splitlines()[2]
                assert header.count("▼") == 1, (key, header)
                seen.append(header.split("▼")[0].split()[-1])
                starts.add(tuple(screen.table._widths(screen.table.size.width)))
            if size == SIZE:
                # The columns stay where they are whichever is sorted (they moved a cell when
                # GPUS or UTIL took the arrow's cell only while sorted).
                assert len(starts) == 1, starts
                assert seen == ["NODE", "STATE", "HEALTH", "GPUS", "UTIL", "TEMP"]
                # The rows are laid out as the header: "8/8" stays under GPUS.
                at = header.index("GPUS")
                row = text_of(world.app).splitlines()[3]
                assert row[at:at + 4].strip() == "8/8"


async def test_node_detail(world):
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        for _ in range(5):
            world.fleet.telemetry(world.ingest, names=["gpu0003"], faults={
                "gpu0003": __import__("tests.tui.fleet", fromlist=["x"]).throttled(3)})
            world.tick(1.0)
        world.app.open_node("gpu0003")
        await pilot.pause()
        world.tick()
        await pilot.pause()
        text = text_of(world.app)
        assert "GPUs" in text and "InfiniBand ports" in text and "Timeline" in text
        assert "hw thermal" in text  # decoded clock-event reason
        assert "▁" in text or "█" in text  # sparklines
        assert len(world.app.recent.series("gpu0003", 0, "util")) >= 5
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(world.app.screen, OverviewScreen)


async def test_node_detail_drain_reason(world):
    from fleetdeck.protocol.messages import DrainState

    world.fleet.status(world.ingest, "gpu0005", DrainState.DRAINED, "bad PSU", "bob")
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        world.app.open_node("gpu0005")
        await pilot.pause()
        world.tick()
        await pilot.pause()
        assert "Reason=bad PSU [bob@2026-01-01T00:00:00]" in text_of(world.app)


async def test_node_detail_says_a_drain_its_agent_could_not_save(world):
    """Its agent's --state-dir full: the drain's acks told the console that sent it, and the
    node's detail in any other console read the drain as kept (docs/reliability.md)."""
    from fleetdeck.protocol import codec
    from fleetdeck.protocol.messages import DrainState
    from fleetdeck.protocol.topics import Kind, topic_for
    from tests.tui.fleet import CLUSTER

    world.fleet.status(world.ingest, "gpu0005", DrainState.DRAINED, "bad PSU", "bob")
    a = world.fleet.agents["gpu0005"]
    a.drain = a.drain.model_copy(update={"unsaved": "/var/lib/fleetdeck/x.json: No space"})
    world.ingest.handle(topic_for(CLUSTER, Kind.STATUS, "gpu0005"), codec.encode(a.status()),
                        world.clock())
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        world.app.open_node("gpu0005")
        await pilot.pause()
        world.tick()
        await pilot.pause()
        assert ("drained not saved on the node (/var/lib/fleetdeck/x.json: No space): an "
                "agent restart forgets it") in text_of(world.app)


async def test_fabric_groups_by_leaf_with_hint(world):
    async with world.app.run_test(size=SIZE) as pilot:
        await pilot.press("4")
        world.tick()
        await pilot.pause()
        screen = world.app.screen
        assert isinstance(screen, FabricScreen)
        # gpu0009, 13, 17 are all on leaf01 (i % 4 == 0 for index 8, 12, 16)
        assert screen.leaves[0].leaf == "leaf00" and screen.leaves[0].down == 3
        assert "suspect leaf switch leaf00" in text_of(world.app)
        assert {p.node for p in screen.ports} == {"gpu0009", "gpu0013", "gpu0017"}


async def test_jobs_view_straggler(world):
    async with world.app.run_test(size=SIZE) as pilot:
        await pilot.press("3")
        world.tick()
        await pilot.pause()
        screen = world.app.screen
        assert isinstance(screen, JobsScreen)
        row = screen.rows[0]
        assert row.job_id == "41" and row.state == "R" and row.nodes == "gpu[0001-0004]"
        assert "gpu0003" in row.straggler and "throttled GPU" in row.straggler
        text = text_of(world.app)
        assert "50%" in text and "llama-70b" in text
        await pilot.press("enter")
        await pilot.pause()
        world.tick()
        nodes = world.app.screen
        assert isinstance(nodes, NodesScreen)
        assert sorted(nodes.shown) == ["gpu0001", "gpu0002", "gpu0003", "gpu0004"]
        # One Esc goes back to the job (it took two: the first only cleared the job's
        # filter), and the nodes view shows every node when asked for again.
        await pilot.press("escape")
        await pilot.pause()
        assert world.app.screen is screen
        await pilot.press("2")
        world.tick()
        await pilot.pause()
        assert world.app.screen is nodes and len(nodes.shown) == len(world.fleet.names)
        # A filter the operator typed is cleared by Esc, and the view stays.
        await pilot.press("slash", *"gpu000[1-3]", "enter")
        world.tick()
        await pilot.pause()
        assert sorted(nodes.shown) == ["gpu0001", "gpu0002", "gpu0003"]
        await pilot.press("escape")
        world.tick()
        await pilot.pause()
        assert world.app.screen is nodes and len(nodes.shown) == len(world.fleet.names)
        # Marks made in a drill-down go with it: kept, a later `r` drained them (a review);
        # opening and closing the filter box there leaves it a drill-down.
        await pilot.press("3")
        await pilot.pause()
        await pilot.press("enter")
        world.tick()
        await pilot.pause()
        await pilot.press("space")
        assert nodes.table.marks
        await pilot.press("slash", "escape")
        await pilot.pause()
        await pilot.press("escape")
        await pilot.pause()
        assert world.app.screen is screen
        assert not nodes.table.marks
        # A drill-down left for another view and come back to by its key is a plain filter.
        await pilot.press("enter")
        world.tick()
        await pilot.pause()
        await pilot.press("1")
        await pilot.pause()
        await pilot.press("2")
        world.tick()
        await pilot.pause()
        assert len(nodes.shown) == 4
        await pilot.press("escape")
        world.tick()
        await pilot.pause()
        assert world.app.screen is nodes and len(nodes.shown) == len(world.fleet.names)


async def test_pending_job_without_a_reason_says_none_of_it(world):
    """Slurm's reason for a fresh pending job is the word "None": shown as no reason."""
    from fleetdeck.protocol.messages import JobState
    from tests.tui.fleet import job_status, publish_job

    pending = job_status("42", [], world.clock).model_copy(update=dict(
        state=JobState.PD, reason="None", step=0, eta_s=None, last_checkpoint_ts=None,
        last_checkpoint_step=0))
    publish_job(world.ingest, pending, world.clock)
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        overview = text_of(world.app)
        line = next(x for x in overview.splitlines() if x.lstrip().startswith("42 "))
        jobs_panel = line[:80]  # the fabric panel is beside it
        assert jobs_panel.rstrip().endswith("llama-70b PD"), jobs_panel
        await pilot.press("3")
        world.tick()
        await pilot.pause()
        screen = world.app.screen
        assert isinstance(screen, JobsScreen)
        [row] = [r for r in screen.rows if r.job_id == "42"]
        assert row.state == "PD" and row.reason == ""
        assert "None" not in text_of(world.app)


async def open_events(world, pilot) -> EventsScreen:
    return await open_view(world, pilot, "5", EventsScreen)


async def test_events_view_filter(world):
    from fleetdeck.agents.source import EventDraft

    agent = world.fleet.agents["gpu0007"]
    ev = agent._event(EventDraft("xid", "Xid 79: GPU fell off the bus", component="gpu2"))
    from fleetdeck.protocol import codec

    world.ingest.handle("fleetdeck/v1/t/node/gpu0007/event", codec.encode(ev), world.clock())
    world.ingest.handle("fleetdeck/v1/t/node/gpu0007/event", codec.encode(ev), world.clock())  # dup
    async with world.app.run_test(size=SIZE) as pilot:
        screen = await open_events(world, pilot)
        assert len(screen.rows) == 1 and "fell off the bus" in text_of(world.app)
        await pilot.press("slash", *"nomatch", "enter")
        world.tick()
        assert screen.rows == []


async def test_events_view_says_a_filter_it_cannot_read(world):
    # "gpu[0007" (a bracket left open) is neither a hostlist nor a regex: it matched no event
    # and the line above the table said nothing of why, where the nodes view says it.
    async with world.app.run_test(size=SIZE) as pilot:
        await open_events(world, pilot)
        await pilot.press("slash", *"gpu[0007", "enter")
        world.tick()
        await pilot.pause()
        line = text_of(world.app).splitlines()[1]
        # Said as typed after its key where the line is short for its reading as well.
        assert "gpu[0007" in line and "bad regex" in line, line


async def test_nodes_asked_for_by_name_show_although_unhealthy_only_was_on(world):
    # "/gpu00[12,20]" typed on the overview gave "1/48": ctrl+z (unhealthy only) was still on
    # from earlier and hid the healthy one asked for (an operator's walkthrough).
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        screen = await open_view(world, pilot, "2", NodesScreen)
        await pilot.press("ctrl+z")
        world.tick()
        assert "gpu0001" not in screen.shown
        await pilot.press("1")
        await pilot.pause()
        world.app.show_nodes("gpu[0001,0009]")
        await pilot.pause()
        world.tick()
        await pilot.pause()
        assert list(screen.shown) == ["gpu0009", "gpu0001"]  # worst first


async def test_events_view_is_newest_first_by_time_not_by_arrival(world):
    # A node's event (its agent's clock) arrived after a later verdict line and read
    # 13:41:33 under 13:41:32 (an operator's walkthrough).
    from fleetdeck.agents.source import EventDraft
    from fleetdeck.protocol import codec

    agent = world.fleet.agents["gpu0007"]
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        later = agent._event(EventDraft("xid", "later by its clock", component="gpu2"))
        world.clock.advance(-5)  # an event stamped 5 s before the one above, arriving after
        earlier = agent._event(EventDraft("xid", "earlier by its clock", component="gpu1"))
        world.clock.advance(5)
        for ev in (later, earlier):  # one tick each: one batch is put in time order
            world.ingest.handle("fleetdeck/v1/t/node/gpu0007/event", codec.encode(ev),
                                world.clock())
            world.tick()
        screen = await open_events(world, pilot)
        texts = [line.text for _seq, line in screen.rows]
        later_at, earlier_at = (texts.index("gpu2: later by its clock"),
                                texts.index("gpu1: earlier by its clock"))
        assert later_at < earlier_at, texts


async def test_command_mode_help_and_back(world):
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.press("colon", *"jobs", "enter")
        await pilot.pause()
        assert isinstance(world.app.screen, JobsScreen)
        await pilot.press("colon", *"node gpu0002", "enter")
        await pilot.pause()
        assert isinstance(world.app.screen, NodeDetailScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(world.app.screen, JobsScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(world.app.screen, OverviewScreen)
        await pilot.press("question_mark")
        await pilot.pause()
        assert "fleetdeck keys" in text_of(world.app)
        await pilot.press("escape")


async def test_small_terminal_renders(world):
    async with world.app.run_test(size=(100, 30)) as pilot:
        for key in "12345":
            await pilot.press(key)
            world.tick()
            await pilot.pause()
            assert "fleetdeck t" in text_of(world.app)


async def test_a_pending_jobs_reason_is_under_a_header_that_says_so(world):
    """The jobs view's last column holds a running job's straggler or the scheduler's reason:
    its header said STRAGGLER over a pending job's "Resources" (UX audit)."""
    from fleetdeck.protocol.messages import JobState
    from tests.tui.fleet import job_status, publish_job

    pending = job_status("42", [], world.clock).model_copy(update=dict(
        state=JobState.PD, reason="Resources", step=0, eta_s=None, last_checkpoint_ts=None,
        last_checkpoint_step=0))
    publish_job(world.ingest, pending, world.clock)
    async with world.app.run_test(size=SIZE) as pilot:
        await pilot.press("3")
        world.tick()
        await pilot.pause()
        assert isinstance(world.app.screen, JobsScreen)
        text = text_of(world.app)
        header = next(x for x in text.splitlines() if "JOBID" in x)
        assert "HELD UP (REASON)" in header
        row = next(x for x in text.splitlines() if x.lstrip().startswith("42 "))
        assert row.rstrip().endswith("(Resources)")
        running = next(x for x in text.splitlines() if x.lstrip().startswith("41 "))
        assert "rank 19 gpu0003" in running


async def test_a_job_on_a_failed_node_says_which_node_holds_it_up(world):
    """One failed node stops a whole job at its next allreduce: the jobs view and the
    overview's jobs panel name it first (the straggler, on another node, after it), though
    the job's step times have not moved yet (UX: the job read 'R' and nothing else)."""
    from tests.tui.fleet import port_down

    world.tick(1.0)
    world.fleet.telemetry(world.ingest, job={n: "41" for n in world.fleet.names[:4]},
                          faults={"gpu0003": throttled(3), "gpu0002": port_down("mlx5_ib5")})
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        panel = text_of(world.app)
        assert "1 held up by a node" in panel
        lines = panel.splitlines()
        head = next(i for i, x in enumerate(lines) if "41 " in x and "llama-70b " in x)
        assert "↳ gpu0002 failed: N1 mlx5_ib5:1" in lines[head + 1]
        assert "↳ straggler gpu0003 +50%" in lines[head + 2]
        await pilot.press("3")
        world.tick()
        await pilot_until(pilot, lambda: isinstance(world.app.screen, JobsScreen), "jobs view")
        await pilot.pause()
        text = text_of(world.app)
        assert "1 held up by a node" in text
        row = next(x for x in text.splitlines() if x.lstrip().startswith("41 "))
        assert "gpu0002 failed: N1 mlx5_ib5:1" in row  # the rest of the cell is cut here
        (job,) = [r for r in world.app.screen.rows if r.job_id == "41"]
        assert job.held_up.startswith("gpu0002 failed: N1 mlx5_ib5:1")
        assert job.held_up.endswith("; straggler rank 19 gpu0003 +50%: throttled GPU (gpu3 "
                                    "clock throttled (hw thermal))")


async def test_events_view_follows_the_newest_and_c_keeps_commands_only(world):
    """Left on its top row, the view showed that row sinking as events arrived ("newest first",
    yet opened at 74/92); 'c' listed the console's other notes (interruptions) as commands;
    enter on a command's line did nothing."""
    from fleetdeck.agents.source import EventDraft
    from fleetdeck.protocol import codec

    agent = world.fleet.agents["gpu0007"]

    def event(text: str) -> None:
        ev = agent._event(EventDraft("xid", text, component="gpu2"))
        world.ingest.handle("fleetdeck/v1/t/node/gpu0007/event", codec.encode(ev), world.clock())

    event("Xid 79: first")
    async with world.app.run_test(size=SIZE) as pilot:
        screen = await open_events(world, pilot)
        event("Xid 79: second")
        world.tick()
        await pilot.pause()
        assert "second" in screen.table.current_row[1].text  # followed the newest
        await pilot.press("down")  # on the older one now: it stays there
        event("Xid 79: third")
        world.tick()
        await pilot.pause()
        assert "first" in screen.table.current_row[1].text
        session = world.app.session
        session.note("job 41 interrupted: node failure", kind="interruption", nodes=("gpu0003",))
        session.note("drain gpu0005 requested", kind="command", nodes=("gpu0005",))
        # Another operator's drain (the CLI's) is the node's word: kept too.
        ev = agent._event(EventDraft("drain", "drained: OPS-2 [bob]"))
        world.ingest.handle("fleetdeck/v1/t/node/gpu0007/event", codec.encode(ev), world.clock())
        world.tick()
        await pilot.press("c")
        world.tick()
        await pilot.pause()
        kinds = [r[1].kind for r in screen.rows]
        assert sorted(kinds) == ["command", "drain"]
        await pilot.press("home", *["down"] * kinds.index("command"), "enter")
        await pilot.pause()
        assert isinstance(world.app.screen, NodeDetailScreen)
        assert world.app.screen.node_id == "gpu0005"


async def test_commands_only_with_no_command_says_so_not_no_events(world):
    """'c' with events but no command read "0/66 events … commands only" over "no events yet"
    (a newcomer's run)."""
    from fleetdeck.agents.source import EventDraft
    from fleetdeck.protocol import codec

    ev = world.fleet.agents["gpu0007"]._event(EventDraft("xid", "Xid 79", component="gpu2"))
    world.ingest.handle("fleetdeck/v1/t/node/gpu0007/event", codec.encode(ev), world.clock())
    async with world.app.run_test(size=SIZE) as pilot:
        screen = await open_events(world, pilot)
        await pilot.press("c")
        world.tick()
        await pilot.pause()
        assert screen.rows == []
        assert screen.table.empty_text.startswith("no command yet: none from this console")
        assert "no events yet" not in text_of(world.app)


async def test_jobs_view_cursor_never_moved_stays_on_the_first_job(world):
    """The jobs view opened with its cursor on job 41 kept it there while a job a failed node
    held up rose above it: `r` restarted the job that had been first (a 3 a.m. drive). A
    cursor never moved stays on the first row; once moved it follows its job."""
    from tests.tui.fleet import job_status, port_down, publish_job

    nodes = ["gpu0010", "gpu0011"]
    publish_job(world.ingest, job_status("43", nodes, world.clock), world.clock)
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.press("3")
        await pilot.pause()
        screen = world.app.screen
        assert isinstance(screen, JobsScreen)
        assert screen.table.current_row.job_id == "41"  # its straggler puts it first
        world.fleet.telemetry(world.ingest, names=["gpu0010"],
                              faults={"gpu0010": port_down()})
        publish_job(world.ingest, job_status("43", nodes, world.clock), world.clock)
        world.tick()
        await pilot.pause()
        assert [r.job_id for r in screen.rows][:2] == ["43", "41"]
        assert screen.table.current_row.job_id == "43"
        await pilot.press("j")  # moved: it follows job 41 from now on
        await pilot.pause()
        assert screen.table.current_row.job_id == "41"


async def test_a_stragglers_detail_says_it_slows_its_job(world):
    """The overview and the jobs view named the straggler; its own detail said only
    "jobs: 41" (a 3 a.m. drive)."""
    from fleetdeck.console.judgements import straggler

    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        slow = straggler(world.app.state.jobs["41"], world.app.state)
        assert slow is not None and slow.node == "gpu0003"
        world.app.open_node("gpu0003")
        world.tick()
        await pilot.pause()
        text = text_of(world.app)
        assert (f"straggler of job 41, every step of its 32 GPUs waits for it: "
                f"{slow.text}") in " ".join(text.split()), text


async def test_the_detail_timeline_names_the_consoles_lines_by_their_kind(world):
    """A job's interruption read "command" in the node's timeline and "interruption" in the
    events view (a 3 a.m. drive)."""
    from fleetdeck.console.interruptions import INTERRUPTION

    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        world.app.session.note("job 41 interrupted: gpu on gpu0003", severity="warn",
                               nodes=("gpu0003",), kind=INTERRUPTION)
        world.app.open_node("gpu0003")
        world.tick()
        await pilot.pause()
        line = next(ln for ln in text_of(world.app).splitlines() if "job 41 interrupted" in ln)
        assert f"{INTERRUPTION} " in line and "command" not in line, line


async def test_a_quiet_jobs_line_keeps_the_time_it_turns_hung_at_160_columns():
    """A job whose step stood still for a minute says when it will be called hung: the jobs
    view's HELD UP column cut that time off at 160 columns (the step it stopped at, which the
    STEP column shows, now comes last); and with a long NODES cell, as a 2,048-node drive's
    "gpu[0175-0178]" beside "gpu[0009-0019,0021-0024,004…", it cut "hung if none by 2…"."""
    import re

    from tests.tui.conftest import World
    from tests.tui.fleet import job_status, publish_job

    w = World()
    w.fleet.birth(w.ingest)
    for t in range(100):
        if t <= 20:
            publish_job(w.ingest, job_status("41", w.fleet.names[:4], w.clock, step=100 + t),
                        w.clock)
            publish_job(w.ingest, job_status("43", w.fleet.names[5:24:2], w.clock,
                                             step=100 + t), w.clock)
        publish_job(w.ingest, job_status("42", ["gpu0005"], w.clock, step=100 + t), w.clock)
        w.fleet.telemetry(w.ingest)
        w.tick(1.0)
    async with w.app.run_test(size=(160, 48)) as pilot:
        w.tick()
        await pilot.press("3")
        w.tick()
        await pilot_until(pilot, lambda: isinstance(w.app.screen, JobsScreen), "jobs view")
        await pilot.pause()
        row = next(x for x in text_of(w.app).splitlines() if x.lstrip().startswith("41 "))
        assert re.search(r"no step for \d+ s; hung at \d\d:\d\d:\d\d", row), row


async def test_a_job_held_up_by_a_suspect_switch_names_the_switch_not_a_node(world):
    """A leaf switch outage read "2 held up by a node" and "↳ gpu0017 degraded: F1 behind
    suspect switch leaf02-r5: check the switch, d…", a sound node first (a 3 a.m. drive): the
    job is held up by the switch, and the overview and the jobs view say so."""
    from tests.tui.fleet import port_down

    world.tick(1.0)
    down = port_down("mlx5_ib2")
    world.fleet.telemetry(world.ingest, job={n: "41" for n in world.fleet.names[:4]},
                          faults={n: down for n in ("gpu0001", "gpu0005", "gpu0009",
                                                    "gpu0013")})
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        panel = text_of(world.app)
        assert "1 held up by a switch" in panel and "held up by a node" not in panel
        assert "↳ suspect switch leaf00-r2: check it, do not drain (gpu0001 behind" in panel
        await open_view(world, pilot, "3", JobsScreen)
        text = text_of(world.app)
        assert "1 held up by a switch" in text and "held up by a node" not in text
        (job,) = [r for r in world.app.screen.rows if r.job_id == "41"]
        assert job.held_up.startswith("suspect switch leaf00-r2: check it, do not drain "
                                      "(gpu0001 behind it); straggler rank 19 gpu0003")


async def test_events_view_says_that_enter_opens_the_events_node(world):
    # Each other view's line above its table says what enter opens ("enter: its nodes",
    # "enter: detail"); the events view said nothing of it (a UX pass).
    async with world.app.run_test(size=SIZE) as pilot:
        await open_events(world, pilot)
        await pilot.pause()
        tabs = next(ln for ln in text_of(world.app).splitlines() if "events, newest first" in ln)
        assert "enter: its node" in tabs, tabs


async def test_enter_on_a_job_that_holds_no_node_opens_where_it_failed_or_says_why(world):
    # "⏎ Its nodes" on job 4106, F on gpu0059 and so on no node, opened nothing and said
    # nothing (a 3 a.m. drive on the demo): the failed job opens the node its reason names,
    # a pending one says it holds none.
    from fleetdeck.protocol.messages import JobState
    from tests.tui.fleet import job_status, publish_job

    reason = "rank 3 on gpu0002 gpu3: uncorrectable ECC error encountered (Xid 48)"
    failed = job_status("42", [], world.clock, state=JobState.F)
    publish_job(world.ingest, failed.model_copy(update={"reason": reason, "eta_s": None}),
                world.clock)
    pending = job_status("43", [], world.clock, state=JobState.PD, step=0)
    publish_job(world.ingest, pending.model_copy(update={"reason": "Resources", "eta_s": None}),
                world.clock)
    async with world.app.run_test(size=SIZE) as pilot:
        await pilot.press("3")
        world.tick()
        await pilot.pause()
        jobs = world.app.screen
        assert isinstance(jobs, JobsScreen)
        assert jobs.table.move_to_key("43")
        await pilot.press("enter")
        world.tick()
        await pilot.pause()
        assert world.app.screen is jobs
        toasts = [str(n.message) for n in world.app._notifications]
        assert [t for t in toasts if "43" in t] == ["job 43 (PD: Resources) holds no nodes now"], \
            toasts
        assert jobs.table.move_to_key("42")
        await pilot.press("enter")
        world.tick()
        await pilot.pause()
        nodes = world.app.screen
        assert isinstance(nodes, NodesScreen)
        assert list(nodes.shown) == ["gpu0002"]
