"""A key goes before the rest of a backlog: while a large batch is applied slice by slice, a
view switch shows the new view before the backlog is through, and every sample is still
applied."""

import time
from typing import Any

from fleetdeck.console.tui.screens.nodes import NodesScreen
from tests.tui.conftest import SIZE, World


async def test_a_view_switch_goes_before_the_rest_of_a_backlog(monkeypatch: Any) -> None:
    world = World(256)
    world.fleet.birth(world.ingest)
    app = world.app
    async with app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        session = app.session
        session.apply_max_nodes = 2  # 128 slices, each scheduled by the one before
        tick = session.tick

        def slow_tick(now: float | None = None) -> Any:
            time.sleep(0.01)  # a slice costs its budget, as at fleet size
            return tick(now)

        monkeypatch.setattr(session, "tick", slow_tick)
        applied = session.state.applied
        world.fleet.telemetry(world.ingest)
        shown: list[tuple[int, int]] = []
        refresh = NodesScreen.refresh_view

        def spy(screen: NodesScreen, now: float) -> None:
            shown.append((app.ticks, session.backlog))
            refresh(screen, now)

        monkeypatch.setattr(NodesScreen, "refresh_view", spy)
        world.tick()  # the first slice; the rest follow on their own
        assert session.backlog == 254
        ticks = app.ticks
        await pilot.press("2")
        for _ in range(500):
            if shown:
                break
            await pilot.pause(0.001)
        assert shown, "the node list never refreshed"
        first_ticks, backlog = shown[0]
        # The key reached the app before the next slice was due: no slice went first (one did
        # before keys had priority, several on a busy loop).
        assert first_ticks == ticks, f"{first_ticks - ticks} slices went before the key"
        assert backlog > 200
        assert isinstance(app.screen, NodesScreen)
        for _ in range(2000):  # then the backlog drains: nothing lost
            if not session.backlog:
                break
            await pilot.pause(0.005)
        assert session.backlog == 0
        assert session.state.applied - applied == 256
