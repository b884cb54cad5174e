"""Deterministic text snapshots of each screen at 160x48, 80x24 (tmux's default, a laptop
split) and 220x60: a synthetic fleet with a fixed seed and a frozen clock, plus a job with a long
name and an event with a long kind, compared line by line with tests/tui/snapshots/*.txt
(``NAME.txt`` at 160x48, ``NAME@WxH.txt`` at the others).

Plain text rather than SVG so colours and fonts cannot make them flaky; layout changes still
show. After an intended change: FLEETDECK_UPDATE_SNAPSHOTS=1 pytest tests/tui/test_snapshots.py
and review the diff of the .txt files.
"""

import difflib
import os
from pathlib import Path

import pytest

from tests.tui.conftest import SIZE, World
from tests.tui.test_fit import enrich
from tests.tui.test_views import text_of

SNAPSHOTS = Path(__file__).parent / "snapshots"
UPDATE = os.environ.get("FLEETDECK_UPDATE_SNAPSHOTS") == "1"


def check(name: str, text: str) -> None:
    path = SNAPSHOTS / f"{name}.txt"
    lines = [line.rstrip() for line in text.splitlines()]
    got = "\n".join(lines) + "\n"
    if UPDATE or not path.exists():
        path.write_text(got)
        if not UPDATE:
            pytest.fail(f"snapshot {path.name} was missing and has been written; run again")
        return
    want = path.read_text()
    if got != want:
        diff = "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True),
                                            f"{name} (expected)", f"{name} (now)"))
        pytest.fail(f"screen {name} changed:\n{diff}")


@pytest.mark.parametrize("size", [SIZE, (80, 24), (220, 60)],
                         ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize(("name", "keys"), [
    ("overview", []),
    ("nodes", ["2"]),
    ("jobs", ["3"]),
    ("fabric", ["4"]),
    ("events", ["5"]),
    ("incidents", ["6"]),
    ("node_detail", ["2", "enter"]),
    ("node_history", ["2", "enter", "h"]),
    ("drain_modal", ["2", "r"]),
    ("help", ["question_mark"]),
])
async def test_screen_snapshot(name, keys, size):
    world = World()
    world.populate()
    enrich(world)
    async with world.app.run_test(size=size) as pilot:
        world.tick()
        await pilot.pause()
        for key in keys:
            await pilot.press(key)
            await pilot.pause()
        world.app.refresh_view()
        await pilot.pause()
        check(name if size == SIZE else f"{name}@{size[0]}x{size[1]}", text_of(world.app))
