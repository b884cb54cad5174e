"""A command dialog's Tab stops are the fields an operator can use: the blast radius, a scroll
box that had nothing to scroll, was one, showing no focus, and an Enter there did nothing (a
3 a.m. drive: reason, Tab round the dialog, Enter, and the drain was not sent)."""

from fleetdeck.console.tui.modals import ConfirmScreen, DrainScreen, RestartScreen
from fleetdeck.protocol.messages import DrainState
from tests.tui.conftest import World, pilot_until
from tests.tui.fleet import job_status, publish_job


def _stops(screen) -> list[str | None]:
    return [w.id for w in screen.focus_chain]


async def test_drain_dialog_tabs_round_its_fields_only():
    world = World()
    world.populate()
    async with world.app.run_test(size=(160, 48)) as pilot:
        world.tick()
        await pilot.pause()
        world.app.request_drain([world.fleet.names[3]])
        await pilot_until(pilot, lambda: isinstance(world.app.screen, DrainScreen), "drain")
        await pilot.pause()
        screen = world.app.screen
        assert _stops(screen) == ["reason", "mode", "ok", "cancel"]
        assert screen.focused is screen.query_one("#reason")
        await pilot.press("shift+tab")
        await pilot.pause()
        assert screen.focused is screen.query_one("#cancel")
        for _ in range(4):
            await pilot.press("tab")
        await pilot.pause()
        assert screen.focused is screen.query_one("#cancel")


async def test_restart_and_resume_dialogs_have_no_dead_stop():
    world = World()
    world.populate()
    publish_job(world.ingest, job_status("51", world.fleet.names[8:12], world.clock),
                world.clock)
    name = world.fleet.names[2]
    world.fleet.status(world.ingest, name, DrainState.DRAINED, reason="xid 79 OPS-1", by="bob")
    async with world.app.run_test(size=(160, 48)) as pilot:
        world.tick()
        await pilot.pause()
        world.app.request_restart("51")
        await pilot_until(pilot, lambda: isinstance(world.app.screen, RestartScreen), "restart")
        await pilot.pause()
        assert _stops(world.app.screen) == ["reason", "ok", "cancel"]
        await pilot.press("escape")
        await pilot_until(pilot, lambda: not isinstance(world.app.screen, RestartScreen),
                          "the restart dialog closed")
        world.app.request_resume([name])
        await pilot_until(pilot, lambda: isinstance(world.app.screen, ConfirmScreen), "resume")
        await pilot.pause()
        assert _stops(world.app.screen) == ["ok", "cancel"]
