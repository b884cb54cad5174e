"""Small and large terminals: data before decoration, cuts marked with "…", long names given
room on a wide screen, and the fabric view's leaf table sized to its rows."""

from fleetdeck.agents.source import EventDraft
from fleetdeck.console.tui.fit_table import FitColumn, fit_columns
from fleetdeck.console.tui.line_table import Column, fit, layout
from fleetdeck.protocol import codec
from tests.tui.conftest import World
from tests.tui.fleet import job_status, publish_job, throttled
from tests.tui.test_views import text_of

LONG_NAME = "llama-70b-pretrain-v2"
LONG_KIND = "link_flap_storm_detected"


def enrich(world: World) -> None:
    """A job with a long name and an event with a long kind, on top of the usual fleet."""
    publish_job(world.ingest, job_status("4102", world.fleet.names[4:6], world.clock).model_copy(
        update={"name": LONG_NAME}), world.clock)
    agent = world.fleet.agents["gpu0007"]
    ev = agent._event(EventDraft(LONG_KIND, "mlx5_ib3:1 went down and up 9 times in 60 s",
                                 component="mlx5_ib3:1"))
    world.ingest.handle("fleetdeck/v1/t/node/gpu0007/event", codec.encode(ev), world.clock())


def line_with(text: str, needle: str) -> str:
    return next(line for line in text.splitlines() if needle in line)


async def show(world: World, size: tuple[int, int], *keys: str, node: str = "",
               gpu: int | None = None) -> str:
    async with world.app.run_test(size=size) as pilot:
        world.tick()
        await pilot.pause()
        if node:
            world.app.open_node(node, gpu)
            await pilot.pause()
        for key in keys:
            await pilot.press(key)
            await pilot.pause()
        world.app.refresh_view()
        await pilot.pause()
        return text_of(world.app)


# --- the pieces ------------------------------------------------------------------------------


def test_fit_marks_every_cut():
    assert fit("abcdef", 4) == "abc…"
    assert fit("ab", 4) == "ab  " and fit("ab", 4, right=True) == "  ab"
    assert fit("90°C tempé", 6) == "90°C …"
    assert fit("x", 0) == ""


def test_layout_drops_by_rank_then_grows():
    cols = [Column("A", "a", 10), Column("B", "b", 10, drop=1), Column("C", "c", 10, drop=2),
            Column("N", "n", 8, grow=30), Column("R", "r", 0, min=20)]
    assert layout(cols, 200, (0, 0, 0, 25, 0)) == [10, 10, 10, 25, 140]
    narrow = layout(cols, 60, (0, 0, 0, 25, 0))
    assert narrow[2] is None and narrow[1] is not None  # highest rank goes first
    assert narrow[4] is not None and narrow[4] >= 20
    assert layout(cols, 40)[1] is None


def test_fit_columns_drops_sparklines_before_data():
    from rich.text import Text

    data = [Text("12345")] * 3
    cols = [FitColumn("GPU", data), FitColumn("util", spark=16, draw=lambda w: []),
            FitColumn("TEMP", data), FitColumn("MEM", data, drop=1)]
    wide = fit_columns(cols, 80)
    assert wide.spark == 16 and not wide.hidden
    mid = fit_columns(cols, 30)
    assert 6 <= mid.spark < 16 and not mid.hidden
    narrow = fit_columns(cols, 20)
    assert narrow.spark == 0 and narrow.widths[3] is not None  # data stays, decoration goes
    tiny = fit_columns(cols, 12)
    assert tiny.widths[3] is None and tiny.widths[0] is not None


# --- the screens -----------------------------------------------------------------------------


async def test_node_detail_80x24_keeps_the_numbers():
    world = World()
    world.populate()
    for _ in range(4):
        world.fleet.telemetry(world.ingest, names=["gpu0003"], faults={"gpu0003": throttled(3)})
        world.tick(1.0)
    text = await show(world, (80, 24), node="gpu0003", gpu=3)
    header = line_with(text, "UTIL")  # "GPU " is in the straggler line too
    for title in ("GPU", "UTIL", "POWER", "TEMP"):
        assert title in header
    row = line_with(text, "▶3")
    assert "90°" in row and "W" in row and "%" in row
    assert "…" not in row
    assert "hidden at this width" in text and "sparklines" in text
    assert not any(c in header for c in "▁▂▃▄▅▆▇█")


async def test_node_detail_wide_keeps_sparklines():
    world = World()
    world.populate()
    for _ in range(4):
        world.fleet.telemetry(world.ingest, names=["gpu0003"])
        world.tick(1.0)
    text = await show(world, (160, 48), node="gpu0003")
    assert "last 16 samples" in text and "hidden" not in text
    assert any(c in line_with(text, "  0 ") for c in "▁▂▃▄▅▆▇█")


