"""A command dialog's target list uses the screen's free height, and ends with how many more
and which when it cannot show them all: a 12-node restart showed 2 targets and no cue with 30
rows free."""

from fleetdeck.console.tui.modals import RestartScreen
from tests.tui.conftest import World, pilot_until
from tests.tui.fleet import job_status, publish_job
from tests.tui.test_views import text_of


async def restart_dialog(world: World, pilot) -> str:
    world.tick()
    await pilot.pause()
    world.app.request_restart("51")
    await pilot_until(pilot, lambda: isinstance(world.app.screen, RestartScreen),
                      "the restart dialog")
    await pilot.pause()
    await pilot.pause()
    return text_of(world.app)


def job_of_12() -> World:
    world = World()
    world.populate()
    publish_job(world.ingest, job_status("51", world.fleet.names[8:20], world.clock),
                world.clock)
    return world


async def test_restart_dialog_lists_all_12_targets_on_a_tall_screen():
    world = job_of_12()
    async with world.app.run_test(size=(160, 48)) as pilot:
        text = await restart_dialog(world, pilot)
        shown = [n for n in world.fleet.names[8:20] if f"• {n} (" in text]
        assert len(shown) == 12, text


async def test_restart_dialog_says_how_many_more_it_cannot_show():
    world = job_of_12()
    async with world.app.run_test(size=(100, 30)) as pilot:
        text = await restart_dialog(world, pilot)
        shown = [n for n in world.fleet.names[8:20] if f"• {n} (" in text]
        assert 0 < len(shown) < 12, text
        assert f"… and {12 - len(shown)} more (gpu[" in text, text


async def test_restart_dialog_keeps_its_buttons_on_80x24():
    world = job_of_12()
    async with world.app.run_test(size=(80, 24)) as pilot:
        text = await restart_dialog(world, pilot)
        assert "Restart" in text and "Cancel" in text, text
        radius = str(world.app.screen.query_one("#radius").render())
        assert "more (gpu[" in radius, radius


async def test_resume_dialog_lists_its_5_drained_targets():
    from fleetdeck.console.tui.modals import ConfirmScreen
    from fleetdeck.protocol.messages import DrainState

    world = World()
    world.populate()
    names = world.fleet.names[8:13]
    for n in names:
        world.fleet.status(world.ingest, n, DrainState.DRAINED, reason="xid 79 on gpu3 OPS-1",
                           by="bob")
    async with world.app.run_test(size=(160, 48)) as pilot:
        world.tick()
        await pilot.pause()
        world.app.request_resume(names)
        await pilot_until(pilot, lambda: isinstance(world.app.screen, ConfirmScreen),
                          "the resume dialog")
        await pilot.pause()
        await pilot.pause()
        text = text_of(world.app)
        assert all(f"• {n} (" in text for n in names), text


def test_a_long_target_list_measures_only_what_can_show(monkeypatch):
    """Every target line was measured (~24 µs each): a 16,384-node drain's dialog spent
    ~0.4 s at each open, resize and mode change (a review)."""
    from fleetdeck.console.commands import BlastRadius
    from fleetdeck.console.tui import modals
    from fleetdeck.protocol.messages import CommandOp, DrainMode

    nodes = [f"gpu{i:05d}" for i in range(1, 16385)]
    r = BlastRadius(CommandOp.DRAIN, DrainMode.FINISH, nodes, [f"{n} (idle)" for n in nodes],
                    8 * len(nodes), [], len(nodes), 8 * len(nodes), 0.0, 0)
    measured = []
    real = modals._rows
    monkeypatch.setattr(modals, "_rows", lambda m, w: measured.append(m) or real(m, w))
    text = modals.radius_text(r, width=100, height=30)
    assert len(measured) < 60, len(measured)
    assert text.splitlines()[-1].startswith("  … and ")
    assert "gpu00001 (idle)" in text


