"""Three cuts a walk-through of the console found at 100x30: the fabric view's leaf table cut
its hint before the switch's name, the nodes view's metric sorts did not say they sort in
steps, and a read-only console's refusal wrapped to three lines."""

import pytest

from fleetdeck.console.judgements import LeafGroup, SuspectSwitch
from fleetdeck.console.tui.screens.fabric import FabricScreen
from fleetdeck.console.tui.screens.nodes import NodesScreen
from tests.tui.conftest import open_view
from tests.tui.test_views import text_of

NODES16 = [f"gpu{i:04d}" for i in range(1, 17)]


def test_a_suspect_switchs_short_hint_names_the_switch_first():
    sw = SuspectSwitch("leaf05-r3", "leaf05", NODES16, [f"{n}:mlx5_ib3:1" for n in NODES16])
    assert sw.short == "leaf05-r3 suspect: 16 ports on 16 nodes (gpu[0001-0016])"
    # The banner's and status's sentence is the one it was.
    assert sw.text.startswith("16 ports on 16 nodes fail together: suspect leaf switch "
                              "leaf05-r3, not the nodes")
    back = SuspectSwitch("leaf05-r3", "leaf05", NODES16[:1], ["gpu0001:mlx5_ib3:1"], held=1)
    assert back.short == "leaf05-r3 recovered: 1 port on 1 node up again (gpu0001)"
    rails = [SuspectSwitch(f"leaf04-r{r}", "leaf04", NODES16[:8],
                           [f"{n}:mlx5_ib{r}:1" for n in NODES16[:8]]) for r in range(8)]
    group = LeafGroup("leaf04", rails)
    assert group.short.startswith("leaf04: 8 rails suspect: 64 ports on 8 nodes (r0, r1, r2")
    assert group.short.endswith("r7; gpu[0001-0008])")
    assert group.text.startswith("leaf04: 8 rail switches suspect (r0, ")


@pytest.mark.parametrize("size", [(100, 30), (80, 24)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_leaf_tables_hint_shows_the_suspect_switch(world, size):
    """World's leaf00-r2 has 3 ports down: the leaf table's row names it whole, where it read
    "3 ports on 3 nodes fail together: suspe…"; the banner above keeps the sentence."""
    async with world.app.run_test(size=size) as pilot:
        world.tick()
        await pilot.pause()
        await pilot.press("4")
        world.tick()
        await pilot.pause()
        screen = world.app.screen
        assert isinstance(screen, FabricScreen)
        if not screen.stacked:  # a short screen: the tables are the view's second page
            await pilot.press("tab")
            await pilot.pause()
        world.app.refresh_view()
        await pilot.pause()
        lines = text_of(world.app).splitlines()
        table = screen.leaf_table.region
        row = lines[table.y + 1]  # under its header
        assert row.startswith("  leaf00 "), "\n".join(lines)
        assert "leaf00-r2 suspect: 3 ports on 3 nodes" in row, row
        assert any("3 ports on 3 nodes fail together: suspect leaf switch leaf00-r2" in line
                   for line in lines) or not screen.stacked


@pytest.mark.parametrize(("key", "said"), [("util", "UTIL in 5 % steps"),
                                           ("temp", "TEMP in 2 °C steps"),
                                           ("power", "POWER in 25 W steps")])
async def test_a_metric_sort_says_it_sorts_in_steps(world, key, said):
    """Sorted by UTIL, 95 % sits above 99 % (one 5 % step, then by name:
    ``rows.METRIC_SORT_STEP``): the view's header says so, where "sort UTIL" alone read as a
    bug. HEALTH, not a metric, says no steps."""
    async with world.app.run_test(size=(100, 30)) as pilot:
        world.tick()
        await pilot.pause()
        screen = await open_view(world, pilot, "2", NodesScreen)
        assert "sort HEALTH (o/O)" in text_of(world.app).splitlines()[1]
        while screen.sort_key != key:
            await pilot.press("o")
            await pilot.pause()
        world.app.refresh_view()
        await pilot.pause()
        assert f"sort {said}" in text_of(world.app).splitlines()[1]
        await pilot.press("O")  # reversed
        await pilot.pause()
        world.app.refresh_view()
        await pilot.pause()
        # At 100 columns "sort POWER ▲ in 25 W steps" does not fit beside the tabs: the step
        # is kept, "sort" given up (the column's own ▲ says it sorts).
        header, steps = said.split(" in ")
        assert f"{header} ▲ in {steps}" in text_of(world.app).splitlines()[1]


@pytest.mark.parametrize("size", [(100, 30), (80, 24)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_a_read_only_refusal_is_one_line(ro_world, size):
    """``r`` in a read-only console says so in one short line (the rest is in ``?``'s help):
    its notice wrapped to 3 lines at 100 columns, over the rows it was about."""
    from textual.widgets._toast import Toast

    from tests.tui.conftest import pilot_until
    from tests.tui.test_newcomer_run import notices

    world = ro_world
    async with world.app.run_test(size=size, notifications=True) as pilot:
        world.tick()
        await open_view(world, pilot, "2", NodesScreen)
        await pilot.press("r")
        await pilot_until(pilot, lambda: list(world.app.screen.query(Toast)), "the notice")
        await pilot.pause()
        assert notices(world.app)[-1] == "read-only console (--read-only): r (drain) is off"
        (toast,) = world.app.screen.query(Toast)
        assert toast.content_region.height == 1, toast.content_region
        await pilot.press("question_mark")
        await pilot.pause()
        help_text = " ".join(" ".join(str(w.render()) for w in world.app.screen.query("Static"))
                             .split())
        assert "drain, resume and restart are for a read-write console" in help_text


@pytest.mark.parametrize("size", [(100, 30), (80, 24)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_a_filter_that_hides_nodes_is_said_on_a_short_line(world, size):
    """At 80 columns the nodes view's line read "16/2048 nodes  f…" (a 3 a.m. drive at 2,048
    nodes): the filter that hid the other nodes cut to a letter, where the line has room for
    it as typed after its key. The events view says its filter the same way."""
    from fleetdeck.console.tui.screens.events import EventsScreen

    async with world.app.run_test(size=size) as pilot:
        world.tick()
        nodes = await open_view(world, pilot, "2", NodesScreen)
        await pilot.press("slash", *"gpu0003", "escape")
        world.tick()
        await pilot.pause()
        assert len(nodes.shown) == 1
        line = text_of(world.app).splitlines()[1]
        assert "1/24" in line and "gpu0003" in line, line
        await open_view(world, pilot, "5", EventsScreen)
        await pilot.press("slash", *"gpu0003", "escape")
        world.tick()
        await pilot.pause()
        line = text_of(world.app).splitlines()[1]
        assert "gpu0003" in line, line