async def test_reasons_and_stragglers_cut_with_a_mark_at_100_columns():
    world = World()
    world.populate()
    nodes = await show(world, (100, 30), "2")
    row = line_with(nodes, "gpu0003 ")
    assert "G12 gpu3: clock" in row and row.rstrip().endswith("…")
    world = World()
    world.populate()
    jobs = await show(world, (100, 30), "3")
    assert "HELD UP" in jobs
    row = line_with(jobs, "llama-70b")
    assert "rank 19 gpu0003" in row and row.rstrip().endswith("…")
    assert "50%" in row  # the percentage stays when the bar goes


async def test_long_names_get_room_on_a_wide_screen():
    world = World()
    world.populate()
    enrich(world)
    jobs = await show(world, (220, 60), "3")
    assert LONG_NAME in jobs and "rank 19 gpu0003 +50%: throttled GPU" in jobs
    world = World()
    world.populate()
    enrich(world)
    jobs = await show(world, (80, 24), "3")
    assert LONG_NAME not in jobs and LONG_NAME[:11] + "…" in jobs
    world = World()
    world.populate()
    enrich(world)
    events = await show(world, (220, 60), "5")
    assert LONG_KIND in events
    world = World()
    world.populate()
    enrich(world)
    events = await show(world, (80, 24), "5")
    assert LONG_KIND[:12] + "…" in events


async def test_every_kind_in_use_is_whole_at_80_columns():
    """At 80 columns the KIND column cut "ib_port_state" to "ib_port_st…" (docs/protocol.md's
    longest kind in use), the word a filter of the events view is typed from."""
    world = World()
    world.populate()
    agent = world.fleet.agents["gpu0007"]
    ev = agent._event(EventDraft("ib_port_state", "mlx5_ib3:1 went DOWN (was ACTIVE)",
                                 component="mlx5_ib3:1"))
    world.ingest.handle("fleetdeck/v1/t/node/gpu0007/event", codec.encode(ev), world.clock())
    events = await show(world, (80, 24), "5")
    assert " ib_port_state " in line_with(events, "went DOWN"), events


async def test_fabric_shows_every_leaf():
    for size in ((160, 48), (80, 24)):
        world = World()
        world.populate()
        text = await show(world, size, "4")
        for leaf in ("leaf00", "leaf01", "leaf02", "leaf03"):
            assert f"  {leaf} " in text.split("COUNTERS")[0], (size, leaf)
        assert "mlx5_ib2:1" in text


async def test_fabric_leaf_table_stops_at_its_limit():
    world = World(n=48)
    world.fleet.__init__(48, world.clock, leaves=20)
    world.populate()
    async with world.app.run_test(size=(160, 48)) as pilot:
        world.tick()
        await pilot.press("4")
        await pilot.pause()
        world.app.refresh_view()
        await pilot.pause()
        leaf = world.app.screen.leaf_table
        assert leaf.size.height == 11  # the CSS cap (12 with its border): the rest scroll
        assert len(leaf.rows) == 20


async def test_header_says_how_many_columns_the_width_hides():
    world = World()
    world.populate()
    text = await show(world, (80, 24), "2")
    header = line_with(text, "NODE ")
    assert "REASONS" in header and header.rstrip().endswith("3 hidden · 1/24")
    world = World()
    world.populate()
    text = await show(world, (160, 48), "2")
    assert "hidden" not in line_with(text, "NODE ")


async def test_content_is_measured_only_when_there_is_room_to_grow():
    """Measuring asks every row for its cells: never on a screen too narrow to use it, and
    never for the nodes table (4,096 rows; its NODE column fits the ids when the fleet's size
    changes)."""
    world = World()
    world.populate()
    enrich(world)
    async with world.app.run_test(size=(100, 30)) as pilot:
        world.tick()
        await pilot.press("3")
        world.tick()
        await pilot.pause()
        assert world.app.screen.table._content == ()
        await pilot.press("2")
        world.tick()
        await pilot.pause()
        table = world.app.screen.table
        assert not any(c.grow for c in table.columns) and table.columns[0].width == 10


def test_an_empty_flexible_column_lends_its_room_to_the_growing_ones():
    """At 160 columns the jobs table cut NODES to "gpu[0017-0019,00…" beside an empty HELD UP
    (a 3 a.m. drive): growing columns may take what the flexible one's cells do not need,
    down to its min; with long cells there it keeps GROW_KEEP as before."""
    from fleetdeck.console.tui.screens.jobs import JOB_COLUMNS

    nodes = next(i for i, c in enumerate(JOB_COLUMNS) if c.title == "NODES")
    content = [0] * len(JOB_COLUMNS)
    content[1], content[nodes] = 17, 26  # "mixtral-8x22b-002", "gpu[0017-0019,0021-0024]"
    assert layout(JOB_COLUMNS, 158, content)[nodes] == 26
    content[-1] = 60  # something holds a job up: the flexible column keeps its room
    assert layout(JOB_COLUMNS, 158, content)[-1] >= 40


