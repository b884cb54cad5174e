"""What a new user met in the first minutes: ``/`` on the overview, ``R`` missing from help, the
first frame calling nodes without telemetry failed, and words ("restart job job 4102",
"1 nodes need attention")."""

from fleetdeck.console.tui.screens.nodes import NodesScreen
from tests.tui.conftest import SIZE, World
from tests.tui.fleet import job_status, port_down, publish_job
from tests.tui.test_views import text_of


async def test_slash_on_the_overview_filters_nodes(world):
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        await pilot.press("slash", *"gpu0003")  # typed straight on, as a user would
        await pilot.press("enter")
        world.tick()
        await pilot.pause()
        screen = world.app.screen
        assert isinstance(screen, NodesScreen)
        assert list(screen.shown) == ["gpu0003"]
        assert "filter gpu0003" in text_of(world.app)
        await pilot.press("escape")  # clears the filter
        await pilot.press("escape")  # back to the overview
        await pilot.pause()
        assert world.app.current_mode == "overview"


async def test_slash_on_the_overview_passes_an_open_node_detail(world):
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.press("2", "enter")  # node detail, left open on the nodes view
        await pilot.pause()
        await pilot.press("1")
        await pilot.pause()
        await pilot.press("slash", *"gpu0009", "enter")
        world.tick()
        await pilot.pause()
        assert isinstance(world.app.screen, NodesScreen)
        assert list(world.app.screen.shown) == ["gpu0009"]


async def test_help_lists_record_and_the_overview_filter(world):
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.press("question_mark")
        await pilot.pause()
        text = text_of(world.app)
        assert "R records what this console receives" in text
        assert "/ filter nodes" in text
        assert "✖ failed" in text and "⊘ offline" in text


async def test_first_frame_counts_nodes_without_telemetry_as_waiting():
    world = World()
    world.fleet.birth(world.ingest)  # births, no telemetry yet: the first frame of a console
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        text = text_of(world.app)
        assert "failed 0" in text and "waiting 192" in text
        assert "Health waiting 24" in text and "ok 24" not in text
        assert "?" * 8 in text  # the grid: waiting cells
        await pilot.press("2")
        world.tick()
        await pilot.pause()
        assert "waiting" in text_of(world.app).split("gpu0001", 1)[1].splitlines()[0]
        # Telemetry arrives: the same nodes count as they are.
        world.fleet.telemetry(world.ingest, faults={"gpu0009": port_down()})
        await pilot.press("1")
        world.tick()
        await pilot.pause()
        text = text_of(world.app)
        assert "waiting" not in text.split("Top problems")[0]
        # Failed for its IB port: its 8 sound GPUs are out, not failed.
        assert "Health ok 23  failed 1" in text and "failed 0  out 8" in text


async def test_words_in_notifications_and_counts():
    world = World()
    world.fleet.birth(world.ingest)
    world.fleet.telemetry(world.ingest, faults={"gpu0009": port_down()})
    publish_job(world.ingest, job_status("4102", ["gpu0001", "gpu0009"], world.clock),
                world.clock)
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        text = text_of(world.app)
        assert "(1 node needs attention," in text
        await pilot.press("3")
        world.tick()
        await pilot.pause()
        assert "1 job  1 running" in text_of(world.app)
        await pilot.press("r")
        await pilot.pause()
        assert "Restart job 4102?" in text_of(world.app)
        # gpu0009's port is down under the job: the reason box offers it as an example.
        assert "e.g. gpu0009 failed: N1" in text_of(world.app)
        await pilot.press(*"port down", "enter")
        await pilot.pause()
        notes = [str(n.message) for n in world.app._notifications]
        assert any("restart job 4102: requested" in n for n in notes), notes
        assert not any("job job" in n for n in notes)
        await pilot.press("4")
        world.tick()
        await pilot.pause()
        assert "4 leaves  192 ports" in text_of(world.app)


async def test_one_leaf_is_a_leaf():
    world = World(n=4)
    world.fleet.__init__(4, world.clock, leaves=1)
    world.populate()
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.press("4")
        world.tick()
        await pilot.pause()
        assert "1 leaf  32 ports" in text_of(world.app)