async def test_drain_dialog_keeps_its_buttons_on_80x24_in_either_mode():
    """The mode switch's margin was not counted when the radius was fitted: a drain of four
    marked nodes at 80x24 put Drain and Cancel under the dialog's border (a 3 a.m. drive)."""
    from fleetdeck.console.tui.modals import DrainScreen

    world = World()
    world.populate()
    async with world.app.run_test(size=(80, 24)) as pilot:
        world.tick()
        await pilot.pause()
        for key in ("2", "space", "down", "space", "down", "space", "down", "space", "r"):
            await pilot.press(key)
            await pilot.pause()
        await pilot_until(pilot, lambda: isinstance(world.app.screen, DrainScreen),
                          "the drain dialog")
        for mode in ("#mode-finish", "#mode-now"):
            await pilot.click(mode)
            await pilot.pause()
            await pilot.pause()
            screen = world.app.screen
            assert isinstance(screen, DrainScreen) and screen.mode.value in mode, screen.mode
            inside = screen.query_one("#dialog").content_region
            for button in ("#ok", "#cancel"):
                region = screen.query_one(button).region
                assert region.height and inside.contains_region(region), (mode, button, region,
                                                                          text_of(world.app))


async def test_drain_dialog_shows_every_target_whose_line_ends_at_the_border():
    """A target line that fits the body's width but not that width less the scrollbar: the
    body, scrolling before its first fit, kept its scrollbar, wrapped it onto a second row, and
    the last target went under the fold with no "… and 1 more" (a 1,024-node fleet's drain of 5
    nodes at 160x48 showed 4 of them: a 3 a.m. drive)."""
    from fleetdeck.console.tui.modals import DrainScreen
    from tests.tui.fleet import port_down

    world = World(n=32)
    world.fleet.birth(world.ingest)
    job = "4" * 28  # its target lines end two columns inside the 160x48 dialog's border
    nodes = world.fleet.names[:4]
    publish_job(world.ingest, job_status(job, nodes, world.clock), world.clock)
    world.fleet.telemetry(world.ingest, job={n: job for n in nodes},
                          faults={n: port_down() for n in nodes[:3]})
    targets = world.fleet.names[:5]
    async with world.app.run_test(size=(160, 48)) as pilot:
        world.tick()
        await pilot.pause()
        world.app.request_drain(targets)
        await pilot_until(pilot, lambda: isinstance(world.app.screen, DrainScreen),
                          "the drain dialog")
        for _ in range(4):
            await pilot.pause()
        body = world.app.screen.query_one("#dialog-body")
        assert body.virtual_size.height <= body.size.height, (body.size, body.virtual_size)
        text = text_of(world.app)
        assert all(f"• {n} (" in text for n in targets), text


async def test_restart_dialogs_example_reason_fits_its_box():
    """A failed job's scheduler reason is the restart dialog's example: at 160 columns the
    placeholder ran past the reason box, cut mid-word with its "— ticket OPS-123" lost. It is
    cut at a word to the box, said so with "…"; a short one keeps the ticket's part."""
    from textual.widgets import Input

    from fleetdeck.protocol.messages import JobState

    world = World()
    world.populate()
    reason = ("NodeFail gpu0012 (Xid 79: GPU has fallen off the bus) while the NCCL "
              "allreduce of step 1200 waited on gpu0013 and gpu0014 mlx5_ib3 link down")
    publish_job(world.ingest, job_status("51", [], world.clock, state=JobState.F).model_copy(
        update={"reason": reason}), world.clock)
    async with world.app.run_test(size=(160, 48)) as pilot:
        await restart_dialog(world, pilot)
        box = world.app.screen.query_one("#reason", Input)
        await pilot_until(pilot, lambda: box.placeholder.endswith("…"), box.placeholder)
        said = box.placeholder
        assert len(said) <= box.content_region.width, (said, box.content_region.width)
        assert said.startswith("e.g. F: NodeFail gpu0012 (Xid 79: GPU has fallen off"), said
        assert (said[:-1] + " ").removeprefix("e.g. F: ") in reason + " ", said
    short = World()
    short.populate()
    publish_job(short.ingest, job_status("51", [], short.clock, state=JobState.F).model_copy(
        update={"reason": "NodeFail gpu0012"}), short.clock)
    async with short.app.run_test(size=(160, 48)) as pilot:
        await restart_dialog(short, pilot)
        box = short.app.screen.query_one("#reason", Input)
        assert box.placeholder == "e.g. F: NodeFail gpu0012 — ticket OPS-123", box.placeholder
