"""Keys an SRE's hands give at 3 a.m. without meaning them: ctrl+c, and text pasted into the
console by mistake (a bracketed paste arrives as one ``events.Paste``, never as keys).

- ctrl+c showed Textual 8's "Press ctrl+q to quit the app" and left the console running; it
  now quits as ``q`` does, from a view or a dialog, asking first while commands are open.
- A paste must never act as keys: not a view's bindings (``r`` drain, ``u`` resume), not a
  dialog's answer (``y``, Enter), and in a text box it fills the box but submits nothing."""

from textual import events
from textual.widgets import Input

from fleetdeck.console.commands import Phase
from fleetdeck.console.tui.modals import (
    CommandLine,
    ConfirmScreen,
    DrainScreen,
    QuitScreen,
)
from fleetdeck.console.tui.screens.nodes import NodesScreen
from fleetdeck.console.tui.screens.overview import OverviewScreen
from tests.tui.conftest import SIZE, open_view, pilot_until
from tests.tui.test_command_flows import sent
from tests.tui.test_views import text_of

SHELL_TEXT = ":drain gpu0002 reason\nr\ny\nd\nu\n\ny\n"
"""A paste an operator did not mean for the console: a command line, then command keys and
answers, each with its Enter."""


async def paste(app, pilot, text: str = SHELL_TEXT) -> None:
    """Post a bracketed paste as the driver does (the app routes it to what has focus)."""
    app.post_message(events.Paste(text))
    await pilot.pause()
    await pilot.pause()


async def test_ctrl_c_quits_with_nothing_open(world):
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.press("ctrl+c")
        await pilot_until(pilot, lambda: not world.app.is_running, "the console to quit")
    assert world.app.return_code == 0


async def test_ctrl_c_quits_from_a_dialog_and_the_command_line(world):
    """A dialog had sent nothing yet: ctrl+c leaves (a text box's copy did not take it)."""
    async with world.app.run_test(size=SIZE) as pilot:
        await open_view(world, pilot, "2", NodesScreen)
        await pilot.press("r")
        await pilot_until(pilot, lambda: isinstance(world.app.screen, DrainScreen),
                          "the drain dialog")
        assert isinstance(world.app.focused, Input)  # the reason box, where ctrl+c copies
        await pilot.press(*"typed", "ctrl+c")
        await pilot_until(pilot, lambda: not world.app.is_running, "the console to quit")
    assert sent(world) == []
    assert world.app.return_code == 0


async def test_ctrl_c_asks_while_a_command_is_open_and_again_quits(world):
    async with world.app.run_test(size=SIZE) as pilot:
        nodes = await open_view(world, pilot, "2", NodesScreen)
        nodes.table.move_to_key("gpu0002")
        await pilot.press("r")
        await pilot.pause()
        await pilot.press(*"fan", "enter")
        await pilot.pause()
        await world.app.session.flush()
        [cmd] = sent(world)
        req = world.app.tracker.requests[cmd.cmd_id.rsplit(".", 1)[0]]
        await pilot.press("ctrl+c")
        await pilot_until(pilot, lambda: isinstance(world.app.screen, QuitScreen),
                          "the quit question")
        await pilot.press("n")  # stays
        await pilot_until(pilot, lambda: not isinstance(world.app.screen, QuitScreen),
                          "the question to close")
        assert world.app.is_running and req.phase is Phase.REQUESTED
        await pilot.press("ctrl+c")
        await pilot_until(pilot, lambda: isinstance(world.app.screen, QuitScreen),
                          "the quit question")
        stacked = sum(isinstance(s, QuitScreen) for s in world.app.screen_stack)
        await pilot.press("ctrl+c")  # again: quit anyway, not a second question
        await pilot_until(pilot, lambda: not world.app.is_running, "the console to quit")
    assert stacked == 1
    assert req.phase is Phase.ABANDONED
    assert world.audit.records[-1].outcome == "abandoned"
    assert world.app.return_code == 0


async def test_ctrl_q_at_the_quit_question_quits_instead_of_asking_again(world):
    async with world.app.run_test(size=SIZE) as pilot:
        nodes = await open_view(world, pilot, "2", NodesScreen)
        nodes.table.move_to_key("gpu0002")
        await pilot.press("u")
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        await world.app.session.flush()
        assert len(sent(world)) == 1
        await pilot.press("ctrl+q")
        await pilot_until(pilot, lambda: isinstance(world.app.screen, QuitScreen),
                          "the quit question")
        await pilot.press("ctrl+q")
        await pilot_until(pilot, lambda: not world.app.is_running, "the console to quit")
    assert world.app.return_code == 0


