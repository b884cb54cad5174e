"""Tab in one burst with what follows it: the keys after Tab go to the field Tab focuses. The
restart dialog's reason read "retry after gpu0035restart 12" from `send-keys 'retry after
gpu0035' Tab 'restart 12' Enter` (a 3 a.m. drive): the keys after Tab had reached the reason
box before Tab, a binding run once the key had gone round, moved the focus."""

from textual import events
from textual.keys import _character_to_key
from textual.widgets import Input

from fleetdeck.console.tui.modals import RestartScreen
from tests.tui.conftest import pilot_until
from tests.tui.test_command_flows import sent
from tests.tui.test_dialog_targets import job_of_12, restart_dialog


def burst(app, text: str) -> None:
    """Every key of ``text`` posted to the app at once ('⏎' is Enter, '⇥' Tab)."""
    for ch in text:
        if ch == "⏎":
            app.post_message(events.Key("enter", "\r"))
        elif ch == "⇥":
            app.post_message(events.Key("tab", "\t"))
        else:
            app.post_message(events.Key(_character_to_key(ch), ch))


async def test_keys_typed_after_tab_go_to_the_field_tab_focuses():
    world = job_of_12()
    async with world.app.run_test(size=(160, 48)) as pilot:
        await restart_dialog(world, pilot)
        screen = world.app.screen
        burst(world.app, "retry after gpu0035⇥restart 12⏎")
        await pilot_until(pilot, lambda: bool(world.published) or "confirm" in str(
            screen.query_one("#dialog-error").render()), "the restart sent or refused")
        await pilot.pause(0.3)
        if world.app.screen is screen:
            reason = screen.query_one("#reason", Input).value
            assert reason == "retry after gpu0035", reason
        await world.app.session.flush()
        assert [c.args.reason for c in sent(world)] == ["retry after gpu0035"]


async def test_tab_and_shift_tab_move_one_field_each():
    world = job_of_12()
    async with world.app.run_test(size=(160, 48)) as pilot:
        await restart_dialog(world, pilot)
        screen = world.app.screen
        assert screen.focused is screen.query_one("#reason")
        await pilot.press("tab")
        await pilot.pause()
        assert screen.focused is screen.query_one("#confirm")
        await pilot.press("shift+tab")
        await pilot.pause()
        assert screen.focused is screen.query_one("#reason")


async def test_escape_in_a_burst_after_tab_still_cancels():
    """Keys routed to the box during Tab's move that it could not type were dropped: a burst
    'reason⇥<esc>' left the dialog open (a review)."""
    world = job_of_12()
    async with world.app.run_test(size=(160, 48)) as pilot:
        await restart_dialog(world, pilot)
        burst(world.app, "why⇥")
        world.app.post_message(events.Key("escape", "\x1b"))
        await pilot_until(pilot, lambda: not isinstance(world.app.screen, RestartScreen),
                          "the dialog cancelled")
        assert world.published == []
