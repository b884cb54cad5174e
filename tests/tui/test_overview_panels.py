"""The overview uses the screen: under the grid, panels of jobs (progress, stragglers), fabric
health by switch (suspected first) and the last events, laid out by size; at 80x24 only the
essentials; no fleet-wide pass when nothing changed."""

import pytest

from fleetdeck.console.fabric_map import switch_health
from fleetdeck.console.tui.screens.overview import OverviewScreen
from tests.tui.conftest import World
from tests.tui.test_fit import LONG_KIND, LONG_NAME, enrich
from tests.tui.test_views import text_of


def panel_text(screen: OverviewScreen, name: str) -> str:
    return screen.query_one(f"#{name}").render().plain


async def overview(world: World, pilot) -> OverviewScreen:
    world.tick()
    await pilot.pause()
    await pilot.pause()  # the panels are arranged after the first layout
    world.app.refresh_view()
    await pilot.pause()
    screen = world.app.screen
    assert isinstance(screen, OverviewScreen)
    return screen


@pytest.mark.parametrize("size", [(160, 48), (220, 60)], ids=["160x48", "220x60"])
async def test_jobs_fabric_and_events_panels_show_on_a_big_screen(size):
    world = World()
    world.populate()
    enrich(world)
    async with world.app.run_test(size=size) as pilot:
        screen = await overview(world, pilot)
        for name in ("jobs-panel", "fabric-panel", "events-panel"):
            assert screen.query_one(f"#{name}").display, name
        jobs = panel_text(screen, "jobs-panel")
        # The job with the straggler first, with its progress, and the straggler named.
        assert jobs.splitlines()[0].split()[:3] == ["41", "llama-70b", "R"]
        assert "50%" in jobs and "█████" in jobs
        assert "straggler gpu0003 +50%" in jobs
        assert LONG_NAME in jobs, "a long job name is not cut where there is room"
        fabric = panel_text(screen, "fabric-panel")
        # The bad ports counted with their unit: "3 down of 6" beside a hostlist read as
        # 3 of 6 nodes (a UX pass at 3 a.m.).
        assert fabric.splitlines()[0].startswith("▶ leaf00-r2") and "3 of 6 ports down" in fabric
        assert "31 of 32 rail switches ok" in fabric
        # A line per leaf group, a glyph per rail switch, under a heading that says so: right
        # under the switches' lines they read as nested in them.
        lines = fabric.splitlines()
        at = lines.index("leaf groups, a glyph per rail switch:")
        assert lines[at + 1] == "▶ leaf00 r0-7 ■■✖■■■■■  6 nodes"
        assert "  leaf01 r0-7 ■■■■■■■■  6 nodes" in fabric
        events = panel_text(screen, "events-panel")
        assert "gpu0007" in events and LONG_KIND in events
        titles = text_of(world.app)
        assert "Jobs: 2 running, 1 with a straggler" in titles
        assert "Fabric by switch: 1 suspect" in titles and "Last events" in titles
        # Side by side from 200 columns, jobs beside fabric-over-events below that.
        regions = {n: screen.query_one(f"#{n}").region
                   for n in ("jobs-panel", "fabric-panel", "events-panel")}
        assert regions["fabric-panel"].x > regions["jobs-panel"].x
        if size[0] >= 200:
            assert regions["events-panel"].x > regions["fabric-panel"].x
        else:
            assert regions["events-panel"].y > regions["fabric-panel"].y
        # No big blank area: the panels reach down to the footer.
        bottom = max(r.bottom for r in regions.values())
        assert bottom >= size[1] - 2


