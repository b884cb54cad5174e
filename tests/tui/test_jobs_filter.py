"""``/`` in the jobs view filters its jobs as the nodes view filters nodes: it did nothing,
silently, while the overview's and the nodes view's footers teach ``/`` (a newcomer's run)."""

from fleetdeck.console.rows import JobRow, NodeFilter
from tests.tui.conftest import SIZE, World
from tests.tui.fleet import job_status, publish_job
from tests.tui.test_views import text_of


def _row(job_id: str, name: str, state: str = "R", reason: str = "") -> JobRow:
    return JobRow(job_id=job_id, name=name, user="alice", state=state, progress=0.5,
                  step="1/2", step_time="-", eta="-", nodes="gpu[0001-0002]", checkpoint="-",
                  straggler="", reason=reason)


def test_a_job_filter_reads_as_the_nodes_one():
    llama = _row("41", "llama-70b")
    bert = _row("42", "bert-large", state="PD", reason="Resources")
    on = ["gpu0001", "gpu0002"]
    assert [NodeFilter("llama").match_job(r, on) for r in (llama, bert)] == [True, False]
    assert [NodeFilter("42").match_job(r, on) for r in (llama, bert)] == [False, True]  # id
    assert NodeFilter("resources").match_job(bert, on)  # why the scheduler holds it
    assert [NodeFilter("!llama").match_job(r, on) for r in (llama, bert)] == [False, True]
    # A hostlist: the jobs on any of those nodes.
    assert NodeFilter("gpu[0002-0005]").match_job(llama, on)
    assert not NodeFilter("gpu[0003-0005]").match_job(llama, on)
    assert NodeFilter("!gpu[0003-0005]").match_job(llama, on)


async def test_slash_in_the_jobs_view_filters_its_jobs_and_esc_clears_it():
    world = World()
    world.populate()
    other = job_status("42", world.fleet.names[8:10], world.clock).model_copy(
        update={"name": "bert-large"})
    publish_job(world.ingest, other, world.clock)
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        await pilot.press("3")
        world.tick()
        await pilot.pause()
        screen = world.app.screen
        assert sorted(r.job_id for r in screen.rows) == ["41", "42"]
        assert " / Filter " in text_of(world.app).splitlines()[-1]
        await pilot.press("slash", *"bert")
        world.tick()
        await pilot.pause()
        assert [r.job_id for r in screen.rows] == ["42"]
        assert "1/2 jobs" in screen.info() and "filter bert" in screen.info()
        await pilot.press("enter")  # closes the box, keeps the filter
        world.tick()
        await pilot.pause()
        assert [r.job_id for r in screen.rows] == ["42"]
        await pilot.press("escape")  # clears it; the view stays
        world.tick()
        await pilot.pause()
        assert world.app.current_mode == "jobs"
        assert sorted(r.job_id for r in screen.rows) == ["41", "42"]