async def test_the_jobs_counts_fit_the_width_in_fewer_words_where_they_must():
    """The overview's jobs panel title ("…1 held up by a switch, 1 failed, not r…") and the
    jobs view's line ("…1 with a straggler  enter: it…") were cut at 160 columns (a 3 a.m.
    drive on 1,024 nodes): in full where they fit, else in shorter words, the hint and then
    the least telling counts left out first."""
    from fleetdeck.protocol.messages import JobState
    from tests.console.test_judgements import xid
    from tests.tui.fleet import port_down
    from tests.tui.test_overview_panels import overview

    world = World()
    world.populate()
    names = world.fleet.names
    publish_job(world.ingest, job_status("42", names[6:8], world.clock), world.clock)
    for jid in ("43", "44", "45", "46", "47"):
        publish_job(world.ingest, job_status(jid, names[20:22], world.clock), world.clock)
    publish_job(world.ingest, job_status("50", names[14:16], world.clock, state=JobState.F),
                world.clock)
    world.tick(1.0)
    down = port_down("mlx5_ib2")
    world.fleet.telemetry(world.ingest, job={**{n: "41" for n in names[:4]},
                                             **{n: "42" for n in names[6:8]}},
                          faults={"gpu0003": throttled(3), "gpu0007": xid(2, 79),
                                  **{n: down for n in ("gpu0001", "gpu0005", "gpu0009",
                                                       "gpu0013")}})
    async with world.app.run_test(size=(160, 48)) as pilot:
        screen = await overview(world, pilot)
        title = str(screen.query_one("#jobs-panel").border_title)
        assert "1 held by node" in title and "1 held by switch" in title, title
        assert "1 failed" in title and "…" not in line_with(text_of(world.app), "Jobs:")
        await pilot.press("3")
        world.tick()
        await pilot.pause()
        info = line_with(text_of(world.app), "│")
        assert "1 failed" in info and "straggl" in info and "…" not in info, info
        await pilot.press("1")
        await pilot.resize_terminal(100, 48)
        screen = await overview(world, pilot)
        jobs = line_with(text_of(world.app), "Jobs:")
        assert "1 failed" in jobs and "…" not in jobs, jobs
        # The jobs view at 100 columns cut "…1 held by node  1 held by switch  1 fai…": the
        # jobs held up come in one count there, the table's rows say by what.
        await pilot.press("3")
        world.tick()
        await pilot.pause()
        info = line_with(text_of(world.app), "│")
        assert "2 held up" in info and "1 failed" in info and "…" not in info, info


async def test_jobs_at_160_columns_give_unused_cells_to_nodes_and_what_holds_a_job_up():
    """At 160 columns the jobs table cut NODES (``gpu[0009,0011-00…``) and the straggler beside
    it while JOBID kept 8 cells for "4101", STEP 11 and CKPT 14 for "-" (a 3 a.m. drive on
    256 nodes): those narrow to their cells, never below their titles."""
    world = World()
    world.populate()
    names = world.fleet.names
    spread = [names[i] for i in (8, 10, 11, 12, 13, 14, 15, 16, 17, 19)]
    publish_job(world.ingest, job_status("4102", spread, world.clock), world.clock)
    text = await show(world, (160, 48), "3")
    assert "gpu[0009,0011-0018,0020] " in line_with(text, "4102"), text
    header = line_with(text, "JOBID")
    assert "JOBID  NAME" in header and "CKPT          HELD" not in header, header
    held = line_with(text, "rank 19")
    assert len(held.split("rank 19", 1)[1].rstrip()) >= 40, held


async def test_every_views_line_fits_at_80_and_100_columns_hints_given_up_whole():
    """At 100 columns the overview's line read "colour by he…", the fabric's "ta…", the
    events' "enter:…" and the incidents' "wors…"; at 80 the nodes' "s…" and the fabric
    legend lost its last line without a mark (a 3 a.m. drive on 256 nodes): a short line
    gives up its hint whole, then says less in fewer words, never cut mid-word."""
    from tests.tui.fleet import port_down

    for size in ((80, 24), (100, 30)):
        world = World()
        world.populate()
        enrich(world)
        world.tick(1.0)
        down = port_down("mlx5_ib2")
        world.fleet.telemetry(world.ingest, job={n: "41" for n in world.fleet.names[:4]},
                              faults={"gpu0003": throttled(3),
                                      **{n: down for n in ("gpu0001", "gpu0005", "gpu0009",
                                                           "gpu0013")}})
        async with world.app.run_test(size=size) as pilot:
            for key in ("1", "2", "4", "5", "6"):
                await pilot.press(key)
                world.tick()
                await pilot.pause()
                text = text_of(world.app)
                info = line_with(text, "│")
                assert not info.rstrip().endswith("…"), (size, key, info)
                if key == "4":
                    legend = line_with(text, "▶suspect")
                    after = text.split(legend, 1)[1].splitlines()[1]
                    assert "(worst shown)" in legend + after or "one port" in legend + after, (
                        text)