async def test_80x24_keeps_the_essentials_only():
    world = World()
    world.populate()
    async with world.app.run_test(size=(80, 24)) as pilot:
        screen = await overview(world, pilot)
        text = text_of(world.app)
        assert "Top problems" in text and "gpu0001 ■■■■" in text
        # The panels get only what the essentials leave: here (24 nodes, problem rows cut to
        # one line each) the whole grid and at least PANELS_MIN lines.
        from fleetdeck.console.tui.screens.overview import PANELS_MIN
        grid = screen.grid
        rows = -(-len(world.fleet.names) // grid.per_line)
        assert grid.size.height == rows
        assert screen.query_one("#panels").size.height >= PANELS_MIN
    world = World(n=64)  # the demo's fleet: no room left for them at 80x24
    world.populate()
    async with world.app.run_test(size=(80, 24)) as pilot:
        screen = await overview(world, pilot)
        assert not screen.query_one("#panels").display
        assert "Top problems" in text_of(world.app)


async def test_new_events_and_job_progress_reach_the_panels(world):
    from fleetdeck.agents.source import EventDraft
    from fleetdeck.protocol import codec
    from tests.tui.fleet import job_status, publish_job

    async with world.app.run_test(size=(160, 48)) as pilot:
        screen = await overview(world, pilot)
        ev = world.fleet.agents["gpu0011"]._event(EventDraft("xid", "XID 79: fell off the bus",
                                                             component="gpu5"))
        world.ingest.handle("fleetdeck/v1/t/node/gpu0011/event", codec.encode(ev),
                            world.clock())
        publish_job(world.ingest, job_status("41", world.fleet.names[:4], world.clock,
                                             step=900, slowest_node="gpu0003"), world.clock)
        world.tick()
        await pilot.pause()
        events = panel_text(screen, "events-panel")
        assert events.splitlines()[0].split()[1:3] == ["gpu0011", "xid"]  # newest first
        assert "90%" in panel_text(screen, "jobs-panel")


async def test_a_quiet_fleet_costs_no_fleet_wide_pass(world, monkeypatch):
    """Ticks with nothing new do not recompute counts, switches or jobs (the revision
    cache), so the overview stays cheap at 16,384 nodes."""
    import fleetdeck.console.tui.screens.overview as ov

    calls = []
    monkeypatch.setattr(ov, "switch_health",
                        lambda *a, **k: calls.append(1) or switch_health(*a, **k))
    async with world.app.run_test(size=(160, 48)) as pilot:
        await overview(world, pilot)
        first = len(calls)
        assert first >= 1
        for _ in range(5):
            world.tick()
            await pilot.pause()
        assert len(calls) == first
        world.fleet.telemetry(world.ingest, names=["gpu0002"])
        world.tick()
        await pilot.pause()
        assert len(calls) == first + 1


def test_switch_health_counts_ports_of_each_bad_switch(world):
    world.app.session.tick()
    s = switch_health(world.app.state)
    assert s.switches == 32
    assert [r.switch for r in s.rows] == ["leaf00-r2"]
    row = s.rows[0]
    assert (row.down, row.ports, row.nodes) == (3, 6, ("gpu0009", "gpu0013", "gpu0017"))
    assert "suspect leaf switch leaf00-r2" in row.suspect


async def test_a_switch_with_low_rate_errors_only_is_drawn_as_the_matrix_draws_it():
    """Receive errors rising on one port (N4, a warning) are the matrix's △, not the ▲ of
    errors at a rate that drains: the overview's line per leaf group drew every erroring port
    ▲, so a warning read as a port to drain."""
    from tests.tui.test_views_scale import _replace as replace

    world = World()
    world.fleet.birth(world.ingest)
    count = {"n": 0}

    def rcv_errors(tel):
        count["n"] += 1
        return replace(tel, ib_ports=[replace(p, rcv_errors=count["n"] * 10)
                                      if p.dev == "mlx5_ib5" else p for p in tel.ib_ports])

    async with world.app.run_test(size=(160, 48)) as pilot:
        for _ in range(3):
            world.fleet.telemetry(world.ingest, faults={"gpu0002": rcv_errors})
            world.tick(1.0)
        screen = await overview(world, pilot)
        s = switch_health(world.app.state)
        row = next(r for r in s.rows if r.switch.endswith("-r5"))
        assert (row.erroring, row.low_rate, row.port_name) == (1, 1, "errors")
        fabric = panel_text(screen, "fabric-panel")
        line = next(ln for ln in fabric.splitlines() if ln.strip().startswith(row.leaf + " "))
        assert "■■■■■△■■" in line and "▲" not in line, line


async def test_the_last_events_panel_is_newest_first_by_time_not_by_arrival(world):
    """An event stamped by its agent's clock before one that arrived earlier was listed
    above it (a 3 a.m. drive: the panel out of time order, the events view in it)."""
    from fleetdeck.agents.source import EventDraft
    from fleetdeck.protocol import codec

    agent = world.fleet.agents["gpu0007"]
    async with world.app.run_test(size=(160, 48)) as pilot:
        screen = await overview(world, pilot)
        later = agent._event(EventDraft("xid", "later by its clock", component="gpu2"))
        world.clock.advance(-5)
        earlier = agent._event(EventDraft("xid", "earlier by its clock", component="gpu1"))
        world.clock.advance(5)
        for ev in (later, earlier):  # one tick each: the earlier one arrives last
            world.ingest.handle("fleetdeck/v1/t/node/gpu0007/event", codec.encode(ev),
                                world.clock())
            world.tick()
        await pilot.pause()
        text = panel_text(screen, "events-panel")
        assert text.index("later by its clock") < text.index("earlier by its clock"), text


async def test_the_counts_wrap_between_groups_not_inside_one():
    """At 80 columns the counts read "IB ports 256  down 0  erroring" over "0  Jobs PD 5":
    a figure cut from its label (a newcomer's run)."""
    import re

    world = World(n=64)
    world.populate()
    async with world.app.run_test(size=(80, 24)) as pilot:
        screen = await overview(world, pilot)
        lines = [ln.strip() for ln in panel_text(screen, "counts").splitlines()]
        assert len(lines) >= 3, lines
        for line in lines:
            assert re.match(r"^(Nodes|Health|GPUs|IB ports|Jobs) ", line), lines
            assert not re.search(r"(erroring|down|free|failed|out|in use)$", line), lines
    world = World(n=64)
    world.populate()
    async with world.app.run_test(size=(200, 50)) as pilot:  # room: two lines, as before
        screen = await overview(world, pilot)
        assert len(panel_text(screen, "counts").splitlines()) == 2


async def test_the_jobs_panel_follows_the_clock_with_nothing_received():
    """Under a dead simulator the overview's jobs kept "ckpt 100 (14s)" for minutes (the
    jobs view moved on): made again only when something arrived (a drill)."""
    import re

    world = World()
    world.populate()
    async with world.app.run_test(size=(160, 48)) as pilot:
        screen = await overview(world, pilot)
        from fleetdeck.protocol import codec
        from fleetdeck.protocol.topics import Kind, topic_for
        from tests.tui.fleet import CLUSTER

        for name, agent in world.fleet.agents.items():  # every agent's Last Will
            world.ingest.handle(topic_for(CLUSTER, Kind.STATUS, name),
                                codec.encode(agent.status(online=False)), world.clock())
        world.tick(5.0)  # believed (WILL_BURST_S): nothing more changes from here
        world.tick()
        await pilot.pause()

        def age() -> str:
            found = re.search(r"ckpt 400 \(([0-9ms]+)\)", panel_text(screen, "jobs-panel"))
            assert found, panel_text(screen, "jobs-panel")
            return found.group(1)

        before = age()
        for _ in range(14):  # 7 s, nothing received
            world.tick(0.5)
            await pilot.pause()
        assert age() != before


async def test_the_jobs_panel_says_a_failed_job_s_reason_once(world):
    # The head line said the scheduler's reason, and the line under it "failed on gpu0002
    # (the same reason); drain …": one sentence twice in one panel, the restart cut off (a UX
    # pass on the demo, an XID 48).
    from fleetdeck.protocol.messages import JobState
    from tests.tui.fleet import job_status, publish_job

    reason = "rank 3 on gpu0002 gpu3: uncorrectable ECC error encountered (Xid 48)"
    async with world.app.run_test(size=(160, 48)) as pilot:
        screen = await overview(world, pilot)
        ended = job_status("41", world.fleet.names[:4], world.clock, state=JobState.F)
        publish_job(world.ingest, ended.model_copy(update={"reason": reason, "eta_s": None}),
                    world.clock)
        world.tick()
        await pilot.pause()
        jobs = panel_text(screen, "jobs-panel")
        assert jobs.count("uncorrectable ECC") == 1, jobs
        (under,) = [ln for ln in jobs.splitlines() if "↳" in ln]
        assert under.strip() == ("↳ failed on gpu0002; restart-job 41 from its checkpoint at "
                                 "step 400")
        # The line under that names whose job it is: a bare "alice" read as a stray word.
        owner = jobs.splitlines()[jobs.splitlines().index(under) + 1].strip()
        assert owner.startswith("user "), jobs


@pytest.mark.parametrize(("size", "shown"), [((80, 24), 3), ((100, 30), 3), ((160, 48), 9),
                                             ((250, 70), 14)],
                         ids=["80x24", "100x30", "160x48", "250x70"])
async def test_the_top_problems_use_the_height_there_is(size, shown):
    """At 250x70 the top problems stopped at 6 lines with ~24 empty rows under the panels (a
    newcomer's run): from 40 rows they take a fifth of the screen; under it, 3. The rows left
    out are counted on a line of their own: three rows under "11 nodes need attention" read as
    the whole list (a 3 a.m. drive on 1,024 nodes)."""
    from fleetdeck.console.rows import top_problems
    from fleetdeck.console.tui.screens.overview import problem_rows
    from tests.tui.fleet import throttled

    assert problem_rows(size[1]) == shown
    world = World(n=64)
    world.populate()
    world.fleet.telemetry(world.ingest, faults={n: throttled(i % 8)
                                                for i, n in enumerate(world.fleet.names[8:28])})
    async with world.app.run_test(size=size) as pilot:
        screen = await overview(world, pilot)
        problems = screen.query_one("#problems")
        rows = problems.render().plain.splitlines()
        assert rows[0].startswith("Top problems"), rows
        assert len(rows) == 2 + shown and problems.size.height == 2 + shown, rows
        every = len(top_problems(world.app.state, 1000)[0])
        assert every > shown
        # Its keys as the title says them: "2 for the node list, 6 for the incidents" read
        # as counts (a 3 a.m. drive at 80x24).
        assert rows[-1].strip() == f"… {every - shown} more (2: node list, 6: incidents)", rows
        if size[1] >= 40:
            # The panels still have their room, and reach down to the footer.
            panels = screen.query_one("#panels")
            assert panels.display and panels.size.height >= 6
            assert panels.region.bottom >= size[1] - 2



async def test_a_grid_taller_than_the_screen_says_how_many_rows_are_off_it():
    """At 80x24 the demo's 64 nodes took 10 grid rows, 8 shown, with nothing saying more
    existed (a fresh-clone walk-through): the grid's last line says how many rows are below,
    and above once the cursor has moved the grid down."""
    world = World(128)
    world.populate()
    async with world.app.run_test(size=(80, 24)) as pilot:
        screen = await overview(world, pilot)
        grid = screen.grid
        lines = -(-len(grid.node_ids) // grid.per_line)
        shown = grid.size.height - 1  # the last says what is off the screen
        assert lines > shown + 1, (lines, shown)
        rows = text_of(world.app).splitlines()
        more = [r for r in rows if "more row" in r]
        assert len(more) == 1, rows
        assert f"↓ {lines - shown} more rows" in more[0] and "above" not in more[0], more
        grid.focus()
        grid.action_ends(1)  # to the last node: the grid moves down
        await pilot.pause()
        rows = text_of(world.app).splitlines()
        (more,) = [r for r in rows if "rows above" in r]
        assert f"↑ {lines - shown} rows above" in more and "more row" not in more, more
        last = grid.node_ids[(lines - 1) * grid.per_line]  # the last row's label
        assert any(r.lstrip().startswith(f"{last} ") for r in rows), rows


async def test_the_jobs_panel_lines_up_the_node_lists_after_etas_of_any_length():
    """With more jobs than room for their detail lines, each running job's nodes follow its
    ETA on its line: "ETA -" beside "ETA 59m51s" started them five cells apart (a 3 a.m.
    drive at 2,048 nodes)."""
    from tests.tui.fleet import job_status, publish_job
    from tests.tui.test_views_scale import _replace

    world = World(96)
    world.fleet.birth(world.ingest)
    etas = [None, 27.0, 3600.0 * 3 + 59, 59 * 60 + 51.0]
    for i in range(24):
        job = job_status(str(4101 + i), world.fleet.names[4 * i:4 * i + 4], world.clock)
        publish_job(world.ingest, _replace(job, eta_s=etas[i % len(etas)]), world.clock)
    world.fleet.telemetry(world.ingest)
    async with world.app.run_test(size=(160, 48)) as pilot:
        screen = await overview(world, pilot)
        lines = [ln for ln in panel_text(screen, "jobs-panel").splitlines() if " ETA " in ln]
        said = {ln.split(" ETA ")[1].split()[0] for ln in lines}
        assert {"-", "27s", "59m51s"} <= said, lines
        starts = {ln.index("gpu[") for ln in lines}
        assert len(starts) == 1, lines
