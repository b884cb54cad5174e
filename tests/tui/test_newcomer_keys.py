"""A newcomer run's findings in the console: ':seek' (named by README and the help) answered
'unknown command' in a live console, and the help's command line wrapped under its label and
left out node detail's r/u."""

from tests.tui.conftest import SIZE
from tests.tui.test_newcomer_run import notices
from tests.tui.test_views import text_of


async def test_seek_in_a_live_console_says_it_is_for_a_recording(world):
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        await pilot.press("colon", *"seek 90", "enter")
        await pilot.pause()
        said = notices(world.app)[-1]
        assert "unknown command" not in said, said
        assert said.startswith("':seek' is for a recording: fleetdeck replay FILE"), said


async def test_help_lists_every_command_line_command_and_node_detail_keys(world):
    async with world.app.run_test(size=(160, 60)) as pilot:
        world.tick()
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        lines = text_of(world.app).splitlines()
        drain = next(line for line in lines if ":drain HOSTLIST" in line)
        # On a line of its own under the label column, not wrapped to the dialog's edge.
        assert "        :drain HOSTLIST · :resume HOSTLIST · :restart JOB" in drain, drain
        assert any(":node NAME :ctx NAME" in line for line in lines)
        node = next(line for line in lines if " Node " in line)
        assert "r drain · u resume this node" in node, node