async def test_a_paste_in_a_view_presses_no_key(world):
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        assert isinstance(world.app.screen, OverviewScreen)
        await paste(world.app, pilot)
        assert isinstance(world.app.screen, OverviewScreen)  # no ':' line, no dialog
        nodes = await open_view(world, pilot, "2", NodesScreen)
        nodes.table.move_to_key("gpu0002")
        await paste(world.app, pilot)
        world.tick()
        await world.app.session.flush()
        assert world.app.screen is nodes
        assert sent(world) == [] and world.audit.records == []


async def test_a_paste_answers_no_dialog(world):
    """The resume dialog's focus is on its button, where Enter confirms; the drain dialog's is
    in its reason box, where Enter submits: a paste holding Enter and ``y`` does neither."""
    async with world.app.run_test(size=SIZE) as pilot:
        nodes = await open_view(world, pilot, "2", NodesScreen)
        nodes.table.move_to_key("gpu0002")
        await pilot.press("u")
        await pilot_until(pilot, lambda: isinstance(world.app.screen, ConfirmScreen),
                          "the resume dialog")
        await paste(world.app, pilot)
        assert isinstance(world.app.screen, ConfirmScreen)
        await pilot.press("escape")
        await pilot.press("r")
        await pilot_until(pilot, lambda: isinstance(world.app.screen, DrainScreen),
                          "the drain dialog")
        drain = world.app.screen
        await paste(world.app, pilot, "bad gpu\ny\n\n")
        assert world.app.screen is drain
        # The first line fills the reason box; its newline pressed no Enter.
        assert drain.query_one("#reason", Input).value == "bad gpu"
        await world.app.session.flush()
        assert sent(world) == [] and world.audit.records == []


async def test_a_paste_fills_the_command_line_but_does_not_run_it(world):
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.press("colon")
        await pilot_until(pilot, lambda: isinstance(world.app.focused, Input),
                          "the command line's box")
        line = world.app.screen
        assert isinstance(line, CommandLine)
        await paste(world.app, pilot, "drain gpu0002\n")
        assert world.app.screen is line
        assert line.query_one("#cmdline", Input).value == "drain gpu0002"
        await world.app.session.flush()
        assert sent(world) == [] and world.audit.records == []


async def test_help_says_the_broker_drops_commands_when_the_probe_found_it(world):
    """The header read "[R] broker drops commands" while the help's Mode line still said
    "[RW] commands enabled, each audited" (an SRE drill's leftover)."""
    from fleetdeck.console.publish_probe import PublishProbe

    async with world.app.run_test(size=(160, 60)) as pilot:
        world.tick()
        probe = PublishProbe(user="viewer")
        probe.dropped_since = world.clock()
        world.app.session.probe = probe
        await pilot.press("question_mark")
        await pilot.pause()
        mode = next(line for line in text_of(world.app).splitlines() if "Mode:" in line)
        assert "[R?] commands unconfirmed: this console cannot confirm" in mode, mode
        assert "[RW]" not in mode, mode


async def test_header_and_help_say_rw_is_unconfirmed_until_the_probe_answers(world):
    """For the 10 s a viewer's test publish is waited for, its header read "[RW]", a right the
    broker had not shown it to have. Until the probe answers it reads "[RW?]", and the help's
    Mode line says what is being checked; what follows the mode keeps its column, so nothing
    jumps when the answer comes."""
    from fleetdeck.console.publish_probe import PublishProbe

    async with world.app.run_test(size=(160, 60)) as pilot:
        world.tick()
        probe = PublishProbe(user="viewer")
        world.app.session.probe = probe
        world.tick()
        await pilot.pause()
        pending = text_of(world.app).splitlines()[0]
        assert "[RW?]" in pending and "[RW]" not in pending, pending
        await pilot.press("question_mark")
        await pilot.pause()
        mode = next(line for line in text_of(world.app).splitlines() if "Mode:" in line)
        assert "[RW?] commands enabled, each audited; checking that the broker" in mode, mode
        await pilot.press("escape")
        probe.heard_at = 1.0  # its test publish came back
        world.tick()
        await pilot.pause()
        answered = text_of(world.app).splitlines()[0]
        assert "[RW]" in answered and "[RW?]" not in answered, answered
        assert answered.index("op alice") == pending.index("op alice"), (pending, answered)
