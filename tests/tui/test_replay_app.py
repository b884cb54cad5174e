"""The console over a recording: same views, read-only, with pause, step, seek, speed and
event navigation (Pilot, against a real recorded fixture)."""

from fleetdeck.console.tui.replay_app import ReplayApp
from tests.conftest import REPO

FIXTURE = REPO / "fixtures" / "xid79.jsonl.gz"


async def test_replay_controls_move_through_the_recording():
    app = ReplayApp(FIXTURE, speed=1.0)
    app.auto_tick = False
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()  # let the first tick (on mount) run
        p = app.player
        assert app.read_only
        assert "[R]" in app.header_text(p.clock())
        app.seek_to("5")
        await pilot.pause()
        assert abs(p.position - (p.start + 5)) < 1e-6
        assert all(n.verdict.value == "ok" for n in app.state.nodes.values())
        app.seek_to("+25")  # past the XID 79 at ~12 s
        await pilot.pause()
        assert app.state.nodes["gpu0006"].verdict.value == "failed"
        app.seek_to("-25")  # backwards: the state is rebuilt from the nearest keyframe
        await pilot.pause()
        assert app.state.nodes["gpu0006"].verdict.value == "ok"
        await pilot.press("p")
        assert p.paused
        before = p.position
        app.tick()
        assert p.position == before  # paused
        await pilot.press("right_square_bracket")
        assert p.position > before
        await pilot.press("plus")
        await pilot.press("plus")
        assert p.speed == 4.0
        for _ in range(10):
            await pilot.press("minus")
        assert p.speed == 0.5
        await pilot.press("n")
        assert p.position > before
        await pilot.press("r")  # drain: absent in replay (read-only)
        assert not app.tracker.requests
